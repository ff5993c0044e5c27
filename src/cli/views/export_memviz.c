/* export_memviz.c - a snapshot as PyTorch's memory-snapshot pickle, the
 * dictionary torch.cuda.memory._snapshot() returns, for pytorch.org/memory_viz
 * and torch/cuda/_memory_viz.py (export.h).  docs/cli.md's `export` section
 * says what it holds: the caching allocator's own segments where it handed
 * them over, else one segment a live allocation, replayed from the event log
 * (so a thinned log is refused) at synthetic addresses.
 *
 * The pickle is protocol 2, written with a handful of opcodes; each stack's
 * frame list is memoised once and referred to after.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "export.h"
#include "hmap.h"
#include "snapshot_phases.h"

#define SYNTH_BASE 0x7f0000000000ull /* looks like a device address, is not one */
#define SYNTH_ALIGN 512ull

struct pk {
    FILE *f;
    unsigned char *memoised; /* per stack: frame list already in the memo */
};

static void op(struct pk *p, int c) { fputc(c, p->f); }

static void u32le(struct pk *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        fputc((int)((v >> (8 * i)) & 0xff), p->f);
}

static void pstr(struct pk *p, const char *s)
{
    size_t n = strlen(s);
    op(p, 'X'); /* BINUNICODE */
    u32le(p, (uint32_t)n);
    fwrite(s, 1, n, p->f);
}

static void pint(struct pk *p, int64_t v)
{
    if (v >= INT32_MIN && v <= INT32_MAX) {
        op(p, 'J'); /* BININT */
        u32le(p, (uint32_t)(int32_t)v);
        return;
    }
    op(p, 0x8a); /* LONG1: little-endian two's complement */
    op(p, 8);
    for (int i = 0; i < 8; i++)
        fputc((int)(((uint64_t)v >> (8 * i)) & 0xff), p->f);
}

static void puint(struct pk *p, uint64_t v)
{
    if (v <= INT64_MAX) {
        pint(p, (int64_t)v);
        return;
    }
    op(p, 0x8a);
    op(p, 9);
    for (int i = 0; i < 8; i++)
        fputc((int)((v >> (8 * i)) & 0xff), p->f);
    fputc(0, p->f);
}

static void key(struct pk *p, const char *k) { pstr(p, k); }

/* Opens a dictionary (EMPTY_DICT, MARK); its items end at SETITEMS, 'u'. */
static void dict(struct pk *p)
{
    op(p, '}');
    op(p, '(');
}

/* A dictionary item: its key, then its value. */
static void item_int(struct pk *p, const char *k, int64_t v)
{
    key(p, k);
    pint(p, v);
}

static void item_uint(struct pk *p, const char *k, uint64_t v)
{
    key(p, k);
    puint(p, v);
}

static void item_str(struct pk *p, const char *k, const char *v)
{
    key(p, k);
    pstr(p, v);
}

/* {"filename", "line", "name"}: PyTorch's frame shape. */
static void frame_dict(struct pk *p, const char *file, int64_t line, const char *name)
{
    dict(p);
    item_str(p, "filename", file);
    item_int(p, "line", line);
    item_str(p, "name", name);
    op(p, 'u');
}

/* A frame of the context as PyTorch's frame. */
static void frame(struct pk *p, const struct frame *fr)
{
    char buf[1024];
    const char *file = fr->module ? fr->module : "??", *name = fr->name;
    int64_t line = 0;
    if (fr->type == FRAME_PYTHON) {
        /* name is file:line:function; the file may hold ':' itself. */
        const char *c2 = strrchr(fr->name, ':');
        const char *c1 = NULL;
        for (const char *q = fr->name; c2 && q < c2; q++)
            if (*q == ':')
                c1 = q;
        if (c1 != NULL) {
            line = strtoll(c1 + 1, NULL, 10);
            name = c2 + 1;
            snprintf(buf, sizeof buf, "%.*s", (int)(c1 - fr->name), fr->name);
            file = buf;
        }
    }
    frame_dict(p, file, line, name);
}

