/* snapshot_allocator.c - oom.allocator: PyTorch's figures at its OOM. */
#include "snapshot_allocator.h"

#include <stddef.h>
#include <stdio.h>

#include "snapshot.h"

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

static const struct field allocator_fields[] = {
    FIELD(snap_allocator, name, F_STRN),
    FIELD(snap_allocator, version, F_STRN),
    FIELD(snap_allocator, requested_bytes, F_U64N),
    FIELD(snap_allocator, allocated_bytes, F_U64N),
    FIELD(snap_allocator, reserved_bytes, F_U64N),
    FIELD(snap_allocator, active_bytes, F_U64N),
    FIELD(snap_allocator, reserved_unallocated_bytes, F_U64N),
    FIELD(snap_allocator, inactive_split_bytes, F_U64N),
    FIELD(snap_allocator, segments, F_U64N),
    FIELD(snap_allocator, num_alloc_retries, F_U64N),
    FIELD(snap_allocator, num_ooms, F_U64N),
    FIELD(snap_allocator, limit_bytes, F_U64N),
    FIELD(snap_allocator, device_total_bytes, F_U64N),
    FIELD(snap_allocator, device_free_bytes, F_U64N),
    FIELD_FN("largest_free_block_bytes", rd_largest_free),
    FIELD_FN("config", rd_config),
};

static int read_allocator(struct reader *r, struct snap_allocator *a)
{
    uint64_t *nums[] = {&a->requested_bytes, &a->allocated_bytes, &a->reserved_bytes,
                        &a->active_bytes, &a->reserved_unallocated_bytes,
                        &a->inactive_split_bytes, &a->largest_free_small,
                        &a->largest_free_large, &a->segments, &a->num_alloc_retries,
                        &a->num_ooms, &a->limit_bytes, &a->device_total_bytes,
                        &a->device_free_bytes};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        *nums[i] = SNAP_UNKNOWN;
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
