/* oom_causes.c - see oom_causes.h: one row per cause, its words beside it. */
#include "oom_causes.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "frames.h"
#include "holders.h"
#include "oom_text.h"
#include "out.h"
#include "report_allocator.h"

/* A recorded string as text output may print it (snapshot_display). */
static const char *text(const struct snapshot *s, const char *str)
{
    return snapshot_display(s->ctx, str);
}

/* ---- exhausted: the device had less free than the request ---- */

static void line_exhausted(const struct snapshot *s, char *buf, size_t n)
{
    const struct snap_oom *o = &s->oom;
    char a[OUT_NUM], b[OUT_NUM], c[OUT_NUM], d[OUT_NUM];
    uint64_t user = oom_text_request(o);
    uint64_t short_by = advice_short_by(o);
    if (short_by == 0)
        short_by = SNAP_UNKNOWN; /* neither recorded nor free < request: "?" */
    if (user != o->requested_bytes)
        snprintf(buf, n, "exhausted - the %s %s of %s's %s request was short by %s "
                 "(free %s)",
                 out_bytes(o->requested_bytes, a),
                 o->entry_point ? text(s, o->entry_point) : "call",
                 oom_text_allocator(&o->allocator), out_bytes(user, b), out_bytes(short_by, c),
                 out_bytes(o->free_bytes, d));
    else
        snprintf(buf, n, "exhausted - short by %s (request %s, free %s)",
                 out_bytes(short_by, a), out_bytes(o->requested_bytes, b),
                 out_bytes(o->free_bytes, c));
}

/* Whether a Python frame is a forward pass (`forward`, `Model.forward`). */
static bool forward_frame(const struct frame *f)
{
    const char *fn = f->type == FRAME_PYTHON ? strrchr(f->name, ':') : NULL;
    return fn != NULL && (strcmp(fn + 1, "forward") == 0 ||
                          (strlen(fn + 1) > 8 && strcmp(fn + 1 + strlen(fn + 1) - 8, ".forward") == 0));
}

/* Bytes held at the failure by stacks with a Python frame whose function
 * is a forward pass (`forward`, `Model.forward`): the activations. */
static uint64_t forward_bytes(const struct snapshot *s, const struct snap_groups *g)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < g->n; i++) {
        if (g->v[i].stack == SNAP_NO_STACK)
            continue;
        const struct snap_stack *st = &s->stacks[g->v[i].stack];
        for (uint32_t k = 0; k < st->nframes; k++) {
            if (forward_frame(&s->ctx->frames[st->frames[k]])) {
                sum += g->v[i].bytes;
                break;
            }
        }
    }
    return sum;
}

/* The activations at the failure: with PyTorch's tensors the lines the
 * post-mortem lists whose stack passes through a forward (the same
 * holders, the same bytes), of what its tensors hold; without them in a
 * PyTorch process nothing (*held 0); else the driver's call sites under
 * forward, of what this process holds.  *lead is the
 * sentence's start.  0, or -1 when out of memory. */
static int forward_share(struct snapshot *s, uint64_t *fwd, uint64_t *held, char *lead, size_t n)
{
    char a[OUT_NUM], b[OUT_NUM], c[OUT_NUM];
    struct holders h;
    if (holders_get(s, NULL, HOLDERS_OOM, false, &h) != 0)
        return -1;
    if (h.source != HOLDERS_TENSORS && s->oom.allocator.present) {
        /* PyTorch's cached segments hold freed blocks too: the lines that
         * created them do not say what its tensors held. */
        holders_free(&h);
        *fwd = *held = 0;
        lead[0] = '\0';
        return 0;
    }
    if (h.source != HOLDERS_TENSORS) {
        holders_free(&h);
        *fwd = forward_bytes(s, &s->oom.live);
        *held = snap_known(s->oom.tracked_bytes) ? s->oom.tracked_bytes : 0;
        snprintf(lead, n, "call sites under forward hold %s (%s of this process)",
                 out_bytes(*fwd, a), out_pct(*fwd, *held, b));
        return 0;
    }
    const struct holder *largest = NULL;
    size_t lines = 0;
    *fwd = 0;
    *held = h.total_bytes;
    for (size_t i = 0; i < h.n; i++) {
        const struct holder *x = &h.v[i];
        bool under = false;
        for (uint32_t k = 0; k < x->nframes && !under; k++)
            under = forward_frame(&s->ctx->frames[x->frames[k]]);
        if (!under)
            continue;
        *fwd += x->bytes;
        lines++;
        if (largest == NULL)
            largest = x; /* the holders are largest first */
    }
    if (largest == NULL)
        snprintf(lead, n, "no line under forward holds PyTorch's tensors");
    else if (lines == 1)
        snprintf(lead, n, "%s holds %s (%s of PyTorch's tensors)", largest->display,
                 out_bytes(*fwd, a), out_pct(*fwd, *held, b));
    else
        snprintf(lead, n, "%zu lines under forward hold %s (%s of PyTorch's tensors; the "
                 "largest, %s, %s)", lines, out_bytes(*fwd, a), out_pct(*fwd, *held, b),
                 largest->display, out_bytes(largest->bytes, c));
    holders_free(&h);
    return 0;
}

