/* python_walk.c - the cheap walk of the calling thread's Python frames
 * (3.11-3.13), and a per-thread cache of the last stack's frame indices.
 *
 * Why: through the public API (python.c's walk) a 30-frame capture cost
 * ~6300 instructions on 3.11 - four calls and two reference counts per
 * frame (PyFrame_GetBack creates frame objects, hence the collector
 * switched off around it), then a hash probe per frame under a lock.  The
 * interpreter's own frames are plain structs (_PyInterpreterFrame) linked
 * from the thread state; reading them is what CPython's fault handler does
 * for a traceback.  A walk reads four fields a frame, and the frames of the
 * last stack seen by this thread are matched from the outer end, where a
 * program's stacks share most of their frames: only the frames that
 * changed are looked up in the intern table (and only those take its lock).
 *
 * Layouts: the offsets of each minor version's structs, as its own headers
 * (cpython/pystate.h, internal/pycore_frame.h, cpython/code.h) place them
 * on 64-bit builds; the rules of the walk are those of
 * PyThreadState_GetFrame/PyFrame_GetBack/PyFrame_GetLasti: frames that
 * are not yet complete (_PyFrame_IsIncomplete), and from 3.13 the C-stack
 * entry frames, are skipped; the offset is (instruction pointer - code
 * start), -1 when negative.
 *
 * Never trusted unchecked: a build whose structs differ (a patched or
 * debug CPython) must not make us read wild memory.  Until a layout is
 * proven, every capture walks through the public API (python.c), and the
 * first VERIFY_STACKS stacks of two frames or more are walked once more
 * here with reads that cannot fault (through a memfd: a bad address is
 * EFAULT, not SIGSEGV).  Only when those agree frame for frame - same code
 * objects, same offsets, same length - are direct walks used; one
 * disagreement turns them off for the process.  Once proven, the walk
 * still checks that each code object has PyCode_Type and gives up on
 * anything else (the caller then walks through the API).  It runs only in
 * a thread that holds the GIL, whose frames nobody else can change; it
 * allocates nothing and takes no lock.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "log.h"
#include "python_impl.h"
#include "record.h"

/* Byte offsets in one minor version's structs (64-bit). */
struct layout {
    int minor;
    int ts_cframe;       /* PyThreadState.cframe, -1 if none (3.13) */
    int frame;           /* _PyCFrame.current_frame, or from 3.13 PyThreadState.current_frame */
    int f_code;          /* _PyInterpreterFrame.f_code / f_executable */
    int f_previous;
    int f_instr;         /* prev_instr, or from 3.13 instr_ptr */
    int f_owner;
    int co_code;         /* PyCodeObject.co_code_adaptive */
    int co_firsttraceable;
    bool cstack_incomplete; /* FRAME_OWNED_BY_CSTACK frames skipped by owner */
};

static const struct layout layouts[] = {
    {11, 56, 8, 32, 48, 56, 69, 184, 168, false},
    {12, 56, 0, 0, 8, 56, 70, 192, 176, false},
    {13, -1, 72, 0, 8, 56, 70, 200, 184, true},
};

_Static_assert(sizeof layouts / sizeof layouts[0] == 3, "py_walk_direct: one case a layout");

enum { OWNED_BY_GENERATOR = 1, OWNED_BY_CSTACK = 3, OB_TYPE = 8 };
enum { VERIFY_STACKS = 3 };
/* Frames skipped as incomplete, at most: a bound on any walk. */
enum { MAX_SKIPPED = 4 * RECORD_MAX_DEPTH };

static const struct layout *lay;
enum { UNPROVEN, PROVEN, REFUSED };
static int state = UNPROVEN;      /* atomic */
static int verified;              /* agreeing stacks, under verify_lock */
static pthread_mutex_t verify_lock = PTHREAD_MUTEX_INITIALIZER;

