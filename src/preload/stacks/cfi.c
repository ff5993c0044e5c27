/* cfi.c - frame rules for return addresses, read from .eh_frame.
 *
 * Why: a DWARF unwinder steps through each frame's rules every time; the
 * walk in unwind.c needs, per return address, only "where is the CFA, is
 * the caller's rbp saved, and where".  That is what the DWARF call-frame
 * information (the .eh_frame every x86-64 object carries, which C++
 * exceptions rely on) says for the row containing the call.  So this file
 * reads exactly that row, once per return address, and caches it packed in
 * one 64-bit word: the walk then costs a hash probe and two loads a frame,
 * and follows the same rules a DWARF unwinder would - frame pointers or not.
 *
 * What it reads: glibc's _dl_find_object (lock-free, async-signal-safe,
 * glibc 2.35+) names the module of an address and its .eh_frame_hdr; the
 * hdr's sorted table finds the FDE; its CIE and instructions are run up to
 * the call.  Every read is bounded by the module's mapping.  Anything
 * outside the common shapes - a signal frame (augmentation 'S'), a DWARF
 * expression for the CFA, rbp or the return address, the CFA in another
 * register, a missing FDE - answers false, and the walk hands the whole
 * stack to backtrace().  Negative answers are cached too.
 *
 * Cache: 8192 words, 2048 sets of 4 (cfi.h gives the layout), written and read with relaxed atomics
 * (a word is the whole entry, so a reader sees an old entry or a new one,
 * never half of each).  Tag and index together give back the address
 * exactly.  A module unloaded and another loaded at the same address could
 * leave stale rules: dlclose of code still on a stack is already undefined,
 * and a stale rule that sends the walk astray is caught by its bounds.
 */
#include "cfi.h"

#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

#include "resolve.h"

#if defined(__x86_64__)

typedef int (*find_object_fn)(void *, struct dl_find_object *);
static find_object_fn find_object;

enum { CACHE_SIZE = 1 << CFI_CACHE_BITS };
uint64_t cfi_cache[CACHE_SIZE] __attribute__((visibility("hidden")));

bool cfi_init(void)
{
    /* dlsym, not a link-time reference: the library must still load on a
     * glibc older than 2.35 (there the walk always defers to backtrace()) */
    *(void **)&find_object = resolve_dlsym(RTLD_DEFAULT, "_dl_find_object");
    return find_object != NULL;
}

/* ---- bounded reading ---- */

struct rd {
    const uint8_t *p, *lo, *hi; /* cursor; the module's mapping */
    bool bad;
};

static bool has(struct rd *r, size_t n)
{
    if (r->bad || r->p < r->lo || r->p > r->hi || (size_t)(r->hi - r->p) < n)
        r->bad = true;
    return !r->bad;
}

static uint64_t u(struct rd *r, size_t n)
{
    uint64_t v = 0;
    if (!has(r, n))
        return 0;
    memcpy(&v, r->p, n); /* x86-64 is little-endian */
    r->p += n;
    return v;
}

static uint64_t uleb(struct rd *r)
{
    uint64_t v = 0;
    for (unsigned shift = 0; has(r, 1); shift += 7) {
        uint8_t b = *r->p++;
        if (shift < 64)
            v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
        if (shift > 63)
            r->bad = true;
    }
    return 0;
}

static int64_t sleb(struct rd *r)
{
    uint64_t v = 0;
    unsigned shift = 0;
    uint8_t b = 0x80;
    while ((b & 0x80) && has(r, 1)) {
        b = *r->p++;
        if (shift < 64)
            v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (shift > 70)
            r->bad = true;
    }
    if (shift < 64 && (b & 0x40))
        v |= ~(uint64_t)0 << shift;
    return (int64_t)v;
}

/* Skips a block: a ULEB128 length, then that many bytes. */
static void skip(struct rd *r)
{
    uint64_t n = uleb(r);
    if (has(r, n))
        r->p += n;
}

/* A DW_EH_PE-encoded value: absolute or pc-relative; `datarel` is the base
 * for DW_EH_PE_datarel (the hdr's start, in .eh_frame_hdr). */
