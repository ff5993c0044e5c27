/* resolve.c - finds each wrapper's real function.  Making every path to a
 * CUDA allocation function land on a wrapper is hooks_lookup.c's: it holds
 * the wrappers' addresses, this file none (it lies below the wrappers,
 * which call through it).
 *
 * The paths (docs/design.md): the dynamic linker (our exported symbols come
 * first in the global scope); dlsym(handle, name) on libcuda (old runtimes,
 * old NCCL - our dlsym override in dlsym_trampoline.S); cuGetProcAddress(_v2),
 * how every runtime since 11.3, shared or static, reaches the driver; and
 * cudaGetDriverEntryPoint(ByVersion), how PyTorch and NCCL get the VMM calls.
 *
 * Real functions, in order of preference: whatever handed us the call's
 * pointer (dlsym on a handle, cuGetProcAddress), then dlsym(RTLD_NEXT), then
 * the driver's own cuGetProcAddress, then a scan of loaded libraries - the
 * last one matters because Python loads extension modules RTLD_LOCAL, so
 * libcudart under torch is invisible to RTLD_NEXT.
 *
 * Rules learnt from others' bugs: dlsym(RTLD_NEXT) of any other caller is
 * forwarded by a tail jump so glibc still sees *that* caller; only names we
 * wrap are touched (cudnnCreate is not ours); a handle is never replaced by
 * RTLD_DEFAULT; nothing heavy runs inside dlsym; a real pointer into our
 * own library - one of our wrappers - is never stored (that would recurse).
 *
 * Threads: real pointers are published with atomic compare-and-swap; two
 * threads resolving the same slot find the same answer.
 */
#include "resolve.h"

#include <dlfcn.h>
#include <link.h>
#include <stdbool.h>
#include <string.h>

#include "config.h"
#include "log.h"

void *resolve_reals[SLOT_COUNT];
void *(*resolve_real_dlsym)(void *, const char *);

static unsigned char how[SLOT_COUNT];
/* For each slot, the load count at which it was last looked for in vain:
 * until another library is loaded (or a new way to ask the driver appears),
 * looking again would find nothing and cost a scan of every library. */
static unsigned long long missed_at[SLOT_COUNT];

/* A new source of real functions: every miss deserves another look. */
DLSYM_PATH static void forget_misses(void)
{
    for (int i = 0; i < SLOT_COUNT; i++)
        __atomic_store_n(&missed_at[i], 0, __ATOMIC_RELAXED);
}
static void *libcuda_handle; /* a handle the application used for cu* */

struct slot_info {
    const char *name, *base;
    int version;
    int ptsz;
};

#define SLOT_INFO(sym, b, ver, p) {#sym, b, ver, p},
static const struct slot_info slots[SLOT_COUNT] = {
    CUMEMTRACE_DRIVER_HOOKS(SLOT_INFO)
    CUMEMTRACE_RUNTIME_HOOKS(SLOT_INFO)
    CUMEMTRACE_HELPERS(SLOT_INFO)
};

const char *const resolve_how_names[] = {
    "not resolved", "dynamic link (RTLD_NEXT)", "dlsym on a library handle",
    "cuGetProcAddress", "cudaGetDriverEntryPoint", "scan of loaded libraries"};

/* The bounds of this library's image, from the linker: a "real" function
 * found there is one of our wrappers (only they have CUDA names here), and
 * storing it would make the wrapper call itself.  Comparing with the image
 * instead of the wrapper table (hooks_lookup.c) keeps the resolver below
 * the wrappers: it needs none of their addresses. */
extern const char __ehdr_start[] __attribute__((visibility("hidden")));
extern const char _end[] __attribute__((visibility("hidden")));

DLSYM_PATH bool resolve_is_ours(const void *p)
{
    return (uintptr_t)p >= (uintptr_t)__ehdr_start && (uintptr_t)p < (uintptr_t)_end;
}

DLSYM_PATH void resolve_dlsym_init(void)
{
    void *p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (p == NULL)
        p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    __atomic_store_n((void **)&resolve_real_dlsym, p, __ATOMIC_RELEASE);
}

DLSYM_PATH static void *real_dlsym(void *handle, const char *name)
{
    void *(*fn)(void *, const char *) =
        __atomic_load_n(&resolve_real_dlsym, __ATOMIC_ACQUIRE);
    if (fn == NULL) {
        resolve_dlsym_init();
        fn = __atomic_load_n(&resolve_real_dlsym, __ATOMIC_ACQUIRE);
    }
    return fn ? fn(handle, name) : NULL;
}

