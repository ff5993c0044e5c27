/* python_walk.c - the cheap walk of the calling thread's Python frames
 * (3.11-3.13), and a per-thread cache of the last stack's frame indices.
 *
 * Why: through the public API (python.c's walk) a capture costs four
 * calls and two reference counts per frame (PyFrame_GetBack creates frame objects, hence the collector
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
 * Without the GIL: PyTorch releases it around every op, so most of its
 * allocations come from a thread that does not hold it.  Such a thread's
 * own frames cannot change while it runs our hook - only it pushes and
 * pops them, and they hold their code objects, whose names and line
 * tables are immutable - so the same walk reads them; names of a code
 * object first seen then are read from its str objects (compact strings:
 * PyASCIIObject's state bits say where the characters are) and lines
 * come from PyCode_Addr2Line, which reads only the line table (CPython's
 * fault handler does both from any thread).  No reference can be taken
 * without the GIL: python_table.c keys such entries by the code's
 * identity too.
 *
 * Never trusted unchecked: a build whose structs differ (a patched or
 * debug CPython) must not make us read wild memory.  Until a layout is
 * proven, every capture reads its frames another way - through the public
 * API with the GIL, through CPython's fault-handler dumper without it - and
 * the first VERIFY_STACKS stacks of two frames or more are read once more
 * here with reads that cannot fault (through a memfd: a bad address is
 * EFAULT, not SIGSEGV).  Only when those agree frame for frame - same code
 * objects and offsets as the API's walk, or the same files, lines and
 * names as the dumper's text - are direct walks used; one disagreement
 * turns them off for the process.  Once proven, the walk still checks
 * that each code object has PyCode_Type and gives up on anything else (the
 * caller then reads the frames the other way).  It allocates nothing and
 * takes no lock.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "log.h"
#include "own_fd.h"
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
    int co_firstlineno;
    int str_ascii;       /* sizeof(PyASCIIObject): a compact ASCII str's data */
    int str_compact;     /* sizeof(PyCompactUnicodeObject): other compact data */
};

/* _PyInterpreterFrame.localsplus: 72 in 3.11, 3.12 and 3.13.  Slot 0 is
 * inside every frame (a frame has room for its locals and its value
 * stack, and real code has a stack), so reading it cannot leave the frame. */
enum { F_LOCALSPLUS = 72 };

/* PyCodeObject's co_filename, co_name, co_qualname, co_linetable: the same
 * bytes in 3.11, 3.12 and 3.13.  PyASCIIObject: length, then the state bits
 * (interned:2, kind:3, compact:1, ascii:1), the same in all three.
 * CO_SIZE: PyObject_VAR_HEAD's ob_size, the code's length in code units. */
enum { CO_SIZE = 16, CO_FILENAME = 112, CO_NAME = 120, CO_QUALNAME = 128,
       CO_LINETABLE = 136, STR_LENGTH = 16, STR_STATE = 32 };

static const struct layout layouts[] = {
    {11, 56, 8, 32, 48, 56, 69, 184, 168, false, 72, 48, 72},
    {12, 56, 0, 0, 8, 56, 70, 192, 176, false, 68, 40, 56},
    {13, -1, 72, 0, 8, 56, 70, 200, 184, true, 68, 40, 56},
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
    bool usable = lay != NULL && pyapi.addr2line != NULL && pyapi.code_type != NULL &&
                  pyapi.unicode_type != NULL;
    __atomic_store_n(&state, usable ? UNPROVEN : REFUSED, __ATOMIC_RELEASE);
}

bool py_walk_proven(void)
{
    return __atomic_load_n(&state, __ATOMIC_ACQUIRE) == PROVEN;
}

/* ---- reads ---- */

/* A read that cannot fault, for verification only: the kernel copies from
 * `a` into our memfd and answers EFAULT for an address we may not read. */
static struct own_fd probe = {-1, 0, 0}; /* under verify_lock; own_fd.c */
static unsigned safe_skipped; /* under verify_lock: the last safe walk's */

