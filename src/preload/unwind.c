/* unwind.c - the only file that knows libunwind.
 *
 * Why dlopen: Debian's libunwind.so.8 exports 18 _Unwind_* symbols.  Linked
 * with DT_NEEDED it would sit in the host's global scope, and libstdc++ and
 * libgcc_s of a C host that later loads C++ code (python3 importing torch)
 * bind _Unwind_RaiseException to it: C++ exceptions would be unwound by the
 * wrong library.  Debian's libunwind.a is not PIC, so static linking is not
 * an option either.  Loading it RTLD_LOCAL keeps its symbols private to the
 * handle; tests/e2e/test_isolation.py proves a thrown exception still goes
 * through libgcc_s.
 *
 * Cost: unw_backtrace walks with libunwind's frame cache (10-20 ns per frame
 * here); the first unwind in a process costs ~200 us, paid in unwind_init.
 * Fallback: glibc's backtrace(), which uses libgcc_s, when libunwind is
 * missing - correct but several times slower.
 *
 * A thread's first captures: libunwind's per-thread cache starts empty in
 * every thread - a 256 KiB mmap, then a full DWARF step (two sigprocmask
 * calls and a dl_iterate_phdr) per frame, and a munmap at thread exit:
 * ~0.4 ms per thread here, which made 20,000 one-allocation threads 8x
 * slower.  backtrace() keeps no per-thread state (libgcc finds each FDE
 * with glibc's lock-free _dl_find_object), so the first COLD_CAPTURES
 * stacks of a thread are taken with it; both report the same return
 * addresses, so the stacks dedupe as one (tests/e2e/test_concurrency.py).
 */
#include "unwind.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <stdint.h>
#include <string.h>

#include "log.h"
#include "record.h"

/* libunwind runs a thread-specific-data destructor that takes a mutex after
 * ThreadSanitizer has torn the exiting thread's state down: TSan crashes.
 * TSan builds (tests only) therefore take stacks with glibc's backtrace(). */
#if defined(__SANITIZE_THREAD__)
#define USE_LIBUNWIND 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define USE_LIBUNWIND 0
#endif
#endif
#ifndef USE_LIBUNWIND
#define USE_LIBUNWIND 1
#endif

typedef int (*backtrace_fn)(void **, int);
static backtrace_fn capture = backtrace;

enum { COLD_CAPTURES = 16 };
static __thread unsigned thread_captures __attribute__((tls_model("initial-exec")));
static uintptr_t self_lo, self_hi;

static int find_self(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    uintptr_t probe = (uintptr_t)data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        uintptr_t hi = lo + ph->p_memsz;
        if (probe >= lo && probe < hi) {
            self_lo = lo;
            self_hi = hi;
            return 1;
        }
    }
    return 0;
}

int unwind_is_ours(const void *addr)
{
    uintptr_t a = (uintptr_t)addr;
    return a >= self_lo && a < self_hi;
}

int unwind_init(void)
{
    dl_iterate_phdr(find_self, (void *)(uintptr_t)unwind_capture);

    void *h = USE_LIBUNWIND ? dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL)
                            : NULL;
    backtrace_fn fn = NULL;
    if (h != NULL) {
        *(void **)&fn = dlsym(h, "unw_backtrace");
#if defined(__x86_64__) || defined(__aarch64__)
        /* Per-thread caching makes repeated unwinds cheap and lock-free. */
#if defined(__x86_64__)
        const char *policy = "_ULx86_64_set_caching_policy";
        const char *space = "_ULx86_64_local_addr_space";
#else
        const char *policy = "_ULaarch64_set_caching_policy";
        const char *space = "_ULaarch64_local_addr_space";
#endif
        int (*set_policy)(void *, int);
        *(void **)&set_policy = dlsym(h, policy);
        void **as = dlsym(h, space);
        if (set_policy != NULL && as != NULL)
            set_policy(*as, 2 /* UNW_CACHE_PER_THREAD */);
#endif
    }
    if (fn != NULL) {
        capture = fn;
    } else {
        LOG(LOG_INFO, "libunwind.so.8 not found (%s); using glibc backtrace() "
                      "for stacks - install libunwind8 for faster tracing",
            h ? "no unw_backtrace" : USE_LIBUNWIND ? dlerror() : "TSan build");
    }
    void *warm[RECORD_MAX_DEPTH];
    capture(warm, RECORD_MAX_DEPTH);
    backtrace(warm, RECORD_MAX_DEPTH); /* loads libgcc_s now, not in a hook */
    return fn != NULL ? 0 : -1;
}

unsigned unwind_capture(void **frames, unsigned max)
{
    /* Our own frames (this function, the hook helper, the wrapper) come
     * first and are dropped.  Unwinding costs 10-20 ns a frame, so we ask
     * for just as many extra as we have seen of our own: 8 the first time,
     * then the largest count seen plus one. */
    enum { FIRST_SLACK = 8 };
    static unsigned slack;
    void *buf[RECORD_MAX_DEPTH + 32];
    unsigned want = __atomic_load_n(&slack, __ATOMIC_RELAXED);
    if (want == 0)
        want = FIRST_SLACK;
    if (max > RECORD_MAX_DEPTH)
        max = RECORD_MAX_DEPTH;
    backtrace_fn fn = capture;
    if (__builtin_expect(thread_captures < COLD_CAPTURES, 0)) {
        thread_captures++;
        fn = backtrace;
    }
    int n = fn(buf, (int)(max + want));
    /* A sanitizer's backtrace() interceptor may put its own frames first:
     * start at our first frame when there is one among the first few. */
    int skip = 0;
    while (skip < n && skip < 8 && !unwind_is_ours(buf[skip]))
        skip++;
    if (skip == n || skip == 8)
        skip = 0;
    while (skip < n && unwind_is_ours(buf[skip]))
        skip++;
    if ((unsigned)skip + 1 > __atomic_load_n(&slack, __ATOMIC_RELAXED) && skip < 31)
        __atomic_store_n(&slack, (unsigned)skip + 1, __ATOMIC_RELAXED);
    unsigned depth = (unsigned)(n - skip);
    if (depth > max)
        depth = max;
    memcpy(frames, buf + skip, depth * sizeof(void *));
    return depth;
}
