/* test_symtab.c - symtab.c names addresses exactly as glibc's dladdr does:
 * the object (name and dli_fbase) and the dynamic symbol, for addresses at
 * and around every dynamic symbol of every object loaded in this process
 * (libc, libm, cmocka, the loader, the program itself, the vDSO) and a
 * stride through their segments, resolved in one batch. */
#include <dlfcn.h>
#include <link.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "symtab.h"

struct addrs {
    uintptr_t *v;
    size_t n, cap;
};

static void add(struct addrs *a, uintptr_t x)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 4096;
        a->v = realloc(a->v, a->cap * sizeof *a->v);
        assert_non_null(a->v);
    }
    a->v[a->n++] = x;
}

/* Addresses to ask about: a stride through each segment; around each
 * symbol comes from asking dladdr1 for it below. */
static int collect(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct addrs *a = arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        for (uintptr_t x = lo; x < hi; x += 97)
            add(a, x);
        add(a, hi - 1);
        add(a, hi); /* often in no object */
    }
    return 0;
}

static int by_addr(const void *a, const void *b)
{
    uintptr_t x = ((const struct symtab_query *)a)->addr;
    uintptr_t y = ((const struct symtab_query *)b)->addr;
    return (x > y) - (x < y);
}

static void test_same_answers_as_dladdr(void **state)
{
    (void)state;
    struct addrs a = {0};
    dl_iterate_phdr(collect, &a);
    /* around the symbols dladdr finds: start, end - 1, end */
    size_t base_n = a.n;
    for (size_t i = 0; i < base_n; i += 7) {
        Dl_info info;
        const ElfW(Sym) *sym = NULL;
        if (dladdr1((void *)a.v[i], &info, (void **)&sym, RTLD_DL_SYMENT) && sym != NULL &&
            info.dli_saddr != NULL) {
            uintptr_t s = (uintptr_t)info.dli_saddr;
            add(&a, s);
            if (sym->st_size > 0) {
                add(&a, s + sym->st_size - 1);
                add(&a, s + sym->st_size);
            }
        }
    }
    struct symtab_query *q = calloc(a.n, sizeof *q);
    assert_non_null(q);
    for (size_t i = 0; i < a.n; i++)
        q[i].addr = a.v[i];
    qsort(q, a.n, sizeof *q, by_addr);
    symtab_resolve(q, a.n);
    size_t named = 0, symbols = 0;
    for (size_t i = 0; i < a.n; i++) {
        Dl_info info;
        int ok = dladdr((void *)q[i].addr, &info) != 0 && info.dli_fname != NULL;
        if (!ok) {
            if (q[i].module != NULL)
                fail_msg("%#lx: dladdr knows no object, symtab says '%s'",
                         (unsigned long)q[i].addr, q[i].module);
            continue;
        }
        if (q[i].module == NULL)
            fail_msg("%#lx: no object, dladdr says '%s'", (unsigned long)q[i].addr,
                     info.dli_fname);
        named++;
        if (strcmp(q[i].module, info.dli_fname) != 0 ||
            q[i].base != (uintptr_t)info.dli_fbase)
            fail_msg("%#lx: object '%s' at %#lx, dladdr '%s' at %p",
                     (unsigned long)q[i].addr, q[i].module, (unsigned long)q[i].base,
                     info.dli_fname, info.dli_fbase);
        const char *want = info.dli_sname, *got = q[i].symbol;
        if ((want == NULL) != (got == NULL) || (want != NULL && strcmp(want, got) != 0))
            fail_msg("%#lx in %s: symbol '%s', dladdr '%s'", (unsigned long)q[i].addr,
                     info.dli_fname, got ? got : "(none)", want ? want : "(none)");
        symbols += want != NULL;
    }
    print_message("%zu addresses, %zu in objects, %zu with a symbol: as dladdr\n", a.n,
                  named, symbols);
    assert_true(symbols > 1000); /* libc alone has thousands */
    free(q);
    free(a.v);
}

static void test_empty_and_unknown(void **state)
{
    (void)state;
    symtab_resolve(NULL, 0);
    struct symtab_query q[2] = {{.addr = 8}, {.addr = 16}}; /* page zero: no object */
    symtab_resolve(q, 2);
    assert_null(q[0].module);
    assert_null(q[1].symbol);
    assert_int_equal(q[1].base, 0);
}

int main(void)
{
    /* a few more objects, with big tables */
    (void)dlopen("libm.so.6", RTLD_NOW);
    (void)dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_answers_as_dladdr),
        cmocka_unit_test(test_empty_and_unknown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
