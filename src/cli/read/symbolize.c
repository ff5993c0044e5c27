/* symbolize.c - DWARF and .symtab look-ups for native frames (libdwfl).
 *
 * One Dwfl per module file, reported at base 0 so that module addresses are
 * the file's own virtual addresses: a frame's address is then the
 * snapshot's vaddr_base + offset, whatever the load address was.
 *
 * The function around an address is found in a per-compilation-unit index
 * of its functions' address ranges, built the first time the unit is met:
 * dwarf_getscopes walks the unit's whole DIE tree on every call, which a
 * unit of thousands of functions makes slow for every frame.  Only the
 * function's own subtree is walked for the inlined calls.
 */
#include "symbolize.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


/* An address range of a function (a DW_TAG_subprogram with code). */
struct fn_range {
    Dwarf_Addr lo, hi; /* [lo, hi) in the module's DWARF addresses */
    Dwarf_Die die;
};

/* A function symbol of .symtab (or .dynsym). */
struct fn_sym {
    GElf_Addr lo, hi; /* [lo, hi) */
    const char *name; /* libdwfl's, as long as the Dwfl */
    int global;
};

/* The functions of one compilation unit, by lo. */
struct cu_index {
    Dwarf_Off cu;
    struct fn_range *v;
    size_t n;
};

struct sym_module {
    char *path;      /* as recorded */
    char *build_id;  /* hex as recorded, or NULL */
    uint64_t vaddr_base;
    Dwfl *dwfl;
    Dwfl_Module *mod; /* NULL: nothing usable was found */
    struct cu_index *cus; /* by cu offset */
    size_t ncus, cus_cap;
    struct fn_sym *syms;  /* the function symbols by address, built on first use */
    size_t nsyms;
    int syms_built;
};

struct symbolizer {
    struct sym_module *v;
    size_t n, cap;
};

static char *debuginfo_path; /* libdwfl keeps a pointer to it */

static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &debuginfo_path,
};

struct symbolizer *symbolizer_new(void)
{
    const char *e = getenv("CUMEMTRACE_DEBUGINFO");
    if (e != NULL && (strcmp(e, "off") == 0 || strcmp(e, "0") == 0))
        return NULL;
    return calloc(1, sizeof(struct symbolizer));
}

void symbolizer_free(struct symbolizer *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->n; i++) {
        if (s->v[i].dwfl != NULL)
            dwfl_end(s->v[i].dwfl);
        for (size_t c = 0; c < s->v[i].ncus; c++)
            free(s->v[i].cus[c].v);
        free(s->v[i].cus);
        free(s->v[i].syms);
        free(s->v[i].path);
        free(s->v[i].build_id);
    }
    free(s->v);
    free(s);
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* 1 when the module's build-id is the recorded one.  A file without a
 * build-id matches only a record without one (nothing better to go on). */
static int build_id_matches(Dwfl_Module *mod, const char *hex)
{
    const unsigned char *bits;
    GElf_Addr vaddr;
    int len = dwfl_module_build_id(mod, &bits, &vaddr);
    if (hex == NULL)
        return len <= 0;
    if (len <= 0 || strlen(hex) != 2 * (size_t)len)
        return 0;
    for (int i = 0; i < len; i++) {
        int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0 || bits[i] != (unsigned char)(hi << 4 | lo))
            return 0;
    }
    return 1;
}

/* Reports file as the only module of a new Dwfl; NULL when it cannot be
 * read as ELF or its build-id is not the one that ran (*mismatch then). */
static Dwfl *open_file(const char *name, const char *file, const char *build_id,
                       Dwfl_Module **out, int *mismatch)
{
    /* a module path comes from the snapshot: a FIFO or a device there would
     * block or feed the ELF reader without end (as for inputs, input.h) */
    struct stat st;
    if (stat(file, &st) != 0 || !S_ISREG(st.st_mode) || access(file, R_OK) != 0)
        return NULL;
    Dwfl *d = dwfl_begin(&callbacks);
    if (d == NULL)
        return NULL;
    dwfl_report_begin(d);
    Dwfl_Module *m = dwfl_report_elf(d, name, file, -1, 0, false);
    dwfl_report_end(d, NULL, NULL);
    if (m == NULL) {
        dwfl_end(d);
        return NULL;
    }
    if (!build_id_matches(m, build_id)) {
        *mismatch = 1;
        dwfl_end(d);
        return NULL;
    }
    *out = m;
    return d;
}

