/* report_allocator.c - the PyTorch part of a post-mortem. */
#include "report_allocator.h"

#include <inttypes.h>
#include <string.h>

#include "out.h"
#include "snapshot_phases.h"

uint64_t report_allocator_largest_free(const struct snap_allocator *a)
{
    uint64_t s = snap_known(a->largest_free_small) ? a->largest_free_small : 0;
    uint64_t l = snap_known(a->largest_free_large) ? a->largest_free_large : 0;
    if (!snap_known(a->largest_free_small) && !snap_known(a->largest_free_large))
        return SNAP_UNKNOWN;
    return s > l ? s : l;
}

const char *report_allocator_who(const struct snap_allocator *a, bool capital)
{
    if (a->name && strcmp(a->name, "pytorch") == 0)
        return "PyTorch";
    return capital ? "The allocator" : "the allocator";
}

uint64_t report_allocator_request(const struct snap_oom *o)
{
    const struct snap_allocator *a = &o->allocator;
    return snap_known(a->requested_bytes) ? a->requested_bytes : o->requested_bytes;
}

void report_allocator_lines(FILE *f, struct snapctx *ctx, const struct snap_oom *o)
{
    const struct snap_allocator *a = &o->allocator;
    if (!a->present)
        return;
    char x[OUT_NUM], y[OUT_NUM], z[OUT_NUM], w[OUT_NUM], text[768];
    const char *first =
        strcmp(report_allocator_who(a, false), "PyTorch") == 0 ? "  pytorch:  " : "  allocator:";
    snprintf(text, sizeof text, "allocated %s | reserved %s | unallocated %s | active %s",
             out_bytes(a->allocated_bytes, x), out_bytes(a->reserved_bytes, y),
             out_bytes(a->reserved_unallocated_bytes, z), out_bytes(a->active_bytes, w));
    out_wrap(f, first, "            ", text);
    uint64_t segments = snap_known(a->segments) ? a->segments : 0;
    snprintf(text, sizeof text,
             "largest free block %s (small pool %s, large pool %s) | %" PRIu64
             " segment%s | inactive split %s",
             out_bytes(report_allocator_largest_free(a), x), out_bytes(a->largest_free_small, y),
             out_bytes(a->largest_free_large, z), segments, out_plural(segments),
             out_bytes(a->inactive_split_bytes, w));
    out_wrap(f, "            ", "            ", text);
    char cap[64] = "";
    if (snap_known(a->limit_bytes))
        snprintf(cap, sizeof cap, "memory fraction cap %s | ", out_bytes(a->limit_bytes, x));
    uint64_t retries = snap_known(a->num_alloc_retries) ? a->num_alloc_retries : 0;
    uint64_t ooms = snap_known(a->num_ooms) ? a->num_ooms : 0;
    snprintf(text, sizeof text, "%s%" PRIu64 " retr%s, %" PRIu64 " OOM%s so far | %s%s",
             cap, retries, retries == 1 ? "y" : "ies", ooms, out_plural(ooms),
             a->config ? "PYTORCH_CUDA_ALLOC_CONF=" : "PYTORCH_CUDA_ALLOC_CONF unset",
             a->config ? snapshot_display(ctx, a->config) : "");
    out_wrap(f, "            ", "            ", text);
    report_allocator_roles(f, a, "  roles:    ", "            ");
    if (!a->tensors.present) /* else the holders' table lists them all */
        report_allocator_tensors(f, ctx, a, "  tensors:  ", "            ", 1);
}

const char *report_allocator_roles_text(const struct snap_allocator *a, char *buf, size_t n)
{
    buf[0] = '\0';
    if (!a->present || !a->has_roles || !snap_known(a->allocated_bytes))
        return buf;
    char al[OUT_NUM], p[OUT_NUM], g[OUT_NUM], o[OUT_NUM], x[OUT_NUM], c[OUT_NUM];
    char buffers[OUT_NUM + 16] = "", cache[OUT_NUM + 16] = "";
    const uint64_t *r = a->roles;
    if (r[SNAP_ROLE_BUFFERS] > 0) {
        char b[OUT_NUM];
        snprintf(buffers, sizeof buffers, " + buffers %s", out_bytes(r[SNAP_ROLE_BUFFERS], b));
    }
    if (snap_known(a->reserved_bytes))
        snprintf(cache, sizeof cache, "; cache %s",
                 out_bytes(a->reserved_bytes > a->allocated_bytes
                               ? a->reserved_bytes - a->allocated_bytes : 0, c));
    snprintf(buf, n,
             "%s allocated = parameters %s%s + gradients %s + %s state %s + other %s "
             "(activations, inputs)%s",
             out_bytes(a->allocated_bytes, al), out_bytes(r[SNAP_ROLE_PARAMETERS], p), buffers,
             out_bytes(r[SNAP_ROLE_GRADIENTS], g),
             a->optimizers != NULL && a->optimizers[0] ? a->optimizers : "optimizer",
             out_bytes(r[SNAP_ROLE_OPTIMIZER], o), out_bytes(r[SNAP_ROLE_OTHER], x), cache);
    return buf;
}

void report_allocator_roles(FILE *f, const struct snap_allocator *a, const char *first,
                            const char *rest)
{
    char text[512];
    if (report_allocator_roles_text(a, text, sizeof text)[0])
        out_wrap(f, first, rest, text);
}

