/* diff_allocator.c - the caching allocator's figures of two runs side by
 * side in `cumemtrace diff`: why one run failed and the other did not, in
 * PyTorch's terms (reserved but unallocated, the largest free block,
 * segments, the configuration).
 *
 * Each side's figures are those of its failure (oom.allocator) when the
 * file is a post-mortem, else its device's latest state (devices[].
 * allocator, reported at the dump: exit, or an api, signal or periodic
 * one).  Neither side has any: nothing printed. */
#include "diff_allocator.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "moment.h"
#include "out.h"
#include "report_allocator.h"

/* The figures of s and when they were read (moment.h: a dump is named by
 * its reason, so two dumps of one run do not both read "at exit"). */
static const struct snap_allocator *pick(const struct snapshot *s, char *when, size_t n)
{
    if (s->oom.present && s->oom.allocator.present) {
        moment_of(s, when, n);
        return &s->oom.allocator;
    }
    for (size_t i = 0; i < s->ndevices; i++)
        if (s->devices[i].allocator.present) {
            moment_of(s, when, n);
            return &s->devices[i].allocator;
        }
    snprintf(when, n, "not reported");
    return NULL;
}

static void bytes_row(struct out_table *t, const char *what, const struct snap_allocator *a,
                      const struct snap_allocator *b, uint64_t va, uint64_t vb)
{
    char x[OUT_NUM], y[OUT_NUM], c[OUT_NUM];
    bool both = a && b && va != SNAP_UNKNOWN && vb != SNAP_UNKNOWN;
    out_table_row(t, what, a ? out_bytes(va, x) : "-", b ? out_bytes(vb, y) : "-",
                  both ? out_sbytes(out_delta(va, vb), c) : "");
}

static void count_row(struct out_table *t, const char *what, const struct snap_allocator *a,
                      const struct snap_allocator *b, uint64_t va, uint64_t vb)
{
    char x[32] = "-", y[32] = "-", c[32] = "";
    if (a && va != SNAP_UNKNOWN)
        snprintf(x, sizeof x, "%" PRIu64, va);
    if (b && vb != SNAP_UNKNOWN)
        snprintf(y, sizeof y, "%" PRIu64, vb);
    if (a && b && va != SNAP_UNKNOWN && vb != SNAP_UNKNOWN)
        snprintf(c, sizeof c, "%+" PRId64, (int64_t)(vb - va));
    out_table_row(t, what, x, y, c);
}

void diff_allocator_print(FILE *f, struct snapctx *ctx, const struct snapshot *base,
                          const struct snapshot *new)
{
    char wa[96], wb[96];
    const struct snap_allocator *a = pick(base, wa, sizeof wa), *b = pick(new, wb, sizeof wb);
    if (a == NULL && b == NULL)
        return;
    const struct snap_allocator *any = a ? a : b;
    const char *who = any->name && strcmp(any->name, "pytorch") == 0 ? "PyTorch's" : "The";
    fputc('\n', f);
    fprintf(f, "%s%s caching allocator (base %s, new %s)%s\n", out_color(OUT_BOLD), who, wa,
            wb, out_color(OUT_RESET));
    struct out_table t;
    out_table_init(&t, "lrrr", 2);
    out_table_row(&t, "", "base", "new", "change");
    bytes_row(&t, "allocated (tensors)", a, b, a ? a->allocated_bytes : 0,
              b ? b->allocated_bytes : 0);
    bytes_row(&t, "reserved", a, b, a ? a->reserved_bytes : 0, b ? b->reserved_bytes : 0);
    bytes_row(&t, "reserved but unallocated", a, b, a ? a->reserved_unallocated_bytes : 0,
              b ? b->reserved_unallocated_bytes : 0);
    bytes_row(&t, "largest free block", a, b, a ? report_allocator_largest_free(a) : 0,
              b ? report_allocator_largest_free(b) : 0);
    count_row(&t, "segments", a, b, a ? a->segments : 0, b ? b->segments : 0);
    count_row(&t, "OOMs so far", a, b, a ? a->num_ooms : 0, b ? b->num_ooms : 0);
    if ((a && a->requested_bytes != SNAP_UNKNOWN) || (b && b->requested_bytes != SNAP_UNKNOWN))
        bytes_row(&t, "failed request", /* "-": no failure on that side */
                  a && a->requested_bytes != SNAP_UNKNOWN ? a : NULL,
                  b && b->requested_bytes != SNAP_UNKNOWN ? b : NULL,
                  a ? a->requested_bytes : 0, b ? b->requested_bytes : 0);
    out_table_print(&t, f);
    char text[1024];
    snprintf(text, sizeof text, "PYTORCH_CUDA_ALLOC_CONF: base %s, new %s",
             !a ? "-" : a->config ? snapshot_display(ctx, a->config) : "unset",
             !b ? "-" : b->config ? snapshot_display(ctx, b->config) : "unset");
    out_wrap(f, "  ", "    ", text);
}