static void open_module(struct sym_module *sm, const char *name)
{
    int mismatch = 0;
    if (sm->path != NULL)
        sm->dwfl = open_file(name, sm->path, sm->build_id, &sm->mod, &mismatch);
    /* Not there, or rebuilt since: a separate debug file holds the symbols
     * and the DWARF of the build that ran, at the same addresses. */
    if (sm->dwfl == NULL && sm->build_id != NULL && strlen(sm->build_id) > 2) {
        char dbg[512];
        snprintf(dbg, sizeof dbg, "/usr/lib/debug/.build-id/%.2s/%s.debug", sm->build_id,
                 sm->build_id + 2);
        int ignored = 0;
        sm->dwfl = open_file(name, dbg, sm->build_id, &sm->mod, &ignored);
    }
    if (sm->dwfl == NULL && mismatch)
        fprintf(stderr, "cumemtrace: warning: %s: the file on disk is not the one that ran (build-id %s differs); "
                 "its frames keep the recorded symbols - keep the binary that ran, or "
                 "install its debug file under /usr/lib/debug/.build-id/\n",
                 sm->path, sm->build_id ? sm->build_id : "absent");
}

int symbolizer_module(struct symbolizer *s, const char *name, const char *path,
                      const char *build_id_hex, uint64_t vaddr_base)
{
    if (s == NULL || (path == NULL && build_id_hex == NULL))
        return -1;
    for (size_t i = 0; i < s->n; i++) {
        struct sym_module *sm = &s->v[i];
        if (sm->vaddr_base == vaddr_base &&
            (sm->path == NULL ? path == NULL : path != NULL && strcmp(sm->path, path) == 0) &&
            (sm->build_id == NULL ? build_id_hex == NULL
                                  : build_id_hex != NULL && strcmp(sm->build_id, build_id_hex) == 0))
            return sm->mod != NULL ? (int)i : -1;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        struct sym_module *v = realloc(s->v, cap * sizeof *v);
        if (v == NULL)
            return -1;
        s->v = v;
        s->cap = cap;
    }
    struct sym_module *sm = &s->v[s->n];
    memset(sm, 0, sizeof *sm);
    sm->path = path ? strdup(path) : NULL;
    sm->build_id = build_id_hex ? strdup(build_id_hex) : NULL;
    sm->vaddr_base = vaddr_base;
    if ((path != NULL && sm->path == NULL) || (build_id_hex != NULL && sm->build_id == NULL)) {
        free(sm->path);
        free(sm->build_id);
        return -1;
    }
    s->n++;
    open_module(sm, name ? name : "?");
    return sm->mod != NULL ? (int)(s->n - 1) : -1;
}

/* The name of a subprogram or inlined-subroutine DIE, following
 * abstract_origin / specification; the linkage name when there is one. */
static const char *die_name(Dwarf_Die *die)
{
    Dwarf_Attribute a;
    const char *n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &a));
    if (n == NULL)
        n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a));
    if (n == NULL)
        n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &a));
    return n;
}

/* ---- the symbol table, sorted once ----
 * dwfl_module_addrinfo scans every symbol on each call: a module of many
 * thousand symbols cost milliseconds a frame. */

static int sym_cmp(const void *a, const void *b)
{
    const struct fn_sym *x = a, *y = b;
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    return y->global - x->global; /* at one address the global name first */
}

static void build_syms(struct sym_module *sm)
{
    sm->syms_built = 1;
    int n = dwfl_module_getsymtab(sm->mod);
    if (n <= 1)
        return;
    struct fn_sym *v = malloc((size_t)n * sizeof *v);
    if (v == NULL)
        return;
    size_t k = 0;
    for (int i = 1; i < n; i++) {
        GElf_Sym sym;
        GElf_Addr addr;
        const char *name = dwfl_module_getsym_info(sm->mod, i, &sym, &addr, NULL, NULL, NULL);
        int type = GELF_ST_TYPE(sym.st_info);
        if (name == NULL || name[0] == '\0' || sym.st_shndx == SHN_UNDEF ||
            sym.st_size == 0 || (type != STT_FUNC && type != STT_GNU_IFUNC))
            continue;
        v[k++] = (struct fn_sym){addr, addr + sym.st_size, name,
                                 GELF_ST_BIND(sym.st_info) != STB_LOCAL};
    }
    qsort(v, k, sizeof *v, sym_cmp);
    sm->syms = v;
    sm->nsyms = k;
}

/* The function symbol whose code holds addr: the table's answer when it
 * has one, else libdwfl's own search (sizeless symbols and the like). */
