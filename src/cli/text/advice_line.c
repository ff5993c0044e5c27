/* advice_line.c - see advice_line.h. */
#include "advice_line.h"

#include <stdarg.h>
#include <stdio.h>

#include "out.h"

void advice_add(struct advice *out, int *n, const char *id, uint64_t bytes,
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

uint64_t advice_short_by(const struct snap_oom *o)
{
    if (snap_known(o->shortfall_bytes) && o->shortfall_bytes > 0)
        return o->shortfall_bytes;
    return snap_known(o->free_bytes) && o->requested_bytes > o->free_bytes
               ? o->requested_bytes - o->free_bytes
               : 0;
}

bool advice_lacking(const struct snapshot *s, char *buf, size_t n)
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