static void advice_exhausted(struct snapshot *s, struct advice *out, int *n)
{
    const struct snap_oom *o = &s->oom;
    char req[OUT_NUM], fr[OUT_NUM];
    out_bytes(o->requested_bytes, req);
    out_bytes(o->free_bytes, fr);
    uint64_t short_by = advice_short_by(o);
    uint64_t fwd, held;
    char lead[512];
    if (forward_share(s, &fwd, &held, lead, sizeof lead) != 0)
        return;
    char who[160], sb[OUT_NUM], lk[320];
    bool step = advice_lacking(s, who, sizeof who);
    out_bytes(short_by, sb);
    if (step)
        snprintf(lk, sizeof lk, "%s lacked %s (free %s)", who, sb, fr);
    else
        snprintf(lk, sizeof lk, "this request lacked %s (request %s, free %s)", sb, req, fr);
    /* Checkpointing keeps about one activation per block: count half as
     * what it frees, so that memory another process holds outright ranks
     * above it when it is larger. */
    if (held > 0 && fwd * 100.0 >= (double)held * ADVICE_DOMINANT_PCT)
        advice_add(out, n, "activations", fwd / 2,
                   "%s at the "
                   "failure - activations: activation checkpointing or a smaller "
                   "micro-batch with gradient accumulation frees part of it; %s%s",
                   lead, step ? lk : "this request lacked ", step ? "" : sb);
    else
        advice_add(out, n, "exhausted", short_by,
                   "%s. Lower precision, a smaller micro-batch, or sharding across GPUs "
                   "would each free memory for it",
                   lk);
    advice_add(out, n, "whole-run", 0,
               "what the whole run needs is not known from one failure (the next "
               "request may fail too): run it where it fits - a larger GPU, or a "
               "smaller batch here - and read its peak with cumemtrace report");
}

/* What the allocator held and what the device had free, opening with
 * `lead`; the sentence of a cause with nothing more particular to say. */
static void allocator_held(const struct snap_oom *o, const char *lead, const char *who,
                           char *buf, size_t n)
{
    const struct snap_allocator *a = &o->allocator;
    char r[OUT_NUM], u[OUT_NUM], al[OUT_NUM], rs[OUT_NUM], fr[OUT_NUM];
    snprintf(buf, n,
             "%s%s holds %s in tensors of %s reserved (%s reserved but unallocated "
             "after its retries), and the device had %s free for the %s requested.",
             lead, who, out_bytes(a->allocated_bytes, al), out_bytes(a->reserved_bytes, rs),
             out_bytes(a->reserved_unallocated_bytes, u), out_bytes(o->free_bytes, fr),
             out_bytes(report_allocator_request(o), r));
}

static void allocator_exhausted(const struct snap_oom *o, char *buf, size_t n)
{
    allocator_held(o, "The device is full: ", report_allocator_who(&o->allocator, false), buf,
                   n);
}

/* ---- other processes: memory held outside this process would have covered it ---- */

static void line_other_processes(const struct snapshot *s, char *buf, size_t n)
{
    const struct snap_oom *o = &s->oom;
    char a[OUT_NUM], b[OUT_NUM], c[OUT_NUM], d[OUT_NUM];
    snprintf(buf, n, "other processes - %s of the device is held outside this "
             "process's allocations, more than the %s this request lacked (request "
             "%s, free %s)",
             out_bytes(o->untracked_bytes, a), out_bytes(o->shortfall_bytes, b),
             out_bytes(o->requested_bytes, c), out_bytes(o->free_bytes, d));
}