static void frames(struct pk *p, const struct snapshot *s, uint32_t stack)
{
    if (stack == SNAP_NO_STACK) {
        op(p, ']');
        return;
    }
    if (p->memoised[stack]) {
        op(p, 'j'); /* LONG_BINGET */
        u32le(p, stack);
        return;
    }
    const struct snap_stack *st = &s->stacks[stack];
    op(p, ']');
    if (st->nframes > 0) {
        op(p, '(');
        for (uint32_t i = 0; i < st->nframes; i++)
            frame(p, &s->ctx->frames[st->frames[i]]);
        op(p, 'e');
    }
    op(p, 'r'); /* LONG_BINPUT */
    u32le(p, stack);
    p->memoised[stack] = 1;
}

/* A live allocation during the replay. */
struct alloc {
    uint64_t addr, size;
    uint32_t stack;
    int32_t device;
    uint32_t next; /* the next live allocation of the same bucket */
    bool live;
};

/* Live allocations by (device, stack, size), oldest first: each bucket's
 * list runs from head to tail through alloc.next. */
struct bucket {
    uint32_t head, tail;
};

struct buckets {
    struct arena arena;
    struct hmap map;
    struct bucket *v;
    size_t n, cap;
};

#define NONE UINT32_MAX

static int bucket_of(struct buckets *b, int32_t device, uint32_t stack, uint64_t size,
                     uint32_t *out)
{
    unsigned char k[16];
    memcpy(k, &device, 4);
    memcpy(k + 4, &stack, 4);
    memcpy(k + 8, &size, 8);
    if (hmap_get_or_add(&b->map, k, sizeof k, (uint32_t)b->n, out, NULL))
        return -1;
    if (*out == b->n) {
        if (snapshot_vec_reserve((void **)&b->v, &b->cap, sizeof *b->v, b->n + 1))
            return -1;
        b->v[b->n++] = (struct bucket){NONE, NONE};
    }
    return 0;
}

static void action(struct pk *p, const struct snapshot *s, const char *what, uint64_t addr,
                   uint64_t size, uint32_t stack, int64_t t_ns)
{
    dict(p);
    item_str(p, "action", what);
    item_uint(p, "addr", addr);
    item_uint(p, "size", size);
    item_int(p, "stream", 0);
    item_int(p, "time_us", t_ns / 1000);
    key(p, "frames");
    frames(p, s, stack);
    op(p, 'u');
}

/* A failed attempt of the attempt log as PyTorch's "oom" action. */
static void oom_action(struct pk *p, const struct snapshot *s, const struct snap_attempt *at,
                       int32_t d)
{
    if (at->device != d || at->outcome == NULL || strcmp(at->outcome, "failed") != 0)
        return;
    const struct snap_device *dv = snapshot_device(s, d);
    dict(p);
    item_str(p, "action", "oom");
    item_int(p, "addr", 0);
    item_uint(p, "size", at->requested_bytes);
    item_int(p, "stream", 0);
    item_int(p, "time_us", at->t_ns / 1000);
    item_uint(p, "device_free", dv && dv->free_bytes != SNAP_UNKNOWN ? dv->free_bytes : 0);
    key(p, "frames");
    op(p, ']');
    op(p, 'u');
}

/* The caching allocator's own segments of device d, or NULL: an OOM's at
 * the failure (oom.layout) for the failing device, else the device's latest
 * state (devices[].allocator_segments: PyTorch's layer hands it over at the
 * exit). */
static const struct snap_layout *allocator_layout(const struct snapshot *s, int32_t d)
{
    const struct snap_oom *o = &s->oom;
    if (o->present && o->device == d && o->layout.present && o->layout.has_segments &&
        o->layout.nsegments > 0)
        return &o->layout;
    const struct snap_device *dv = snapshot_device(s, d);
    if (dv != NULL && dv->segments.has_segments && dv->segments.nsegments > 0)
        return &dv->segments;
    return NULL;
}

#define LAYOUT_FRAMES 64 /* docs/snapshot-format.md: a block's innermost 64 frames */

/* Whether frame i of the context is the block's frame fr. */
static bool same_frame(const struct snapctx *ctx, uint32_t i, const struct snap_pyframe *fr)
{
    char text[2048];
    snprintf(text, sizeof text, "%s:%" PRId64 ":%s", fr->file ? fr->file : "?", fr->line,
             fr->function ? fr->function : "?");
    return strcmp(ctx->frames[i].name, text) == 0;
}

/* The tensor group whose whole stack (as written) a block's stack cut at
 * LAYOUT_FRAMES begins, when exactly one stack does; NULL otherwise. */