/* Keeps the library that defines `fn` loaded for good.  We call real
 * functions long after we learnt them, but their library may be dlclose()d
 * meanwhile - NVIDIA's runtime unloads libcuda.so.1 when it rejects the
 * driver - and a pointer into an unmapped library would crash the host.
 * RTLD_NODELETE on an already-loaded object only pins it. */
/* How deep this thread is in resolve_slow: more than 1 means a signal
 * handler's CUDA call interrupted a resolution on this very thread.  Then
 * no dlopen: the interrupted code may hold the loader's lock (glibc lets the
 * same thread take it again, ThreadSanitizer's dlopen wrapper does not) -
 * the outer resolution pins its library, the one the handler calls too. */
__thread int resolve_depth __attribute__((tls_model("initial-exec")));

DLSYM_PATH static void pin_library(void *fn)
{
    static void *last_base; /* the library pinned last: usually the same */
    if (resolve_depth > 1)
        return;
    Dl_info info;
    if (dladdr(fn, &info) == 0 || info.dli_fname == NULL ||
        info.dli_fbase == __atomic_load_n(&last_base, __ATOMIC_RELAXED))
        return;
    void *h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
    if (h != NULL) {
        dlclose(h); /* drops our reference; NODELETE stays */
        __atomic_store_n(&last_base, info.dli_fbase, __ATOMIC_RELAXED);
    }
}

