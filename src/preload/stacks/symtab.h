/* symtab.h - the object and dynamic symbol of many addresses in one pass
 * per object, with dladdr's answers (see symtab.c). */
#ifndef CUMEMTRACE_SYMTAB_H
#define CUMEMTRACE_SYMTAB_H

#include <stddef.h>
#include <stdint.h>

struct symtab_query {
    uintptr_t addr;     /* in: an address (a return address - 1) */
    const char *module; /* out: the object's name as the loader has it (argv[0]
                         * for the main program); NULL when no object holds addr */
    const char *symbol; /* out: dladdr's dli_sname, or NULL */
    uintptr_t base;     /* out: dladdr's dli_fbase (0 without a module) */
    uintptr_t sym_value; /* the symbol's st_value (for the choice among them) */
};

/* Resolves q[0..n), sorted by addr (equal addresses allowed).  Takes no
 * lock of ours; the names live as long as their objects stay loaded. */
void symtab_resolve(struct symtab_query *q, size_t n);

#endif