static void allocator_other_processes(const struct snap_oom *o, char *buf, size_t n)
{
    const struct snap_allocator *a = &o->allocator;
    const char *who = report_allocator_who(a, false);
    char r[OUT_NUM], u[OUT_NUM], al[OUT_NUM], rs[OUT_NUM], fr[OUT_NUM];
    snprintf(buf, n,
             "%s of the device is held outside this process (other processes, or "
             "memory %s does not allocate); %s holds %s in tensors of %s reserved, "
             "and the device had %s free for the %s requested: without that memory "
             "it would have fit.",
             out_bytes(o->untracked_bytes, u), who, who, out_bytes(a->allocated_bytes, al),
             out_bytes(a->reserved_bytes, rs), out_bytes(o->free_bytes, fr),
             out_bytes(report_allocator_request(o), r));
}

/* ---- refused while free: the driver refused with free >= request ---- */

/* Free >= request, and the driver refused: what the figures allow saying. */
static void line_refused_while_free(const struct snapshot *s, char *buf, size_t n)
{
    const struct snap_oom *o = &s->oom;
    char a[OUT_NUM], b[OUT_NUM], c[OUT_NUM], g[OUT_NUM];
    uint64_t fig;
    out_bytes(o->free_bytes, a);
    out_bytes(o->requested_bytes, b);
    switch (oom_text_refusal(s, &fig)) {
    case REFUSAL_ROUNDING:
        snprintf(buf, n, "refused while free - rounded up to the %s page, the %s request "
                 "needs %s, more than the %s free",
                 out_bytes(oom_text_granularity(s), g), b, out_bytes(fig, c), a);
        break;
    case REFUSAL_MARGIN:
        snprintf(buf, n, "refused while free - free %s is only %s above the %s request, "
                 "and the driver keeps part of what it reports free (page tables, its "
                 "own reserve)",
                 a, out_bytes(fig, c), b);
        break;
    case REFUSAL_OTHERS:
        snprintf(buf, n, "refused while free - free %s >= request %s, with %s held outside "
                 "this process: another process allocating around the call explains it",
                 a, b, out_bytes(fig, c));
        break;
    default:
        snprintf(buf, n, "refused while free - free %s >= request %s, and nothing measured "
                 "explains it (not fragmentation: the GPU maps scattered pages)",
                 a, b);
        break;
    }
}
/* The driver refused with free >= request.  Never "fragmentation": the
 * GPU maps scattered pages (oom_text.h); what the figures explain, or that
 * they do not. */
static void advice_refused_while_free(struct snapshot *s, struct advice *out, int *n)
{
    const struct snap_oom *o = &s->oom;
    char a[OUT_NUM], b[OUT_NUM], c[OUT_NUM];
    uint64_t fig;
    switch (oom_text_refusal(s, &fig)) {
    case REFUSAL_ROUNDING:
        advice_add(out, n, "refused-while-free", fig - o->free_bytes,
            "rounded up to the page the request needs %s, %s more than the %s free: the "
            "device is full for it - free that much first, or ask for at most %s",
            out_bytes(fig, a), out_bytes(fig - o->free_bytes, b), out_bytes(o->free_bytes, c),
            out_bytes(o->free_bytes, c));
        break;
    case REFUSAL_MARGIN:
        advice_add(out, n, "refused-while-free", OOM_TEXT_DRIVER_MARGIN - fig,
            "the request comes within %s of all the free memory, part of which the "
            "driver keeps for itself: free %s more (or ask for that much less) to leave "
            "it %s of headroom",
            out_bytes(fig, a), out_bytes(OOM_TEXT_DRIVER_MARGIN - fig, b),
            out_bytes(OOM_TEXT_DRIVER_MARGIN, c));
        break;
    case REFUSAL_OTHERS:
        advice_add(out, n, "refused-while-free", fig,
            "%s of the device is held outside this process, more than a CUDA context "
            "takes: another process allocating at the moment of the call explains a "
            "refusal with memory free - see who holds it with nvidia-smi",
            out_bytes(fig, a));
        break;
    default:
        advice_add(out, n, "refused-while-free", 0,
            "nothing this run measured explains the refusal of %s with %s free, and it "
            "is not fragmentation (the GPU maps scattered pages): look with nvidia-smi "
            "for another process allocating at the same moment, and for an MPS "
            "(CUDA_MPS_PINNED_DEVICE_MEM_LIMIT) or MIG memory limit",
            out_bytes(o->requested_bytes, a), out_bytes(o->free_bytes, b));
        break;
    }
}