void py_walk_init(void)
{
    lay = NULL;
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
        if (layouts[i].minor == py_minor)
            lay = &layouts[i];
    verified = 0;
    bool usable = lay != NULL && pyapi.addr2line != NULL && pyapi.code_type != NULL;
    __atomic_store_n(&state, usable ? UNPROVEN : REFUSED, __ATOMIC_RELEASE);
}

bool py_walk_proven(void)
{
    return __atomic_load_n(&state, __ATOMIC_ACQUIRE) == PROVEN;
}

/* ---- reads ---- */

/* A read that cannot fault, for verification only: the kernel copies from
 * `a` into our memfd and answers EFAULT for an address we may not read. */
static int probe_fd = -1; /* under verify_lock */

static bool safe_read(uintptr_t a, void *out, size_t n)
{
    return pwrite(probe_fd, (const void *)a, n, 0) == (ssize_t)n &&
           pread(probe_fd, out, n, 0) == (ssize_t)n;
}

static inline __attribute__((always_inline)) bool rd(bool safe, uintptr_t a, void *out,
                                                     size_t n)
{
    if (safe)
        return safe_read(a, out, n);
    memcpy(out, (const void *)a, n);
    return true;
}

/* Up to max frames of thread state ts, innermost first, *more when some
 * are left; -1 when anything is not as a frame should be. */
static inline __attribute__((always_inline)) int
walk_frames(bool safe, const struct layout *l, void *ts, struct raw_frame *raw,
            unsigned max, bool *more)
{
    uintptr_t at = (uintptr_t)ts, f;
    if (l->ts_cframe >= 0 && (!rd(safe, at + l->ts_cframe, &at, 8) || at == 0))
        return -1;
    if (!rd(safe, at + l->frame, &f, 8))
        return -1;
    struct raw_frame *out = raw, *end = raw + max;
    unsigned skipped = 0;
    *more = false;
    while (f != 0) {
        unsigned char owner;
        uintptr_t code, type, instr, prev;
        int first;
        if (!rd(safe, f + l->f_owner, &owner, 1) || !rd(safe, f + l->f_previous, &prev, 8))
            return -1;
        if (l->cstack_incomplete && owner == OWNED_BY_CSTACK)
            goto incomplete;
        if (!rd(safe, f + l->f_code, &code, 8) || code == 0 ||
            !rd(safe, code + OB_TYPE, &type, 8) || type != (uintptr_t)pyapi.code_type ||
            !rd(safe, f + l->f_instr, &instr, 8) ||
            !rd(safe, code + l->co_firsttraceable, &first, 4))
            return -1;
        uintptr_t start = code + (uintptr_t)l->co_code;
        if (owner != OWNED_BY_GENERATOR && instr < start + 2 * (uintptr_t)first)
            goto incomplete;
        if (out == end) { /* a complete frame beyond what fits */
            *more = true;
            break;
        }
        intptr_t lasti = (intptr_t)(instr - start);
        out->code = (py_object *)code;
        out->line_or_lasti = lasti < 0 ? -1 : (int)lasti;
        out++;
        f = prev;
        continue;
    incomplete:
        if (++skipped > MAX_SKIPPED)
            return -1;
        f = prev;
    }
    return (int)(out - raw);
}

/* One copy of the walk per layout, its offsets constants. */
int py_walk_direct(void *ts, struct raw_frame *raw, unsigned max, bool *more)
{
    switch (lay - layouts) {
    case 0:
        return walk_frames(false, &layouts[0], ts, raw, max, more);
    case 1:
        return walk_frames(false, &layouts[1], ts, raw, max, more);
    case 2:
        return walk_frames(false, &layouts[2], ts, raw, max, more);
    default:
        return -1;
    }
}

