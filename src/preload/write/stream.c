/* stream.c - a record of the process that survives SIGKILL.
 *
 * The background thread appends to "<snapshot name>.stream" (the exit
 * snapshot's name with ".stream" for ".json") every CUMEMTRACE_FLUSH_MS:
 * a checkpoint - the whole state, serialised by the same code as every
 * snapshot (serialise_state) - when anything was allocated, freed or
 * failed since the last one, else a heartbeat that says the process was
 * still alive.  The allocation path writes nothing: it only updates the
 * tracker's memory, as without a stream.
 *
 * The event rows new since the last checkpoint come before it as binary
 * records (32 bytes a row, a copy: no formatting), so a checkpoint's cost
 * follows the state, not the event rate; the checkpoint's own record,
 * written last, commits them (the reader ignores rows no checkpoint
 * follows).
 *
 * Records are length-prefixed and checksummed (docs/stream-format.md), so
 * a writer killed half-way through a record leaves a file that reads up to
 * its last complete record.  A checkpoint costs what a snapshot costs; to
 * keep the thread under 0.5% of a CPU the next checkpoint waits at least 199
 * times the last one's cost, its rows left out (heartbeats meanwhile): a
 * state that large is then older than one flush interval, and the reader
 * states how old.  The rows cost what the event rate makes them cost
 * (a copy, a checksum and a write a row).
 * Disk use is bounded by CUMEMTRACE_STREAM_MAX: past it the file is
 * replaced (temporary file + rename) by one holding only the latest
 * checkpoint, which carries every total and the peak attribution.
 *
 * No descriptor is kept between flushes: each flush opens the file by its
 * absolute name (a host's chdir changes nothing), checks it is the file
 * created (device and inode) and closes it, and each checkpoint is
 * serialised into a memfd of its own, closed after.  A kept descriptor
 * took a low number for the process's life: a host that closed every fd
 * and opened its own files, or dup2()ed its log onto that number, found
 * our checkpoints in its file, and under a low `ulimit -n` it had one
 * descriptor fewer.
 */
#include "stream.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "crc.h"
#include "format.h"
#include "log.h"
#include "oom_ledger.h"
#include "output.h"
#include "own_fd.h"
#include "record.h"
#include "serialise.h"

#define STREAM_MAGIC FORMAT_STREAM_MAGIC        /* file header, 8 bytes */
#define RECORD_MAGIC FORMAT_STREAM_RECORD_MAGIC /* "CMTR" little-endian */

struct record_head {
    uint32_t magic;
    uint32_t length; /* payload bytes */
    uint32_t crc;    /* CRC-32C of the payload (crc.h) */
    uint8_t type;    /* 'H' header, 'C' checkpoint, 'B' heartbeat */
    uint8_t pad[3];
};

static bool created;       /* the file exists, as `id` */
static dev_t id_dev;       /* the file we created (or compacted into) */
static ino_t id_ino;
static bool failed, finished;
static char path[4200];    /* as the messages name it */
static char where[8400];   /* absolute, for every open, rename and unlink */
static uint64_t size;
/* Nothing recorded yet is nothing to checkpoint: the first one waits for
 * the first allocation (the pacing would otherwise hold a real one back). */
static uint64_t last_events, last_oom;
static int64_t next_checkpoint;
static struct record_rows events_written; /* rows already in the file */

bool stream_enabled(void)
{
    return config.stream != CONFIG_STREAM_OFF;
}