static const struct snap_tgroup *whole_stack(const struct snapshot *s,
                                             const struct snap_tensors *t,
                                             const struct snap_layout *l, uint32_t k)
{
    if (t == NULL || !t->present || l->pystacks[k].n < LAYOUT_FRAMES)
        return NULL;
    const struct snap_tgroup *found = NULL;
    for (size_t i = 0; i < t->n; i++) {
        const struct snap_tgroup *g = &t->v[i];
        if (g->nrecorded <= l->pystacks[k].n)
            continue;
        bool same = true;
        for (size_t j = 0; j < l->pystacks[k].n && same; j++)
            same = same_frame(s->ctx, g->recorded[j], &l->pyframes[l->pystacks[k].first + j]);
        if (!same)
            continue;
        if (found != NULL && (found->nrecorded != g->nrecorded ||
                              memcmp(found->recorded, g->recorded,
                                     g->nrecorded * sizeof *g->recorded) != 0))
            return NULL; /* two stacks begin so: not told apart */
        found = g;
    }
    return found;
}

/* A block's Python frames (PyTorch's history), [] when none.  A stack the
 * file cut at LAYOUT_FRAMES is written whole from the tensor group (t, the
 * same moment's) whose stack it begins, where one does. */
static void block_frames(struct pk *p, const struct snapshot *s, const struct snap_tensors *t,
                         const struct snap_layout *l, uint32_t k)
{
    op(p, ']');
    if (k == SNAP_NO_STACK || k >= l->npystacks || l->pystacks[k].n == 0)
        return;
    op(p, '(');
    const struct snap_tgroup *g = whole_stack(s, t, l, k);
    if (g != NULL) {
        for (uint32_t i = 0; i < g->nrecorded; i++)
            frame(p, &s->ctx->frames[g->recorded[i]]);
        op(p, 'e');
        return;
    }
    for (size_t i = 0; i < l->pystacks[k].n; i++) {
        const struct snap_pyframe *fr = &l->pyframes[l->pystacks[k].first + i];
        frame_dict(p, fr->file, fr->line, fr->function);
    }
    op(p, 'e');
}

/* Opens a segment (the list of them first, unless *any), up to its
 * "frames" key; requested_size is what its blocks hold, as allocated. */
static void segment_head(struct pk *p, bool *any, int32_t d, uint64_t addr, uint64_t total,
                         uint64_t allocated, uint64_t active, bool small)
{
    if (!*any)
        op(p, '(');
    *any = true;
    dict(p);
    item_int(p, "device", d);
    item_uint(p, "address", addr);
    item_uint(p, "total_size", total);
    item_uint(p, "allocated_size", allocated);
    item_uint(p, "active_size", active);
    item_uint(p, "requested_size", allocated);
    item_int(p, "stream", 0);
    item_str(p, "segment_type", small ? "small" : "large");
    key(p, "is_expandable");
    op(p, 0x89); /* NEWFALSE */
    key(p, "frames");
}

/* The caching allocator's segments of device d, in PyTorch's shape:
 * {device, address, total_size, allocated_size, active_size,
 * requested_size, stream, segment_type, is_expandable, frames, blocks:
 * [{address, size, requested_size, state, frames}]}. */
static void allocator_segments(struct pk *p, const struct snapshot *s,
                               const struct snap_tensors *t, const struct snap_layout *l,
                               int32_t d, bool *any)
{
    static const char *const state[] = {"inactive", "active_allocated", "active_pending_free",
                                        "inactive"};
    for (size_t i = 0; i < l->nsegments; i++) {
        const struct snap_segment *g = &l->segments[i];
        uint64_t addr = g->address ? strtoull(g->address, NULL, 16) : 0;
        uint64_t allocated = 0, active = 0;
        for (size_t k = 0; k < g->nblocks; k++) {
            const struct snap_block *b = &l->blocks[g->first + k];
            allocated += b->state == BLOCK_ALLOCATED ? b->bytes : 0;
            active += b->state == BLOCK_ALLOCATED || b->state == BLOCK_PENDING ? b->bytes : 0;
        }
        segment_head(p, any, d, addr, g->bytes, allocated, active, g->small);
        op(p, ']');
        key(p, "blocks");
        op(p, ']');
        if (g->nblocks > 0)
            op(p, '(');
        for (size_t k = 0; k < g->nblocks; k++) {
            const struct snap_block *b = &l->blocks[g->first + k];
            dict(p);
            item_uint(p, "address", addr + b->offset);
            item_uint(p, "size", b->bytes);
            item_uint(p, "requested_size", b->state == BLOCK_FREE ? 0 : b->bytes);
            item_str(p, "state", state[b->state < 4 ? b->state : 3]);
            key(p, "frames");
            block_frames(p, s, t, l, b->pystack);
            op(p, 'u');
        }
        if (g->nblocks > 0)
            op(p, 'e');
        op(p, 'u');
    }
}

