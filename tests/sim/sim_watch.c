/* sim_watch.c - a watcher for tests/e2e/test_sim_runtime.py, loaded twice:
 *  - as LD_AUDIT it reports on stderr every object the dynamic linker opens
 *    ("watch: open <path>") and every binding of a "cu" symbol, whether by
 *    dlsym() or by a call through the PLT ("watch: bind <name>").  (An
 *    interposed dlsym would see only part of it, and breaks dlsym(RTLD_NEXT)
 *    for sanitizer runtimes.)
 *  - as LD_PRELOAD it interposes cuMemAlloc_v2 and cuMemFree_v2 with versions
 *    that fail loudly: a runtime that reached the driver through the dynamic
 *    linker, or a driver whose cuGetProcAddress handed out interposable
 *    symbols, would call them.
 * Built without sanitizers: the auditor runs in its own link-map namespace. */
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "cuda_api.h"

unsigned int la_version(unsigned int version);
unsigned int la_objopen(struct link_map *map, Lmid_t lmid, uintptr_t *cookie);
uintptr_t la_symbind64(Elf64_Sym *sym, unsigned int ndx, uintptr_t *refcook,
                       uintptr_t *defcook, unsigned int *flags, const char *symname);

unsigned int la_version(unsigned int version)
{
    (void)version;
    return LAV_CURRENT;
}

unsigned int la_objopen(struct link_map *map, Lmid_t lmid, uintptr_t *cookie)
{
    (void)lmid;
    (void)cookie;
    if (map->l_name != NULL && map->l_name[0] != '\0')
        fprintf(stderr, "watch: open %s\n", map->l_name);
    return LA_FLG_BINDTO | LA_FLG_BINDFROM;
}

uintptr_t la_symbind64(Elf64_Sym *sym, unsigned int ndx, uintptr_t *refcook,
                       uintptr_t *defcook, unsigned int *flags, const char *symname)
{
    (void)ndx;
    (void)refcook;
    (void)defcook;
    (void)flags;
    if (strncmp(symname, "cu", 2) == 0)
        fprintf(stderr, "watch: bind %s\n", symname);
    return sym->st_value;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    (void)dptr;
    fprintf(stderr, "watch: interposed cuMemAlloc_v2(%zu) called\n", bytesize);
    return CUDA_ERROR_UNKNOWN;
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    fprintf(stderr, "watch: interposed cuMemFree_v2(0x%llx) called\n", dptr);
    return CUDA_ERROR_UNKNOWN;
}