static int write_all(int to, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t k = write(to, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int append(int to, char type, const void *payload, size_t n)
{
    struct record_head h = {RECORD_MAGIC, (uint32_t)n,
                            crc32c(payload, n), (uint8_t)type, {0}};
    if (write_all(to, &h, sizeof h) != 0 || write_all(to, payload, n) != 0)
        return -1;
    size += sizeof h + n;
    return 0;
}

static int write_header(int to)
{
    char b[1400];
    int n = snprintf(b, sizeof b,
                     "{\"format\":\"cumemtrace-stream\",\"version\":%d,\"pid\":%d,"
                     "\"start_wall_ns\":%lld,\"flush_ms\":%u}",
                     FORMAT_STREAM_VERSION, (int)getpid(), output_process.start_wall_ns, config.flush_ms);
    size = 0;
    if (write_all(to, STREAM_MAGIC, 8) != 0)
        return -1;
    size = 8;
    return append(to, 'H', b, (size_t)n);
}

static void fail(const char *what)
{
    failed = true;
    log_msg(LOG_WARN, "stream '%s': %s: %s; no record survives a SIGKILL of this "
                      "process (free some space, or set CUMEMTRACE_STREAM=off)",
            path, what, strerror(errno));
}

static int open_stream(void)
{
    char name[4096];
    if (output_expand(output_pattern(), "exit", 0, name, sizeof name) != 0) {
        /* CUMEMTRACE_OUTPUT too long: the snapshot writer says so, in one
         * abbreviated line with the fix; a second one about the same value
         * (unabbreviated, thousands of bytes) would bury it */
        failed = true;
        return -1;
    }
    size_t n = strlen(name);
    if (n > 5 && strcmp(name + n - 5, ".json") == 0)
        name[n - 5] = '\0';
    /* O_EXCL|O_NOFOLLOW: never a file or link that is not ours.  A name
     * taken (a killed process of an earlier container with our pid, or the
     * image we exec'd from) gets the next free "<name>.<n>.stream". */
    int fd = -1;
    for (int k = 0; k < 100; k++) {
        if (k == 0)
            snprintf(path, sizeof path, "%s.stream", name);
        else
            snprintf(path, sizeof path, "%s.%d.stream", name, k);
        fd = own_fd_high(open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_APPEND |
                                        O_CLOEXEC, 0644));
        if (fd >= 0 || errno != EEXIST)
            break;
    }
    if (fd < 0) {
        fail("cannot create it");
        return -1;
    }
    char cwd[4096];
    if (path[0] == '/')
        snprintf(where, sizeof where, "%s", path);
    else if (getcwd(cwd, sizeof cwd) != NULL)
        snprintf(where, sizeof where, "%s/%s", cwd, path);
    else
        snprintf(where, sizeof where, "%s", path);
    struct stat st;
    if (fstat(fd, &st) != 0 || write_header(fd) != 0) {
        close(fd);
        fail("cannot write it");
        return -1;
    }
    close(fd);
    id_dev = st.st_dev;
    id_ino = st.st_ino;
    created = true;
    output_manifest_stream(path);
    return 0;
}

/* The stream file, opened for appending, or -1 (errno set; ESTALE when
 * the name now holds another file: removed or replaced under us). */
static int open_again(void)
{
    int fd = own_fd_high(open(where, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC));
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || st.st_dev != id_dev || st.st_ino != id_ino)) {
        close(fd);
        errno = ESTALE;
        return -1;
    }
    return fd;
}

/* Serialises a checkpoint into a memfd of its own, closed before
 * returning; returns its bytes (mapped, munmap after use) or NULL. */
static char *checkpoint(size_t *len, struct record_rows *ev)
{
    const struct serialise_doc doc = {"stream", 0, NULL, NULL, true};
    int scratch = own_fd_high(memfd_create("cumemtrace-checkpoint", MFD_CLOEXEC));
    if (scratch < 0)
        return NULL;
    void *m = MAP_FAILED;
    off_t end = -1;
    if (serialise_state(scratch, &doc, ev, NULL) == 0 &&
        (end = lseek(scratch, 0, SEEK_CUR)) > 0)
        m = mmap(NULL, (size_t)end, PROT_READ, MAP_PRIVATE, scratch, 0);
    int saved = errno;
    close(scratch); /* the mapping keeps the bytes */
    errno = saved;
    if (m == MAP_FAILED)
        return NULL;
    *len = (size_t)end;
    return m;
}

/* Event rows as 32 little-endian bytes each (docs/stream-format.md):
 * t_ns i64, delta i64, current u64, stack u32, pool i16, kind u8, 0.  The
 * row in memory is the row on disk (byte 31, the padding, is not read): no
 * second copy.  CUDA runs on little-endian CPUs only (x86-64, aarch64,
 * ppc64le), so the library never meets another byte order. */
#define ROW 32
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ &&
                   sizeof(struct record_event) == ROW &&
                   offsetof(struct record_event, delta) == 8 &&
                   offsetof(struct record_event, current) == 16 &&
                   offsetof(struct record_event, stack) == 24 &&
                   offsetof(struct record_event, pool) == 28 &&
                   offsetof(struct record_event, kind) == 30,
               "struct record_event is the stream's row");
static int append_chunk(int to, const struct record_rows *ev)
{
    return ev->nrows == 0 ? 0 : append(to, 'E', ev->rows, ev->nrows * ROW);
}

/* The checkpoint's rows, a record a chunk (the reader joins them). */
static int append_rows(int to, struct record_rows *ev)
{
    int rc = append_chunk(to, ev);
    while (rc == 0 && record_rows_more(ev))
        rc = append_chunk(to, ev);
    return rc;
}

/* Replaces the file by one holding the header and this checkpoint. */
static int compact(const char *doc, size_t len, struct record_rows *ev)
{
    char tmp[8600], actual[8600];
    int t = output_open_temp(where, tmp, sizeof tmp);
    if (t < 0)
        return -1;
    struct stat st;
    if (write_header(t) != 0 || append_rows(t, ev) != 0 || append(t, 'C', doc, len) != 0 ||
        fstat(t, &st) != 0 || output_commit(tmp, where, true, actual, sizeof actual) != 0) {
        close(t);
        unlink(tmp);
        return -1;
    }
    close(t);
    id_dev = st.st_dev; /* the file under the name from now on */
    id_ino = st.st_ino;
    return 0;
}

