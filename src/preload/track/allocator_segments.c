/* allocator_segments.c - cumemtrace_allocator_layout: where a
 * caching allocator's memory lies at its OOM (the post-mortem's picture
 * of PyTorch's segments and blocks beside the driver-level layout), and at
 * the exit (tag CUMEMTRACE_LAYOUT_STATE: devices[].allocator_segments, what
 * export --format memory_viz draws as PyTorch's own blocks).
 *
 * The caller is PyTorch's out-of-memory observer (src/torchboot/), after
 * PyTorch released its allocator mutex, just before it hands the facts
 * (cumemtrace_allocator_oom), whose rewrite of the post-mortem then writes
 * these.  The latest ALLOCATOR_KEPT reports are kept per device, each with its tag
 * (PyTorch's num_ooms): a post-mortem shows the one whose tag its own facts
 * carry, so a post-mortem rewritten later never shows a newer state.
 * The state report has a slot of its own per device, so that the exit's
 * never pushes an OOM's out of the ALLOCATOR_KEPT a post-mortem rewritten at exit
 * looks for.
 * Bounded copy: SEGMENTS_MAX segments and BLOCKS_MAX blocks (a 80 GiB card
 * of 20 MiB segments has 4 k); the rest are counted.  Of the blocks' Python
 * stacks, the first that fit in STACK_TEXT_MAX bytes (a block whose stack
 * did not fit has none).
 */
#include "allocator_segments.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "torch_protocol.h"
#include "record.h"

#define SEGMENTS_MAX 1024
#define BLOCKS_MAX 16384
/* Python stacks of up to ~32 frames of ~100 bytes: 1 MiB holds 300+
 * distinct allocating stacks, more than a model's live tensors have. */
#define STACK_TEXT_MAX (1u << 20)

struct seg {
    uint64_t address;
    int64_t size;
    int32_t pool;
    uint32_t first, nblocks; /* in blocks[] */
};

struct blk {
    int64_t offset, size;
    int32_t state;
    uint32_t stack; /* 1 + index in stacks, 0 none */
};

struct report {
    int64_t tag;
    uint64_t segments_total, blocks_total;
    uint32_t nsegs, nblocks, nstacks;
    struct seg *segs;   /* the arrays and the text follow the struct in one block */
    struct blk *blocks;
    uint32_t *stack_at; /* stack i's text starts at text + stack_at[i] */
    char *text;         /* NUL-terminated stacks, one after the other */
};

static struct allocator_kept store = {PTHREAD_MUTEX_INITIALIZER, {{0}}, {0}};

static bool valid(const struct cumemtrace_allocator_segment *in, uint32_t n,
                  const char *const *stacks, int64_t nstacks)
{
    if ((n > 0 && in == NULL) || (nstacks > 0 && stacks == NULL))
        return false;
    for (int64_t i = 0; i < nstacks; i++)
        if (stacks[i] == NULL)
            return false;
    for (uint32_t i = 0; i < n; i++) {
        if (in[i].size < 0 || (in[i].nblocks > 0 && in[i].blocks == NULL))
            return false;
        for (uint32_t b = 0; b < in[i].nblocks; b++)
            if (in[i].blocks[b].offset < 0 || in[i].blocks[b].size < 0 ||
                in[i].blocks[b].stack < 0 || in[i].blocks[b].stack > nstacks)
                return false;
    }
    return true;
}

/* A copy of what is kept of in[0..n): whole segments while they fit, and
 * the stacks while their text fits. */