static void allocator_refused_while_free(const struct snap_oom *o, char *buf, size_t n)
{
    const struct snap_allocator *a = &o->allocator;
    char r[OUT_NUM], u[OUT_NUM], al[OUT_NUM], rs[OUT_NUM], fr[OUT_NUM];
    snprintf(buf, n,
             "The driver refused it with %s free for the %s requested: %s holds %s in "
             "tensors of %s reserved (%s reserved but unallocated after its retries).",
             out_bytes(o->free_bytes, fr), out_bytes(report_allocator_request(o), r),
             report_allocator_who(a, false), out_bytes(a->allocated_bytes, al),
             out_bytes(a->reserved_bytes, rs), out_bytes(a->reserved_unallocated_bytes, u));
}

/* ---- limit: CUMEMTRACE_LIMIT refused it ---- */

static void line_limit(const struct snapshot *s, char *buf, size_t n)
{
    const struct snap_oom *o = &s->oom;
    char a[OUT_NUM], b[OUT_NUM];
    snprintf(buf, n, "limit - CUMEMTRACE_LIMIT %s refused it (this process holds %s)",
             out_bytes(o->limit_bytes, a), out_bytes(o->tracked_bytes, b));
}

static void advice_limit(struct snapshot *s, struct advice *out, int *n)
{
    const struct snap_oom *o = &s->oom;
    char req[OUT_NUM], fr[OUT_NUM], a[OUT_NUM], b[OUT_NUM], c[OUT_NUM];
    out_bytes(o->requested_bytes, req);
    out_bytes(o->free_bytes, fr);
    uint64_t held = snap_known(o->tracked_bytes) ? o->tracked_bytes : 0;
    uint64_t limit = o->limit_bytes;
    uint64_t room = snap_known(limit) && limit > held ? limit - held : 0;
    char fits[200] = "";
    if (snap_known(o->free_bytes) && o->free_bytes >= o->requested_bytes)
        snprintf(fits, sizeof fits, "; on the real device (free %s) it would "
                 "have fit", fr);
    uint64_t need = o->requested_bytes > room ? o->requested_bytes - room : 0;
    char nd[OUT_NUM];
    advice_add(out, n, "limit", need,
               "the cumemtrace limit of %s caused this OOM: this process holds %s, so "
               "%s more fit under the limit and the request was %s%s - this request "
               "lacked %s",
               out_bytes(limit, a), out_bytes(held, b), out_bytes(room, c), req, fits,
               out_bytes(need, nd));
}

static void allocator_limit(const struct snap_oom *o, char *buf, size_t n)
{
    const struct snap_allocator *a = &o->allocator;
    char r[OUT_NUM], al[OUT_NUM], rs[OUT_NUM], lim[OUT_NUM], fr[OUT_NUM];
    snprintf(buf, n,
             "The cumemtrace limit (%s) refused it, not the device: %s holds %s in "
             "tensors of %s reserved, and the device itself had %s free for the %s "
             "requested.",
             out_bytes(o->limit_bytes, lim), report_allocator_who(a, false),
             out_bytes(a->allocated_bytes, al), out_bytes(a->reserved_bytes, rs),
             out_bytes(o->free_bytes, fr), out_bytes(report_allocator_request(o), r));
}

/* ---- allocator fragmentation: free inside the allocator's segments, in pieces ---- */

static void line_allocator_fragmentation(const struct snapshot *s, char *buf, size_t n)
{
    const struct snap_oom *o = &s->oom;
    char a[OUT_NUM], b[OUT_NUM];
    snprintf(buf, n, "allocator fragmentation - %s reserved but unallocated >= the %s "
             "request, but no free block is large enough",
             out_bytes(o->allocator.reserved_unallocated_bytes, a),
             out_bytes(oom_text_request(o), b));
}

static bool config_has(const struct snap_allocator *a, const char *item)
{
    return a->config != NULL && strstr(a->config, item) != NULL;
}

/* The largest run of free bytes in the caching allocator's segments of the
 * request's pool (PyTorch: small for requests up to 1 MiB), once the free
 * blocks at the edges of segments adjacent in address order join - what
 * one growing range (expandable segments) would make of them.  *inside
 * gets the largest free block as it is.  Returns SNAP_UNKNOWN when the
 * segments are not all listed. */
