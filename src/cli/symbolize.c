/* symbolize.c - DWARF and .symtab look-ups for native frames (libdwfl).
 *
 * One Dwfl per module file, reported at base 0 so that module addresses are
 * the file's own virtual addresses: a frame's address is then the
 * snapshot's vaddr_base + offset, whatever the load address was.
 */
#include "symbolize.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


struct sym_module {
    char *path;      /* as recorded */
    char *build_id;  /* hex as recorded, or NULL */
    uint64_t vaddr_base;
    Dwfl *dwfl;
    Dwfl_Module *mod; /* NULL: nothing usable was found */
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
    if (access(file, R_OK) != 0)
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
    int nscopes = cu ? dwarf_getscopes(cu, addr - bias, &scopes) : 0;
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
    GElf_Off symoff;
    GElf_Sym sym;
    const char *symname = dwfl_module_addrinfo(sm->mod, addr, &symoff, &sym, NULL, NULL, NULL);
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