static const char *symbol_at(struct sym_module *sm, GElf_Addr addr)
{
    if (!sm->syms_built)
        build_syms(sm);
    size_t lo = 0, hi = sm->nsyms;
    while (lo < hi) { /* the first symbol above addr */
        size_t mid = (lo + hi) / 2;
        if (sm->syms[mid].lo <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    const struct fn_sym *best = NULL;
    for (size_t i = lo; i-- > 0 && lo - i <= 64;) {
        const struct fn_sym *f = &sm->syms[i];
        if (best != NULL && f->lo != best->lo)
            break;
        if (addr < f->hi && (best == NULL || (f->global && !best->global)))
            best = f;
    }
    if (best != NULL)
        return best->name;
    GElf_Off symoff;
    GElf_Sym sym;
    return dwfl_module_addrinfo(sm->mod, addr, &symoff, &sym, NULL, NULL, NULL);
}

/* ---- the per-unit index of functions ---- */

struct fn_vec {
    struct fn_range *v;
    size_t n, cap;
    int failed;
};

static void add_ranges(struct fn_vec *fv, Dwarf_Die *die)
{
    Dwarf_Addr base, lo, hi;
    ptrdiff_t off = 0;
    while ((off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0) {
        if (hi <= lo)
            continue;
        if (fv->n == fv->cap) {
            size_t cap = fv->cap ? 2 * fv->cap : 64;
            struct fn_range *v = realloc(fv->v, cap * sizeof *v);
            if (v == NULL) {
                fv->failed = 1;
                return;
            }
            fv->v = v;
            fv->cap = cap;
        }
        fv->v[fv->n++] = (struct fn_range){lo, hi, *die};
    }
}

/* Every function with code under die: at the unit's top level, in
 * namespaces and classes, and nested in other functions (GNU C). */
static void collect(struct fn_vec *fv, Dwarf_Die *parent, int depth)
{
    Dwarf_Die child;
    if (depth > 64 || dwarf_child(parent, &child) != 0)
        return;
    do {
        switch (dwarf_tag(&child)) {
        case DW_TAG_subprogram:
            add_ranges(fv, &child);
            collect(fv, &child, depth + 1);
            break;
        case DW_TAG_namespace:
        case DW_TAG_class_type:
        case DW_TAG_structure_type:
        case DW_TAG_union_type:
        case DW_TAG_module:
        case DW_TAG_lexical_block:
            collect(fv, &child, depth + 1);
            break;
        default:
            break;
        }
    } while (!fv->failed && dwarf_siblingof(&child, &child) == 0);
}

static int range_cmp(const void *a, const void *b)
{
    const struct fn_range *x = a, *y = b;
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    /* the larger first, so a nested function's range comes after */
    return x->hi > y->hi ? -1 : x->hi < y->hi;
}

/* The index of cu in sm (built on first use), or NULL when out of memory. */
static const struct cu_index *cu_index(struct sym_module *sm, Dwarf_Die *cu)
{
    Dwarf_Off off = dwarf_dieoffset(cu);
    size_t lo = 0, hi = sm->ncus;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (sm->cus[mid].cu < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < sm->ncus && sm->cus[lo].cu == off)
        return &sm->cus[lo];
    if (sm->ncus == sm->cus_cap) {
        size_t cap = sm->cus_cap ? 2 * sm->cus_cap : 16;
        struct cu_index *v = realloc(sm->cus, cap * sizeof *v);
        if (v == NULL)
            return NULL;
        sm->cus = v;
        sm->cus_cap = cap;
    }
    struct fn_vec fv = {NULL, 0, 0, 0};
    collect(&fv, cu, 0);
    if (fv.failed) {
        free(fv.v);
        return NULL;
    }
    qsort(fv.v, fv.n, sizeof *fv.v, range_cmp);
    memmove(sm->cus + lo + 1, sm->cus + lo, (sm->ncus - lo) * sizeof *sm->cus);
    sm->cus[lo] = (struct cu_index){off, fv.v, fv.n};
    sm->ncus++;
    return &sm->cus[lo];
}

/* The innermost function of the unit whose code holds pc, or NULL. */
static Dwarf_Die *function_at(const struct cu_index *ix, Dwarf_Addr pc)
{
    size_t lo = 0, hi = ix->n;
    while (lo < hi) { /* the first range with lo > pc */
        size_t mid = (lo + hi) / 2;
        if (ix->v[mid].lo <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* Ranges before it start at or below pc; the nearest that holds pc is
     * the innermost (nested ranges sort after their container). */
    for (size_t i = lo; i-- > 0 && lo - i <= 64;)
        if (pc < ix->v[i].hi)
            return &ix->v[i].die;
    return NULL;
}

/* The inlined calls inside fn that hold pc, outermost first. */
static int inlined_at(Dwarf_Die *parent, Dwarf_Addr pc, Dwarf_Die *chain, int n, int max)
{
    Dwarf_Die child;
    if (dwarf_child(parent, &child) != 0)
        return n;
    do {
        int tag = dwarf_tag(&child);
        if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_lexical_block &&
            tag != DW_TAG_try_block && tag != DW_TAG_catch_block)
            continue;
        if (dwarf_haspc(&child, pc) != 1)
            continue;
        if (tag == DW_TAG_inlined_subroutine) {
            if (n == max)
                return n;
            chain[n++] = child;
        }
        return inlined_at(&child, pc, chain, n, max);
    } while (dwarf_siblingof(&child, &child) == 0);
    return n;
}

/* Scopes holding pc innermost first, ending at the function (as
 * dwarf_getscopes gives them, less the blocks and the unit); a malloc'd
 * array in *out, or 0. */
static int scopes_at(struct sym_module *sm, Dwarf_Die *cu, Dwarf_Addr pc, Dwarf_Die **out)
{
    const struct cu_index *ix = cu_index(sm, cu);
    Dwarf_Die *fn = ix ? function_at(ix, pc) : NULL;
    if (fn == NULL) /* no index, or code the index lacks: the full walk */
        return dwarf_getscopes(cu, pc, out);
    enum { DEEP = 64 };
    Dwarf_Die chain[DEEP];
    int n = inlined_at(fn, pc, chain, 0, DEEP - 1);
    Dwarf_Die *v = malloc((size_t)(n + 1) * sizeof *v);
    if (v == NULL)
        return 0;
    for (int i = 0; i < n; i++)
        v[i] = chain[n - 1 - i];
    v[n] = *fn;
    *out = v;
    return n + 1;
}

size_t symbolizer_lookup(struct symbolizer *s, int m, uint64_t offset,
                         struct src_frame *out, size_t max)
{
    if (s == NULL || m < 0 || (size_t)m >= s->n || max == 0)
        return 0;
    struct sym_module *sm = &s->v[m];
    if (sm->mod == NULL)
        return 0;
    GElf_Addr addr = sm->vaddr_base + offset;
    const char *file = NULL;
    int line = 0;
    Dwfl_Line *ln = dwfl_module_getsrc(sm->mod, addr);
    if (ln != NULL)
        file = dwfl_lineinfo(ln, NULL, &line, NULL, NULL, NULL);

    size_t k = 0;
    Dwarf_Addr bias = 0;
    Dwarf_Die *cu = dwfl_module_addrdie(sm->mod, addr, &bias);
    Dwarf_Die *scopes = NULL;
    int nscopes = cu ? scopes_at(sm, cu, addr - bias, &scopes) : 0;
    for (int i = 0; i < nscopes && k < max; i++) {
        int tag = dwarf_tag(&scopes[i]);
        if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram)
            continue;
        out[k] = (struct src_frame){die_name(&scopes[i]), file, line,
                                    tag == DW_TAG_inlined_subroutine};
        k++;
        if (tag == DW_TAG_subprogram)
            break;
        /* The caller's line is where this inlined call sits. */
        Dwarf_Attribute a;
        Dwarf_Word w;
        file = NULL;
        line = 0;
        Dwarf_Files *files;
        size_t nfiles;
        if (dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_file, &a), &w) == 0 &&
            dwarf_getsrcfiles(cu, &files, &nfiles) == 0 && w < nfiles)
            file = dwarf_filesrc(files, w, NULL, NULL);
        if (dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_line, &a), &w) == 0)
            line = (int)w;
    }
    free(scopes);
    if (k > 0 && out[k - 1].inlined && k < max) {
        /* DWARF ran out before the enclosing function: .symtab names it. */
        out[k++] = (struct src_frame){NULL, file, line, 0};
    }
    /* The outermost frame is the real function: the symbol table names
     * static functions too (and names the frame when there is no DWARF). */
    const char *symname =
        k == 0 || out[k - 1].function == NULL ? symbol_at(sm, addr) : NULL;
    if (k == 0) {
        if (symname == NULL && file == NULL)
            return 0;
        out[k++] = (struct src_frame){symname, file, line, 0};
    } else if (out[k - 1].function == NULL) {
        out[k - 1].function = symname; /* DWARF names GCC's clones better */
    }
    if (out[k - 1].function == NULL)
        return 0; /* a line without a function is no better than the record */
    return k;
}
