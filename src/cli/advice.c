/* advice.c - see advice.h for the triggers. */
#include "advice.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include "out.h"
#include "sites.h"

static void add(struct advice *out, int *n, const char *id, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void add(struct advice *out, int *n, const char *id, const char *fmt, ...)
{
    if (*n >= ADVICE_MAX)
        return;
    struct advice *a = &out[(*n)++];
    a->id = id;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->text, sizeof a->text, fmt, ap);
    va_end(ap);
}

static bool known(uint64_t v)
{
    return v != SNAP_UNKNOWN;
}

static void oom_advice(struct snapshot *s, struct advice *out, int *n)
{
    const struct snap_oom *o = &s->oom;
    char req[OUT_NUM], fr[OUT_NUM], a[OUT_NUM], b[OUT_NUM], c[OUT_NUM];
    out_bytes(o->requested_bytes, req);
    out_bytes(o->free_bytes, fr);

    if (o->cause == CAUSE_FRAGMENTATION) {
        add(out, n, "fragmentation",
            "free %s >= request %s but placement failed: fragmentation - try "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (or allocate the "
            "largest buffers first, before memory is cut into pieces)",
            fr, req);
    }
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
        add(out, n, "limit",
            "the cumemtrace limit of %s caused this OOM: this process holds %s, so "
            "%s more fit under the limit and the request was %s%s - to go on, the "
            "job needs %s less memory (or a limit that much higher)",
            out_bytes(limit, a), out_bytes(held, b), out_bytes(room, c), req, fits,
            out_bytes(need, nd));
    }
    if (o->cause == CAUSE_EXHAUSTED) {
        uint64_t short_by = known(o->shortfall_bytes) && o->shortfall_bytes > 0
                                ? o->shortfall_bytes
                                : (known(o->free_bytes) && o->requested_bytes > o->free_bytes
                                       ? o->requested_bytes - o->free_bytes
                                       : 0);
        char share[96] = "";
        if (known(o->tracked_bytes) && o->tracked_bytes > 0)
            snprintf(share, sizeof share, " (%s of the %s this process holds)",
                     out_pct(short_by, o->tracked_bytes, a), out_bytes(o->tracked_bytes, b));
        char bigger[128] = "";
        if (known(o->total_bytes))
            snprintf(bigger, sizeof bigger, "; 6) a GPU with at least %s",
                     out_bytes(o->total_bytes + short_by, c));
        else
            snprintf(bigger, sizeof bigger, "; 6) a GPU with more memory");
        char sb[OUT_NUM];
        add(out, n, "exhausted",
            "the device is exhausted: %s more is needed%s. Save at least that, in "
            "the order practitioners try: 1) lower precision (bf16/fp16 halves "
            "weights and activations); 2) activation checkpointing; 3) a smaller "
            "micro-batch with gradient accumulation; 4) sharding across GPUs "
            "(FSDP/ZeRO); 5) quantisation%s",
            out_bytes(short_by, sb), share, bigger);
    }
    if (known(o->untracked_bytes) && known(o->total_bytes) && o->total_bytes > 0 &&
        o->untracked_bytes * 100.0 > (double)o->total_bytes * ADVICE_UNTRACKED_PCT) {
        add(out, n, "untracked",
            "untracked memory %s (%s of the device): another process or library "
            "holds it - check nvidia-smi",
            out_bytes(o->untracked_bytes, a), out_pct(o->untracked_bytes, o->total_bytes, b));
    }
}

/* The largest call site of one device at its peak. */
static int dominant(struct snapshot *s, const struct snap_device *d,
                    struct advice *out, int *n)
{
    if (d->peak_bytes == 0 || d->at_peak.n == 0)
        return 0;
    struct sites_sum sum;
    sites_init(&sum, BY_STACK);
    if (sites_add(&sum, s, &d->at_peak) != 0) {
        sites_free(&sum);
        return -1;
    }
    sites_sort(&sum, s->ctx);
    uint32_t top = sum.touched[0];
    uint64_t bytes = sum.bytes[top];
    if (bytes * 100.0 >= (double)d->peak_bytes * ADVICE_DOMINANT_PCT) {
        char a[OUT_NUM], b[OUT_NUM], c[OUT_NUM];
        add(out, n, "dominant-site",
            "peak of device %" PRId64 " set by %s holding %s (%s of %s): shrink or "
            "free that first",
            d->ordinal, s->ctx->sites[BY_STACK][top].display,
            out_pct(bytes, d->peak_bytes, a), out_bytes(bytes, b),
            out_bytes(d->peak_bytes, c));
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
        add(out, n, "small-segments",
            "%" PRIu64 " live allocations under 1 MiB (%s) on device %" PRId64 ": "
            "many small segments - pool them (cudaMallocAsync, or a caching "
            "allocator) instead of one cudaMalloc each",
            f->small_count, out_bytes(f->small_bytes, a), d->ordinal);
    }
    if (f->rounded_bytes > f->requested_bytes && known(f->granularity_bytes)) {
        uint64_t waste = f->rounded_bytes - f->requested_bytes;
        if (waste >= ADVICE_WASTE_MIN &&
            waste * 100.0 >= (double)f->rounded_bytes * ADVICE_WASTE_PCT)
            add(out, n, "granularity",
                "rounding to the %s granularity wastes %s (%s of live memory) on "
                "device %" PRId64 ": allocate sizes just under a multiple of it, or "
                "pool small buffers",
                out_bytes(f->granularity_bytes, a), out_bytes(waste, b),
                out_pct(waste, f->rounded_bytes, c), d->ordinal);
    }
}

int advice_compute(struct snapshot *s, struct advice *out)
{
    int n = 0;
    if (s->oom.present)
        oom_advice(s, out, &n);
    for (size_t i = 0; i < s->ndevices; i++) {
        const struct snap_device *d = &s->devices[i];
        if (s->oom.present && d->ordinal != s->oom.device)
            continue;
        if (dominant(s, d, out, &n) != 0)
            return -1;
    }
    for (size_t i = 0; i < s->ndevices; i++)
        device_advice(&s->devices[i], out, &n);
    if (s->ooms.recovered > 0) {
        char a[OUT_NUM];
        add(out, &n, "recovered",
            "%" PRIu64 " OOM%s recovered after the allocator released cached memory "
            "(%s freed by retries): this job runs at the edge of the device, and a "
            "slightly larger batch or sequence will fail",
            s->ooms.recovered, s->ooms.recovered == 1 ? " was" : "s were",
            out_bytes(s->ooms.retry_released_bytes, a));
    }
    return n;
}