static uint64_t encoded(struct rd *r, uint8_t enc, uintptr_t datarel)
{
    uintptr_t at = (uintptr_t)r->p;
    uint64_t v;
    switch (enc & 0x0f) {
    case 0x00: v = u(r, 8); break;                        /* absptr */
    case 0x01: v = uleb(r); break;
    case 0x02: v = u(r, 2); break;
    case 0x03: v = u(r, 4); break;
    case 0x04: v = u(r, 8); break;
    case 0x09: v = (uint64_t)sleb(r); break;
    case 0x0a: v = (uint64_t)(int64_t)(int16_t)u(r, 2); break;
    case 0x0b: v = (uint64_t)(int64_t)(int32_t)u(r, 4); break;
    case 0x0c: v = u(r, 8); break;
    default: r->bad = true; return 0;
    }
    switch (enc & 0x70) {
    case 0x00: return v;
    case 0x10: return v + at;      /* pcrel */
    case 0x30: if (datarel) return v + datarel; /* fall through */
    default: r->bad = true; return 0;
    }
}

/* ---- running the CFA program ---- */

enum { REG_RBP = 6, REG_RSP = 7, REG_RA = 16 };
enum { RULE_SAME, RULE_OFFSET, RULE_UNDEF, RULE_BAD };

struct row {
    uint64_t cfa_reg;
    int64_t cfa_off;
    unsigned char rbp, ra; /* RULE_* */
    int64_t rbp_off, ra_off;
};

struct cie {
    uint64_t code_align;
    int64_t data_align;
    uint8_t fde_enc;
    bool z, signal;
    const uint8_t *insns, *end;
};

static void set_rule(struct row *w, uint64_t reg, unsigned char rule, int64_t off)
{
    if (reg == REG_RBP) {
        w->rbp = rule;
        w->rbp_off = off;
    } else if (reg == REG_RA) {
        w->ra = rule;
        w->ra_off = off;
    }
}

/* Runs insns[...end) from location `loc`, stopping at the first row past
 * `pc`.  `init` is the CIE's row (for DW_CFA_restore).  False on anything
 * unsupported. */
static bool run(struct rd *r, const uint8_t *end, uint64_t loc, uint64_t pc,
                const struct cie *c, struct row *w, const struct row *init)
{
    struct row saved[8];
    unsigned nsaved = 0;
    while (r->p < end && !r->bad) {
        uint8_t op = (uint8_t)u(r, 1);
        uint64_t reg, delta = 0;
        switch (op >> 6) {
        case 1: delta = (op & 0x3f) * c->code_align; goto advance;
        case 2: set_rule(w, op & 0x3f, RULE_OFFSET, (int64_t)uleb(r) * c->data_align); continue;
        case 3: reg = op & 0x3f; goto restore;
        }
        switch (op) {
        case 0x00: continue;                                  /* nop */
        case 0x01: loc = encoded(r, c->fde_enc, 0); if (loc > pc) return !r->bad; continue;
        case 0x02: delta = u(r, 1) * c->code_align; goto advance;
        case 0x03: delta = u(r, 2) * c->code_align; goto advance;
        case 0x04: delta = u(r, 4) * c->code_align; goto advance;
        case 0x05: reg = uleb(r); set_rule(w, reg, RULE_OFFSET, (int64_t)uleb(r) * c->data_align); continue;
        case 0x06: reg = uleb(r); goto restore;
        case 0x07: set_rule(w, uleb(r), RULE_UNDEF, 0); continue;
        case 0x08: set_rule(w, uleb(r), RULE_SAME, 0); continue;
        case 0x09: reg = uleb(r); (void)uleb(r); set_rule(w, reg, RULE_BAD, 0); continue;
        case 0x0a: if (nsaved == 8) return false; saved[nsaved++] = *w; continue;
        case 0x0b: /* the whole row, CFA included, as GCC's epilogues expect */
            if (nsaved == 0) return false;
            *w = saved[--nsaved];
            continue;
        case 0x0c: w->cfa_reg = uleb(r); w->cfa_off = (int64_t)uleb(r); continue;
        case 0x0d: w->cfa_reg = uleb(r); continue;
        case 0x0e: w->cfa_off = (int64_t)uleb(r); continue;
        case 0x0f: w->cfa_reg = ~(uint64_t)0; skip(r); continue; /* expression */
        case 0x10: reg = uleb(r); skip(r); set_rule(w, reg, RULE_BAD, 0); continue;
        case 0x11: reg = uleb(r); set_rule(w, reg, RULE_OFFSET, sleb(r) * c->data_align); continue;
        case 0x12: w->cfa_reg = uleb(r); w->cfa_off = sleb(r) * c->data_align; continue;
        case 0x13: w->cfa_off = sleb(r) * c->data_align; continue;
        case 0x14: reg = uleb(r); (void)uleb(r); set_rule(w, reg, RULE_BAD, 0); continue;
        case 0x15: reg = uleb(r); (void)sleb(r); set_rule(w, reg, RULE_BAD, 0); continue;
        case 0x16: reg = uleb(r); skip(r); set_rule(w, reg, RULE_BAD, 0); continue;
        case 0x2e: (void)uleb(r); continue;                   /* GNU_args_size */
        case 0x2f: reg = uleb(r); set_rule(w, reg, RULE_OFFSET, -(int64_t)uleb(r) * c->data_align); continue;
        default: return false;
        }
    advance:
        loc += delta;
        if (loc > pc)
            return !r->bad;
        continue;
    restore:
        set_rule(w, reg, reg == REG_RBP ? init->rbp : init->ra,
                 reg == REG_RBP ? init->rbp_off : init->ra_off);
    }
    return !r->bad;
}

