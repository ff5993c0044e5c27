/* stream_read.c - the reader of stream files (docs/stream-format.md).
 *
 * A stream is "CMTSTRM1" then records: a 16-byte head (magic "CMTR",
 * payload length, CRC-32 of the payload, type, 3 bytes of padding, all
 * little-endian) and the payload, JSON text.  A writer killed half-way
 * leaves a last record that is short or fails its checksum: we stop there,
 * say where and why, and use the last complete checkpoint before it.
 * Nothing in the file is trusted: lengths are checked against what is left,
 * payloads against their checksum, and the checkpoint itself then goes
 * through the ordinary snapshot reader.
 */
#include "stream_read.h"

#include "crc.h"
#include "snapshot.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEAD 16
#define ROW_JSON_MAX 120 /* the longest JSON row: six numbers at most 20 digits */
#define RECORD_MAGIC FORMAT_STREAM_RECORD_MAGIC

bool stream_is(const char *buf, size_t len)
{
    return len >= 8 && memcmp(buf, STREAM_FILE_MAGIC, 8) == 0;
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

/* The integer after "key": in p[0..n), or def. */
static int64_t field(const char *p, size_t n, const char *key, int64_t def)
{
    size_t k = strlen(key);
    for (size_t i = 0; i + k < n; i++)
        if (memcmp(p + i, key, k) == 0) {
            int64_t v = 0;
            bool neg = false;
            size_t j = i + k;
            if (j < n && p[j] == '-') {
                neg = true;
                j++;
            }
            if (j >= n || p[j] < '0' || p[j] > '9')
                return def;
            for (; j < n && p[j] >= '0' && p[j] <= '9' && v < INT64_MAX / 10; j++)
                v = v * 10 + (p[j] - '0');
            return neg ? -v : v;
        }
    return def;
}

static void escape(const char *s, char *out, size_t n)
{
    size_t o = 0;
    for (; *s && o + 7 < n; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c < 0x20) {
            o += (size_t)snprintf(out + o, n - o, "\\u%04x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    out[o] = '\0';
}

struct span {
    size_t off, len;
    char type; /* 'C' (JSON rows inside it) or 'E' (binary rows) */
};

#define ROW 32
#define KIND_NAME(sym, name, on_device, with_context, placed, phrase) name,
static const char *const kinds[] = {FORMAT_KINDS(KIND_NAME)}; /* the writer's numbers */
#undef KIND_NAME

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* One binary row as the snapshot's JSON row; 0 for a row of unknown kind. */
static int json_row(const unsigned char *r, char *out, size_t n)
{
    if (r[30] >= sizeof kinds / sizeof kinds[0])
        return 0;
    int16_t pool = (int16_t)(uint16_t)(r[28] | r[29] << 8);
    int k = snprintf(out, n, "[%" PRId64 ",%d,\"%s\",%" PRId64 ",%" PRIu32 ",%" PRIu64 "]",
                     (int64_t)le64(r), pool, kinds[r[30]], (int64_t)le64(r + 8),
                     le32(r + 24), le64(r + 16));
    return k > 0 && (size_t)k < n ? k : 0;
}

/* What a pass over the records found: the records that hold event rows
 * ('E', and checkpoints, whose events.data a writer may fill) in file
 * order, and the last complete checkpoint's payload. */
struct scan {
    struct span *rows;
    size_t nrows, cap;
    struct span ck; /* len 0: none */
};

/* The event rows of a checkpoint: what lies between `"data":[` of its
 * "events" object and the `]}` that closes it (rows hold no braces), with
 * the leading newline and space. */
static bool rows_of(const char *p, size_t n, struct span *r)
{
    static const char ev[] = "\"events\":{\"cap\":", data[] = "\"data\":[";
    size_t i = 0;
    for (; i + sizeof ev - 1 <= n; i++)
        if (memcmp(p + i, ev, sizeof ev - 1) == 0)
            break;
    for (; i + sizeof data - 1 <= n; i++)
        if (memcmp(p + i, data, sizeof data - 1) == 0)
            break;
    if (i + sizeof data - 1 > n)
        return false;
    size_t start = i + sizeof data - 1, j = start;
    for (; j + 1 < n; j++) {
        if (p[j] == '{' || p[j] == '}')
            break;
    }
    /* the rows end where "]}" closes the object */
    if (j + 1 >= n || p[j] != '}' || j == start || p[j - 1] != ']')
        return false;
    size_t end = j - 1; /* the ']' of "data" */
    while (start < end && (p[start] == '\n' || p[start] == ' '))
        start++;
    r->off = start;
    r->len = end - start;
    return true;
}

/* Why reading stops at the record at off, in info->stopped; false when the
 * record is whole (its type and payload length in *type, *plen). */
static bool cut_at(const char *buf, size_t len, size_t off, char *type, uint32_t *plen,
                   struct stream_info *info)
{
    const unsigned char *u = (const unsigned char *)buf + off;
    info->stopped_at = off;
    if (off == len) {
        snprintf(info->stopped, sizeof info->stopped, "end of file");
    } else if (len - off < HEAD) {
        snprintf(info->stopped, sizeof info->stopped, "a truncated record head at "
                 "byte %zu (the writer stopped while writing it: killed, or its disk was "
                 "full)", off);
    } else if (le32(u) != RECORD_MAGIC) {
        snprintf(info->stopped, sizeof info->stopped, "no record marker at byte %zu", off);
    } else {
        *plen = le32(u + 4);
        *type = (char)u[12];
        return false;
    }
    return true;
}

/* A header of another version (whatever its checksum, which another writer
 * may compute otherwise) is not damage but a reader of another release:
 * versions before this one were never released. */
static int other_version(const char *name, int64_t v, struct cli_error *err)
{
    if (v > FORMAT_STREAM_VERSION)
        return errors_set(err, CLI_EVERSION, "cannot read stream '%s': its format "
                          "version %" PRId64 " is newer than this cumemtrace, which "
                          "reads version %d", name, v, FORMAT_STREAM_VERSION);
    return errors_set(err, CLI_EVERSION, "cannot read stream '%s': its format "
                      "version %" PRId64 " is from before this cumemtrace's first "
                      "release, which reads version %d; record the program again "
                      "with this cumemtrace", name, v, FORMAT_STREAM_VERSION);
}

/* Reads the records up to the first that is cut or damaged.  Returns 0, or
 * a CLI_E* code with err set. */
static int scan_records(const char *name, const char *buf, size_t len, struct scan *sc,
                        struct stream_info *info, struct cli_error *err)
{
    const unsigned char *u = (const unsigned char *)buf;
    bool header = false;
    char type;
    uint32_t plen;
    for (size_t off = 8; !cut_at(buf, len, off, &type, &plen, info); off += HEAD + plen) {
        const char *p = buf + off + HEAD;
        int64_t other = !header && type == 'H' && plen <= len - off - HEAD
                            ? field(p, plen, "\"version\":", 0)
                            : 0;
        if (other > 0 && other != FORMAT_STREAM_VERSION)
            return other_version(name, other, err);
        if (plen > len - off - HEAD) {
            snprintf(info->stopped, sizeof info->stopped, "a record of %" PRIu32 " bytes "
                     "at byte %zu cut short after %zu (the writer stopped while writing "
                     "it: killed, or its disk was full)", plen, off, len - off - HEAD);
            break;
        }
        if (crc32c(u + off + HEAD, plen) != le32(u + off + 8)) {
            snprintf(info->stopped, sizeof info->stopped, "a checksum mismatch in the "
                     "record at byte %zu", off);
            break;
        }
        if (!header) {
            if (type != 'H' || other != FORMAT_STREAM_VERSION) {
                snprintf(info->stopped, sizeof info->stopped, "a first record that is "
                         "not a version %d header", FORMAT_STREAM_VERSION);
                break;
            }
            header = true;
            int64_t f = field(p, plen, "\"flush_ms\":", 1000);
            info->flush_ms = f > 0 && f < 86400000 ? (unsigned)f : 1000;
        } else if (type == 'C' || (type == 'E' && plen % ROW == 0)) {
            if (type == 'C') {
                sc->ck = (struct span){off + HEAD, plen, 'C'};
                info->checkpoints++;
                int64_t t = field(p, plen < 4096 ? plen : 4096, "\"dump_time_ns\":", -1);
                info->state_ns = t;
                if (t > info->alive_ns)
                    info->alive_ns = t;
            }
            if (snapshot_vec_reserve((void **)&sc->rows, &sc->cap, sizeof *sc->rows,
                                     sc->nrows + 1) != 0)
                return errors_set(err, CLI_ENOMEM, "cannot read stream '%s': out "
                                  "of memory", name);
            sc->rows[sc->nrows++] = (struct span){off + HEAD, plen, type};
        } else if (type == 'B') {
            info->heartbeats++;
            int64_t t = field(p, plen, "\"t_ns\":", -1);
            if (t > info->alive_ns)
                info->alive_ns = t;
        } else {
            info->skipped++; /* a newer writer's record: readable around it */
        }
        info->records++;
    }
    if (!header)
        return errors_set(err, CLI_ETRUNC, "cannot read stream '%s': %s before its "
                          "header", name, info->stopped);
    if (sc->ck.len == 0)
        return errors_set(err, CLI_ETRUNC, "cannot read stream '%s': no complete "
                          "checkpoint (stopped at %s; the process ended within its "
                          "first flush)", name, info->stopped);
    return 0;
}

/* Appends n bytes at p to d + *o, after a separator unless it is the first. */
static void put_row(char *d, size_t *o, bool *first, const char *p, size_t n)
{
    if (!*first) {
        memcpy(d + *o, ",\n ", 3);
        *o += 3;
    }
    memcpy(d + *o, p, n);
    *o += n;
    *first = false;
}

/* Appends the JSON rows of sc's committed records at d + *o. */
static void put_rows(const char *buf, const struct scan *sc, char *d, size_t *o)
{
    bool first = true;
    for (size_t i = 0; i < sc->nrows; i++) {
        const struct span *sp = &sc->rows[i];
        struct span r;
        if (sp->type == 'C' && rows_of(buf + sp->off, sp->len, &r) && r.len > 0)
            put_row(d, o, &first, buf + sp->off + r.off, r.len);
        const unsigned char *u = (const unsigned char *)buf + sp->off;
        for (size_t k = 0; sp->type == 'E' && k < sp->len / ROW; k++, u += ROW) {
            char row[ROW_JSON_MAX];
            int rl = json_row(u, row, sizeof row);
            if (rl > 0)
                put_row(d, o, &first, row, (size_t)rl);
        }
    }
}

/* The last checkpoint with reason "killed", a "recovered" object, and for
 * its events.data every row a checkpoint committed, in file order (each
 * checkpoint's rows are new since the one before; the writer writes them
 * in 'E' records before it): rows after the last one are uncommitted (the
 * writer was killed among them), and left out. */
static int assemble(const char *name, const char *buf, struct scan *sc,
                    const struct stream_info *info, char **doc, size_t *doclen,
                    struct cli_error *err)
{
    /* The checkpoint opens {"format":"cumemtrace","version":N,"reason":"stream", */
    const char *ck = buf + sc->ck.off;
    static const char reason[] = "\"reason\":\"stream\"";
    const char *at = NULL;
    for (size_t i = 0; i + sizeof reason - 1 <= sc->ck.len && i < 200 && at == NULL; i++)
        if (memcmp(ck + i, reason, sizeof reason - 1) == 0)
            at = ck + i;
    struct span last_rows;
    if (at == NULL || !rows_of(ck, sc->ck.len, &last_rows))
        return errors_set(err, CLI_EVALUE, "cannot read stream '%s': its checkpoint at "
                          "byte %zu is not a stream snapshot", name, sc->ck.off - HEAD);
    while (sc->nrows > 0 && sc->rows[sc->nrows - 1].off > sc->ck.off)
        sc->nrows--;
    size_t rows_len = 0;
    for (size_t i = 0; i < sc->nrows; i++) {
        struct span r;
        if (sc->rows[i].type == 'E')
            rows_len += sc->rows[i].len / ROW * (ROW_JSON_MAX + 3);
        else if (rows_of(buf + sc->rows[i].off, sc->rows[i].len, &r))
            rows_len += r.len + 3;
    }
    char ename[2048], ewhy[400], rec[3000];
    escape(name, ename, sizeof ename);
    escape(info->stopped, ewhy, sizeof ewhy);
    int rn = snprintf(rec, sizeof rec, "\"reason\":\"killed\",\"recovered\":{\"stream\":"
                      "\"%s\",\"state_ns\":%" PRId64 ",\"alive_ns\":%" PRId64
                      ",\"flush_ms\":%u,\"stopped\":\"%s\"}", ename, info->state_ns,
                      info->alive_ns, info->flush_ms, ewhy);
    size_t head = (size_t)(at - ck);
    size_t mid = last_rows.off - head - (sizeof reason - 1);        /* up to the rows */
    size_t tail = sc->ck.len - last_rows.off - last_rows.len;       /* after them */
    char *d = malloc(head + (size_t)rn + mid + rows_len + tail + 1);
    if (d == NULL)
        return errors_set(err, CLI_ENOMEM, "cannot read stream '%s': out of memory", name);
    memcpy(d, ck, head);
    memcpy(d + head, rec, (size_t)rn);
    memcpy(d + head + (size_t)rn, at + sizeof reason - 1, mid);
    size_t o = head + (size_t)rn + mid;
    put_rows(buf, sc, d, &o);
    memcpy(d + o, ck + last_rows.off + last_rows.len, tail);
    o += tail;
    d[o] = '\0';
    *doc = d;
    *doclen = o;
    return 0;
}

int stream_recover(const char *name, const char *buf, size_t len, char **doc,
                   size_t *doclen, struct stream_info *info, struct cli_error *err)
{
    memset(info, 0, sizeof *info);
    info->state_ns = info->alive_ns = -1;
    if (!stream_is(buf, len))
        return errors_set(err, CLI_EFOREIGN, "cannot read stream '%s': it does not "
                          "start with " STREAM_FILE_MAGIC, name);
    struct scan sc = {0};
    int rc = scan_records(name, buf, len, &sc, info, err);
    if (rc == 0)
        rc = assemble(name, buf, &sc, info, doc, doclen, err);
    free(sc.rows);
    return rc;
}

void stream_staleness(const struct stream_info *info, char *out, size_t n)
{
    /* The age holds for a stream its process's end stopped: one whose writes
     * failed (a full disk) stops early, and its process may have run on. */
    double lag = (double)(info->alive_ns - info->state_ns) / 1e9 + info->flush_ms / 1e3;
    snprintf(out, n, "state recorded at most %.1f s before the process ended, if its end "
             "is what stopped the stream (last checkpoint %.1f s before its last sign of "
             "life, flushes every %u ms; reading stopped at %s); a stream whose writes "
             "failed (a full disk) stops early, and then the process may have run on "
             "after its last sign of life", lag,
             (double)(info->alive_ns - info->state_ns) / 1e9, info->flush_ms,
             info->stopped);
}