static uint64_t joined_free(const struct snap_layout *l, uint64_t request, uint64_t *inside)
{
    *inside = 0;
    if (!l->present || !l->has_segments || l->nsegments < l->segments_count ||
        l->nblocks < l->blocks_count)
        return SNAP_UNKNOWN;
    bool small = request <= ((uint64_t)1 << 20);
    uint64_t best = 0, run = 0; /* run: free bytes ending at the last segment's end */
    for (size_t i = 0; i < l->nsegments; i++) {
        const struct snap_segment *g = &l->segments[i];
        if (g->small != small)
            continue;
        uint64_t cur = run, end = 0;
        for (size_t k = 0; k < g->nblocks; k++) {
            const struct snap_block *b = &l->blocks[g->first + k];
            if (b->state == BLOCK_FREE) {
                cur += b->bytes;
                if (b->bytes > *inside)
                    *inside = b->bytes;
            } else {
                cur = 0;
            }
            if (cur > best)
                best = cur;
            end = b->offset + b->bytes;
        }
        /* A segment whose blocks do not reach its end is not understood:
         * nothing joins across it. */
        run = end == g->bytes ? cur : 0;
    }
    return best;
}

/* PyTorch's expandable segments map physical memory in pages of one size per
 * pool (its kSmallBuffer, 2 MiB, for the small pool; kLargeBuffer, 20 MiB,
 * for the large: tests/torch/test_allocators.py sees the cuMemCreate sizes).
 * At an OOM it unmaps the whole pages inside free blocks and maps new pages at
 * its segment's end; the part of a free block short of a whole page stays. */
#define PAGE_SMALL ((uint64_t)2 << 20)
#define PAGE_LARGE ((uint64_t)20 << 20)

static uint64_t expandable_page(uint64_t request)
{
    return request <= ((uint64_t)1 << 20) ? PAGE_SMALL : PAGE_LARGE;
}

/* The bytes of the request's pool's free blocks that lie in whole pages
 * counted from their segment's start - what expandable segments would give
 * back to the device, were the blocks where they are.  SNAP_UNKNOWN when
 * the segments are not all listed. */
static uint64_t free_in_pages(const struct snap_layout *l, uint64_t request)
{
    if (!l->present || !l->has_segments || l->nsegments < l->segments_count ||
        l->nblocks < l->blocks_count)
        return SNAP_UNKNOWN;
    bool small = request <= ((uint64_t)1 << 20);
    uint64_t page = expandable_page(request), sum = 0;
    for (size_t i = 0; i < l->nsegments; i++) {
        const struct snap_segment *g = &l->segments[i];
        if (g->small != small)
            continue;
        for (size_t k = 0; k < g->nblocks; k++) {
            const struct snap_block *b = &l->blocks[g->first + k];
            if (b->state != BLOCK_FREE)
                continue;
            uint64_t lo = (b->offset + page - 1) / page, hi = (b->offset + b->bytes) / page;
            sum += hi > lo ? (hi - lo) * page : 0;
        }
    }
    return sum;
}

/* What the allocator's other settings do to a layout of free blocks between
 * live tensors: neither rejoins a block already split. */
#define OTHER_SETTINGS                                                              \
    "max_split_size_mb keeps cached blocks above that size from being split, "      \
    "which changes where tensors land: its effect here is not known; "              \
    "garbage_collection_threshold returns only free blocks that are whole segments, " \
    "and PyTorch returned those before giving up"

/* Fragmentation inside PyTorch's segments: what each allocator setting does
 * to this layout, and only what the layout shows.  Free blocks at segment
 * edges join under expandable segments, which also hand the whole pages of
 * free blocks back to the device and map pages at the segment's end; the
 * rest of a free block between live tensors stays. */
