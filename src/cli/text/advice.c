/* advice.c - see advice.h for the triggers. */
#include "advice.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frames.h"
#include "oom_text.h"
#include "holders.h"
#include "out.h"
#include "report_allocator.h"
#include "report_layout.h"
#include "sites.h"

static void add(struct advice *out, int *n, const char *id, uint64_t bytes,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void add(struct advice *out, int *n, const char *id, uint64_t bytes,
                const char *fmt, ...)
{
    if (*n >= ADVICE_MAX)
        return;
    struct advice *a = &out[(*n)++];
    a->id = id;
    a->bytes = bytes == SNAP_UNKNOWN ? 0 : bytes;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->text, sizeof a->text, fmt, ap);
    va_end(ap);
}

static bool known(uint64_t v)
{
    return v != SNAP_UNKNOWN;
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
 * holders, the same bytes), of what its tensors hold; else the driver's
 * call sites under forward, of what this process holds.  *lead is the
 * sentence's start.  0, or -1 when out of memory. */
static int forward_share(struct snapshot *s, uint64_t *fwd, uint64_t *held, char *lead, size_t n)
{
    char a[OUT_NUM], b[OUT_NUM], c[OUT_NUM];
    struct holders h;
    if (holders_get(s, NULL, HOLDERS_OOM, false, &h) != 0)
        return -1;
    if (h.source != HOLDERS_TENSORS) {
        holders_free(&h);
        *fwd = forward_bytes(s, &s->oom.live);
        *held = known(s->oom.tracked_bytes) ? s->oom.tracked_bytes : 0;
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

/* The largest of PyTorch's lines at a moment: the lever when it holds most
 * of its tensors. */
static int dominant_tensors(struct snapshot *s, const struct holders *h, const char *what,
                            struct advice *out, int *n)
{
    if (h->n == 0 || h->total_bytes == 0)
        return 0;
    const struct holder *x = &h->v[0];
    if (x->bytes * 100.0 >= (double)h->total_bytes * ADVICE_DOMINANT_PCT) {
        char a[OUT_NUM], b[OUT_NUM], c[OUT_NUM];
        add(out, n, "dominant-site", x->bytes, "%s, %s holds %s (%s of PyTorch's %s in "
            "tensors): shrink or free that first",
            what, x->display, out_pct(x->bytes, h->total_bytes, a), out_bytes(x->bytes, b),
            out_bytes(h->total_bytes, c));
    }
    (void)s;
    return 0;
}

/* A device whose memory PyTorch's caching allocator holds: the driver's
 * segments there are cached blocks, freed tensors among them, so the line
 * that created a segment does not hold what it holds at the peak. */
static bool torch_device(const struct snapshot *s, const struct snap_device *d)
{
    return d->allocator.present || d->tensors.present || d->peak_tensors.present ||
           report_allocator_peak(s, d) != SNAP_UNKNOWN;
}

/* PyTorch's device at its peak without the peak's tensors: what is known
 * (the peak, when, max_memory_allocated: the figures the report prints
 * beside it) and how to get the lines, naming none. */
static void peak_unrecorded(const struct snapshot *s, const struct snap_device *d,
                            const char *what, struct advice *out, int *n)
{
    uint64_t tensors = report_allocator_peak(s, d);
    if (d->peak_bytes == 0 || !known(d->peak_bytes))
        return;
    char a[OUT_NUM], b[OUT_NUM], t[OUT_NUM], when[640], during[700] = "", held[160] = "";
    if (report_allocator_when(s, d->peak_phase, report_allocator_peak_step(s, d), when,
                              sizeof when)[0])
        snprintf(during, sizeof during, ", during %s", when);
    if (known(tensors))
        snprintf(held, sizeof held, "; its tensors peaked at %s (max_memory_allocated)",
                 out_bytes(tensors, b));
    add(out, n, "peak-unrecorded", 0,
        "%s (%s at %s%s) the lines that held PyTorch's tensors were not recorded%s, "
        "and the lines that created its cached segments do not tell them (those hold "
        "freed blocks too): rerun with CUMEMTRACE_TORCH_PEAK=1 to list the peak's "
        "tensors by line",
        what, out_bytes(d->peak_bytes, a), out_duration(d->peak_time_ns, t), during, held);
}

static uint64_t largest_free(const struct snap_allocator *a)
{
    uint64_t s = known(a->largest_free_small) ? a->largest_free_small : 0;
    uint64_t l = known(a->largest_free_large) ? a->largest_free_large : 0;
    return s > l ? s : l;
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
static void allocator_fragmentation(const struct snap_oom *o, struct advice *out, int *n)
{
    const struct snap_allocator *al = &o->allocator;
    uint64_t user = oom_text_request(o), un = al->reserved_unallocated_bytes, inside;
    uint64_t joined = joined_free(&o->layout, user, &inside);
    uint64_t paged = free_in_pages(&o->layout, user), page = expandable_page(user);
    uint64_t dev_free = known(o->free_bytes) ? o->free_bytes : 0;
    uint64_t need = (user + page - 1) / page * page;
    bool expandable = config_has(al, "expandable_segments:True");
    char a[OUT_NUM], b[OUT_NUM], c[OUT_NUM], d[OUT_NUM], e[OUT_NUM], f[OUT_NUM];
    char most[OUT_NUM];
    out_bytes(un, a);
    out_bytes(user, b);
    out_bytes(page, d);
    out_bytes(known(joined) ? inside : largest_free(al), most);
    if (!expandable && known(joined) && joined >= user) {
        add(out, n, "expandable-segments", un,
            "%s reserved by PyTorch is free but in pieces smaller than the %s asked "
            "for, and free blocks at the edges of its segments join into %s once the "
            "segments are one range: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
            "(not verified by a run with it)",
            a, b, out_bytes(joined, c));
    } else if (!expandable && !known(joined)) {
        add(out, n, "expandable-segments", un,
            "%s reserved by PyTorch is free but in pieces smaller than the %s asked "
            "for: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True joins free blocks at "
            "the edges of segments and gives the whole %s pages of free blocks back to "
            "the device at an OOM (where the blocks lie was not recorded, so whether "
            "that makes room is not known)",
            a, b, d);
    } else if (!expandable && paged + dev_free >= need) {
        add(out, n, "expandable-segments", un,
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
        add(out, n, "live-holes", un,
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
    if (known(o->total_bytes) && o->total_bytes > 0)
        return o->total_bytes;
    if (known(al->device_total_bytes) && al->device_total_bytes > 0 &&
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
    if (!known(total) || !known(al->reserved_bytes)) {
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

/* The driver refused with free >= request.  Never "fragmentation": the
 * GPU maps scattered pages (oom_text.h); what the figures explain, or that
 * they do not. */
static void refused_while_free(const struct snapshot *s, struct advice *out, int *n)
{
    const struct snap_oom *o = &s->oom;
    char a[OUT_NUM], b[OUT_NUM], c[OUT_NUM];
    uint64_t fig;
    switch (oom_text_refusal(s, &fig)) {
    case REFUSAL_ROUNDING:
        add(out, n, "refused-while-free", fig - o->free_bytes,
            "rounded up to the page the request needs %s, %s more than the %s free: the "
            "device is full for it - free that much first, or ask for at most %s",
            out_bytes(fig, a), out_bytes(fig - o->free_bytes, b), out_bytes(o->free_bytes, c),
            out_bytes(o->free_bytes, c));
        break;
    case REFUSAL_MARGIN:
        add(out, n, "refused-while-free", OOM_TEXT_DRIVER_MARGIN - fig,
            "the request comes within %s of all the free memory, part of which the "
            "driver keeps for itself: free %s more (or ask for that much less) to leave "
            "it %s of headroom",
            out_bytes(fig, a), out_bytes(OOM_TEXT_DRIVER_MARGIN - fig, b),
            out_bytes(OOM_TEXT_DRIVER_MARGIN, c));
        break;
    case REFUSAL_OTHERS:
        add(out, n, "refused-while-free", fig,
            "%s of the device is held outside this process, more than a CUDA context "
            "takes: another process allocating at the moment of the call explains a "
            "refusal with memory free - see who holds it with nvidia-smi",
            out_bytes(fig, a));
        break;
    default:
        add(out, n, "refused-while-free", 0,
            "nothing this run measured explains the refusal of %s with %s free, and it "
            "is not fragmentation (the GPU maps scattered pages): look with nvidia-smi "
            "for another process allocating at the same moment, and for an MPS "
            "(CUDA_MPS_PINNED_DEVICE_MEM_LIMIT) or MIG memory limit",
            out_bytes(o->requested_bytes, a), out_bytes(o->free_bytes, b));
        break;
    }
}

/* The optimizer's state, measured by PyTorch's layer (allocator roles). */
static void optimizer_state(const struct snap_allocator *al, struct advice *out, int *n)
{
    if (!al->present || !al->has_roles || !known(al->allocated_bytes) ||
        al->allocated_bytes == 0)
        return;
    uint64_t st = al->roles[SNAP_ROLE_OPTIMIZER], par = al->roles[SNAP_ROLE_PARAMETERS];
    if (st * 100.0 < (double)al->allocated_bytes * ADVICE_OPTIMIZER_PCT)
        return;
    char a[OUT_NUM], b[OUT_NUM], c[OUT_NUM], times[48] = "";
    if (par > 0)
        snprintf(times, sizeof times, ", %.1fx the parameters' %s", (double)st / (double)par,
                 out_bytes(par, c));
    /* An 8-bit state keeps a quarter of an fp32 one: rank it by half. */
    add(out, n, "optimizer-state", st / 2,
        "%s state is %s, %s of what PyTorch's tensors held at the failure%s: an 8-bit "
        "optimizer (bitsandbytes' AdamW8bit keeps each moment in 1 byte per element) or "
        "sharding the state across GPUs (ZeroRedundancyOptimizer, FSDP) shrinks it; a "
        "fused optimizer (fused=True) saves time and temporaries, not state",
        al->optimizers && al->optimizers[0] ? al->optimizers : "The optimizer's",
        out_bytes(st, a), out_pct(st, al->allocated_bytes, b), times);
}

/* Who lacked the shortfall: the failing call.  When it is a step of the
 * allocator's larger request (an expandable segment's 20 MiB cuMemCreate for
 * a 172 MiB tensor) the shortfall is that call's, so the call is named with
 * the request it serves; nothing here measures what the whole request
 * lacked.  Returns true for such a step. */
static bool lacking(const struct snapshot *s, char *buf, size_t n)
{
    const struct snap_oom *o = &s->oom;
    uint64_t user = oom_text_request(o);
    char a[OUT_NUM], b[OUT_NUM];
    if (user == o->requested_bytes) {
        snprintf(buf, n, "this request");
        return false;
    }
    snprintf(buf, n, "the %s %s for %s's %s request", out_bytes(o->requested_bytes, a),
             o->entry_point ? snapshot_display(s->ctx, o->entry_point) : "call",
             oom_text_allocator(&o->allocator), out_bytes(user, b));
    return true;
}

static void oom_advice(struct snapshot *s, struct advice *out, int *n)
{
    const struct snap_oom *o = &s->oom;
    const struct snap_allocator *al = &o->allocator;
    char req[OUT_NUM], fr[OUT_NUM], a[OUT_NUM], b[OUT_NUM], c[OUT_NUM];
    out_bytes(o->requested_bytes, req);
    out_bytes(o->free_bytes, fr);
    uint64_t short_by = known(o->shortfall_bytes) && o->shortfall_bytes > 0
                            ? o->shortfall_bytes
                            : (known(o->free_bytes) && o->requested_bytes > o->free_bytes
                                   ? o->requested_bytes - o->free_bytes
                                   : 0);

    if (o->cause == CAUSE_ALLOCATOR_FRAGMENTATION)
        allocator_fragmentation(o, out, n);
    if (o->cause == CAUSE_ALLOCATOR_LIMIT) {
        uint64_t over = known(al->limit_bytes) && known(al->reserved_bytes) &&
                                al->reserved_bytes + o->requested_bytes > al->limit_bytes
                            ? al->reserved_bytes + o->requested_bytes - al->limit_bytes
                            : 0;
        char fix[320];
        fraction_fix(o, fix, sizeof fix);
        /* Raising the cap frees nothing but makes the device's free memory
         * usable: rank it by that. */
        add(out, n, "memory-fraction", known(o->free_bytes) ? o->free_bytes : over,
            "torch.cuda.set_per_process_memory_fraction caps PyTorch at %s and it "
            "holds %s reserved: the %s request passes the cap by %s - %s; the device "
            "itself had %s free",
            out_bytes(al->limit_bytes, a), out_bytes(al->reserved_bytes, b), req,
            out_bytes(over, c), fix, fr);
    }
    if (o->cause == CAUSE_REFUSED_WHILE_FREE)
        refused_while_free(s, out, n);
    if (o->cause == CAUSE_LIMIT) {
        uint64_t held = known(o->tracked_bytes) ? o->tracked_bytes : 0;
        uint64_t limit = o->limit_bytes;
        uint64_t room = known(limit) && limit > held ? limit - held : 0;
        char fits[200] = "";
        if (known(o->free_bytes) && o->free_bytes >= o->requested_bytes)
            snprintf(fits, sizeof fits, "; on the real device (free %s) it would "
                     "have fit", fr);
        uint64_t need = o->requested_bytes > room ? o->requested_bytes - room : 0;
        char nd[OUT_NUM];
        add(out, n, "limit", need,
            "the cumemtrace limit of %s caused this OOM: this process holds %s, so "
            "%s more fit under the limit and the request was %s%s - this request "
            "lacked %s",
            out_bytes(limit, a), out_bytes(held, b), out_bytes(room, c), req, fits,
            out_bytes(need, nd));
    }
    /* Only memory beyond what this process's own context and workspaces
     * take can be another process's: nvidia-smi is the lever when that
     * part would have covered the request, or is a large share of the card. */
    uint64_t beyond = known(o->untracked_bytes) && o->untracked_bytes > ADVICE_CONTEXT_BYTES
                          ? o->untracked_bytes - ADVICE_CONTEXT_BYTES
                          : 0;
    bool untracked_big = beyond > 0 &&
                         ((short_by > 0 && beyond >= short_by) ||
                          (known(o->total_bytes) && o->total_bytes > 0 &&
                           o->untracked_bytes * 100.0 >
                               (double)o->total_bytes * ADVICE_UNTRACKED_PCT));
    if (untracked_big && o->cause != CAUSE_ALLOCATOR_LIMIT && o->cause != CAUSE_LIMIT &&
        o->cause != CAUSE_REFUSED_WHILE_FREE) {
        char more[320] = "", ctx[OUT_NUM], bey[OUT_NUM];
        char who[160];
        lacking(s, who, sizeof who);
        if (short_by > 0 && beyond >= short_by)
            snprintf(more, sizeof more, ", which alone exceeds the %s %s lacked",
                     out_bytes(short_by, c), who);
        add(out, n, "untracked", o->untracked_bytes,
            "%s of the device (%s) is held outside this process's CUDA allocations, %s "
            "beyond the %s a CUDA context and library workspaces take%s: other "
            "processes, or large NCCL buffers - see who holds it with nvidia-smi before "
            "shrinking the model; a cache of another PyTorch process is released by "
            "torch.cuda.empty_cache() there",
            out_bytes(o->untracked_bytes, a),
            known(o->total_bytes) ? out_pct(o->untracked_bytes, o->total_bytes, b) : "?",
            out_bytes(beyond, bey), out_bytes(ADVICE_CONTEXT_BYTES, ctx), more);
    }
    optimizer_state(al, out, n);
    if (o->cause == CAUSE_EXHAUSTED) {
        uint64_t fwd, held;
        char lead[512];
        if (forward_share(s, &fwd, &held, lead, sizeof lead) != 0)
            return;
        char who[160], sb[OUT_NUM], lk[320];
        bool step = lacking(s, who, sizeof who);
        out_bytes(short_by, sb);
        if (step)
            snprintf(lk, sizeof lk, "%s lacked %s (free %s)", who, sb, fr);
        else
            snprintf(lk, sizeof lk, "this request lacked %s (request %s, free %s)", sb, req,
                     fr);
        /* Checkpointing keeps about one activation per block: count half as
         * what it frees, so that memory another process holds outright ranks
         * above it when it is larger. */
        if (held > 0 && fwd * 100.0 >= (double)held * ADVICE_DOMINANT_PCT)
            add(out, n, "activations", fwd / 2,
                "%s at the "
                "failure - activations: activation checkpointing or a smaller "
                "micro-batch with gradient accumulation frees part of it; %s%s",
                lead, step ? lk : "this request lacked ", step ? "" : sb);
        else
            add(out, n, "exhausted", short_by,
                "%s. Lower precision, a smaller micro-batch, or sharding across GPUs "
                "would each free memory for it",
                lk);
        add(out, n, "whole-run", 0,
            "what the whole run needs is not known from one failure (the next "
            "request may fail too): run it where it fits - a larger GPU, or a "
            "smaller batch here - and read its peak with cumemtrace report");
    }
}

/* The largest call site among `g`: the lever when it holds most of `total`. */
static int dominant(struct snapshot *s, const struct snap_groups *g, uint64_t total,
                    const char *what, struct advice *out, int *n)
{
    if (total == 0 || g->n == 0)
        return 0;
    struct sites_sum sum;
    if (sites_sum_sorted(&sum, s, g) != 0)
        return -1;
    uint32_t top = sum.touched[0];
    uint64_t bytes = sum.bytes[top];
    if (bytes * 100.0 >= (double)total * ADVICE_DOMINANT_PCT) {
        char a[OUT_NUM], b[OUT_NUM], c[OUT_NUM];
        add(out, n, "dominant-site", bytes, "%s, %s holds %s (%s of %s): shrink or "
            "free that first",
            what, s->ctx->sites[BY_STACK][top].display, out_pct(bytes, total, a),
            out_bytes(bytes, b), out_bytes(total, c));
    }
    sites_free(&sum);
    return 0;
}

static void device_advice(const struct snap_device *d, struct advice *out, int *n)
{
    char a[OUT_NUM], b[OUT_NUM], c[OUT_NUM];
    const struct snap_frag *f = &d->frag;
    if (!f->present)
        return;
    if (f->small_count >= ADVICE_SMALL_COUNT) {
        add(out, n, "small-segments", 0,
            "%" PRIu64 " live allocations under 1 MiB (%s) on device %" PRId64 ": "
            "many small segments - pool them (cudaMallocAsync, or a caching "
            "allocator) instead of one cudaMalloc each",
            f->small_count, out_bytes(f->small_bytes, a), d->ordinal);
    }
    if (f->rounded_bytes > f->requested_bytes && known(f->granularity_bytes)) {
        uint64_t waste = f->rounded_bytes - f->requested_bytes;
        if (waste >= ADVICE_WASTE_MIN &&
            waste * 100.0 >= (double)f->rounded_bytes * ADVICE_WASTE_PCT)
            add(out, n, "granularity", waste,
                "rounding to the %s granularity wastes %s (%s of live memory) on "
                "device %" PRId64 ": allocate sizes just under a multiple of it, or "
                "pool small buffers",
                out_bytes(f->granularity_bytes, a), out_bytes(waste, b),
                out_pct(waste, f->rounded_bytes, c), d->ordinal);
    }
}

static int by_bytes(const void *x, const void *y)
{
    const struct advice *a = x, *b = y;
    if (a->bytes != b->bytes)
        return a->bytes < b->bytes ? 1 : -1;
    return a->order - b->order; /* stable */
}

int advice_compute(struct snapshot *s, struct advice *out)
{
    int n = 0;
    if (s->oom.present) {
        oom_advice(s, out, &n);
        /* What holds memory at the failure, not at a peak long before it:
         * never advise shrinking something already freed. */
        uint64_t total = 0;
        for (size_t i = 0; i < s->oom.live.n; i++)
            total += s->oom.live.v[i].bytes;
        bool activations = false;
        for (int i = 0; i < n; i++)
            activations = activations || strcmp(out[i].id, "activations") == 0;
        struct holders h;
        if (holders_get(s, NULL, HOLDERS_OOM, false, &h) != 0)
            return -1;
        int rc = activations ? 0 /* that line already names the forward pass */
                 : h.source == HOLDERS_TENSORS
                     ? dominant_tensors(s, &h, "At the failure", out, &n)
                     : dominant(s, &s->oom.live, total, "At the failure", out, &n);
        holders_free(&h);
        if (rc != 0)
            return -1;
    } else {
        for (size_t i = 0; i < s->ndevices; i++) {
            const struct snap_device *d = &s->devices[i];
            char what[64];
            snprintf(what, sizeof what, "At the peak of device %" PRId64, d->ordinal);
            struct holders h;
            if (holders_get(s, d, HOLDERS_PEAK, false, &h) != 0)
                return -1;
            int rc = 0;
            if (h.source == HOLDERS_TENSORS)
                rc = dominant_tensors(s, &h, what, out, &n);
            else if (!torch_device(s, d))
                rc = dominant(s, &d->at_peak, d->peak_bytes, what, out, &n);
            else if (!d->peak_tensors.present) /* else --segments hid them */
                peak_unrecorded(s, d, what, out, &n);
            holders_free(&h);
            if (rc != 0)
                return -1;
        }
    }
    for (size_t i = 0; i < s->ndevices; i++)
        device_advice(&s->devices[i], out, &n);
    /* Ordered by how much memory each would free. */
    for (int i = 0; i < n; i++)
        out[i].order = i;
    qsort(out, (size_t)n, sizeof *out, by_bytes);
    if (s->oom.present)
        advice_verified(s, out, &n);
    return n;
}