/* A range's opening or closing, for external_annotations. */
struct mark {
    int64_t t_ns;
    int64_t phase;
    size_t order; /* ties: in the file's order, an opening before its closing */
    bool end;
};

static int mark_order(const void *a, const void *b)
{
    const struct mark *x = a, *y = b;
    if (x->t_ns != y->t_ns)
        return x->t_ns < y->t_ns ? -1 : 1;
    return (x->order > y->order) - (x->order < y->order);
}

/* The program's ranges (phases.ranges) as PyTorch's external_annotations -
 * what torch.profiler.record_function ranges become in its snapshot under
 * _record_memory_history(global_record_annotations=True), drawn by
 * memory_viz beside the timeline: [{stage: START|END, name, device,
 * time_us}] by time, name the range's path; a range still open at the dump
 * has no END, a mark (nvtxMarkA) both at once.  Ranges belong to threads,
 * not devices, so each is listed once per device.  -1 on OOM. */
static int annotations(struct pk *p, const struct snapshot *s, int32_t ndev)
{
    const struct snap_phases *ph = &s->phases;
    if (!ph->present || ph->nspans == 0)
        return 0;
    struct mark *m = malloc(2 * ph->nspans * sizeof *m);
    if (m == NULL)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < ph->nspans; i++) {
        const struct snap_span *sp = &ph->spans[i];
        m[n] = (struct mark){sp->start_ns, sp->phase, n, false};
        n++;
        if (sp->end_ns != SNAP_UNKNOWN_I64) {
            m[n] = (struct mark){sp->end_ns, sp->phase, n, true};
            n++;
        }
    }
    qsort(m, n, sizeof *m, mark_order);
    key(p, "external_annotations");
    op(p, ']');
    if (n > 0 && ndev > 0)
        op(p, '(');
    for (int32_t d = 0; d < ndev; d++)
        for (size_t i = 0; i < n; i++) {
            dict(p);
            item_str(p, "stage", m[i].end ? "END" : "START");
            item_str(p, "name", snapshot_phase_path(s, m[i].phase));
            item_int(p, "device", d);
            item_int(p, "time_us", m[i].t_ns / 1000);
            op(p, 'u');
        }
    if (n > 0 && ndev > 0)
        op(p, 'e');
    free(m);
    return 0;
}

static int32_t max_ordinal(const struct snapshot *s)
{
    int32_t m = -1;
    for (size_t i = 0; i < s->ndevices; i++)
        if (s->devices[i].ordinal > m && s->devices[i].ordinal < 4096)
            m = (int32_t)s->devices[i].ordinal;
    return m;
}