void py_walk_verify(void *ts, const struct raw_frame *api_raw, unsigned m, bool more)
{
    if (m < 2 || __atomic_load_n(&state, __ATOMIC_RELAXED) != UNPROVEN ||
        pthread_mutex_trylock(&verify_lock) != 0)
        return;
    int verdict = UNPROVEN;
    int saved_errno = errno; /* a refused read sets it: the host's stays */
    if (probe_fd < 0)
        probe_fd = memfd_create("cumemtrace-pyprobe", MFD_CLOEXEC);
    if (probe_fd < 0) {
        verdict = REFUSED;
    } else {
        struct raw_frame raw[RECORD_MAX_DEPTH];
        bool got_more = false;
        int n = walk_frames(true, lay, ts, raw, m, &got_more);
        bool same = n == (int)m && got_more == more;
        for (unsigned i = 0; same && i < m; i++)
            same = raw[i].code == api_raw[i].code &&
                   raw[i].line_or_lasti == api_raw[i].line_or_lasti;
        if (!same)
            verdict = REFUSED;
        else if (++verified >= VERIFY_STACKS)
            verdict = PROVEN;
    }
    if (verdict != UNPROVEN) {
        if (probe_fd >= 0)
            close(probe_fd);
        probe_fd = -1;
        LOG(LOG_DEBUG, verdict == PROVEN
                           ? "CPython 3.%d: frames read directly"
                           : "CPython 3.%d: frames read through the C API (its "
                             "structs are not where 3.%d's headers put them)",
            py_minor, py_minor);
        __atomic_store_n(&state, verdict, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&verify_lock);
    errno = saved_errno;
}

/* ---- frame indices ---- */

/* 3.11+: the index of a frame keyed by its instruction offset, through the
 * (code, line) entry on the first sight of that offset.  Caller holds
 * py_lock and the GIL. */
static uint32_t intern_lasti(const struct raw_frame *r, bool api_walk)
{
    int64_t key = LASTI_KEY(r->line_or_lasti);
    uint32_t index = py_slot_find(r->code, key);
    if (index != 0)
        return index;
    int line = api_walk ? pyapi.frame_line(r->frame)
                                : pyapi.addr2line(r->code, r->line_or_lasti);
    index = py_frame_intern(r->code, line);
    if (index >= MARKER_COUNT)
        (void)py_slot_put(r->code, key, index); /* else: retried next time */
    return index;
}

/* The last stack this thread interned, outermost frame first: a frame
 * whose code object and offset match keeps its index, which never changes
 * (the table keeps the code object alive, so its address names it). */
struct last_frame {
    py_object *code;
    int lasti;
    uint32_t index;
};
struct last_stack {
    unsigned n;
    struct last_frame f[RECORD_MAX_DEPTH];
};
static __thread struct last_stack last;

void py_index_frames(const struct raw_frame *raw, unsigned m, void **py, bool line_keyed,
                     bool api_walk)
{
    struct last_stack *c = &last;
    __asm__("" : "+r"(c)); /* one __tls_get_addr, not one per frame */
    /* frames matched, from the outer end: raw[m - 1] is the outermost */
    unsigned k = 0, lim = m < c->n ? m : c->n;
    const struct raw_frame *r = raw + m - 1;
    void **out = py + m - 1;
    for (const struct last_frame *e = c->f; k < lim; k++, e++, r--, out--) {
        if (e->code != r->code || e->lasti != r->line_or_lasti)
            break;
        *out = py_tag(e->index);
    }
    unsigned keep = k; /* what the cache holds afterwards */
    if (k < m) {
        int gc_was_on = pyapi.gc_disable != NULL ? pyapi.gc_disable() : 0;
        pthread_mutex_lock(&py_lock);
        for (unsigned j = k; j < m; j++) {
            r = &raw[m - 1 - j];
            uint32_t index = line_keyed ? py_frame_intern(r->code, r->line_or_lasti)
                                        : intern_lasti(r, api_walk);
            py[m - 1 - j] = py_tag(index);
            if (keep == j && index >= MARKER_COUNT) { /* a marker is not matched */
                c->f[j] = (struct last_frame){r->code, r->line_or_lasti, index};
                keep++;
            }
        }
        pthread_mutex_unlock(&py_lock);
        if (gc_was_on)
            pyapi.gc_enable();
    }
    c->n = keep;
}
