/* driver_procaddress.c - cuGetProcAddress: base name + CUDA version + flags
 * to the exported variant with the matching ABI.
 *
 * As NVIDIA documents it: a caller asks for a base name ("cuMemAlloc") and
 * the CUDA version its code was written for; the driver returns the newest
 * variant introduced at or before that version (3020 and later get
 * cuMemAlloc_v2, earlier versions the 32-bit cuMemAlloc).  With
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM a _ptsz variant is preferred
 * where one exists.  The returned function is the library's own definition
 * of the exported symbol, whatever an LD_PRELOAD interposes (NVIDIA's driver
 * returns its own functions too): the Makefile links the library with
 * -Bsymbolic-functions, which binds &sym here to this library.
 *
 * Outcomes: unknown name -> CUDA_ERROR_NOT_FOUND + SYMBOL_NOT_FOUND; known
 * name, every variant newer than the version -> CUDA_ERROR_NOT_FOUND +
 * VERSION_NOT_SUFFICIENT; NULL symbol or pfn, unknown flag bits, or a
 * version above the driver's (13000, documented) -> CUDA_ERROR_INVALID_VALUE
 * with symbolStatus untouched.  Works before cuInit, as NVIDIA's does.
 */
#include "driver_impl.h"

#include <string.h>

struct proc_entry {
    const char *base; /* the name callers ask for */
    void *fn;         /* the variant's function */
    int version;      /* first CUDA version that binds base to this variant */
    int ptsz;         /* per-thread-default-stream variant */
};

#define ENTRY(sym, allocates, base, version, ptsz) {#base, (void *)sym, version, ptsz},
static const struct proc_entry entries[] = {DRIVER_SYMBOLS(ENTRY)};
#undef ENTRY

CUresult driver_procaddress_lookup(const char *symbol, void **pfn, int cudaVersion,
                                   cuuint64_t flags,
                                   CUdriverProcAddressQueryResult *status)
{
    const cuuint64_t known_flags =
        CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (symbol == NULL || pfn == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    if ((flags & ~known_flags) != 0 || cudaVersion > SIM_DRIVER_VERSION)
        return CUDA_ERROR_INVALID_VALUE;

    int per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    const struct proc_entry *legacy = NULL, *ptsz = NULL;
    int known = 0;
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        const struct proc_entry *e = &entries[i];
        if (strcmp(e->base, symbol) != 0)
            continue;
        known = 1;
        if (e->version > cudaVersion)
            continue;
        if (e->ptsz) {
            if (per_thread && (ptsz == NULL || e->version > ptsz->version))
                ptsz = e;
        } else if (legacy == NULL || e->version > legacy->version) {
            legacy = e;
        }
    }
    const struct proc_entry *best = ptsz ? ptsz : legacy;
    if (best == NULL) {
        *status = known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                        : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return CUDA_ERROR_NOT_FOUND;
    }
    *pfn = best->fn;
    *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}