int export_memviz(FILE *f, struct snapshot *s, struct cli_error *err)
{
    const struct snap_events *ev = &s->events;
    if (ev->thinned != 0 || ev->stride > 1)
        return errors_set(err, CLI_EVALUE, "cannot export '%s' for memory_viz: its event log "
                          "was thinned (%zu of %" PRIu64 " events kept); rerun with "
                          "CUMEMTRACE_EVENTS above %" PRIu64, s->file, ev->n, ev->recorded,
                          ev->recorded);
    struct pk p = {f, calloc(s->nstacks ? s->nstacks : 1, 1)};
    struct alloc *a = calloc(ev->n ? ev->n : 1, sizeof *a);
    if (p.memoised == NULL || a == NULL) {
        free(p.memoised);
        free(a);
        return errors_set(err, CLI_ENOMEM, "cannot export '%s': out of memory", s->file);
    }
    /* Replay: allocation i of the log gets synthetic address
     * SYNTH_BASE + (sum of earlier sizes rounded to SYNTH_ALIGN); a free row
     * ends the oldest live allocation of the same device, stack and size. */
    size_t na = 0;
    uint64_t next = SYNTH_BASE;
    int32_t ndev = max_ordinal(s) + 1;
    struct buckets b = {.v = NULL};
    arena_init(&b.arena);
    hmap_init(&b.map, &b.arena);
    int rc = 0;
    op(&p, 0x80); /* PROTO 2 */
    op(&p, 2);
    dict(&p);
    key(&p, "device_traces");
    op(&p, ']');
    if (ndev > 0)
        op(&p, '(');
    for (int32_t d = 0; d < ndev && rc == 0; d++) {
        op(&p, ']');
        op(&p, '(');
        size_t ai = 0; /* next attempt log row to place */
        for (size_t i = 0; i <= ev->n; i++) {
            const struct snap_event *e = i < ev->n ? &ev->v[i] : NULL;
            for (; ai < s->ooms.nattempts && (e == NULL || s->ooms.attempts[ai].t_ns <= e->t_ns);
                 ai++)
                oom_action(&p, s, &s->ooms.attempts[ai], d);
            if (e == NULL || e->device != d || e->delta == 0 || e->unfocused)
                continue; /* unfocused: --focus left its call site out */
            uint32_t st = e->stack_id > 0 ? snapshot_stack_index(s, e->stack_id) : SNAP_NO_STACK;
            uint64_t size = e->delta > 0 ? (uint64_t)e->delta : (uint64_t)(-(e->delta + 1)) + 1;
            uint32_t bk;
            if (bucket_of(&b, d, st, size, &bk) != 0) {
                rc = -1;
                break;
            }
            if (e->delta > 0) {
                a[na] = (struct alloc){next, size, st, d, NONE, true};
                next += (size + SYNTH_ALIGN - 1) / SYNTH_ALIGN * SYNTH_ALIGN;
                if (b.v[bk].tail == NONE)
                    b.v[bk].head = (uint32_t)na;
                else
                    a[b.v[bk].tail].next = (uint32_t)na;
                b.v[bk].tail = (uint32_t)na;
                action(&p, s, "segment_alloc", a[na].addr, size, st, e->t_ns);
                action(&p, s, "alloc", a[na].addr, size, st, e->t_ns);
                na++;
                continue;
            }
            uint32_t k = b.v[bk].head;
            if (k == NONE)
                continue; /* memory allocated before the log (never in an unthinned one) */
            b.v[bk].head = a[k].next;
            if (b.v[bk].head == NONE)
                b.v[bk].tail = NONE;
            a[k].live = false;
            action(&p, s, "free_requested", a[k].addr, size, st, e->t_ns);
            action(&p, s, "free_completed", a[k].addr, size, st, e->t_ns);
            action(&p, s, "segment_free", a[k].addr, size, st, e->t_ns);
        }
        op(&p, 'e');
    }
    hmap_free(&b.map);
    arena_free(&b.arena);
    free(b.v);
    if (rc != 0)
        goto nomem;
    if (ndev > 0)
        op(&p, 'e');
    key(&p, "segments");
    op(&p, ']');
    bool any = false;
    for (int32_t d = 0; d < ndev; d++) {
        const struct snap_layout *l = allocator_layout(s, d);
        /* the tensors read with that layout: the failure's, or the dump's */
        const struct snap_tensors *t =
            l == &s->oom.layout ? &s->oom.allocator.tensors
            : snapshot_device(s, d) ? &snapshot_device(s, d)->tensors : NULL;
        if (l != NULL)
            allocator_segments(&p, s, t, l, d, &any);
    }
    for (size_t k = 0; k < na; k++) {
        if (!a[k].live || allocator_layout(s, a[k].device) != NULL)
            continue;
        segment_head(&p, &any, a[k].device, a[k].addr, a[k].size, a[k].size, a[k].size,
                     a[k].size <= (1u << 20));
        frames(&p, s, a[k].stack);
        key(&p, "blocks");
        op(&p, ']');
        op(&p, '(');
        dict(&p);
        item_uint(&p, "address", a[k].addr);
        item_uint(&p, "size", a[k].size);
        item_uint(&p, "requested_size", a[k].size);
        item_str(&p, "state", "active_allocated");
        key(&p, "frames");
        frames(&p, s, a[k].stack);
        op(&p, 'u');
        op(&p, 'e');
        op(&p, 'u');
    }
    if (any)
        op(&p, 'e');
    if (annotations(&p, s, ndev) != 0)
        goto nomem;
    op(&p, 'u');
    op(&p, '.'); /* STOP */
    free(a);
    free(p.memoised);
    return 0;
nomem:
    free(a);
    free(p.memoised);
    return errors_set(err, CLI_ENOMEM, "cannot export '%s': out of memory", s->file);
}