static void keep_rows(const struct record_rows *ev)
{
    events_written.rows = ev->rows;
    events_written.cap = ev->cap;
}

static void flush_to(int fd, int64_t now)
{
    uint64_t oom = oom_ledger_activity();
    uint64_t events = record_activity();
    bool moved = events != last_events || oom != last_oom;
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    char b[128];
    int n = snprintf(b, sizeof b, "{\"t_ns\":%" PRId64 ",\"wall_ns\":%lld}", now,
                     (long long)wall.tv_sec * 1000000000LL + wall.tv_nsec);
    /* A heartbeat that would pass the bound is not written: a checkpoint,
     * paced as any, replaces the file instead (and says the process lived) */
    bool full = size + sizeof(struct record_head) + (size_t)n > config.stream_max;
    if ((moved || full) && now >= next_checkpoint) {
        int64_t cpu0 = clock_thread_cpu_ns(), rows_ns = 0;
        size_t len = 0;
        struct record_rows ev = events_written;
        char *doc = checkpoint(&len, &ev);
        keep_rows(&ev); /* the buffer, whatever came of the checkpoint */
        if (doc == NULL) {
            fail("cannot serialise a checkpoint");
            return;
        }
        int rc;
        size_t rows = ev.nrows + record_rows_left(&ev);
        size_t chunks = rows / RECORD_ROWS_CHUNK + 1;
        if (size + (1 + chunks) * sizeof(struct record_head) + len + rows * ROW <=
            config.stream_max) {
            /* the rows first: the checkpoint's record commits them, so a
             * writer killed among them leaves the last checkpoint whole */
            int64_t r0 = clock_thread_cpu_ns();
            rc = append_rows(fd, &ev);
            rows_ns = clock_thread_cpu_ns() - r0;
            if (rc == 0)
                rc = append(fd, 'C', doc, len);
        } else {
            /* the new file starts with every row the log still holds */
            munmap(doc, len);
            ev = (struct record_rows){.rows = ev.rows, .cap = ev.cap};
            doc = checkpoint(&len, &ev);
            keep_rows(&ev);
            rc = doc != NULL ? compact(doc, len, &ev) : -1;
        }
        if (doc != NULL)
            munmap(doc, len);
        keep_rows(&ev); /* record_rows_more may have moved it */
        if (rc == 0)
            events_written = ev;
        if (rc != 0) {
            fail("cannot append to it");
            return;
        }
        /* CPU time, not wall time: a loaded machine must not thin them.
         * The rows' own cost is left out: every row is written once
         * whenever it is, so waiting longer saves none of it, and only
         * makes each checkpoint's rows more (their buffers grow, and fresh
         * pages are most of the cost). */
        int64_t state_ns = clock_thread_cpu_ns() - cpu0 - rows_ns;
        next_checkpoint = now + 199 * (state_ns > 0 ? state_ns : 0);
        last_events = events;
        last_oom = oom;
        return;
    }
    if (full)
        return;
    if (append(fd, 'B', b, (size_t)n) != 0)
        fail("cannot append to it");
}

void stream_flush(int64_t now)
{
    if (!stream_enabled() || failed || finished)
        return;
    if (!created && open_stream() != 0)
        return;
    int fd = open_again();
    if (fd < 0 && (errno == EMFILE || errno == ENFILE))
        return; /* the host uses every descriptor it may: the next flush tries */
    if (fd < 0 && errno == ESTALE) {
        failed = true;
        log_msg(LOG_WARN, "stream '%s': removed or replaced by another file; no record "
                          "survives a SIGKILL of this process (leave the file alone, or "
                          "set CUMEMTRACE_STREAM=off)", path);
        return;
    }
    if (fd < 0) {
        fail("cannot open it again");
        return;
    }
    flush_to(fd, now);
    close(fd);
}

void stream_finish(bool snapshot_written)
{
    if (finished)
        return;
    finished = true;
    struct stat st;
    /* only the file we created: a host's file under that name stays */
    if (created && snapshot_written && config.stream == CONFIG_STREAM_AUTO &&
        lstat(where, &st) == 0 && st.st_dev == id_dev && st.st_ino == id_ino)
        unlink(where);
}

void stream_atfork_child(void)
{
    created = false; /* the child makes its own file */
    failed = finished = false;
    size = 0;
    last_events = last_oom = 0;
    next_checkpoint = 0;
    /* the child's copy of the row buffer is its own */
    events_written = (struct record_rows){.rows = events_written.rows,
                                          .cap = events_written.cap};
}