static bool safe_read(uintptr_t a, void *out, size_t n)
{
    return pwrite(probe.fd, (const void *)a, n, 0) == (ssize_t)n &&
           pread(probe.fd, out, n, 0) == (ssize_t)n;
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
walk_frames(bool safe, bool selves, const struct layout *l, void *ts, struct raw_frame *raw,
            unsigned max, bool *more)
{
    uintptr_t at = (uintptr_t)ts, f;
    const uintptr_t code_type = (uintptr_t)pyapi.code_type; /* not reloaded a frame */
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
            !rd(safe, code + OB_TYPE, &type, 8) || type != code_type ||
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
        if (selves && !rd(safe, f + F_LOCALSPLUS, &out->self, 8))
            return -1;
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
    if (safe)
        safe_skipped = skipped;
    return (int)(out - raw);
}

/* One copy of the walk per layout, its offsets constants. */
int py_walk_direct(void *ts, struct raw_frame *raw, unsigned max, bool *more)
{
    switch (lay - layouts) {
    case 0:
        return walk_frames(false, false, &layouts[0], ts, raw, max, more);
    case 1:
        return walk_frames(false, false, &layouts[1], ts, raw, max, more);
    case 2:
        return walk_frames(false, false, &layouts[2], ts, raw, max, more);
    default:
        return -1;
    }
}

int py_walk_selves(void *ts, struct raw_frame *raw, unsigned max, bool *more)
{
    if (!py_walk_proven())
        return -1;
    return walk_frames(false, true, lay, ts, raw, max, more);
}

bool py_walk_unproven(void)
{
    return __atomic_load_n(&state, __ATOMIC_ACQUIRE) == UNPROVEN;
}

bool py_probe_lock(void)
{
    if (!py_walk_unproven())
        return false;
    pthread_mutex_lock(&verify_lock);
    if (own_fd_check(&probe) < 0 && py_walk_unproven())
        own_fd_take(&probe, memfd_create("cumemtrace-pyprobe", MFD_CLOEXEC));
    if (probe.fd < 0 || !py_walk_unproven()) {
        pthread_mutex_unlock(&verify_lock);
        return false;
    }
    return true;
}

void py_probe_unlock(void)
{
    pthread_mutex_unlock(&verify_lock);
}

/* Held across fork() (python.c's handlers): a child must not inherit it
 * held by a thread that does not exist there, or its first probe hangs. */
void py_walk_fork_prepare(void)
{
    pthread_mutex_lock(&verify_lock);
}

void py_walk_fork_release(void)
{
    pthread_mutex_unlock(&verify_lock);
}

int py_walk_safe(void *ts, struct raw_frame *raw, unsigned max, bool *more,
                 unsigned *skipped)
{
    safe_skipped = 0;
    int n = walk_frames(true, false, lay, ts, raw, max, more);
    *skipped = safe_skipped;
    return n;
}

/* Under verify_lock: the verdict, once reached, said and published. */
static void judge(bool agree, bool counts)
{
    int verdict = !agree ? REFUSED
                  : counts && ++verified >= VERIFY_STACKS ? PROVEN
                                                          : UNPROVEN;
    if (verdict == UNPROVEN)
        return;
    own_fd_close(&probe);
    LOG(LOG_DEBUG, verdict == PROVEN
                       ? "CPython 3.%d: frames read directly"
                       : "CPython 3.%d: frames read through the C API (its "
                         "structs are not where 3.%d's headers put them)",
        py_minor, py_minor);
    __atomic_store_n(&state, verdict, __ATOMIC_RELEASE);
}

void py_walk_judged(bool agree, bool counts)
{
    int saved_errno = errno; /* a refused read sets it: the host's stays */
    judge(agree, counts);
    errno = saved_errno;
}

void py_walk_verify(void *ts, const struct raw_frame *api_raw, unsigned m, bool more)
{
    if (m < 2 || __atomic_load_n(&state, __ATOMIC_RELAXED) != UNPROVEN ||
        pthread_mutex_trylock(&verify_lock) != 0)
        return;
    int saved_errno = errno; /* a refused read sets it: the host's stays */
    if (own_fd_check(&probe) < 0)
        own_fd_take(&probe, memfd_create("cumemtrace-pyprobe", MFD_CLOEXEC));
    if (probe.fd < 0) {
        judge(false, false);
    } else if (py_walk_unproven()) {
        struct raw_frame raw[RECORD_MAX_DEPTH];
        bool got_more = false;
        int n = walk_frames(true, false, lay, ts, raw, m, &got_more);
        bool same = n == (int)m && got_more == more;
        for (unsigned i = 0; same && i < m; i++)
            same = raw[i].code == api_raw[i].code &&
                   raw[i].line_or_lasti == api_raw[i].line_or_lasti;
        judge(same, true);
    }
    pthread_mutex_unlock(&verify_lock);
    errno = saved_errno;
}

/* ---- names and identity, read from the structs ---- */

const void *py_code_field(py_object *code, enum py_code_field which, bool safe)
{
    static const int at[] = {[CODE_FILE] = CO_FILENAME, [CODE_QUALNAME] = CO_QUALNAME,
                             [CODE_NAME] = CO_NAME};
    uintptr_t v;
    if (lay == NULL || !rd(safe, (uintptr_t)code + at[which], &v, 8))
        return NULL;
    return (const void *)v;
}

bool py_code_id(py_object *code, struct code_id *id, bool safe)
{
    uintptr_t w[4], at = (uintptr_t)code; /* co_filename, co_name, co_qualname, co_linetable */
    int64_t size;
    int32_t first;
    if (lay == NULL || !rd(safe, at + CO_FILENAME, w, sizeof w) ||
        !rd(safe, at + CO_SIZE, &size, 8) || !rd(safe, at + (uintptr_t)lay->co_firstlineno, &first, 4))
        return false;
    *id = (struct code_id){(const void *)w[0], (const void *)w[2], (const void *)w[3],
                           (uint64_t)size << 32 | (uint32_t)first};
    return true;
}

/* Appends code point c as UTF-8; a lone surrogate (which UTF-8 cannot
 * hold) becomes U+FFFD. */
static char *put_utf8(char *o, uint32_t c)
{
    if (c >= 0xd800 && c < 0xe000)
        c = 0xfffd;
    if (c < 0x80) {
        *o++ = (char)c;
    } else if (c < 0x800) {
        *o++ = (char)(0xc0 | c >> 6);
        *o++ = (char)(0x80 | (c & 0x3f));
    } else if (c < 0x10000) {
        *o++ = (char)(0xe0 | c >> 12);
        *o++ = (char)(0x80 | (c >> 6 & 0x3f));
        *o++ = (char)(0x80 | (c & 0x3f));
    } else {
        *o++ = (char)(0xf0 | c >> 18);
        *o++ = (char)(0x80 | (c >> 12 & 0x3f));
        *o++ = (char)(0x80 | (c >> 6 & 0x3f));
        *o++ = (char)(0x80 | (c & 0x3f));
    }
    return o;
}

/* Longer names are not worth reading in a hook: "?" instead. */
enum { STR_MAX = 1 << 16 };

char *py_read_str(const void *obj, bool safe)
{
    uintptr_t s = (uintptr_t)obj, type;
    int64_t len;
    uint32_t st;
    if (lay == NULL || s == 0 || !rd(safe, s + OB_TYPE, &type, 8) ||
        type != (uintptr_t)pyapi.unicode_type || !rd(safe, s + STR_LENGTH, &len, 8) ||
        !rd(safe, s + STR_STATE, &st, 4))
        return NULL;
    unsigned kind = st >> 2 & 7, compact = st >> 5 & 1, ascii = st >> 6 & 1;
    if (!compact || len < 0 || len > STR_MAX || (kind != 1 && kind != 2 && kind != 4))
        return NULL;
    uintptr_t data = s + (uintptr_t)(ascii ? lay->str_ascii : lay->str_compact);
    char *out = malloc((size_t)len * 4 + 1), *o = out;
    if (out == NULL)
        return NULL;
    unsigned char chunk[1024];
    for (int64_t at = 0; at < len;) {
        size_t n = (size_t)(len - at) < sizeof chunk / kind ? (size_t)(len - at)
                                                           : sizeof chunk / kind;
        if (!rd(safe, data + (uintptr_t)at * kind, chunk, n * kind)) {
            free(out);
            return NULL;
        }
        for (size_t i = 0; i < n; i++) {
            uint32_t c = chunk[i];
            if (kind == 2) {
                uint16_t u;
                memcpy(&u, chunk + 2 * i, 2);
                c = u;
            } else if (kind == 4) {
                memcpy(&c, chunk + 4 * i, 4);
            }
            o = put_utf8(o, c > 0x10ffff ? 0xfffd : c);
        }
        at += (int64_t)n;
    }
    *o = '\0';
    return out;
}

/* ---- frame indices ---- */

/* The last stack this thread interned, outermost frame first: a frame
 * whose code object and offset match keeps its index, which never changes
 * (a held entry keeps the code object alive, so its address names it; an
 * unheld one is checked against the code's identity). */
struct last_frame {
    py_object *code;
    int lasti;
    uint32_t index;
    bool check;         /* unheld: compare id with the code's */
    struct code_id id;
};
struct last_stack {
    unsigned n;
    struct last_frame f[RECORD_MAX_DEPTH];
};
static __thread struct last_stack last;

/* An unheld entry's code object still the one it named: its identity
 * read directly (the frame that holds it is this thread's, alive) and
 * compared branch-free - on a PyTorch run, where nothing holds the GIL in
 * our hook, every cached frame is checked on every capture. */
static inline __attribute__((always_inline)) bool still_same(const struct last_frame *e,
                                                              bool safe)
{
    if (!e->check)
        return true;
    struct code_id now;
    if (safe)
        return py_code_id(e->code, &now, true) && py_same_id(&now, &e->id);
    /* co_qualname's and co_linetable's objects only: each belongs to one
     * code object (the table checks the rest when it makes the entry), so
     * a code object that took a dead one's address has other ones */
    const char *c = (const char *)e->code;
    uintptr_t name, lines;
    memcpy(&name, c + CO_QUALNAME, 8);
    memcpy(&lines, c + CO_LINETABLE, 8);
    return ((name ^ (uintptr_t)e->id.name) | (lines ^ (uintptr_t)e->id.lines)) == 0;
}

/* How many of raw[0..m)'s outer frames match the cache's, their indices
 * written to py; one copy for plain reads, one through the probe. */
static inline __attribute__((always_inline)) unsigned
match_cached(const struct last_stack *c, const struct raw_frame *raw, unsigned m, void **py,
             bool safe)
{
    unsigned k = 0, lim = m < c->n ? m : c->n;
    const struct raw_frame *r = raw + m - 1;
    void **out = py + m - 1;
    for (const struct last_frame *e = c->f; k < lim; k++, e++, r--, out--) {
        if (e->code != r->code || e->lasti != r->line_or_lasti ||
            __builtin_expect(!still_same(e, safe), 0))
            break;
        *out = py_tag(e->index);
    }
    return k;
}

void py_index_frames(const struct raw_frame *raw, unsigned m, void **py, enum py_how how)
{
    struct last_stack *c = &last;
    __asm__("" : "+r"(c)); /* one __tls_get_addr, not one per frame */
    bool safe = how == PY_NOGIL_SAFE;
    /* frames matched, from the outer end: raw[m - 1] is the outermost */
    unsigned k = safe ? match_cached(c, raw, m, py, true) : match_cached(c, raw, m, py, false);
    unsigned keep = k; /* what the cache holds afterwards */
    if (k < m) {
        bool gil = py_how_gil(how);
        int gc_was_on = gil && pyapi.gc_disable != NULL ? pyapi.gc_disable() : 0;
        pthread_mutex_lock(&py_lock);
        for (unsigned j = k; j < m; j++) {
            const struct raw_frame *r = &raw[m - 1 - j];
            bool unheld = false;
            uint32_t index = how == PY_LINES
                                 ? py_frame_intern(r->code, r->line_or_lasti)
                                 : py_lasti_intern(r->code, r->line_or_lasti,
                                                   how == PY_API ? r->frame : NULL, how,
                                                   &unheld);
            py[m - 1 - j] = py_tag(index);
            if (keep == j && index >= MARKER_COUNT) { /* a marker is not matched */
                struct last_frame *e = &c->f[j];
                *e = (struct last_frame){r->code, r->line_or_lasti, index, unheld, {0}};
                if (!unheld || py_code_id(r->code, &e->id, safe))
                    keep++; /* else it could not be checked: not cached */
            }
        }
        pthread_mutex_unlock(&py_lock);
        if (gc_was_on)
            pyapi.gc_enable();
    }
    c->n = keep;
}
