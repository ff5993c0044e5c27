/* resolve.h - where each wrapper's real function comes from. */
#ifndef CUMEMTRACE_RESOLVE_H
#define CUMEMTRACE_RESOLVE_H

#include <stdbool.h>
#include <stdint.h>

/* The wrapped entry points are exported (the version script the build
 * makes from hooks_table.h); everything else in the library is hidden by
 * -fvisibility=hidden. */
#pragma GCC visibility push(default)
#include "cuda_api.h"

/* The pre-4.0 ABI of the context stack (same parameters; NVIDIA's cuda.h
 * maps the names to _v2), still exported by libcuda for old binaries. */
CUresult cuCtxPushCurrent(CUcontext ctx);
CUresult cuCtxPopCurrent(CUcontext *pctx);
/* Runtime entry points that exist in libcudart but not in cuda_api.h. */
cudaError_t cudaGetDriverEntryPoint_ptsz(
    const char *symbol, void **funcPtr, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *driverStatus);
cudaError_t cudaGetDriverEntryPointByVersion_ptsz(
    const char *symbol, void **funcPtr, unsigned int cudaVersion,
    unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *driverStatus);
#pragma GCC visibility pop

#include "hooks_table.h"

enum resolve_slot {
#define SLOT_ENUM(sym, base, ver, ptsz) SLOT_##sym,
    CUMEMTRACE_DRIVER_HOOKS(SLOT_ENUM)
    SLOT_DRIVER_END,
    SLOT_RUNTIME_BEGIN = SLOT_DRIVER_END - 1,
    CUMEMTRACE_RUNTIME_HOOKS(SLOT_ENUM)
    SLOT_WRAPPED_END,
    SLOT_HELPERS_BEGIN = SLOT_WRAPPED_END - 1,
    CUMEMTRACE_HELPERS(SLOT_ENUM)
    SLOT_COUNT
#undef SLOT_ENUM
};

/* How a slot's real function was found (for CUMEMTRACE_LOG=debug). */
enum resolve_how {
    HOW_NONE,
    HOW_DYNAMIC,     /* dlsym(RTLD_NEXT): the dynamic linker's next definition */
    HOW_DLSYM,       /* the application's dlsym(handle, name) */
    HOW_PROCADDRESS, /* cuGetProcAddress */
    HOW_ENTRYPOINT,  /* cudaGetDriverEntryPoint(ByVersion) */
    HOW_SCAN         /* found in a library loaded RTLD_LOCAL */
};

#define PFN(sym) __typeof__(&sym)

/* ThreadSanitizer's runtime calls dlsym - ours - while it initialises,
 * before it can take the function-entry callbacks instrumented code makes,
 * and AddressSanitizer's before its shadow memory is mapped (a checked load
 * of a global defined in another file, resolve_real_dlsym, faults there):
 * the dlsym path must not be instrumented. */
#if defined(__clang__)
#define DLSYM_PATH __attribute__((disable_sanitizer_instrumentation))
#else
#define DLSYM_PATH __attribute__((no_sanitize("address", "thread")))
#endif

extern void *resolve_reals[SLOT_COUNT] __attribute__((visibility("hidden")));

/* Returns the real function of a slot, resolving it on first use; NULL when
 * no library in the process defines it. */
void *resolve_slow(enum resolve_slot slot);
/* Non-zero while this thread is in resolve_slow: it may hold the dynamic
 * loader's lock (dlsym, dl_iterate_phdr), even outside every wrapper's
 * bookkeeping (a wrapper looks up its real function first).  Read by
 * signal handlers. */
extern __thread int resolve_depth __attribute__((tls_model("initial-exec")));

static inline void *resolve_real(enum resolve_slot slot)
{
    void *p = __atomic_load_n(&resolve_reals[slot], __ATOMIC_ACQUIRE);
    return p ? p : resolve_slow(slot);
}

#define REAL(sym) ((PFN(sym))resolve_real(SLOT_##sym))

/* Name of a slot (the exported symbol); "?" out of range (resolve_names.c). */
const char *resolve_name(unsigned slot);

/* Logs, at debug level, how every wrapped entry point was resolved. */
void resolve_log_summary(void);

/* Called from the dlsym trampoline (dlsym_trampoline.S): our wrapper for
 * (handle, name), or NULL to let the real dlsym answer on the caller's
 * behalf (hooks_lookup.c). */
void *resolve_dlsym_substitute(void *handle, const char *name);

/* The real dlsym, for the trampoline's tail jump; NULL until
 * resolve_dlsym_init ran (idempotent). */
extern void *(*resolve_real_dlsym)(void *, const char *);
void resolve_dlsym_init(void);
/* The real dlsym(handle, name), for our own look-ups: the library's code
 * calls this, never `dlsym` (our override), so that nothing below the
 * wrappers calls up into them.  NULL when there is no real dlsym. */
void *resolve_dlsym(void *handle, const char *name);

/* ---- for hooks_lookup.c ---- */
/* True when p lies in this library's image (our wrappers, never a real
 * function).  Async-signal-safe: two compares. */
bool resolve_is_ours(const void *p);
/* Publishes `fn` as the real function of `slot` unless one is known (or
 * fn is NULL or ours), remembering how it was found. */
void resolve_store(int slot, void *fn, enum resolve_how how);
/* The application used `handle` for a driver symbol: looked at for later
 * look-ups, and every earlier miss deserves another look. */
void resolve_note_libcuda(void *handle);
/* What resolve_how's values are called in debug logs. */
extern const char *const resolve_how_names[];

#endif