static void advice_allocator_fragmentation(struct snapshot *s, struct advice *out, int *n)
{
    const struct snap_oom *o = &s->oom;
    const struct snap_allocator *al = &o->allocator;
    uint64_t user = oom_text_request(o), un = al->reserved_unallocated_bytes, inside;
    uint64_t joined = joined_free(&o->layout, user, &inside);
    uint64_t paged = free_in_pages(&o->layout, user), page = expandable_page(user);
    uint64_t dev_free = snap_known(o->free_bytes) ? o->free_bytes : 0;
    uint64_t need = (user + page - 1) / page * page;
    bool expandable = config_has(al, "expandable_segments:True");
    char a[OUT_NUM], b[OUT_NUM], c[OUT_NUM], d[OUT_NUM], e[OUT_NUM], f[OUT_NUM];
    char most[OUT_NUM];
    out_bytes(un, a);
    out_bytes(user, b);
    out_bytes(page, d);
    uint64_t largest = report_allocator_largest_free(al);
    out_bytes(snap_known(joined) ? inside : snap_known(largest) ? largest : 0, most);
    if (!expandable && snap_known(joined) && joined >= user) {
        advice_add(out, n, "expandable-segments", un,
            "%s reserved by PyTorch is free but in pieces smaller than the %s asked "
            "for, and free blocks at the edges of its segments join into %s once the "
            "segments are one range: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
            "(not verified by a run with it)",
            a, b, out_bytes(joined, c));
    } else if (!expandable && !snap_known(joined)) {
        advice_add(out, n, "expandable-segments", un,
            "%s reserved by PyTorch is free but in pieces smaller than the %s asked "
            "for: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True joins free blocks at "
            "the edges of segments and gives the whole %s pages of free blocks back to "
            "the device at an OOM (where the blocks lie was not recorded, so whether "
            "that makes room is not known)",
            a, b, d);
    } else if (!expandable && paged + dev_free >= need) {
        advice_add(out, n, "expandable-segments", un,
            "%s reserved by PyTorch is free in blocks of at most %s between live "
            "tensors, each smaller than the %s asked for. With "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True PyTorch gives the whole %s "
            "pages of free blocks back at an OOM and maps new pages at its segment's "
            "end: %s of these blocks lies in whole pages, which with the device's %s "
            "free covers the %s the request takes in pages - it would likely fit (not "
            "verified by a run with it). %s",
            a, most, b, d, out_bytes(paged, c), out_bytes(dev_free, e), out_bytes(need, f),
            OTHER_SETTINGS);
    } else {
        char why[640];
        if (expandable)
            snprintf(why, sizeof why, "expandable segments are on: PyTorch gave the "
                     "whole %s pages of its free blocks back before giving up, and what "
                     "stays are parts of pages between live tensors", d);
        else
            snprintf(why, sizeof why, "expandable_segments:True would give back only "
                     "the whole %s pages of free blocks, %s here, which with the "
                     "device's %s free is less than the %s the request takes in pages. "
                     "%s",
                     d, out_bytes(paged, c), out_bytes(dev_free, e), out_bytes(need, f),
                     OTHER_SETTINGS);
        advice_add(out, n, "live-holes", un,
            "%s reserved by PyTorch is free in holes of at most %s between live "
            "tensors (%s): free the tensors no longer needed before the %s request, "
            "allocate long-lived tensors before temporaries, or work in pieces of at "
            "most %s",
            a, most, why, b, most);
    }
}

/* The device's total at a memory-fraction refusal: the driver's, as our
 * library measured it; else the allocator's, unless that is the cap (what
 * PyTorch hands its observer under a fraction). */
static uint64_t device_total(const struct snap_oom *o)
{
    const struct snap_allocator *al = &o->allocator;
    if (snap_known(o->total_bytes) && o->total_bytes > 0)
        return o->total_bytes;
    if (snap_known(al->device_total_bytes) && al->device_total_bytes > 0 &&
        al->device_total_bytes != al->limit_bytes)
        return al->device_total_bytes;
    return SNAP_UNKNOWN;
}

/* What to do about a memory-fraction refusal: the smallest fraction, in
 * thousandths, whose cap (PyTorch's: fraction * total, truncated) holds
 * what is reserved plus the request; or that no fraction up to 1 does. */