DLSYM_PATH void resolve_store(int slot, void *fn, enum resolve_how h)
{
    void *expected = NULL;
    if (fn == NULL || resolve_is_ours(fn))
        return;
    pin_library(fn);
    if (__atomic_compare_exchange_n(&resolve_reals[slot], &expected, fn, false,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        how[slot] = (unsigned char)h;
        if (slot == SLOT_cuGetProcAddress || slot == SLOT_cuGetProcAddress_v2)
            forget_misses();
        LOG(LOG_DEBUG, "%s: real function %p found by %s", slots[slot].name,
            fn, resolve_how_names[h]);
    }
}

/* ---- scanning loaded libraries ----
 *
 * dl_iterate_phdr holds the loader's list lock while it calls us; dlopen on
 * another thread takes the loader's main lock and then that one.  Calling
 * dlopen, dlclose or dlsym from inside the callback takes them in the
 * opposite order: a late RTLD_LOCAL runtime, threads making first calls
 * and a dlopen elsewhere hung the host.  So the callback only
 * copies names into a buffer on our stack, and the look-ups run after the
 * iteration returns, a chunk of names at a time. */

enum { SCAN_NAMES = 32, SCAN_BYTES = 4096 };

struct scan {
    unsigned skip;  /* objects handled by earlier passes */
    unsigned seen;  /* objects visited in this pass */
    unsigned n;     /* names copied in this pass */
    bool more;      /* the buffer filled before the list ended */
    size_t used;
    unsigned off[SCAN_NAMES];
    char buf[SCAN_BYTES];
};

/* Copies an object's name as the loader keeps it into dst[0..n); its length,
 * or n when it does not fit.  The loader's list lock, which dl_iterate_phdr
 * holds while it calls us, orders this read after the dlopen that wrote the
 * name.  ThreadSanitizer cannot see that lock; its dl_iterate_phdr
 * interceptor forgets earlier writes to the name instead, but not to its
 * terminating NUL - when the NUL starts a new 8-byte word (a path length that
 * is a multiple of 8), reading it was reported as racing with that dlopen's
 * strdup.  So the loader's bytes are read here, uninstrumented, one at a
 * time (volatile: no strlen or memcpy, which TSan intercepts). */
DLSYM_PATH static size_t copy_loader_name(const char *name, char *dst, size_t n)
{
    const volatile char *src = name;
    for (size_t i = 0; i < n; i++) {
        char c = src[i];
        dst[i] = c;
        if (c == '\0')
            return i;
    }
    return n;
}

static int collect_one(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct scan *sc = data;
    if (sc->seen < sc->skip) {
        sc->seen++;
        return 0;
    }
    if (sc->n == SCAN_NAMES) {
        sc->more = true; /* the next pass starts here */
        return 1;
    }
    size_t room = sizeof sc->buf - sc->used;
    size_t len = info->dlpi_name != NULL
                     ? copy_loader_name(info->dlpi_name, sc->buf + sc->used, room)
                     : 0;
    if (len == 0 || (len == room && sc->used == 0)) { /* the executable, or unusable */
        sc->seen++;
        return 0;
    }
    if (len == room) {
        sc->more = true; /* did not fit after the others: the next pass */
        return 1;
    }
    sc->off[sc->n++] = (unsigned)sc->used;
    sc->used += len + 1;
    sc->seen++;
    return 0;
}

/* The first definition of `name` in a loaded library, libraries loaded
 * RTLD_LOCAL included; NULL if none.  Called with no lock of ours held. */
static void *scan_loaded(const char *name)
{
    struct scan sc;
    sc.skip = 0;
    do {
        sc.seen = sc.n = 0;
        sc.used = 0;
        sc.more = false;
        dl_iterate_phdr(collect_one, &sc);
        for (unsigned i = 0; i < sc.n; i++) {
            /* NOLOAD: unloaded since the copy means NULL, never a load */
            void *h = dlopen(sc.buf + sc.off[i], RTLD_LAZY | RTLD_NOLOAD);
            if (h == NULL)
                continue;
            void *p = real_dlsym(h, name);
            if (p != NULL && !resolve_is_ours(p)) {
                pin_library(p); /* before our reference goes */
                dlclose(h);
                return p;
            }
            dlclose(h);
        }
        sc.skip = sc.seen;
    } while (sc.more);
    return NULL;
}

static void *driver_lookup(int slot)
{
    const struct slot_info *s = &slots[slot];
    cuuint64_t flags = s->ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                               : CU_GET_PROC_ADDRESS_DEFAULT;
    void *fn = NULL;
    PFN(cuGetProcAddress_v2) gpa2 = resolve_reals[SLOT_cuGetProcAddress_v2];
    PFN(cuGetProcAddress) gpa1 = resolve_reals[SLOT_cuGetProcAddress];
    CUdriverProcAddressQueryResult st;
    if (gpa2 != NULL && gpa2(s->base, &fn, s->version, flags, &st) == CUDA_SUCCESS)
        return fn;
    if (gpa1 != NULL && gpa1(s->base, &fn, s->version, flags) == CUDA_SUCCESS)
        return fn;
    return NULL;
}

static int loads_seen(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    *(unsigned long long *)data = info->dlpi_adds;
    return 1; /* the first object carries the process-wide counter */
}

/* How many objects the process has loaded so far (never decreases). */
static unsigned long long loads_so_far(void)
{
    unsigned long long adds = 0;
    dl_iterate_phdr(loads_seen, &adds);
    return adds;
}

DLSYM_PATH void resolve_note_libcuda(void *handle)
{
    if (__atomic_exchange_n(&libcuda_handle, handle, __ATOMIC_ACQ_REL) != handle)
        forget_misses();
}

DLSYM_PATH void *resolve_dlsym(void *handle, const char *name)
{
    return real_dlsym(handle, name);
}

static void *resolve_slow_depth(enum resolve_slot slot);

void *resolve_slow(enum resolve_slot slot)
{
    resolve_depth++;
    void *p = resolve_slow_depth(slot);
    resolve_depth--;
    return p;
}

static void *resolve_slow_depth(enum resolve_slot slot)
{
    const char *name = slots[slot].name;
    unsigned long long loads = loads_so_far();
    if (__atomic_load_n(&missed_at[slot], __ATOMIC_RELAXED) == loads)
        return NULL;
    void *p = real_dlsym(RTLD_NEXT, name);
    if (p != NULL && !resolve_is_ours(p)) {
        resolve_store(slot, p, HOW_DYNAMIC);
        return resolve_reals[slot];
    }
    bool driver = slot < SLOT_DRIVER_END ||
                  (slot >= SLOT_WRAPPED_END && strncmp(name, "cuda", 4) != 0);
    if (driver && slot != SLOT_cuGetProcAddress &&
        slot != SLOT_cuGetProcAddress_v2 && (p = driver_lookup(slot)) != NULL) {
        resolve_store(slot, p, HOW_PROCADDRESS);
        return resolve_reals[slot];
    }
    void *h = __atomic_load_n(&libcuda_handle, __ATOMIC_ACQUIRE);
    if (driver && h != NULL && (p = real_dlsym(h, name)) != NULL) {
        resolve_store(slot, p, HOW_DLSYM);
        return resolve_reals[slot];
    }
    if ((p = scan_loaded(name)) != NULL) {
        resolve_store(slot, p, HOW_SCAN);
        return resolve_reals[slot];
    }
    __atomic_store_n(&missed_at[slot], loads, __ATOMIC_RELAXED);
    return NULL;
}

void resolve_log_summary(void)
{
    if (!log_enabled(LOG_DEBUG))
        return;
    for (int i = 0; i < SLOT_WRAPPED_END; i++)
        if (how[i] != HOW_NONE)
            log_msg(LOG_DEBUG, "wrapped %s: real function by %s", slots[i].name,
                    resolve_how_names[how[i]]);
}
