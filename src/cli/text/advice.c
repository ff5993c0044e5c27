/* advice.c - see advice.h for the triggers. */
#include "advice.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frames.h"
#include "oom_causes.h"
#include "oom_text.h"
#include "holders.h"
#include "out.h"
#include "report_allocator.h"
#include "report_layout.h"
#include "sites.h"

/* The largest holder, `bytes` of `total` (PyTorch's tensors when
 * `tensors`): the lever when it holds most of them. */
static void add_dominant(const char *what, const char *display, uint64_t bytes, uint64_t total,
                         bool tensors, struct advice *out, int *n)
{
    if (bytes * 100.0 < (double)total * ADVICE_DOMINANT_PCT)
        return;
    char a[OUT_NUM], b[OUT_NUM], c[OUT_NUM];
    advice_add(out, n, "dominant-site", bytes, "%s, %s holds %s (%s of %s%s%s): shrink or "
        "free that first",
        what, display, out_pct(bytes, total, a), out_bytes(bytes, b),
        tensors ? "PyTorch's " : "", out_bytes(total, c), tensors ? " in tensors" : "");
}

/* The largest of PyTorch's lines at a moment. */
static void dominant_tensors(const struct holders *h, const char *what, struct advice *out,
                             int *n)
{
    if (h->n > 0 && h->total_bytes > 0)
        add_dominant(what, h->v[0].display, h->v[0].bytes, h->total_bytes, true, out, n);
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
    if (d->peak_bytes == 0 || !snap_known(d->peak_bytes))
        return;
    char a[OUT_NUM], b[OUT_NUM], t[OUT_NUM], when[640], during[700] = "", held[160] = "";
    if (report_allocator_when(s, d->peak_phase, report_allocator_peak_step(s, d), when,
                              sizeof when)[0])
        snprintf(during, sizeof during, ", during %s", when);
    if (snap_known(tensors))
        snprintf(held, sizeof held, "; its tensors peaked at %s (max_memory_allocated)",
                 out_bytes(tensors, b));
    advice_add(out, n, "peak-unrecorded", 0,
        "%s (%s at %s%s) the lines that held PyTorch's tensors were not recorded%s, "
        "and the lines that created its cached segments do not tell them (those hold "
        "freed blocks too): PyTorch's layer lists the peak's tensors by line by default, "
        "not under CUMEMTRACE_TORCH_PEAK=0, not from a program's own history without "
        "CUMEMTRACE_TORCH_PEAK=1, and not when PyTorch's trace did not reach the peak "
        "exactly",
        what, out_bytes(d->peak_bytes, a), out_duration(d->peak_time_ns, t), during, held);
}

/* The optimizer's state, measured by PyTorch's layer (allocator roles). */
static void optimizer_state(const struct snap_allocator *al, struct advice *out, int *n)
{
    if (!al->present || !al->has_roles || !snap_known(al->allocated_bytes) ||
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
    advice_add(out, n, "optimizer-state", st / 2,
        "%s state is %s, %s of what PyTorch's tensors held at the failure%s: an 8-bit "
        "optimizer (bitsandbytes' AdamW8bit keeps each moment in 1 byte per element) or "
        "sharding the state across GPUs (ZeroRedundancyOptimizer, FSDP) shrinks it; a "
        "fused optimizer (fused=True) saves time and temporaries, not state",
        al->optimizers && al->optimizers[0] ? al->optimizers : "The optimizer's",
        out_bytes(st, a), out_pct(st, al->allocated_bytes, b), times);
}

static void oom_advice(struct snapshot *s, struct advice *out, int *n)
{
    const struct snap_oom *o = &s->oom;
    const struct oom_cause_row *row = oom_cause_row(o->cause);
    char a[OUT_NUM], b[OUT_NUM], c[OUT_NUM];
    uint64_t short_by = advice_short_by(o);
    /* Only memory beyond what this process's own context and workspaces
     * take can be another process's: nvidia-smi is the lever when that
     * part would have covered the request, or is a large share of the card. */
    uint64_t beyond = snap_known(o->untracked_bytes) && o->untracked_bytes > ADVICE_CONTEXT_BYTES
                          ? o->untracked_bytes - ADVICE_CONTEXT_BYTES
                          : 0;
    bool untracked_big = beyond > 0 &&
                         ((short_by > 0 && beyond >= short_by) ||
                          (snap_known(o->total_bytes) && o->total_bytes > 0 &&
                           o->untracked_bytes * 100.0 >
                               (double)o->total_bytes * ADVICE_UNTRACKED_PCT));
    if (untracked_big && row->outside_advice) {
        char more[320] = "", ctx[OUT_NUM], bey[OUT_NUM];
        char who[160];
        advice_lacking(s, who, sizeof who);
        if (short_by > 0 && beyond >= short_by)
            snprintf(more, sizeof more, ", which alone exceeds the %s %s lacked",
                     out_bytes(short_by, c), who);
        advice_add(out, n, "untracked", o->untracked_bytes,
            "%s of the device (%s) is held outside this process's CUDA allocations, %s "
            "beyond the %s a CUDA context and library workspaces take%s: other "
            "processes, or large NCCL buffers - see who holds it with nvidia-smi before "
            "shrinking the model; a cache of another PyTorch process is released by "
            "torch.cuda.empty_cache() there",
            out_bytes(o->untracked_bytes, a),
            snap_known(o->total_bytes) ? out_pct(o->untracked_bytes, o->total_bytes, b) : "?",
            out_bytes(beyond, bey), out_bytes(ADVICE_CONTEXT_BYTES, ctx), more);
    }
    optimizer_state(&o->allocator, out, n);
    /* The cause's own lines last: lines of equal bytes keep this order. */
    if (row->advice != NULL)
        row->advice(s, out, n);
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
    add_dominant(what, s->ctx->sites[BY_STACK][top].display, sum.bytes[top], total, false, out,
                 n);
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
        advice_add(out, n, "small-segments", 0,
            "%" PRIu64 " live allocations under 1 MiB (%s) on device %" PRId64 ": "
            "many small segments - pool them (cudaMallocAsync, or a caching "
            "allocator) instead of one cudaMalloc each",
            f->small_count, out_bytes(f->small_bytes, a), d->ordinal);
    }
    if (f->rounded_bytes > f->requested_bytes && snap_known(f->granularity_bytes)) {
        uint64_t waste = f->rounded_bytes - f->requested_bytes;
        if (waste >= ADVICE_WASTE_MIN &&
            waste * 100.0 >= (double)f->rounded_bytes * ADVICE_WASTE_PCT)
            advice_add(out, n, "granularity", waste,
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
        /* Not when the activations' line already names the forward pass;
         * not PyTorch's segments (oom_causes.c, forward_share). */
        int rc = 0;
        if (!activations && h.source == HOLDERS_TENSORS)
            dominant_tensors(&h, "At the failure", out, &n);
        else if (!activations && !s->oom.allocator.present)
            rc = dominant(s, &s->oom.live, total, "At the failure", out, &n);
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
                dominant_tensors(&h, what, out, &n);
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
