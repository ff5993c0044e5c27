/* reader.h - the state of one snapshot read, and table-driven reading of
 * JSON values into the model's structs with the field path kept for
 * messages ("devices[0].peak_bytes is a string, expected ...").
 *
 * Internal to the snapshot reader: snapshot_read.c (the document, header
 * and error precedence), snapshot_sections.c (the small sections),
 * snapshot_bulk.c (events and stacks, streamed).  Views never see it.
 */
#ifndef CUMEMTRACE_CLI_READER_H
#define CUMEMTRACE_CLI_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "arena.h"
#include "errors.h"
#include "hmap.h"
#include "json.h"
#include "snapshot.h"

#define PATH_MAX_DEPTH 16 /* deeper than any field path of the format */

struct path_elem {
    const char *key; /* NULL for an array index */
    size_t index;
};

struct read_module; /* snapshot_bulk.c */

struct reader {
    struct json_cursor c;
    struct snapctx *ctx;
    struct snapshot *s;
    struct cli_error *err;
    const char *name;
    size_t len;
    struct path_elem path[PATH_MAX_DEPTH];
    int depth;
    uint32_t *tmp; /* frames of the stack being read */
    size_t tmp_cap;
    struct arena scratch;    /* lives for one read */
    struct hmap raw_frames;  /* raw frame bytes -> frame index (in scratch) */
    char *key;               /* the raw frame being looked up */
    size_t key_cap;
    struct hmap frame_bytes; /* a frame object's bytes -> as raw_frames (in scratch) */
    char *release_from;      /* a mapped file: its pages from here ... */
    const char *release_at;  /* ... are given back once the cursor is here */
    const char *format;      /* top-level "format" if a string (in the buffer) */
    int64_t version;         /* top-level "version" ... */
    bool have_version;       /* ... if present */
    bool version_int;        /* ... and an integer */
    bool data_read; /* events.data seen (columns must not change after) */
    bool plain_rows; /* events.data: the documented columns, in order */
    int col_of_pos[16]; /* events column at row position j, -1 unknown */
    size_t ncols;
    struct read_module *mods; /* "modules": name -> symbolizer handle */
    size_t nmods, mods_cap;
    uint32_t *expand; /* runs [n, frame...] of inlined chains, see rd_frame */
    size_t nexpand, expand_cap;
};

/* One row of a field table: the JSON key, how to read it, where it goes. */
enum ftype {
    F_U64, F_U64N, F_I64, F_I64N, F_BOOLN, F_STR, F_STRN,
    F_RAWN, /* a string or null, left in the buffer (valid during the read) */
    F_KIND, /* a kind's name (enum snap_kind), or null: the member kept */
    F_FN,
    F_ARRAY, /* an array: `each` reads each element into the object */
    F_LIST, /* as F_ARRAY, or null */
    F_OBJECT, /* an object: `sub`, the member's table, reads it */
    F_OPTIONAL, /* as F_OBJECT, or null: the member's first field, present, says which */
    F_FLAG /* an object or null whose keys fill the row's own struct: the bool says which */
};

struct field {
    const char *name;
    enum ftype type;
    size_t off;
    int (*fn)(struct reader *r, void *obj);
    int (*each)(struct reader *r, void *obj, size_t i);
    const struct field *sub;
    size_t nsub;
};

#define FIELD_FN(key, rd) {.name = key, .type = F_FN, .fn = rd} /* rd gets obj + off */
#define NFIELDS(t) (sizeof(t) / sizeof((t)[0]))

/* A row of a schema table (snapshot.h's SNAP_*_SCHEMA) as a field of the
 * row's struct; SCHEMA_FIELD_##type(st, key, member) for one read into a
 * struct around it (host_pinned's stats).  The build refuses a row whose
 * member is not of its type's C type: it would read into the wrong bytes. */
