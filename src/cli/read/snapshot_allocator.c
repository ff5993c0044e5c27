/* snapshot_allocator.c - oom.allocator: PyTorch's figures at its OOM. */
#include "snapshot_allocator.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "snapshot.h"
#include "snapshot_tensors.h"

static const struct field largest_free_fields[] = {SNAP_LARGEST_FREE_SCHEMA(SCHEMA_FIELD)};

static int rd_largest_free(struct reader *r, void *obj)
{
    if (reader_take_null(r))
        return 0;
    return reader_object(r, obj, largest_free_fields, NFIELDS(largest_free_fields));
}

/* The configuration object, kept as "key:value,..." as the user wrote it. */
static int rd_config(struct reader *r, void *obj)
{
    struct snap_allocator *a = obj;
    if (reader_take_null(r))
        return 0;
    int rc = json_enter_object(&r->c);
    if (rc != JSON_OK)
        return reader_bad_value(r, rc, "an object");
    char buf[1024];
    size_t used = 0;
    const char *key;
    size_t klen;
    while ((rc = json_next_member(&r->c, &key, &klen)) == 1) {
        const char *v;
        reader_push_key(r, key);
        rc = reader_raw(r, &v);
        reader_pop(r);
        if (rc != 0)
            return rc;
        int k = snprintf(buf + used, sizeof buf - used, "%s%.*s:%s", used ? "," : "",
                         (int)klen, key, v ? v : "");
        if (k > 0 && (size_t)k < sizeof buf - used)
            used += (size_t)k;
    }
    if (rc < 0)
        return reader_json_failed(r);
    if (used > 0 && (a->config = snapshot_intern(r->ctx, buf, used)) == NULL)
        return reader_nomem(r);
    return 0;
}

/* A top_tensors stack read into one line of text, frame by frame. */
struct site_text {
    char text[1024];
    size_t used;
    const char *file, *function;
    int64_t line;
};
#define SNAP_TOP_FRAME_SCHEMA(X) /* allocator.top_tensors[].stack[] */ \
    X(site_text, file, file, RAWN, 0)                                 \
    X(site_text, line, line, I64N, 0)                                 \
    X(site_text, function, function, RAWN, 0)

static const struct field frame_fields[] = {SNAP_TOP_FRAME_SCHEMA(SCHEMA_FIELD)};

static int rd_frame(struct reader *r, void *obj, size_t i)
{
    struct site_text *s = obj;
    s->file = s->function = NULL;
    s->line = -1;
    int rc = reader_object(r, s, frame_fields, NFIELDS(frame_fields));
    if (rc != 0)
        return rc;
    const char *base = s->file ? strrchr(s->file, '/') : NULL; /* as report shows frames */
    int k = snprintf(s->text + s->used, sizeof s->text - s->used, "%s%s:%" PRId64 ":%s",
                     i ? " < " : "", base ? base + 1 : s->file ? s->file : "?", s->line,
                     s->function ? s->function : "?");
    if (k > 0 && (size_t)k < sizeof s->text - s->used)
        s->used += (size_t)k;
    return 0;
}

static int rd_site_stack(struct reader *r, void *obj)
{
    struct snap_tensor_site *site = obj;
    struct site_text s = {.used = 0};
    int rc = reader_array(r, &s, rd_frame);
    if (rc == 0 && (site->where = snapshot_intern(r->ctx, s.text, s.used)) == NULL)
        return reader_nomem(r);
    return rc;
}

static const struct field site_fields[] = {SNAP_TOP_TENSOR_SCHEMA(SCHEMA_FIELD)};

static int rd_site(struct reader *r, void *obj, size_t i)
{
    struct snap_allocator *a = obj;
    struct snap_tensor_site spare;
    struct snap_tensor_site *site = i < SNAP_TOP_TENSORS ? &a->top[i] : &spare;
    memset(site, 0, sizeof *site);
    int rc = reader_object(r, site, site_fields, NFIELDS(site_fields));
    if (rc == 0 && i < SNAP_TOP_TENSORS)
        a->ntop = i + 1;
    return rc;
}

/* null without the allocator's history; else its largest tensors' lines. */
static int rd_top_tensors(struct reader *r, void *obj)
{
    struct snap_allocator *a = obj;
    if (reader_take_null(r))
        return 0;
    a->has_top = true;
    return reader_array(r, a, rd_site);
}

/* roles: null when the layer did not measure them */
static const struct field roles_fields[] = {SNAP_ROLES_SCHEMA(SCHEMA_FIELD)};

static const struct field allocator_fields[] = {
    SNAP_ALLOCATOR_SCHEMA(SCHEMA_FIELD) SNAP_ALLOCATOR_OOM_SCHEMA(SCHEMA_FIELD)};

static int read_allocator(struct reader *r, struct snap_allocator *a)
{
    uint64_t *nums[] = {&a->requested_bytes, &a->allocated_bytes, &a->reserved_bytes,
                        &a->active_bytes, &a->reserved_unallocated_bytes,
                        &a->inactive_split_bytes, &a->largest_free_small,
                        &a->largest_free_large, &a->segments, &a->num_alloc_retries,
                        &a->num_ooms, &a->limit_bytes, &a->device_total_bytes,
                        &a->device_free_bytes, &a->peak_allocated_bytes};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        *nums[i] = SNAP_UNKNOWN;
    a->step = a->peak_step = a->reported_ns = SNAP_UNKNOWN_I64;
    a->origin = (struct snap_origin){NULL, NULL, SNAP_NO_FRAME};
    if (reader_take_null(r))
        return 0;
    a->present = true;
    return reader_object(r, a, allocator_fields, NFIELDS(allocator_fields));
}

int snapshot_read_allocator(struct reader *r, void *obj)
{
    return read_allocator(r, &((struct snap_oom *)obj)->allocator);
}

int snapshot_read_device_allocator(struct reader *r, void *obj)
{
    return read_allocator(r, &((struct snap_device *)obj)->allocator);
}
