/* symtab.c - module and dynamic symbol of many addresses at once, as
 * dladdr() names them, without one symbol-table scan per address.
 *
 * Why: glibc's dladdr finds the object, then scans its whole dynamic
 * symbol table for the nearest symbol, libtorch's large one too, for each
 * address, and a dump asks about many (most of a small run's exit
 * snapshot went there).  Here the addresses
 * of a dump are sorted, and each object's table is scanned once for all
 * of its addresses: a symbol is rejected by a bitmap of the pages that
 * hold an address, and only a symbol on such a page is matched against
 * them (a binary search).
 *
 * The same answers as dladdr (glibc elf/dl-addr.c): the object is the one
 * whose PT_LOAD segments hold the address, named dlpi_name (argv[0] for
 * the main program), based at its first mapping's page; the symbol is the
 * defined, non-TLS, non-absolute one of the GNU hash table's range (or,
 * without one, the DT_HASH table's) that holds the address - or sits
 * exactly on it when it has no size - with the highest value, the first
 * in table order on a tie.  tests/unit/test_symtab.c compares the two.
 *
 * Threads: the scan runs inside dl_iterate_phdr, whose loader lock keeps
 * an object from being unloaded while we read it; inside it we allocate
 * nothing and take no lock (the bitmap is allocated before).  The names
 * point into the objects, valid until they are unloaded.
 */
#include "symtab.h"

#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Pages of the span of one object's addresses the bitmap tells apart; a
 * wider span shares bits between neighbouring pages (only slower). */
#define BITMAP_BITS (1u << 19)
#define PAGE_SHIFT 12

struct scan {
    struct symtab_query *q;
    size_t n;
    uint64_t *bits; /* BITMAP_BITS, cleared per object */
    uintptr_t page;
};

/* First index in q[lo, hi) with addr >= a. */
static size_t lower(const struct symtab_query *q, size_t lo, size_t hi, uintptr_t a)
{
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (q[mid].addr < a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The dynamic section's pointer as an address: the loader relocates most
 * sections' entries in place, not a read-only one (the vDSO's). */
static uintptr_t dyn_ptr(uintptr_t v, uintptr_t bias)
{
    return v < bias ? v + bias : v;
}

/* Symbols [first, end) of the object's table, or false when it has none
 * we can read (then its addresses keep no symbol, as dladdr leaves them);
 * *gnu: the range is the GNU hash table's (else every symbol counts, and
 * dladdr keeps only global and weak ones of default visibility). */
static bool sym_range(const ElfW(Dyn) *dyn, uintptr_t bias, const ElfW(Sym) **symtab,
                      const char **strtab, size_t *strsz, size_t *first, size_t *end,
                      bool *gnu_table)
{
    uintptr_t sym = 0, str = 0, gnu = 0, hash = 0;
    *strsz = 0;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        switch (dyn->d_tag) {
        case DT_SYMTAB: sym = dyn_ptr(dyn->d_un.d_ptr, bias); break;
        case DT_STRTAB: str = dyn_ptr(dyn->d_un.d_ptr, bias); break;
        case DT_STRSZ: *strsz = dyn->d_un.d_val; break;
        case DT_GNU_HASH: gnu = dyn_ptr(dyn->d_un.d_ptr, bias); break;
        case DT_HASH: hash = dyn_ptr(dyn->d_un.d_ptr, bias); break;
        default: break;
        }
    }
    if (sym == 0 || str == 0)
        return false;
    *symtab = (const ElfW(Sym) *)sym;
    *strtab = (const char *)str;
    *gnu_table = gnu != 0;
    if (gnu != 0) {
        /* nbuckets, symoffset, bloom words, shift; bloom; buckets; chains */
        const uint32_t *h = (const uint32_t *)gnu;
        uint32_t nbuckets = h[0], symoffset = h[1], bloom = h[2];
        const uint32_t *buckets =
            (const uint32_t *)((const char *)(h + 4) + (size_t)bloom * sizeof(ElfW(Addr)));
        const uint32_t *chain = buckets + nbuckets;
        uint32_t last = 0;
        for (uint32_t b = 0; b < nbuckets; b++)
            if (buckets[b] > last)
                last = buckets[b];
        if (last < symoffset) { /* no defined symbols */
            *first = *end = symoffset;
            return true;
        }
        while ((chain[last - symoffset] & 1u) == 0)
            last++;
        *first = symoffset;
        *end = (size_t)last + 1;
        return true;
    }
    *first = 0;
    if (hash != 0)
        *end = ((const uint32_t *)hash)[1]; /* nchain: the symbol count */
    else
        *end = str > sym ? (str - sym) / sizeof(ElfW(Sym)) : 0; /* as dladdr */
    return true;
}