static bool parse_cie(struct rd *r, struct cie *c)
{
    uint32_t len = (uint32_t)u(r, 4);
    if (len == 0 || len == 0xffffffffu || !has(r, len))
        return false;
    c->end = r->p + len;
    if (u(r, 4) != 0) /* a CIE's id */
        return false;
    uint8_t version = (uint8_t)u(r, 1);
    if (version != 1 && version != 3)
        return false;
    char aug[8];
    size_t n = 0;
    for (;;) {
        char ch = (char)u(r, 1);
        if (r->bad || ch == 0)
            break;
        if (n == sizeof aug - 1)
            return false;
        aug[n++] = ch;
    }
    aug[n] = 0;
    c->code_align = uleb(r);
    c->data_align = sleb(r);
    uint64_t ra = version == 1 ? u(r, 1) : uleb(r);
    if (ra != REG_RA)
        return false;
    c->fde_enc = 0;
    c->z = c->signal = false;
    const uint8_t *aug_end = NULL;
    for (size_t i = 0; i < n && !r->bad; i++) {
        switch (aug[i]) {
        case 'z': {
            if (i != 0)
                return false;
            uint64_t len_z = uleb(r);
            c->z = true;
            aug_end = r->p + len_z;
            break;
        }
        case 'R': c->fde_enc = (uint8_t)u(r, 1); break;
        case 'L': (void)u(r, 1); break;
        case 'P': { uint8_t e = (uint8_t)u(r, 1); (void)encoded(r, e & 0x7f, 0); break; }
        case 'S': c->signal = true; break;
        default:
            if (!c->z)
                return false; /* unknown augmentation without its length */
            i = n; /* the length lets us skip what we do not know */
        }
    }
    if (c->z)
        r->p = aug_end;
    c->insns = r->p;
    return !r->bad && c->insns <= c->end;
}

/* The FDE covering pc in the module of `fo`, or NULL. */
static const uint8_t *find_fde(const struct dl_find_object *fo, uintptr_t pc)
{
    struct rd r = {fo->dlfo_eh_frame, fo->dlfo_map_start, fo->dlfo_map_end, false};
    if (r.p == NULL)
        return NULL;
    uintptr_t hdr = (uintptr_t)r.p;
    if (u(&r, 1) != 1)
        return NULL;
    uint8_t ptr_enc = (uint8_t)u(&r, 1), count_enc = (uint8_t)u(&r, 1),
            table_enc = (uint8_t)u(&r, 1);
    if (ptr_enc == 0xff || count_enc == 0xff || table_enc != 0x3b /* datarel sdata4 */)
        return NULL;
    (void)encoded(&r, ptr_enc, hdr);
    uint64_t count = encoded(&r, count_enc, hdr);
    if (r.bad || count == 0 || !has(&r, count * 8))
        return NULL;
    const uint8_t *table = r.p;
    uint64_t lo = 0, hi = count; /* the last entry whose start <= pc */
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        int32_t start;
        memcpy(&start, table + mid * 8, 4);
        if (hdr + (intptr_t)start <= pc)
            lo = mid;
        else
            hi = mid;
    }
    int32_t start, off;
    memcpy(&start, table + lo * 8, 4);
    memcpy(&off, table + lo * 8 + 4, 4);
    if (hdr + (intptr_t)start > pc)
        return NULL;
    return (const uint8_t *)(hdr + (intptr_t)off);
}

