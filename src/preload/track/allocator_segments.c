/* allocator_segments.c - cumemtrace_allocator_segments: where a caching
 * allocator's memory lies at its OOM (the post-mortem's picture
 * of PyTorch's segments and blocks beside the driver-level layout).
 *
 * The caller is PyTorch's out-of-memory observer (src/torchboot/), after
 * PyTorch released its allocator mutex, just before it hands the facts
 * (cumemtrace_allocator_oom), whose rewrite of the post-mortem then writes
 * these.  The latest KEPT reports are kept per device, each with its tag
 * (PyTorch's num_ooms): a post-mortem shows the one whose tag its own facts
 * carry, so a post-mortem rewritten later never shows a newer state.
 * Bounded copy: SEGMENTS_MAX segments and BLOCKS_MAX blocks (a 80 GiB card
 * of 20 MiB segments has 4 k); the rest are counted.
 */
#include "allocator_segments.h"

#include <inttypes.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "cumemtrace.h"
#include "record.h"

#define SEGMENTS_MAX 1024
#define BLOCKS_MAX 16384
/* Reports kept per device, by tag: a post-mortem rewritten after a few
 * later OOMs (its chain ended, or at exit) still finds its own. */
#define KEPT 4

struct seg {
    uint64_t address;
    int64_t size;
    int32_t pool;
    uint32_t first, nblocks; /* in blocks[] */
};

struct blk {
    int64_t offset, size;
    int32_t state;
};

struct report {
    int64_t tag;
    uint64_t segments_total, blocks_total;
    uint32_t nsegs, nblocks;
    struct seg *segs;   /* the two arrays follow the struct in one block */
    struct blk *blocks;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* guarded by lock; kept[d][0] the latest */
static struct report *kept[RECORD_MAX_DEVICES][KEPT];

static bool valid(const struct cumemtrace_allocator_segment *in, uint32_t n)
{
    if (n > 0 && in == NULL)
        return false;
    for (uint32_t i = 0; i < n; i++) {
        if (in[i].size < 0 || (in[i].nblocks > 0 && in[i].blocks == NULL))
            return false;
        for (uint32_t b = 0; b < in[i].nblocks; b++)
            if (in[i].blocks[b].offset < 0 || in[i].blocks[b].size < 0)
                return false;
    }
    return true;
}

/* A copy of what is kept of in[0..n): whole segments while they fit. */
static struct report *copy(int64_t tag, const struct cumemtrace_allocator_segment *in,
                           uint32_t n)
{
    uint32_t nsegs = 0, nblocks = 0;
    uint64_t blocks_total = 0;
    for (uint32_t i = 0; i < n; i++) {
        blocks_total += in[i].nblocks;
        if (nsegs < SEGMENTS_MAX && in[i].nblocks <= BLOCKS_MAX - nblocks) {
            nsegs++;
            nblocks += in[i].nblocks;
        }
    }
    struct report *r = malloc(sizeof *r + nsegs * sizeof *r->segs +
                              nblocks * sizeof *r->blocks);
    if (r == NULL)
        return NULL;
    r->tag = tag;
    r->segments_total = n;
    r->blocks_total = blocks_total;
    r->segs = (struct seg *)(r + 1);
    r->blocks = (struct blk *)(r->segs + nsegs);
    r->nsegs = r->nblocks = 0;
    for (uint32_t i = 0; i < n && r->nsegs < nsegs; i++) {
        if (in[i].nblocks > BLOCKS_MAX - r->nblocks)
            continue; /* skipped above as well */
        struct seg *s = &r->segs[r->nsegs++];
        *s = (struct seg){in[i].address, in[i].size, in[i].pool, r->nblocks, in[i].nblocks};
        for (uint32_t b = 0; b < in[i].nblocks; b++)
            r->blocks[r->nblocks++] = (struct blk){in[i].blocks[b].offset,
                                                   in[i].blocks[b].size,
                                                   in[i].blocks[b].state};
    }
    return r;
}

__attribute__((visibility("default"))) int
cumemtrace_allocator_segments(int device, int64_t tag,
                              const struct cumemtrace_allocator_segment *segments,
                              uint32_t nsegments)
{
    if (device < 0 || device >= RECORD_MAX_DEVICES || config.disabled ||
        !valid(segments, nsegments))
        return -1;
    struct report *r = copy(tag, segments, nsegments);
    if (r == NULL)
        return -1;
    pthread_mutex_lock(&lock);
    struct report **k = kept[device];
    /* a report with the same tag replaces its predecessor */
    unsigned last = KEPT - 1;
    for (unsigned i = 0; i < KEPT; i++)
        if (k[i] != NULL && k[i]->tag == tag) {
            last = i;
            break;
        }
    struct report *old = k[last];
    memmove(&k[1], &k[0], last * sizeof *k);
    k[0] = r;
    pthread_mutex_unlock(&lock);
    free(old);
    return 0;
}

static const char *state_name(int32_t s)
{
    switch (s) {
    case CUMEMTRACE_BLOCK_FREE: return "free";
    case CUMEMTRACE_BLOCK_ALLOCATED: return "allocated";
    case CUMEMTRACE_BLOCK_PENDING: return "pending";
    default: return "unknown";
    }
}

static void put(allocator_segments_emit_fn emit, void *ctx, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void put(allocator_segments_emit_fn emit, void *ctx, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (k > 0)
        emit(ctx, buf, (size_t)k < sizeof buf ? (size_t)k : sizeof buf - 1);
}

void allocator_segments_write(int device, int64_t tag, allocator_segments_emit_fn emit, void *ctx)
{
    pthread_mutex_lock(&lock);
    const struct report *r = NULL;
    for (unsigned i = 0; tag >= 0 && device >= 0 && device < RECORD_MAX_DEVICES && i < KEPT; i++)
        if (kept[device][i] != NULL && kept[device][i]->tag == tag) {
            r = kept[device][i];
            break;
        }
    if (r == NULL) {
        pthread_mutex_unlock(&lock);
        emit(ctx, "null", 4);
        return;
    }
    put(emit, ctx, "{\"count\":%" PRIu64 ",\"blocks\":%" PRIu64 ",\"segments\":[",
        r->segments_total, r->blocks_total);
    for (uint32_t i = 0; i < r->nsegs; i++) {
        const struct seg *s = &r->segs[i];
        put(emit, ctx, "%s\n   {\"address\":\"0x%" PRIx64 "\",\"bytes\":%" PRId64
                       ",\"pool\":\"%s\",\"blocks\":[",
            i ? "," : "", s->address, s->size, s->pool == 0 ? "small" : "large");
        for (uint32_t b = 0; b < s->nblocks; b++) {
            const struct blk *k = &r->blocks[s->first + b];
            put(emit, ctx, "%s[%" PRId64 ",%" PRId64 ",\"%s\"]", b ? "," : "", k->offset,
                k->size, state_name(k->state));
        }
        put(emit, ctx, "]}");
    }
    put(emit, ctx, "]}");
    pthread_mutex_unlock(&lock);
}

void allocator_segments_atfork_child(void)
{
    pthread_mutex_init(&lock, NULL);
    for (int d = 0; d < RECORD_MAX_DEVICES; d++)
        for (unsigned i = 0; i < KEPT; i++) {
            free(kept[d][i]);
            kept[d][i] = NULL;
        }
}