/* The symbols of one object for q[lo, hi), all inside it. */
static void scan_symbols(struct scan *c, const struct dl_phdr_info *info, size_t lo,
                         size_t hi)
{
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    const ElfW(Sym) *symtab;
    const char *strtab;
    size_t strsz, first, end;
    bool gnu;
    if (dyn == NULL || !sym_range(dyn, info->dlpi_addr, &symtab, &strtab, &strsz, &first,
                                  &end, &gnu))
        return;
    uintptr_t qmin = c->q[lo].addr, qmax = c->q[hi - 1].addr;
    unsigned shift = PAGE_SHIFT;
    while (((qmax - qmin) >> shift) >= BITMAP_BITS)
        shift++;
    memset(c->bits, 0, (((qmax - qmin) >> shift) / 64 + 1) * sizeof *c->bits);
    for (size_t k = lo; k < hi; k++) {
        uintptr_t b = (c->q[k].addr - qmin) >> shift;
        c->bits[b / 64] |= 1ull << (b % 64);
    }
    uintptr_t bias = info->dlpi_addr;
    for (size_t i = first; i < end; i++) {
        const ElfW(Sym) *s = &symtab[i];
        uintptr_t start = bias + s->st_value;
        /* dladdr: a sizeless symbol matches its own address only */
        uintptr_t stop = start + (s->st_size ? s->st_size : 1);
        if (start > qmax || stop <= qmin)
            continue;
        /* most symbols lie on no page with an address: one or two tests */
        uintptr_t pa = ((start > qmin ? start : qmin) - qmin) >> shift;
        uintptr_t pz = ((stop - 1 < qmax ? stop - 1 : qmax) - qmin) >> shift;
        bool any = (c->bits[pa / 64] >> (pa % 64)) & 1;
        for (uintptr_t p = pa + 1; !any && p <= pz; p++)
            any = (c->bits[p / 64] >> (p % 64)) & 1;
        if (!any)
            continue;
        if ((s->st_shndx == SHN_UNDEF && s->st_value == 0) || s->st_shndx == SHN_ABS ||
            ELF64_ST_TYPE(s->st_info) == STT_TLS || s->st_name >= strsz)
            continue;
        if (!gnu && ((ELF64_ST_BIND(s->st_info) != STB_GLOBAL &&
                      ELF64_ST_BIND(s->st_info) != STB_WEAK) ||
                     ELF64_ST_VISIBILITY(s->st_other) != STV_DEFAULT))
            continue;
        for (size_t k = lower(c->q, lo, hi, start); k < hi && c->q[k].addr < stop; k++) {
            struct symtab_query *x = &c->q[k];
            /* a strictly higher value wins: the first in table order on a tie */
            if (x->symbol == NULL || x->sym_value < s->st_value) {
                x->symbol = strtab + s->st_name;
                x->sym_value = s->st_value;
            }
        }
    }
}

/* dladdr names the main program (no loader name) by argv[0]. */
static const char *main_name(void)
{
    return program_invocation_name != NULL ? program_invocation_name : "";
}

static int scan_one(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct scan *c = arg;
    /* glibc's l_map_start, l_map_end and l_contiguous: an object whose
     * segments follow each other page by page holds every address of
     * [start, end), else only those inside a segment */
    uintptr_t page = c->page, low = UINTPTR_MAX, end = 0, expect = 0;
    bool contiguous = true, main_program = info->dlpi_name == NULL || info->dlpi_name[0] == '\0';
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t start = ph->p_vaddr & ~(page - 1);
        if (low != UINTPTR_MAX && start != expect)
            contiguous = false;
        if (start < low)
            low = start;
        if (ph->p_vaddr + ph->p_memsz > end)
            end = ph->p_vaddr + ph->p_memsz;
        /* the kernel maps the main program to its memory size, the loader
         * the others to their file size (the rest is anonymous) */
        uintptr_t mapped = ph->p_vaddr + (main_program ? ph->p_memsz : ph->p_filesz);
        expect = (mapped + page - 1) & ~(page - 1);
    }
    if (low == UINTPTR_MAX)
        return 0;
    /* dladdr's dli_fbase: the object's first mapping, page aligned */
    uintptr_t base = info->dlpi_addr + low;
    size_t lo = SIZE_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (!contiguous && (ph->p_type != PT_LOAD || ph->p_memsz == 0))
            continue;
        uintptr_t a = contiguous ? base : info->dlpi_addr + ph->p_vaddr;
        uintptr_t z = contiguous ? info->dlpi_addr + end : a + ph->p_memsz;
        for (size_t k = lower(c->q, 0, c->n, a); k < c->n && c->q[k].addr < z; k++) {
            if (c->q[k].module != NULL)
                continue; /* an earlier object holds it */
            c->q[k].module = !main_program ? info->dlpi_name : main_name();
            c->q[k].base = base;
            if (k < lo)
                lo = k;
            if (k + 1 > hi)
                hi = k + 1;
        }
        if (contiguous)
            break;
    }
    if (lo >= hi)
        return 0;
    /* q[lo, hi) may hold another object's addresses between this one's
     * segments: scan only for those named after this object */
    size_t k = lo;
    while (k < hi) {
        while (k < hi && c->q[k].base != base)
            k++;
        size_t run = k;
        while (run < hi && c->q[run].base == base)
            run++;
        if (k < run)
            scan_symbols(c, info, k, run);
        k = run;
    }
    return 0;
}

void symtab_resolve(struct symtab_query *q, size_t n)
{
    for (size_t k = 0; k < n; k++)
        q[k] = (struct symtab_query){.addr = q[k].addr}; /* every out field unknown */
    if (n == 0)
        return;
    struct scan c = {q, n, malloc(BITMAP_BITS / 8), (uintptr_t)sysconf(_SC_PAGESIZE)};
    if (c.bits == NULL)
        return; /* no memory: modules and symbols unknown, as without dladdr */
    dl_iterate_phdr(scan_one, &c);
    free(c.bits);
}