static void fraction_fix(const struct snap_oom *o, char *buf, size_t n)
{
    const struct snap_allocator *al = &o->allocator;
    uint64_t total = device_total(o);
    if (!snap_known(total) || !snap_known(al->reserved_bytes)) {
        snprintf(buf, n, "raise the fraction or reserve that much less");
        return;
    }
    uint64_t need = al->reserved_bytes + o->requested_bytes;
    char a[OUT_NUM], b[OUT_NUM], c[OUT_NUM];
    if (need > total) {
        snprintf(buf, n, "no fraction up to 1 makes room: the %s reserved plus the %s "
                 "request exceed the device's %s, so the request or what PyTorch holds "
                 "must shrink",
                 out_bytes(al->reserved_bytes, a), out_bytes(o->requested_bytes, b),
                 out_bytes(total, c));
        return;
    }
    uint64_t milli = (uint64_t)(((unsigned __int128)need * 1000 + total - 1) / total);
    while (milli < 1000 && (uint64_t)((double)milli / 1000.0 * (double)total) < need)
        milli++;
    snprintf(buf, n, "torch.cuda.set_per_process_memory_fraction(%" PRIu64 ".%03" PRIu64
             ") would let it through ((%s reserved + %s) / the device's %s), or reserve "
             "that much less",
             milli / 1000, milli % 1000, out_bytes(al->reserved_bytes, a),
             out_bytes(o->requested_bytes, b), out_bytes(total, c));
}

static void allocator_fragmentation(const struct snap_oom *o, char *buf, size_t n)
{
    const struct snap_allocator *a = &o->allocator;
    char r[OUT_NUM], u[OUT_NUM], b[OUT_NUM];
    snprintf(buf, n,
             "%s is reserved by %s but unallocated, in %" PRIu64 " segment%s; the "
             "largest free block is %s, less than the %s requested: fragmentation.",
             out_bytes(a->reserved_unallocated_bytes, u), report_allocator_who(a, false),
             snap_known(a->segments) ? a->segments : 0, out_plural(a->segments),
             out_bytes(report_allocator_largest_free(a), b),
             out_bytes(report_allocator_request(o), r));
}

/* ---- allocator limit: the memory fraction cap refused it ---- */

static void line_allocator_limit(const struct snapshot *s, char *buf, size_t n)
{
    const struct snap_allocator *al = &s->oom.allocator;
    char a[OUT_NUM], b[OUT_NUM];
    snprintf(buf, n, "allocator limit - the memory fraction cap %s refused it "
             "(reserved %s); no CUDA call was made",
             out_bytes(al->limit_bytes, a), out_bytes(al->reserved_bytes, b));
}

static void advice_allocator_limit(struct snapshot *s, struct advice *out, int *n)
{
    const struct snap_oom *o = &s->oom;
    const struct snap_allocator *al = &o->allocator;
    char req[OUT_NUM], fr[OUT_NUM], a[OUT_NUM], b[OUT_NUM], c[OUT_NUM];
    out_bytes(o->requested_bytes, req);
    out_bytes(o->free_bytes, fr);
    uint64_t over = snap_known(al->limit_bytes) && snap_known(al->reserved_bytes) &&
                            al->reserved_bytes + o->requested_bytes > al->limit_bytes
                        ? al->reserved_bytes + o->requested_bytes - al->limit_bytes
                        : 0;
    char fix[320];
    fraction_fix(o, fix, sizeof fix);
    /* Raising the cap frees nothing but makes the device's free memory
     * usable: rank it by that. */
    advice_add(out, n, "memory-fraction", snap_known(o->free_bytes) ? o->free_bytes : over,
               "torch.cuda.set_per_process_memory_fraction caps PyTorch at %s and it "
               "holds %s reserved: the %s request passes the cap by %s - %s; the device "
               "itself had %s free",
               out_bytes(al->limit_bytes, a), out_bytes(al->reserved_bytes, b), req,
               out_bytes(over, c), fix, fr);
}

static void allocator_allocator_limit(const struct snap_oom *o, char *buf, size_t n)
{
    const struct snap_allocator *a = &o->allocator;
    char r[OUT_NUM], rs[OUT_NUM], lim[OUT_NUM];
    snprintf(buf, n,
             "%s's own cap (set_per_process_memory_fraction) is %s; it has %s reserved, "
             "so the %s requested would pass the cap: refused without asking the "
             "driver.",
             report_allocator_who(a, false), out_bytes(a->limit_bytes, lim),
             out_bytes(a->reserved_bytes, rs), out_bytes(report_allocator_request(o), r));
}

/* ---- allocator: the allocator refused by itself, for a reason it did not state ---- */

static void line_allocator(const struct snapshot *s, char *buf, size_t n)
{
    snprintf(buf, n, "allocator - %s refused it by itself, for a reason it did not "
             "state", oom_text_allocator(&s->oom.allocator));
}

/* ---- a cause this version does not know: its name as the file gave it ---- */

