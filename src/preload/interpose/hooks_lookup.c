/* hooks_lookup.c - every path by which a program asks for a CUDA function
 * hands out our wrapper: cuGetProcAddress(_v2), how every runtime since
 * 11.3, shared or static, reaches the driver; cudaGetDriverEntryPoint(ByVersion),
 * how PyTorch and NCCL get the VMM calls; and dlsym(handle, name) on
 * libcuda (old runtimes, old NCCL), through the trampoline in
 * dlsym_trampoline.S.
 *
 * This file holds every wrapper's address (the table below), so it sits
 * above all of them; the wrappers and everything else find real functions
 * through resolve.c, which holds none.  Only names we wrap are touched
 * (cudnnCreate is not ours); the look-up's answer is remembered as the
 * wrapper's real function (resolve_store).
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "resolve.h"

#define NO_DRIVER CUDA_ERROR_NOT_INITIALIZED
#define NO_RUNTIME cudaErrorInsufficientDriver

/* ---- substitution ----
 * One table of every wrapper by slot, from hooks_table.h. */

struct slot_wrapper {
    const char *name, *base;
    int version;
    int ptsz;
    void *wrapper;
};

#define SLOT_WRAPPER(sym, b, ver, p) {#sym, b, ver, p, (void *)&sym},
static const struct slot_wrapper slots[SLOT_WRAPPED_END] = {
    CUMEMTRACE_DRIVER_HOOKS(SLOT_WRAPPER)
    CUMEMTRACE_RUNTIME_HOOKS(SLOT_WRAPPER)
};
#undef SLOT_WRAPPER

DLSYM_PATH static int slot_by_name(const char *name)
{
    for (int i = 0; i < SLOT_WRAPPED_END; i++)
        if (strcmp(slots[i].name, name) == 0)
            return i;
    return -1;
}

DLSYM_PATH void *resolve_dlsym_substitute(void *handle, const char *name)
{
    if (__atomic_load_n(&resolve_real_dlsym, __ATOMIC_ACQUIRE) == NULL)
        resolve_dlsym_init();
    if (handle == RTLD_NEXT || handle == RTLD_DEFAULT || name == NULL ||
        name[0] != 'c' || name[1] != 'u' || config.disabled)
        return NULL; /* the real dlsym answers, on the caller's behalf */
    int slot = slot_by_name(name);
    if (slot < 0)
        return NULL;
    void *p = resolve_dlsym(handle, name);
    if (p == NULL || p == slots[slot].wrapper)
        return p;
    resolve_store(slot, p, HOW_DLSYM);
    if (slot < SLOT_DRIVER_END)
        resolve_note_libcuda(handle);
    LOG(LOG_DEBUG, "dlsym(%p, \"%s\") -> cumemtrace wrapper", handle, name);
    return slots[slot].wrapper;
}

/* Post-processes a driver look-up that returned `fn` for (symbol, version,
 * flags): returns our wrapper for that exact ABI variant (remembering `fn` as
 * its real function), or `fn` unchanged when the symbol is not ours
 * (hooks_lookup.c, which holds the wrappers). */
static void *resolve_substitute_proc(const char *symbol, void *fn, int version,
                                     unsigned long long flags, enum resolve_how h)
{
    if (symbol == NULL || fn == NULL || symbol[0] != 'c' || symbol[1] != 'u' ||
        config.disabled || resolve_is_ours(fn))
        return fn;
    bool ptds = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    int best = -1;
    long best_rank = -1;
    for (int i = 0; i < SLOT_DRIVER_END; i++) {
        const struct slot_wrapper *s = &slots[i];
        if (strcmp(s->base, symbol) != 0)
            continue;
        if (resolve_reals[i] == fn) { /* known by identity: exact */
            best = i;
            break;
        }
        if (s->version > version || (s->ptsz && !ptds))
            continue;
        long rank = (long)s->ptsz * 1000000 + s->version;
        if (rank > best_rank) {
            best_rank = rank;
            best = i;
        }
    }
    if (best < 0)
        return fn;
    resolve_store(best, fn, h);
    LOG(LOG_DEBUG, "%s(\"%s\", version %d, flags %llu) -> wrapper %s",
        resolve_how_names[h], symbol, version, flags, slots[best].name);
    return slots[best].wrapper;
}

