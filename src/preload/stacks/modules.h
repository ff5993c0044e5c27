/* modules.h - what the CLI needs to resolve a module's frames later, on
 * another machine or after a rebuild: the path as loaded, the GNU build-id
 * (does the file on disk match the one that ran?) and where offset 0 of a
 * frame sits in the ELF file's virtual addresses. */
#ifndef CUMEMTRACE_MODULES_H
#define CUMEMTRACE_MODULES_H

#include <stddef.h>
#include <stdint.h>

#define MODULE_BUILD_ID_MAX 64 /* bytes; GNU build-ids are 20 (SHA-1) */

struct module_info {
    uintptr_t base;        /* in: dladdr's dli_fbase of a frame in the module */
    const char *name;      /* in: the basename frames call it by */
    uintptr_t vaddr_base;  /* out: ELF vaddr of that base (base - load bias) */
    char path[1024];       /* out: as loaded ("" when not found) */
    unsigned char build_id[MODULE_BUILD_ID_MAX];
    size_t build_id_len;   /* out: 0 when the module has none */
    int found;             /* out: 1 when a loaded object starts at base */
};

/* Fills the out fields of mods[0..n) from the loaded objects.  Reads the
 * loader's list only (dl_iterate_phdr): no allocation, no loader call and no
 * lock of ours inside the iteration (a loader call there deadlocked against
 * another thread's dlopen). */
void modules_describe(struct module_info *mods, size_t n);

#endif