#define SCHEMA_FIELD(st, key, member, type, json) SCHEMA_FIELD_##type(st, key, member)
#define SCHEMA_OFF(st, member, ctype)                                                     \
    (offsetof(struct st, member) + 0 * sizeof(struct {                                    \
         _Static_assert(_Generic(((struct st *)0)->member, ctype: 1, default: 0),         \
                        "struct " #st "." #member " is not " #ctype ", as its row says"); \
         int ok; }))
#define SCHEMA_AS(st, key, member, ftype, ctype) \
    {.name = #key, .type = ftype, .off = SCHEMA_OFF(st, member, ctype)},
/* a nested value of a shape read alike wherever it is: fn gets the member */
#define SCHEMA_NESTED(st, key, member, ctype, rd) \
    {.name = #key, .type = F_FN, .off = SCHEMA_OFF(st, member, ctype), .fn = rd},
#define SCHEMA_FIELD_GROUPS(st, key, member) \
    SCHEMA_NESTED(st, key, member, struct snap_groups, rd_groups)
#define SCHEMA_FIELD_PHASE_ROWS(st, key, member) \
    SCHEMA_NESTED(st, key, member, struct snap_phase_rows, snapshot_read_by_phase)
/* PyTorch's objects (snapshot_tensors.h) */
#define SCHEMA_FIELD_TENSORS(st, key, member) \
    SCHEMA_NESTED(st, key, member, struct snap_tensors, snapshot_read_tensors)
#define SCHEMA_FIELD_PEAK_TENSORS(st, key, member) \
    SCHEMA_NESTED(st, key, member, struct snap_tensors, snapshot_read_peak_tensors)
#define SCHEMA_FIELD_GROWTH(st, key, member) \
    SCHEMA_NESTED(st, key, member, struct snap_growth, snapshot_read_growth)
#define SCHEMA_FIELD_SERIES(st, key, member) \
    SCHEMA_NESTED(st, key, member, struct snap_series, snapshot_read_series)
#define SCHEMA_FIELD_ORIGIN(st, key, member) \
    SCHEMA_NESTED(st, key, member, struct snap_origin, snapshot_read_origin)
#define SCHEMA_FIELD_U64(st, key, member) SCHEMA_AS(st, key, member, F_U64, uint64_t)
#define SCHEMA_FIELD_U64N(st, key, member) SCHEMA_AS(st, key, member, F_U64N, uint64_t)
#define SCHEMA_FIELD_I64(st, key, member) SCHEMA_AS(st, key, member, F_I64, int64_t)
#define SCHEMA_FIELD_I64N(st, key, member) SCHEMA_AS(st, key, member, F_I64N, int64_t)
#define SCHEMA_FIELD_BOOLN(st, key, member) SCHEMA_AS(st, key, member, F_BOOLN, int)
#define SCHEMA_FIELD_STR(st, key, member) SCHEMA_AS(st, key, member, F_STR, const char *)
#define SCHEMA_FIELD_STRN(st, key, member) SCHEMA_AS(st, key, member, F_STRN, const char *)
#define SCHEMA_FIELD_RAWN(st, key, member) SCHEMA_AS(st, key, member, F_RAWN, const char *)
#define SCHEMA_FIELD_KIND(st, key, member) SCHEMA_AS(st, key, member, F_KIND, uint8_t)
#define SCHEMA_FIELD_FN(st, key, fn) FIELD_FN(#key, fn),
#define SCHEMA_FIELD_ARRAY(st, key, rd) {.name = #key, .type = F_ARRAY, .each = rd},
#define SCHEMA_FIELD_LIST(st, key, rd) {.name = #key, .type = F_LIST, .each = rd},
/* a member read by the table named after it, member##_fields */
#define SCHEMA_FIELD_OBJECT(st, key, member)                                \
    {.name = #key, .type = F_OBJECT, .off = offsetof(struct st, member), \
     .sub = member##_fields, .nsub = NFIELDS(member##_fields)},
/* the key's table, key##_fields, read into the row's struct; member: its bool */
#define SCHEMA_FIELD_FLAG(st, key, member)                                         \
    {.name = #key, .type = F_FLAG, .off = SCHEMA_OFF(st, member, bool), .sub = key##_fields, \
     .nsub = NFIELDS(key##_fields)},
#define SCHEMA_FIELD_OPTIONAL(st, key, member)                                                \
    {.name = #key, .type = F_OPTIONAL, .off = SCHEMA_OFF(st, member.present, bool),         \
     .sub = member##_fields, .nsub = NFIELDS(member##_fields) + 0 * sizeof(struct {         \
         _Static_assert(offsetof(struct st, member.present) == offsetof(struct st, member), \
                        "struct " #st "." #member " does not start with its present");     \
         int ok; })},
#define SCHEMA_FIELD_SKIP(st, key, none)


/* ---- messages: each names the file, the field path and the cause ---- */

/* The field path (for messages) grows and shrinks as the reader descends
 * (inline: a snapshot's rows push and pop millions of times). */
static inline void reader_push_key(struct reader *r, const char *key)
{
    if (r->depth < PATH_MAX_DEPTH)
        r->path[r->depth] = (struct path_elem){key, 0};
    r->depth++;
}

static inline void reader_push_index(struct reader *r, size_t i)
{
    if (r->depth < PATH_MAX_DEPTH)
        r->path[r->depth] = (struct path_elem){NULL, i};
    r->depth++;
}

static inline void reader_pop(struct reader *r)
{
    r->depth--;
}

/* "a string", "an object", ... for messages. */
const char *reader_type_text(enum json_type t);

/* Each sets r->err and returns its CLI_E* code: the cursor's sticky error
 * (truncated, not JSON, out of memory); out of memory; the value at the
 * cursor is not `expected` (rc: the json_get_* answer); the value at the
 * current path is wrong as `what` says ("has no \"id\" of 1 or more"). */
int reader_json_failed(struct reader *r);
int reader_nomem(struct reader *r);
int reader_bad_value(struct reader *r, int rc, const char *expected);
int reader_invalid(struct reader *r, const char *what);

/* ---- scalars: 0, or the error code with r->err set ---- */

/* Consumes a null at the cursor; false (nothing consumed) for other values. */
bool reader_take_null(struct reader *r);
/* nullable: null reads as SNAP_UNKNOWN / SNAP_UNKNOWN_I64 / NULL. */
int reader_u64(struct reader *r, uint64_t *out, bool nullable);
int reader_i64(struct reader *r, int64_t *out, bool nullable);
/* A string, interned in the context. */
int reader_str(struct reader *r, const char **out, bool nullable);
/* A string or null, left in the buffer (valid during the read only). */
int reader_raw(struct reader *r, const char **out);

/* ---- objects and arrays, table-driven ---- */

/* Whether an object key as json_next_key hands it out (len bytes, not
 * NUL-terminated) is name; the first byte first, as most keys differ there. */
static inline bool reader_key_is(const char *key, size_t len, const char *name)
{
    /* byte by byte: name's NUL ends it where key is longer (a key holds no
     * NUL in its len bytes), so name[len] is in bounds when reached */
    for (size_t i = 0; i < len; i++)
        if (name[i] != key[i])
            return false;
    return name[len] == '\0';
}

/* An object: known keys through the table, the others skipped. */
int reader_object(struct reader *r, void *obj, const struct field *fields,
                  size_t nfields);
/* A mapped file's pages far behind the cursor are given back as the pass
 * goes (a large snapshot is then never resident whole): what the reader
 * keeps of the buffer must be copied, as reader_str and reader_raw do. */
void reader_release_init(struct reader *r);
void reader_release(struct reader *r);

/* The next element of a growing array (*v: n elements, room for *cap),
 * zeroed; the caller counts it once it is read.  NULL, with r->err set
 * (CLI_ENOMEM), when out of memory. */
void *reader_append(struct reader *r, void **v, size_t n, size_t *cap, size_t size);
#define READER_APPEND(r, v, n, cap) reader_append(r, (void **)&(v), n, &(cap), sizeof *(v))

/* An array: fn for each element, with its index. */
int reader_array(struct reader *r, void *obj,
                 int (*fn)(struct reader *r, void *obj, size_t i));
/* An object or null: null leaves *present false. */
int reader_optional_object(struct reader *r, void *obj, bool *present,
                           const struct field *fields, size_t nfields);

#endif