uint64_t report_allocator_peak(const struct snapshot *s, const struct snap_device *d)
{
    if (d->allocator.present && d->allocator.peak_allocated_bytes != SNAP_UNKNOWN)
        return d->allocator.peak_allocated_bytes;
    const struct snap_oom *o = &s->oom;
    if (o->present && o->device == d->ordinal && o->allocator.present)
        return o->allocator.peak_allocated_bytes;
    return SNAP_UNKNOWN;
}

int64_t report_allocator_peak_step(const struct snapshot *s, const struct snap_device *d)
{
    if (d->allocator.present)
        return d->allocator.peak_step;
    const struct snap_oom *o = &s->oom;
    if (o->present && o->device == d->ordinal && o->allocator.present)
        return o->allocator.peak_step;
    return SNAP_UNKNOWN_I64;
}

void report_allocator_tensors(FILE *f, struct snapctx *ctx, const struct snap_allocator *a,
                              const char *first, const char *rest, int lines)
{
    if (!a->present || !a->has_top)
        return;
    char x[OUT_NUM], text[768], cont[64];
    snprintf(cont, sizeof cont, "%s  ", rest);
    if (a->ntop == 0)
        out_wrap(f, first, rest, "no live tensors in PyTorch's history");
    for (size_t i = 0; i < a->ntop; i++) {
        const struct snap_tensor_site *t = &a->top[i];
        char head[96], fit[768];
        snprintf(head, sizeof head, "%s in %" PRIu64 " tensor%s from ", out_bytes(t->bytes, x),
                 t->count, t->count == 1 ? "" : "s");
        const char *where = t->where && t->where[0]
                                ? snapshot_display(ctx, t->where)
                                : "no Python stack (allocated off the Python thread, e.g. "
                                  "by autograd's backward)";
        /* `lines` lines a site: the innermost lines, the callers cut to fit
         * (--full: all of them). */
        size_t used = out_width(first) + out_width(head);
        size_t room = OUT_WIDTH > used ? OUT_WIDTH - used : 0;
        if (lines > 1 && OUT_WIDTH > out_width(cont))
            room += (size_t)(lines - 1) * (OUT_WIDTH - out_width(cont));
        if (t->where && t->where[0] && room > 24)
            where = out_fit_chain(where, room, fit, sizeof fit);
        snprintf(text, sizeof text, "%s%s", head, where);
        out_wrap(f, i == 0 ? first : rest, cont, text);
    }
}

const char *report_allocator_when(const struct snapshot *s, int64_t phase, int64_t step,
                                  char *buf, size_t n)
{
    char what[512] = "";
    const struct snap_phase *inner = phase > 0 ? snapshot_phase(s, phase) : NULL;
    if (inner != NULL && inner->source != NULL && strcmp(inner->source, "torch") == 0) {
        /* The outermost of PyTorch's phases around it: forward, backward or
         * the optimizer step; below it, the innermost is the module. */
        const struct snap_phase *top = inner;
        for (const struct snap_phase *p = inner; p != NULL;
             p = p->parent > 0 ? snapshot_phase(s, p->parent) : NULL)
            if (p->source != NULL && strcmp(p->source, "torch") == 0)
                top = p;
        char t[160];
        snprintf(t, sizeof t, "%s", snapshot_display(s->ctx, top->name));
        if (top != inner)
            snprintf(what, sizeof what, "%s of module `%s`", t,
                     snapshot_display(s->ctx, inner->name));
        else
            snprintf(what, sizeof what, "%s", t);
    } else if (inner != NULL) {
        snprintf(what, sizeof what, "range `%s`",
                 snapshot_display(s->ctx, snapshot_phase_path(s, phase)));
    }
    if (step != SNAP_UNKNOWN_I64 && step > 0)
        snprintf(buf, n, "%s%sstep %" PRId64, what, what[0] ? ", " : "", step);
    else if (step == 0)
        snprintf(buf, n, "%s%sbefore the first optimizer step", what, what[0] ? ", " : "");
    else
        snprintf(buf, n, "%s", what);
    return buf;
}

const char *report_allocator_age(const struct snapshot *s, const struct snap_allocator *a,
                                 char *buf, size_t n)
{
    buf[0] = '\0';
    const struct snap_refresh *r = &s->refresh;
    int64_t dump = s->process.dump_time_ns;
    bool dated = a->present && a->reported_ns != SNAP_UNKNOWN_I64 && dump != SNAP_UNKNOWN_I64;
    char age[OUT_NUM], waited[OUT_NUM], head[96];
    if (dated)
        snprintf(head, sizeof head, "PyTorch's figures here are %s older than this snapshot",
                 out_duration(dump > a->reported_ns ? dump - a->reported_ns : 0, age));
    else
        snprintf(head, sizeof head, "PyTorch's figures are missing");
    if (r->present && r->answered == 0 && r->direct == 1) {
        snprintf(buf, n, "%s: the dump was asked for inside an import, where the PyTorch "
                 "layer does not read them.", head);
    } else if (r->present && r->answered == 0) {
        out_duration(r->waited_ns != SNAP_UNKNOWN_I64 ? r->waited_ns
                     : r->wait_ms != SNAP_UNKNOWN_I64 ? r->wait_ms * 1000000 : 0, waited);
        snprintf(buf, n, "%s: the PyTorch layer did not answer within %s (Python's main "
                 "thread runs it between two bytecodes: a long call that keeps the GIL, or "
                 "a main thread that does not return to Python, delays it).", head, waited);
    } else if (dated && dump - a->reported_ns >= 1000000000) {
        snprintf(buf, n, "%s (read when PyTorch's layer last reported them).", head);
    }
    return buf;
}