static struct report *copy(int64_t tag, const struct cumemtrace_allocator_segment *in,
                           uint32_t n, const char *const *stacks, uint32_t nstacks)
{
    uint32_t nkept = 0;
    size_t text = 0;
    for (; nkept < nstacks; nkept++) {
        size_t k = strlen(stacks[nkept]) + 1;
        if (k > STACK_TEXT_MAX - text)
            break;
        text += k;
    }
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
                              nblocks * sizeof *r->blocks + nkept * sizeof *r->stack_at + text);
    if (r == NULL)
        return NULL;
    r->tag = tag;
    r->segments_total = n;
    r->blocks_total = blocks_total;
    r->segs = (struct seg *)(r + 1);
    r->blocks = (struct blk *)(r->segs + nsegs);
    r->stack_at = (uint32_t *)(r->blocks + nblocks);
    r->text = (char *)(r->stack_at + nkept);
    r->nstacks = nkept;
    for (uint32_t i = 0, at = 0; i < nkept; i++) {
        size_t k = strlen(stacks[i]) + 1;
        memcpy(r->text + at, stacks[i], k);
        r->stack_at[i] = at;
        at += (uint32_t)k;
    }
    r->nsegs = r->nblocks = 0;
    for (uint32_t i = 0; i < n && r->nsegs < nsegs; i++) {
        if (in[i].nblocks > BLOCKS_MAX - r->nblocks)
            continue; /* skipped above as well */
        struct seg *s = &r->segs[r->nsegs++];
        *s = (struct seg){in[i].address, in[i].size, in[i].pool, r->nblocks, in[i].nblocks};
        for (uint32_t b = 0; b < in[i].nblocks; b++)
        {
            /* stacks arrive only through _layout; beyond the kept: none */
            int32_t st = nstacks > 0 ? in[i].blocks[b].stack : 0;
            r->blocks[r->nblocks++] = (struct blk){
                in[i].blocks[b].offset, in[i].blocks[b].size, in[i].blocks[b].state,
                st > 0 && (uint32_t)st <= nkept ? (uint32_t)st : 0};
        }
    }
    return r;
}

static int keep(int device, int64_t tag, const struct cumemtrace_allocator_segment *segments,
                uint32_t nsegments, const char *const *stacks, int64_t nstacks)
{
    if (device < 0 || device >= RECORD_MAX_DEVICES || config.disabled ||
        (tag < 0 && tag != CUMEMTRACE_LAYOUT_STATE) ||
        !valid(segments, nsegments, stacks, nstacks))
        return -1;
    struct report *r = copy(tag, segments, nsegments, stacks,
                            nstacks > 0 ? (uint32_t)nstacks : 0);
    if (r == NULL)
        return -1;
    allocator_kept_put(&store, device, r);
    return 0;
}

void allocator_kept_put(struct allocator_kept *k, int device, void *r)
{
    int64_t tag = *(const int64_t *)r;
    void *old;
    pthread_mutex_lock(&k->lock);
    if (tag == CUMEMTRACE_LAYOUT_STATE) {
        old = k->state[device];
        k->state[device] = r;
    } else {
        void **kept = k->kept[device];
        /* a report with the same tag replaces its predecessor */
        unsigned last = ALLOCATOR_KEPT - 1;
        for (unsigned i = 0; i < ALLOCATOR_KEPT; i++)
            if (kept[i] != NULL && *(const int64_t *)kept[i] == tag) {
                last = i;
                break;
            }
        old = kept[last];
        memmove(&kept[1], &kept[0], last * sizeof *kept);
        kept[0] = r;
    }
    pthread_mutex_unlock(&k->lock);
    free(old);
}

const void *allocator_kept_find(struct allocator_kept *k, int device, int64_t tag)
{
    if (device < 0 || device >= RECORD_MAX_DEVICES)
        return NULL;
    if (tag == CUMEMTRACE_LAYOUT_STATE)
        return k->state[device];
    for (unsigned i = 0; tag >= 0 && i < ALLOCATOR_KEPT; i++)
        if (k->kept[device][i] != NULL && *(const int64_t *)k->kept[device][i] == tag)
            return k->kept[device][i];
    return NULL;
}

