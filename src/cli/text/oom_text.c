/* oom_text.c - see oom_text.h. */
#include "oom_text.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "out.h"

uint64_t oom_text_request(const struct snap_oom *o)
{
    const struct snap_allocator *a = &o->allocator;
    if (a->present && snap_known(a->requested_bytes) && a->requested_bytes > 0)
        return a->requested_bytes;
    return o->requested_bytes;
}

uint64_t oom_text_granularity(const struct snapshot *s)
{
    const struct snap_oom *o = &s->oom;
    const struct snap_device *d = snapshot_device(s, o->device);
    return d != NULL && d->frag.present && snap_known(d->frag.granularity_bytes)
               ? d->frag.granularity_bytes
               : SNAP_UNKNOWN;
}

enum oom_refusal oom_text_refusal(const struct snapshot *s, uint64_t *figure)
{
    const struct snap_oom *o = &s->oom;
    uint64_t g = oom_text_granularity(s), req = o->requested_bytes;
    uint64_t rounded = snap_known(g) && g > 0 ? (req + g - 1) / g * g : req;
    *figure = 0;
    if (!snap_known(o->free_bytes))
        return REFUSAL_UNEXPLAINED;
    if (rounded > o->free_bytes) {
        *figure = rounded;
        return REFUSAL_ROUNDING;
    }
    if (o->free_bytes - rounded < OOM_TEXT_DRIVER_MARGIN) {
        *figure = o->free_bytes - rounded;
        return REFUSAL_MARGIN;
    }
    if (snap_known(o->untracked_bytes) && o->untracked_bytes > OOM_TEXT_CONTEXT_BYTES) {
        *figure = o->untracked_bytes;
        return REFUSAL_OTHERS;
    }
    return REFUSAL_UNEXPLAINED;
}

const char *oom_text_allocator(const struct snap_allocator *a)
{
    return a->name && strcmp(a->name, "pytorch") == 0 ? "PyTorch" : "the caching allocator";
}

const char *oom_text_origin(const struct snapshot *s, char *buf, size_t n)
{
    const struct snap_origin *og = &s->oom.allocator.origin;
    buf[0] = '\0';
    if (!s->oom.allocator.present || og->thread == NULL)
        return buf;
    const char *node = og->node ? og->node : "an autograd node";
    if (og->forward_site != SNAP_NO_FRAME)
        snprintf(buf, n, "%s on autograd's backward thread, the backward of %s", node,
                 s->ctx->frames[og->forward_site].display);
    else
        snprintf(buf, n, "%s on autograd's backward thread; its forward line is not known: "
                 "PyTorch records a node's forward line only under "
                 "torch.autograd.set_detect_anomaly(True)", node);
    return buf;
}