static void line_unknown(const struct snapshot *s, char *buf, size_t n)
{
    snprintf(buf, n, "%s", text(s, snapshot_cause_name(&s->oom)));
}

static void allocator_plain(const struct snap_oom *o, char *buf, size_t n)
{
    allocator_held(o, "", report_allocator_who(&o->allocator, true), buf, n);
}

/* The causes, one row each: CAUSE(symbol, name in the snapshot, the row).
 * These lines are the list: the build reads their first two columns into
 * format.h's FORMAT_CAUSES (scripts/causes.awk), which gives the writer's
 * FORMAT_CAUSE_* and the reader's CAUSE_*, so a new cause is its row here
 * and the code that decides it.  Indexed by enum oom_cause; a trait left
 * out is false. */
#define CAUSE(sym, name, ...) [CAUSE_##sym] = {__VA_ARGS__}
static const struct oom_cause_row rows[FORMAT_CAUSE_COUNT] = {
    [CAUSE_UNKNOWN] = {.line = line_unknown, .allocator = allocator_plain,
                       .outside_advice = true},
    CAUSE(EXHAUSTED, "exhausted", .line = line_exhausted, .advice = advice_exhausted,
          .allocator = allocator_exhausted, .outside_advice = true),
    CAUSE(REFUSED_WHILE_FREE, "refused_while_free", .line = line_refused_while_free,
          .advice = advice_refused_while_free, .allocator = allocator_refused_while_free,
          .shows_layout = true),
    CAUSE(LIMIT, "limit", .line = line_limit, .advice = advice_limit,
          .allocator = allocator_limit),
    CAUSE(ALLOCATOR_FRAGMENTATION, "allocator_fragmentation",
          .line = line_allocator_fragmentation, .advice = advice_allocator_fragmentation,
          .allocator = allocator_fragmentation, .outside_advice = true),
    CAUSE(ALLOCATOR_LIMIT, "allocator_limit", .line = line_allocator_limit,
          .advice = advice_allocator_limit, .allocator = allocator_allocator_limit,
          .by_allocator = true),
    CAUSE(OTHER_PROCESSES, "other_processes", .line = line_other_processes,
          .allocator = allocator_other_processes, .outside_advice = true),
    CAUSE(ALLOCATOR, "allocator", .line = line_allocator, .allocator = allocator_plain,
          .by_allocator = true, .outside_advice = true),
};
#undef CAUSE

const struct oom_cause_row *oom_cause_row(int c)
{
    /* A cause left without a row reads as one this version does not know. */
    if (c < 0 || c >= FORMAT_CAUSE_COUNT || rows[c].line == NULL)
        c = CAUSE_UNKNOWN;
    return &rows[c];
}

const char *oom_causes_failure(const struct snapshot *s, char *buf, size_t n)
{
    const struct snap_oom *o = &s->oom;
    char a[OUT_NUM], b[OUT_NUM], dev[32];
    if (o->device < 0)
        snprintf(dev, sizeof dev, "the host");
    else
        snprintf(dev, sizeof dev, "device %" PRId64, o->device);
    if (oom_cause_row(o->cause)->by_allocator) {
        /* The allocator's own refusal: its name is the entry point. */
        const char *w = oom_text_allocator(&o->allocator);
        snprintf(buf, n, "%c%s refused %s of %s on %s without a CUDA call",
                 w[0] == 't' ? 'T' : w[0], w + 1, out_bytes(oom_text_request(o), a),
                 snapshot_kind_phrase(o->kind), dev);
        return buf;
    }
    uint64_t user = oom_text_request(o);
    char step[160] = "";
    if (user != o->requested_bytes)
        snprintf(step, sizeof step, " (for %s's %s request)", oom_text_allocator(&o->allocator),
                 out_bytes(user, b));
    snprintf(buf, n, "%s of %s of %s failed on %s%s",
             o->entry_point ? text(s, o->entry_point) : "?", out_bytes(o->requested_bytes, a),
             snapshot_kind_phrase(o->kind), dev, step);
    return buf;
}

const char *oom_causes_line(const struct snapshot *s, char *buf, size_t n)
{
    oom_cause_row(s->oom.cause)->line(s, buf, n);
    return buf;
}

const char *oom_causes_allocator(const struct snap_oom *o, char *buf, size_t n)
{
    buf[0] = '\0';
    if (o->allocator.present)
        oom_cause_row(o->cause)->allocator(o, buf, n);
    return buf;
}