/* The rule at return address ra, from the module's .eh_frame. */
static bool lookup(uintptr_t ra, struct cfi_rule *out)
{
    struct dl_find_object fo;
    uintptr_t pc = ra - 1; /* inside the call: the row that was live then */
    if (find_object == NULL || find_object((void *)pc, &fo) != 0)
        return false;
    const uint8_t *fde = find_fde(&fo, pc);
    if (fde == NULL)
        return false;
    struct rd r = {fde, fo.dlfo_map_start, fo.dlfo_map_end, false};
    uint32_t len = (uint32_t)u(&r, 4);
    if (len == 0 || len == 0xffffffffu || !has(&r, len))
        return false;
    const uint8_t *end = r.p + len, *id_at = r.p;
    uint32_t id = (uint32_t)u(&r, 4);
    if (id == 0 || r.bad)
        return false; /* a CIE where an FDE should be */
    struct cie c;
    struct rd cr = {id_at - id, fo.dlfo_map_start, fo.dlfo_map_end, false};
    if (!parse_cie(&cr, &c) || c.signal)
        return false;
    uint64_t begin = encoded(&r, c.fde_enc, 0);
    uint64_t range = encoded(&r, c.fde_enc & 0x0f, 0);
    if (r.bad || pc < begin || pc - begin >= range)
        return false;
    if (c.z)
        skip(&r);
    struct row w = {REG_RSP, 8, RULE_SAME, RULE_SAME, 0, 0}, init;
    if (!run(&cr, c.end, begin, pc, &c, &w, &w))
        return false;
    init = w;
    if (!run(&r, end, begin, pc, &c, &w, &init))
        return false;
    if ((w.cfa_reg != REG_RSP && w.cfa_reg != REG_RBP) || w.cfa_off <= 0 ||
        (w.cfa_off & 7) || w.cfa_off >= (1 << 19))
        return false;
    out->cfa_rbp = w.cfa_reg == REG_RBP;
    out->cfa_off = (uint32_t)w.cfa_off;
    out->last = w.ra == RULE_UNDEF;
    if (!out->last && (w.ra != RULE_OFFSET || w.ra_off != -8))
        return false;
    if (w.rbp == RULE_SAME) {
        out->rbp_off = 0;
    } else if (w.rbp == RULE_OFFSET && w.rbp_off < 0 && !(w.rbp_off & 7) &&
               w.rbp_off >= -2040) {
        out->rbp_off = (int32_t)w.rbp_off;
    } else {
        return false;
    }
    return true;
}

/* Puts e in way 0 of `set`, the ways before `from` one further (the
 * entry at `from` is e itself, or the least recently filled one).  Relaxed
 * word stores: a racing thread may see an entry twice or miss one, and
 * then parses it again - never half an entry. */
static void set_front(uint64_t *set, unsigned from, uint64_t e)
{
    for (unsigned w = from; w > 0; w--)
        __atomic_store_n(&set[w], __atomic_load_n(&set[w - 1], __ATOMIC_RELAXED),
                         __ATOMIC_RELAXED);
    __atomic_store_n(&set[0], e, __ATOMIC_RELAXED);
}

uint64_t cfi_fill(uintptr_t ra)
{
    uint64_t tag = (uint64_t)ra >> CFI_SET_BITS;
    if (ra < ((uintptr_t)1 << CFI_SET_BITS) || tag >> (64 - CFI_TAG_SHIFT))
        return 0; /* not code, or a tag that does not fit: "no rule" */
    uint64_t *set = &cfi_cache[cfi_set(ra) * CFI_WAYS];
    for (unsigned w = 2; w < CFI_WAYS; w++) {
        uint64_t e = __atomic_load_n(&set[w], __ATOMIC_RELAXED);
        if (e >> CFI_TAG_SHIFT == tag) {
            set_front(set, w, e); /* into the ways cfi_entry reads */
            return e;
        }
    }
    struct cfi_rule f;
    uint64_t e = tag << CFI_TAG_SHIFT;
    if (lookup(ra, &f))
        e |= (f.cfa_rbp ? CFI_RBP : 0) | (f.last ? CFI_LAST : (uint64_t)f.cfa_off) |
             (uint64_t)-f.rbp_off << 16;
    set_front(set, CFI_WAYS - 1, e);
    return e;
}

bool cfi_rule(uintptr_t ra, struct cfi_rule *r)
{
    uint64_t e = cfi_entry(ra);
    r->cfa_rbp = (e & CFI_RBP) != 0;
    r->last = (e & CFI_LAST) != 0;
    r->cfa_off = (uint32_t)CFI_CFA_OFF(e);
    r->rbp_off = -(int32_t)CFI_RBP_SLOT(e);
    return r->last || r->cfa_off != 0;
}

#else /* not x86-64: no frame-rule walk */

bool cfi_init(void)
{
    return false;
}

uint64_t cfi_cache[1 << CFI_CACHE_BITS];

uint64_t cfi_fill(uintptr_t ra)
{
    (void)ra;
    return 0;
}

bool cfi_rule(uintptr_t ra, struct cfi_rule *r)
{
    (void)ra;
    (void)r;
    return false;
}

#endif