void allocator_kept_clear(struct allocator_kept *k)
{
    pthread_mutex_init(&k->lock, NULL);
    for (int d = 0; d < RECORD_MAX_DEVICES; d++) {
        for (unsigned i = 0; i < ALLOCATOR_KEPT; i++) {
            free(k->kept[d][i]);
            k->kept[d][i] = NULL;
        }
        free(k->state[d]);
        k->state[d] = NULL;
    }
}

__attribute__((visibility("default"))) int
cumemtrace_allocator_layout(int device, int64_t tag,
                            const struct cumemtrace_allocator_segment *segments,
                            uint32_t nsegments, const char *const *stacks, uint32_t nstacks)
{
    return keep(device, tag, segments, nsegments, stacks, nstacks);
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

void allocator_segments_write_stack(const char *text, struct snapshot_json *w)
{
    snapshot_json_raw(w, "[", 1);
    bool first = true;
    while (*text) {
        const char *end = strchr(text, '\n');
        size_t n = end ? (size_t)(end - text) : strlen(text);
        const char *fn = memrchr(text, ':', n);
        const char *ln = fn ? memrchr(text, ':', (size_t)(fn - text)) : NULL;
        if (ln != NULL) {
            snapshot_json_s(w, first ? "{\"file\":" : ",{\"file\":");
            first = false;
            snapshot_json_strn(w, text, (size_t)(ln - text));
            snapshot_json_printf(w, ",\"line\":%ld,\"function\":", strtol(ln + 1, NULL, 10));
            snapshot_json_strn(w, fn + 1, n - (size_t)(fn + 1 - text));
            snapshot_json_raw(w, "}", 1);
        }
        text += n + (end != NULL);
    }
    snapshot_json_raw(w, "]", 1);
}

static void write_report(const struct report *r, struct snapshot_json *w)
{
    if (r == NULL) {
        snapshot_json_raw(w, "null", 4);
        return;
    }
    snapshot_json_printf(w, "{\"count\":%" PRIu64 ",\"blocks\":%" PRIu64 ",\"stacks\":[",
                         r->segments_total, r->blocks_total);
    for (uint32_t i = 0; i < r->nstacks; i++) {
        if (i)
            snapshot_json_raw(w, ",", 1);
        allocator_segments_write_stack(r->text + r->stack_at[i], w);
    }
    snapshot_json_s(w, "],\"segments\":[");
    for (uint32_t i = 0; i < r->nsegs; i++) {
        const struct seg *s = &r->segs[i];
        snapshot_json_printf(w, "%s\n   {\"address\":\"0x%" PRIx64 "\",\"bytes\":%" PRId64
                                ",\"pool\":\"%s\",\"blocks\":[",
                             i ? "," : "", s->address, s->size, s->pool == 0 ? "small" : "large");
        for (uint32_t b = 0; b < s->nblocks; b++) {
            const struct blk *k = &r->blocks[s->first + b];
            snapshot_json_printf(w, "%s[%" PRId64 ",%" PRId64 ",\"%s\"", b ? "," : "",
                                 k->offset, k->size, state_name(k->state));
            if (k->stack > 0)
                snapshot_json_printf(w, ",%" PRIu32, k->stack - 1);
            snapshot_json_raw(w, "]", 1);
        }
        snapshot_json_s(w, "]}");
    }
    snapshot_json_s(w, "]}");
}

void allocator_segments_write(int device, int64_t tag, struct snapshot_json *w)
{
    pthread_mutex_lock(&store.lock);
    write_report(tag >= 0 ? allocator_kept_find(&store, device, tag) : NULL, w);
    pthread_mutex_unlock(&store.lock);
}

void allocator_segments_write_state(int device, struct snapshot_json *w)
{
    pthread_mutex_lock(&store.lock);
    write_report(allocator_kept_find(&store, device, CUMEMTRACE_LAYOUT_STATE), w);
    pthread_mutex_unlock(&store.lock);
}

void allocator_segments_atfork_child(void)
{
    allocator_kept_clear(&store);
}