/* ---- cuGetProcAddress ---- */

/* Both versions: the real look-up, then our wrapper for its answer. */
#define PROC_ADDRESS(sym, params, args)                                        \
    CUresult sym params                                                        \
    {                                                                          \
        PFN(sym) real = REAL(sym);                                             \
        if (real == NULL)                                                      \
            return NO_DRIVER;                                                  \
        CUresult r = real args;                                                \
        if (r == CUDA_SUCCESS && pfn != NULL)                                  \
            *pfn = resolve_substitute_proc(symbol, *pfn, cudaVersion, flags,   \
                                           HOW_PROCADDRESS);                   \
        return r;                                                              \
    }

PROC_ADDRESS(cuGetProcAddress_v2,
             (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
              CUdriverProcAddressQueryResult *symbolStatus),
             (symbol, pfn, cudaVersion, flags, symbolStatus))
PROC_ADDRESS(cuGetProcAddress, (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags),
             (symbol, pfn, cudaVersion, flags))

/* ---- driver entry points ----
 * The runtime asks the driver through the cuGetProcAddress it obtained -
 * normally our wrapper already - and we post-process its answer as well,
 * for runtimes that obtained the real one before we could intervene. */

static int runtime_version(void)
{
    PFN(cudaRuntimeGetVersion) get = REAL(cudaRuntimeGetVersion);
    int v;
    if (get != NULL && get(&v) == cudaSuccess && v > 0)
        return v;
    return 13000; /* the ABI this library was written against */
}

static cudaError_t entry_point_done(cudaError_t r, const char *symbol,
                                    void **funcPtr, int version,
                                    unsigned long long flags)
{
    if (r == cudaSuccess && funcPtr != NULL)
        *funcPtr = resolve_substitute_proc(symbol, *funcPtr, version, flags,
                                           HOW_ENTRYPOINT);
    return r;
}

/* The four entry-point look-ups: with the runtime's version or the
 * caller's, with or without the per-thread default stream suffix. */
#define ENTRY_POINT(sym)                                                       \
    cudaError_t sym(const char *symbol, void **funcPtr, unsigned long long flags, \
                    enum cudaDriverEntryPointQueryResult *driverStatus)        \
    {                                                                          \
        PFN(sym) real = REAL(sym);                                             \
        if (real == NULL)                                                      \
            return NO_RUNTIME;                                                 \
        cudaError_t r = real(symbol, funcPtr, flags, driverStatus);            \
        return entry_point_done(r, symbol, funcPtr, runtime_version(), flags); \
    }

#define ENTRY_POINT_BY_VERSION(sym)                                            \
    cudaError_t sym(const char *symbol, void **funcPtr, unsigned int cudaVersion, \
                    unsigned long long flags,                                  \
                    enum cudaDriverEntryPointQueryResult *driverStatus)        \
    {                                                                          \
        PFN(sym) real = REAL(sym);                                             \
        if (real == NULL)                                                      \
            return NO_RUNTIME;                                                 \
        cudaError_t r = real(symbol, funcPtr, cudaVersion, flags, driverStatus); \
        return entry_point_done(r, symbol, funcPtr, (int)cudaVersion, flags);  \
    }

ENTRY_POINT(cudaGetDriverEntryPoint)
ENTRY_POINT(cudaGetDriverEntryPoint_ptsz)
ENTRY_POINT_BY_VERSION(cudaGetDriverEntryPointByVersion)
ENTRY_POINT_BY_VERSION(cudaGetDriverEntryPointByVersion_ptsz)
