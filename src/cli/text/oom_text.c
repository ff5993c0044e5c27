/* oom_text.c - see oom_text.h. */
#include "oom_text.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "out.h"

static bool known(uint64_t v)
{
    return v != SNAP_UNKNOWN;
}

/* A recorded string as text output may print it (snapshot_display). */
static const char *text(const struct snapshot *s, const char *str)
{
    return snapshot_display(s->ctx, str);
}

uint64_t oom_text_request(const struct snap_oom *o)
{
    const struct snap_allocator *a = &o->allocator;
    if (a->present && known(a->requested_bytes) && a->requested_bytes > 0)
        return a->requested_bytes;
    return o->requested_bytes;
}

static uint64_t granularity(const struct snapshot *s, const struct snap_oom *o)
{
    const struct snap_device *d = snapshot_device(s, o->device);
    return d != NULL && d->frag.present && known(d->frag.granularity_bytes)
               ? d->frag.granularity_bytes
               : SNAP_UNKNOWN;
}

enum oom_refusal oom_text_refusal(const struct snapshot *s, uint64_t *figure)
{
    const struct snap_oom *o = &s->oom;
    uint64_t g = granularity(s, o), req = o->requested_bytes;
    uint64_t rounded = known(g) && g > 0 ? (req + g - 1) / g * g : req;
    *figure = 0;
    if (!known(o->free_bytes))
        return REFUSAL_UNEXPLAINED;
    if (rounded > o->free_bytes) {
        *figure = rounded;
        return REFUSAL_ROUNDING;
    }
    if (o->free_bytes - rounded < OOM_TEXT_DRIVER_MARGIN) {
        *figure = o->free_bytes - rounded;
        return REFUSAL_MARGIN;
    }
    if (known(o->untracked_bytes) && o->untracked_bytes > OOM_TEXT_CONTEXT_BYTES) {
        *figure = o->untracked_bytes;
        return REFUSAL_OTHERS;
    }
    return REFUSAL_UNEXPLAINED;
}

const char *oom_text_kind(int kind)
{
    return snapshot_kind_phrase(kind); /* one phrase per kind, format.h's */
}

const char *oom_text_allocator(const struct snap_allocator *a)
{
    return a->name && strcmp(a->name, "pytorch") == 0 ? "PyTorch" : "the caching allocator";
}

const char *oom_text_failure(const struct snapshot *s, char *buf, size_t n)
{
    const struct snap_oom *o = &s->oom;
    char a[OUT_NUM], b[OUT_NUM], dev[32];
    if (o->device < 0)
        snprintf(dev, sizeof dev, "the host");
    else
        snprintf(dev, sizeof dev, "device %" PRId64, o->device);
    if (o->cause == CAUSE_ALLOCATOR_LIMIT || o->cause == CAUSE_ALLOCATOR) {
        /* The allocator's own refusal: its name is the entry point. */
        const char *w = oom_text_allocator(&o->allocator);
        snprintf(buf, n, "%c%s refused %s of %s on %s without a CUDA call",
                 w[0] == 't' ? 'T' : w[0], w + 1, out_bytes(oom_text_request(o), a),
                 oom_text_kind(o->kind), dev);
        return buf;
    }
    uint64_t user = oom_text_request(o);
    char step[160] = "";
    if (user != o->requested_bytes)
        snprintf(step, sizeof step, " (for %s's %s request)", oom_text_allocator(&o->allocator),
                 out_bytes(user, b));
    snprintf(buf, n, "%s of %s of %s failed on %s%s",
             o->entry_point ? text(s, o->entry_point) : "?", out_bytes(o->requested_bytes, a),
             oom_text_kind(o->kind), dev, step);
    return buf;
}

/* Free >= request, and the driver refused: what the figures allow saying. */
static void refused_cause(const struct snapshot *s, char *buf, size_t n)
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
                 out_bytes(granularity(s, o), g), b, out_bytes(fig, c), a);
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

const char *oom_text_cause(const struct snapshot *s, char *buf, size_t n)
{
    const struct snap_oom *o = &s->oom;
    const struct snap_allocator *al = &o->allocator;
    char a[OUT_NUM], b[OUT_NUM], c[OUT_NUM], d[OUT_NUM];
    uint64_t user = oom_text_request(o);
    switch (o->cause) {
    case CAUSE_EXHAUSTED: {
        uint64_t short_by = o->shortfall_bytes;
        if (!known(short_by) || short_by == 0)
            short_by = known(o->free_bytes) && o->requested_bytes > o->free_bytes
                           ? o->requested_bytes - o->free_bytes
                           : SNAP_UNKNOWN;
        if (user != o->requested_bytes)
            snprintf(buf, n, "exhausted - the %s %s of %s's %s request was short by %s "
                     "(free %s)",
                     out_bytes(o->requested_bytes, a),
                     o->entry_point ? text(s, o->entry_point) : "call", oom_text_allocator(al),
                     out_bytes(user, b), out_bytes(short_by, c), out_bytes(o->free_bytes, d));
        else
            snprintf(buf, n, "exhausted - short by %s (request %s, free %s)",
                     out_bytes(short_by, a), out_bytes(o->requested_bytes, b),
                     out_bytes(o->free_bytes, c));
        break;
    }
    case CAUSE_OTHER_PROCESSES:
        snprintf(buf, n, "other processes - %s of the device is held outside this "
                 "process's allocations, more than the %s this request lacked (request "
                 "%s, free %s)",
                 out_bytes(o->untracked_bytes, a), out_bytes(o->shortfall_bytes, b),
                 out_bytes(o->requested_bytes, c), out_bytes(o->free_bytes, d));
        break;
    case CAUSE_REFUSED_WHILE_FREE:
        refused_cause(s, buf, n);
        break;
    case CAUSE_LIMIT:
        snprintf(buf, n, "limit - CUMEMTRACE_LIMIT %s refused it (this process holds %s)",
                 out_bytes(o->limit_bytes, a), out_bytes(o->tracked_bytes, b));
        break;
    case CAUSE_ALLOCATOR_FRAGMENTATION:
        snprintf(buf, n, "allocator fragmentation - %s reserved but unallocated >= the %s "
                 "request, but no free block is large enough",
                 out_bytes(al->reserved_unallocated_bytes, a), out_bytes(user, b));
        break;
    case CAUSE_ALLOCATOR_LIMIT:
        snprintf(buf, n, "allocator limit - the memory fraction cap %s refused it "
                 "(reserved %s); no CUDA call was made",
                 out_bytes(al->limit_bytes, a), out_bytes(al->reserved_bytes, b));
        break;
    case CAUSE_ALLOCATOR:
        snprintf(buf, n, "allocator - %s refused it by itself, for a reason it did not "
                 "state", oom_text_allocator(al));
        break;
    default:
        snprintf(buf, n, "%s", text(s, snapshot_cause_name(o)));
        break;
    }
    return buf;
}
