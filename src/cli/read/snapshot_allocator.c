/* snapshot_allocator.c - oom.allocator: PyTorch's figures at its OOM. */
#include "snapshot_allocator.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "snapshot.h"
#include "snapshot_tensors.h"

static const struct field largest_free_fields[] = {
    {"small", F_U64N, offsetof(struct snap_allocator, largest_free_small), NULL},
    {"large", F_U64N, offsetof(struct snap_allocator, largest_free_large), NULL},
};

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

/* One Python frame of a top_tensors stack, appended to the site's text. */
struct site_read {
    char text[1024];
    size_t used;
    const char *file, *function;
    int64_t line;
    struct snap_tensor_site *site;
};

static const struct field frame_fields[] = {
    FIELD_AT("file", site_read, file, F_RAWN),
    FIELD_AT("line", site_read, line, F_I64N),
    FIELD_AT("function", site_read, function, F_RAWN),
};

static int rd_frame(struct reader *r, void *obj, size_t i)
{
    struct site_read *s = obj;
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
    struct site_read *s = obj;
    s->used = 0;
    s->text[0] = '\0';
    int rc = reader_array(r, s, rd_frame);
    if (rc == 0 && (s->site->where = snapshot_intern(r->ctx, s->text, s->used)) == NULL)
        return reader_nomem(r);
    return rc;
}

static int rd_site_u64(struct reader *r, uint64_t *out)
{
    return reader_u64(r, out, true);
}

static int rd_site_bytes(struct reader *r, void *obj)
{
    return rd_site_u64(r, &((struct site_read *)obj)->site->bytes);
}

static int rd_site_count(struct reader *r, void *obj)
{
    return rd_site_u64(r, &((struct site_read *)obj)->site->count);
}

static const struct field site_fields[] = {
    FIELD_FN("stack", rd_site_stack),
    FIELD_FN("bytes", rd_site_bytes),
    FIELD_FN("count", rd_site_count),
};

static int rd_site(struct reader *r, void *obj, size_t i)
{
    struct snap_allocator *a = obj;
    struct snap_tensor_site spare;
    struct site_read s = {.site = i < SNAP_TOP_TENSORS ? &a->top[i] : &spare};
    memset(s.site, 0, sizeof *s.site);
    int rc = reader_object(r, &s, site_fields, NFIELDS(site_fields));
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

static const struct field role_fields[] = {
    {"parameters", F_U64, offsetof(struct snap_allocator, roles[SNAP_ROLE_PARAMETERS]), NULL},
    {"buffers", F_U64, offsetof(struct snap_allocator, roles[SNAP_ROLE_BUFFERS]), NULL},
    {"gradients", F_U64, offsetof(struct snap_allocator, roles[SNAP_ROLE_GRADIENTS]), NULL},
    {"optimizer_state", F_U64, offsetof(struct snap_allocator, roles[SNAP_ROLE_OPTIMIZER]), NULL},
    {"other", F_U64, offsetof(struct snap_allocator, roles[SNAP_ROLE_OTHER]), NULL},
    {"optimizers", F_STRN, offsetof(struct snap_allocator, optimizers), NULL},
};

/* null when the layer did not measure them. */
static int rd_roles(struct reader *r, void *obj)
{
    struct snap_allocator *a = obj;
    if (reader_take_null(r))
        return 0;
    a->has_roles = true;
    return reader_object(r, a, role_fields, NFIELDS(role_fields));
}

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
