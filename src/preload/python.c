/* python.c - Python frames in every stack: "train.py:42 in main" where a
 * native stack shows only a wall of _PyEval_EvalFrameDefault.
 *
 * Workload: one walk of the calling thread's Python frames per allocation
 * (when it holds the GIL), a hash probe per frame; string copies only the
 * first time a code object is seen.  Nothing at all without CPython.
 *
 * Detection: no build-time dependency on Python.  We look for
 * PyGILState_Check in the global scope with the real dlsym at load time
 * (python3 on Debian links libpython statically and exports its API from
 * the executable) and, if it is not there, once more at the first
 * allocation (an embedding application that dlopen()s libpython
 * RTLD_GLOBAL before it allocates); found, the rest of the public C API is
 * resolved and the version read from Py_GetVersion().  Not seen: libpython
 * loaded after the first allocation, or RTLD_LOCAL, or an executable that
 * does not export its symbols - stacks then stay native.  After that look a
 * process without Python pays one branch per allocation (python_mode, read
 * in capture()).  The second look runs dlsym inside a wrapper: should the
 * allocating thread hold the GIL while another one holds the loader lock
 * and waits for the GIL (a library constructor calling into Python), it
 * would deadlock - the reason the first look is made at load time.
 *
 * The GIL rule: frames are read only by a thread that holds the GIL, which
 * stops every other Python thread from changing them.  PyGILState_Check()
 * alone is not enough: before 3.12 it answers 1 for everybody once a
 * sub-interpreter exists, and before initialisation; so we also require the
 * thread state that holds the GIL (_PyThreadState_UncheckedGet, a global
 * before 3.12) to be this thread's own (PyGILState_GetThisThreadState); from
 * 3.12 the unchecked getter is thread-local and non-NULL exactly when this
 * thread is attached.  We never take the GIL and never call Python code.  A
 * thread that does not hold it (ctypes.CDLL calls, autograd's backward
 * threads, C threads) gets one marker frame, "python frames unavailable: GIL
 * not held", in place of the evaluation frames: reading another thread's
 * frames while it runs is not safe on any CPython version through the public
 * API, so we do not guess.
 *
 * Walking: PyThreadState_GetFrame, PyFrame_GetBack, PyFrame_GetCode and
 * PyFrame_GetLineNumber (3.9+), each reference returned released at once:
 * the running frames keep their code objects alive while we hold the GIL.
 * From 3.11 these calls create frame objects for frames that had none; in
 * 3.11 creating a GC-tracked object may run a collection on the spot, and a
 * collection runs finalizers - Python code, possibly freeing tensors into an
 * allocator that holds its own lock right now.  So from 3.11 the walk runs
 * between PyGC_Disable() and PyGC_Enable() (if collection was enabled):
 * the collection then happens at the interpreter's next allocation, as if we
 * had not been there.  3.8 has no PyFrame_GetBack/GetCode: there we read
 * f_back and f_code from PyFrameObject, whose head (PyObject_VAR_HEAD,
 * f_back, f_code) did not change from 2.x to 3.10, and check that each
 * pointer read has type PyFrame_Type / PyCode_Type before trusting it.  (No
 * 3.8 on the machines we test on: that path is unexercised.)
 *
 * Names: co_filename and co_qualname (3.11+; co_name before) have no public
 * getter before 3.12, so we read them with PyObject_GetAttrString.  That runs
 * no Python code on a code object: the code type cannot be subclassed, uses
 * PyObject_GenericGetAttr, and these attributes are plain read-only member
 * descriptors without audit hooks.  It only allocates a str; the pending
 * exception, if any, is saved around it.  Done once per code object.
 *
 * Interning: a (code object, line) pair gets a dense index, stored in the
 * frames[] of record_stack as PYTHON_TAG | index, so record.c dedups mixed
 * stacks unchanged.  Indices below MARKER_COUNT are the marker frames.  The
 * table holds a reference to every code object it names (Py_IncRef, under
 * the GIL we hold), so its address cannot be reused by another code object
 * and a cached name cannot turn stale.  Cost: memory for each distinct code
 * object seen in an allocating stack, never freed - bounded by the program's
 * code, except for code made at run time in a loop (exec, some tracers).
 *
 * Splicing: Python frames take the place of the interpreter's evaluation
 * frames (return addresses inside _PyEval_EvalFrameDefault, whose extent is
 * its ELF symbol size from dladdr1).  Up to 3.10 each Python call is one C
 * call of the evaluator, so the i-th evaluation frame becomes the i-th
 * Python frame.  From 3.11 Python-to-Python calls are inlined in one C
 * evaluation, and the public API does not say which frames start a C
 * evaluation: all Python frames go at the innermost evaluation frame and
 * the other evaluation frames are dropped - as also when, up to 3.10, the
 * counts do not match (more evaluation frames than Python frames).  Native frames between two C
 * evaluations (a C extension calling back into Python) then appear outside
 * all Python frames rather than between them.  Python frames left over
 * (native stack cut at CUMEMTRACE_DEPTH) and those of a stack with no
 * evaluation frame at all go at the outer end.
 *
 * Threads: the intern table is guarded by `lock`, taken once per merge, and
 * never while the tracker's lock is held; fork handlers keep it usable in a
 * child.  The snapshot writer decodes frames without the lock: entries are
 * immutable and were written before the stack that names them was
 * published under the tracker's lock.
 *
 * Limitations: one interpreter in mind (sub-interpreters' threads that hold
 * their GIL through a non-default thread state get the marker before
 * 3.12); free-threaded builds (3.13t) are not supported; at most
 * RECORD_MAX_DEPTH frames in all (the innermost are kept, then a
 * "truncated" marker).
 */
#include "python.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "log.h"
#include "record.h"
#include "resolve.h"

_Static_assert(sizeof(void *) == 8, "tagged frames need 64-bit pointers");

enum python_mode python_mode = PYTHON_OFF;

/* CPython's PyObject, never looked into except on 3.8 (see walk_38). */
typedef struct py_object py_object;

/* The public C API we use, resolved once by attach(). */
static struct {
    int (*is_initialized)(void);
    int (*gil_check)(void);
    void *(*this_thread_state)(void);    /* PyGILState_GetThisThreadState */
    void *(*current_thread_state)(void); /* may be NULL: then trust gil_check */
    py_object *(*thread_frame)(void *);  /* 3.9+, new reference */
    py_object *(*frame_back)(py_object *);
    py_object *(*frame_code)(py_object *);
    py_object *(*eval_frame)(void);      /* 3.8, borrowed */
    int (*frame_line)(py_object *);
    int (*frame_lasti)(py_object *);     /* 3.11+ */
    py_object *(*getattr)(py_object *, const char *);
    const char *(*as_utf8)(py_object *);
    void (*incref)(py_object *);
    void (*decref)(py_object *);
    int (*gc_disable)(void);             /* 3.11+ only, see the top */
    int (*gc_enable)(void);
    void (*err_fetch)(py_object **, py_object **, py_object **);
    void (*err_restore)(py_object *, py_object *, py_object *);
    const char *(*version)(void);
    const void *frame_type, *code_type; /* 3.8: &PyFrame_Type, &PyCode_Type */
    void (*dump_traceback)(int, void *); /* _Py_DumpTraceback, may be NULL */
    int (*add_pending)(int (*)(void *), void *); /* Py_AddPendingCall */
    int (*run_simple)(const char *);             /* PyRun_SimpleString */
    py_object *(*unicode)(const char *);         /* PyUnicode_FromString */
    py_object *(*get_module)(py_object *);       /* PyImport_GetModule */
} api;

static int py_minor;               /* CPython 3.<py_minor> */
static uintptr_t eval_lo, eval_hi; /* _PyEval_EvalFrameDefault's code */
static pthread_once_t attach_once = PTHREAD_ONCE_INIT;

/* ---- the intern table ---- */

enum { MARK_NO_GIL, MARK_TRUNCATED, MARK_NO_MEMORY, MARK_BUDGET, MARKER_COUNT };
static const char *const marker_text[MARKER_COUNT] = {
    "python frames unavailable: GIL not held",
    "python frames truncated",
    "python frame unavailable: out of memory",
    "python frames skipped: GIL not held and the no-GIL reader over its time budget",
};

/* One code object, referenced for as long as the process lives. */
struct code_entry {
    py_object *code;
    char *file;     /* malloc'ed UTF-8 copies */
    char *function;
};

/* What a frame index names. */
struct frame_entry {
    const struct code_entry *code;
    int line;
};

/* Open-addressing slots of the table (code, key) -> frame index, where key
 * is a line (LINE_KEY) or, from 3.11, an instruction offset (LASTI_KEY) that
 * saves computing the line on every capture.  Index 0 = empty (0 is a
 * marker, never an interned frame). */
struct frame_slot {
    py_object *code;
    int64_t key;
    uint32_t index;
};

#define LINE_KEY(line) ((int64_t)(uint32_t)(line))
#define LASTI_KEY(lasti) (((int64_t)1 << 32) | (uint32_t)(lasti))

/* 4096 chunks of 1024 entries: 4M distinct (code, line) pairs, far more lines
 * than any program allocates from; the chunk array costs 32 KiB. */
#define FRAME_CHUNK 1024u
#define FRAME_CHUNKS 4096u

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct frame_entry *chunks[FRAME_CHUNKS];
static uint32_t nframes = MARKER_COUNT; /* next index */
static struct frame_slot *fslots;
static size_t fcap, fused;
static struct code_entry **cslots;
static size_t ccap, cused;

/* The no-GIL path's memfd and buffer (see nogil_frames). */
static pthread_mutex_t dump_lock = PTHREAD_MUTEX_INITIALIZER;
static int dump_fd = -1;
static dev_t dump_dev;
static ino_t dump_ino;
static char dump_buf[1 << 16]; /* under dump_lock */
static int64_t dump_spent_ns;  /* time spent reading without the GIL */

/* The no-GIL reader may take this share of the process's run time (plus a
 * grace for the first captures): beyond it, stacks get MARK_BUDGET. */
#define NOGIL_BUDGET_PERCENT 2
#define NOGIL_GRACE_NS 50000000

static size_t hash_ptr(const void *p, int64_t key)
{
    uint64_t h = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull;
    h ^= (uint64_t)key * 0xC2B2AE3D27D4EB4Full;
    return (size_t)(h ^ (h >> 29));
}

static const struct code_entry *code_find(py_object *code)
{
    if (ccap == 0)
        return NULL;
    for (size_t i = hash_ptr(code, 0) & (ccap - 1);; i = (i + 1) & (ccap - 1)) {
        if (cslots[i] == NULL)
            return NULL;
        if (cslots[i]->code == code)
            return cslots[i];
    }
}

static bool code_put(struct code_entry *c)
{
    if (2 * (cused + 1) > ccap) {
        size_t ncap = ccap ? 2 * ccap : 256;
        struct code_entry **n = calloc(ncap, sizeof *n);
        if (n == NULL)
            return false;
        for (size_t j = 0; j < ccap; j++) {
            if (cslots[j] == NULL)
                continue;
            size_t i = hash_ptr(cslots[j]->code, 0) & (ncap - 1);
            while (n[i] != NULL)
                i = (i + 1) & (ncap - 1);
            n[i] = cslots[j];
        }
        free(cslots);
        cslots = n;
        ccap = ncap;
    }
    size_t i = hash_ptr(c->code, 0) & (ccap - 1);
    while (cslots[i] != NULL)
        i = (i + 1) & (ccap - 1);
    cslots[i] = c;
    cused++;
    return true;
}

/* A UTF-8 copy of a str attribute of `o`, "?" when it has none. */
static char *attr_copy(py_object *o, const char *name)
{
    py_object *s = api.getattr(o, name);
    const char *u = s != NULL ? api.as_utf8(s) : NULL;
    char *copy = strdup(u != NULL ? u : "?");
    if (s != NULL)
        api.decref(s);
    return copy;
}

/* The entry of `code`, created (names copied, code referenced) if new.
 * Caller holds `lock` and the GIL. */
static const struct code_entry *code_intern(py_object *code)
{
    const struct code_entry *found = code_find(code);
    if (found != NULL)
        return found;
    struct code_entry *c = malloc(sizeof *c);
    if (c == NULL)
        return NULL;
    py_object *type, *value, *tb;
    api.err_fetch(&type, &value, &tb);
    c->file = attr_copy(code, "co_filename");
    c->function = attr_copy(code, py_minor >= 11 ? "co_qualname" : "co_name");
    api.err_restore(type, value, tb);
    c->code = code;
    if (c->file == NULL || c->function == NULL || !code_put(c)) {
        free(c->file);
        free(c->function);
        free(c);
        return NULL;
    }
    api.incref(code);
    return c;
}

static bool frame_slots_grow(void)
{
    size_t ncap = fcap ? 2 * fcap : 1024;
    struct frame_slot *n = calloc(ncap, sizeof *n);
    if (n == NULL)
        return false;
    for (size_t j = 0; j < fcap; j++) {
        if (fslots[j].index == 0)
            continue;
        size_t i = hash_ptr(fslots[j].code, fslots[j].key) & (ncap - 1);
        while (n[i].index != 0)
            i = (i + 1) & (ncap - 1);
        n[i] = fslots[j];
    }
    free(fslots);
    fslots = n;
    fcap = ncap;
    return true;
}

/* The frame index stored under (code, key), 0 if none. */
static uint32_t slot_find(py_object *code, int64_t key)
{
    if (fcap == 0)
        return 0;
    for (size_t i = hash_ptr(code, key) & (fcap - 1);; i = (i + 1) & (fcap - 1)) {
        if (fslots[i].index == 0)
            return 0;
        if (fslots[i].code == code && fslots[i].key == key)
            return fslots[i].index;
    }
}

static bool slot_put(py_object *code, int64_t key, uint32_t index)
{
    if (2 * (fused + 1) > fcap && !frame_slots_grow())
        return false;
    size_t i = hash_ptr(code, key) & (fcap - 1);
    while (fslots[i].index != 0)
        i = (i + 1) & (fcap - 1);
    fslots[i] = (struct frame_slot){code, key, index};
    fused++;
    return true;
}

/* A new frame index for (key, line), naming entry c; MARK_NO_MEMORY when
 * it cannot be had.  Caller holds `lock`. */
static uint32_t frame_new(py_object *key, int line, const struct code_entry *c)
{
    if (c == NULL || nframes >= FRAME_CHUNK * FRAME_CHUNKS)
        return MARK_NO_MEMORY;
    uint32_t index = nframes;
    struct frame_entry **chunk = &chunks[index / FRAME_CHUNK];
    if (*chunk == NULL && (*chunk = calloc(FRAME_CHUNK, sizeof **chunk)) == NULL)
        return MARK_NO_MEMORY;
    if (!slot_put(key, LINE_KEY(line), index))
        return MARK_NO_MEMORY;
    (*chunk)[index % FRAME_CHUNK] = (struct frame_entry){c, line};
    nframes++;
    return index;
}

/* The index of (code, line), interned if new; MARK_NO_MEMORY when it cannot
 * be.  Caller holds `lock` and the GIL. */
static uint32_t frame_intern(py_object *code, int line)
{
    uint32_t index = slot_find(code, LINE_KEY(line));
    return index != 0 ? index : frame_new(code, line, code_intern(code));
}

static void *tag(uint32_t index)
{
    return (void *)(PYTHON_TAG | index);
}

enum python_frame_kind python_frame_decode(const void *frame,
                                           struct python_frame *out)
{
    uintptr_t v = (uintptr_t)frame;
    if (!(v & PYTHON_TAG))
        return PYTHON_FRAME_NATIVE;
    uint32_t index = (uint32_t)(v & 0xffffffffu);
    memset(out, 0, sizeof *out);
    const struct frame_entry *chunk =
        index < FRAME_CHUNK * FRAME_CHUNKS ? chunks[index / FRAME_CHUNK] : NULL;
    if (index < MARKER_COUNT || chunk == NULL) {
        out->marker = index < MARKER_COUNT ? marker_text[index] : "?";
        return PYTHON_FRAME_MARKER;
    }
    const struct frame_entry *f = &chunk[index % FRAME_CHUNK];
    out->file = f->code->file;
    out->function = f->code->function;
    out->line = f->line;
    return PYTHON_FRAME_PYTHON;
}

/* ---- finding CPython ---- */

static void *lookup(const char *name)
{
    if (resolve_real_dlsym == NULL) /* sets it; answers NULL for RTLD_DEFAULT */
        (void)resolve_dlsym_substitute(RTLD_DEFAULT, name);
    return resolve_real_dlsym != NULL ? resolve_real_dlsym(RTLD_DEFAULT, name)
                                      : NULL;
}

#define LOOKUP(field, name) (*(void **)&api.field = lookup(name))

static void find_eval_range(void)
{
    void *eval = lookup("_PyEval_EvalFrameDefault");
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (eval != NULL &&
        dladdr1(eval, &info, (void **)&sym, RTLD_DL_SYMENT) != 0 &&
        sym != NULL && sym->st_size != 0) {
        eval_lo = (uintptr_t)eval;
        eval_hi = eval_lo + sym->st_size;
    } else {
        LOG(LOG_INFO, "cannot find the extent of _PyEval_EvalFrameDefault; "
                      "Python frames go at the outer end of native stacks");
    }
}

/* Resolves the API: PYTHON_ON when usable, PYTHON_PENDING when there is
 * no CPython (yet), PYTHON_OFF when there is one we cannot use (said once). */
static enum python_mode find_api(void)
{
    LOOKUP(gil_check, "PyGILState_Check");
    if (api.gil_check == NULL)
        return PYTHON_PENDING;
    int major = 0;
    LOOKUP(version, "Py_GetVersion");
    const char *v = api.version != NULL ? api.version() : "?";
    if (sscanf(v, "%d.%d", &major, &py_minor) != 2 || major != 3 ||
        py_minor < 8) {
        LOG(LOG_WARN, "CPython '%.20s' is not supported (3.8 or newer is); "
                      "stacks have no Python frames", v);
        return PYTHON_OFF;
    }
    LOOKUP(is_initialized, "Py_IsInitialized");
    LOOKUP(this_thread_state, "PyGILState_GetThisThreadState");
    if (LOOKUP(current_thread_state, "PyThreadState_GetUnchecked") == NULL)
        LOOKUP(current_thread_state, "_PyThreadState_UncheckedGet");
    LOOKUP(frame_line, "PyFrame_GetLineNumber");
    LOOKUP(getattr, "PyObject_GetAttrString");
    LOOKUP(as_utf8, "PyUnicode_AsUTF8");
    LOOKUP(incref, "Py_IncRef");
    LOOKUP(decref, "Py_DecRef");
    LOOKUP(err_fetch, "PyErr_Fetch");
    LOOKUP(err_restore, "PyErr_Restore");
    LOOKUP(dump_traceback, "_Py_DumpTraceback"); /* optional: see nogil_frames */
    LOOKUP(add_pending, "Py_AddPendingCall");    /* optional: python_arm_torch_layer */
    LOOKUP(run_simple, "PyRun_SimpleString");
    LOOKUP(unicode, "PyUnicode_FromString");
    LOOKUP(get_module, "PyImport_GetModule");
    bool ok = api.is_initialized && api.this_thread_state && api.frame_line &&
              api.getattr && api.as_utf8 && api.incref && api.decref &&
              api.err_fetch && api.err_restore;
    if (py_minor >= 9) {
        LOOKUP(thread_frame, "PyThreadState_GetFrame");
        LOOKUP(frame_back, "PyFrame_GetBack");
        LOOKUP(frame_code, "PyFrame_GetCode");
        ok = ok && api.thread_frame && api.frame_back && api.frame_code;
    } else {
        LOOKUP(eval_frame, "PyEval_GetFrame");
        api.frame_type = lookup("PyFrame_Type");
        api.code_type = lookup("PyCode_Type");
        ok = ok && api.eval_frame && api.frame_type && api.code_type;
    }
    if (py_minor >= 11) {
        LOOKUP(gc_disable, "PyGC_Disable");
        LOOKUP(gc_enable, "PyGC_Enable");
        LOOKUP(frame_lasti, "PyFrame_GetLasti");
        ok = ok && api.gc_disable && api.gc_enable && api.frame_lasti;
    }
    if (!ok) {
        LOG(LOG_WARN, "CPython 3.%d lacks part of the C API we use; stacks "
                      "have no Python frames", py_minor);
        return PYTHON_OFF;
    }
    find_eval_range();
    LOG(LOG_DEBUG, "CPython 3.%d found: Python frames on (evaluator at "
                   "%#lx, %lu bytes)", py_minor, (unsigned long)eval_lo,
        (unsigned long)(eval_hi - eval_lo));
    return PYTHON_ON;
}

/* The second and last look: at the first allocation, for an embedding
 * application that loaded libpython after us. */
static void attach(void)
{
    enum python_mode mode = find_api();
    if (mode == PYTHON_PENDING) {
        LOG(LOG_DEBUG, "no CPython in this process: stacks stay native");
        mode = PYTHON_OFF;
    }
    __atomic_store_n(&python_mode, mode, __ATOMIC_RELEASE);
}

static void fork_prepare(void)
{
    pthread_mutex_lock(&dump_lock);
    pthread_mutex_lock(&lock);
}

static void fork_release(void)
{
    pthread_mutex_unlock(&lock);
    pthread_mutex_unlock(&dump_lock);
}

/* The child shares the memfd's offset with its parent: it makes its own. */
static void fork_child(void)
{
    if (dump_fd >= 0)
        close(dump_fd);
    dump_fd = -1;
    fork_release();
}

void python_init(void)
{
    if (!config.python) {
        __atomic_store_n(&python_mode, PYTHON_OFF, __ATOMIC_RELEASE);
        return;
    }
    /* First look now: loaded by LD_PRELOAD, our constructor runs before
     * main, so Python is not running yet and nobody can hold the GIL while
     * dlsym takes the loader lock (see the top). */
    enum python_mode mode = find_api();
    __atomic_store_n(&python_mode, mode, __ATOMIC_RELEASE);
    if (mode != PYTHON_OFF)
        pthread_atfork(fork_prepare, fork_release, fork_child);
}

/* ---- walking ---- */

/* The calling thread's state if it holds the GIL, else NULL. */
static void *held_thread_state(void)
{
    if (api.gil_check() != 1)
        return NULL;
    void *mine = api.this_thread_state();
    void *cur = api.current_thread_state ? api.current_thread_state() : mine;
    if (cur == NULL || (py_minor < 12 && cur != mine))
        return NULL;
    return cur;
}

/* One frame seen by a walk.  References are borrowed: the running frames
 * hold their frame objects and code objects while we hold the GIL. */
struct raw_frame {
    py_object *code;
    py_object *frame; /* 3.11+: for the line, computed only on a miss */
    int line_or_lasti; /* the line up to 3.10, the instruction offset after */
};

/* 3.9+: up to `max` frames, innermost first; *more when some are left.
 * From 3.11 PyFrame_GetLineNumber scans the code's location table - most of
 * a capture's cost - so the walk takes the instruction offset and the line
 * is looked up once per (code, offset). */
static unsigned walk(void *ts, struct raw_frame *raw, unsigned max, bool *more)
{
    unsigned m = 0;
    py_object *f = api.thread_frame(ts);
    while (f != NULL && m < max) {
        py_object *code = api.frame_code(f);
        raw[m].code = code;
        raw[m].frame = f;
        raw[m].line_or_lasti = api.frame_lasti != NULL ? api.frame_lasti(f)
                                                       : api.frame_line(f);
        m++;
        api.decref(code);
        py_object *back = api.frame_back(f);
        api.decref(f);
        f = back;
    }
    *more = f != NULL;
    if (f != NULL)
        api.decref(f);
    return m;
}

/* 3.8: the same from PyFrameObject's fields (layout: see the top). */
static unsigned walk_38(struct raw_frame *raw, unsigned max, bool *more)
{
    enum { OB_TYPE = 1, F_BACK = 3, F_CODE = 4 }; /* in pointer-sized words */
    unsigned m = 0;
    py_object *f = api.eval_frame();
    while (f != NULL && m < max) {
        void *const *fw = (void *const *)f;
        py_object *code = fw[F_CODE];
        if (fw[OB_TYPE] != api.frame_type || code == NULL ||
            ((void *const *)code)[OB_TYPE] != api.code_type)
            break;
        raw[m].code = code;
        raw[m].frame = f;
        raw[m].line_or_lasti = api.frame_line(f);
        m++;
        f = fw[F_BACK];
    }
    *more = f != NULL;
    return m;
}

/* 3.11+: the index of a frame keyed by its instruction offset, through
 * the (code, line) entry on the first sight of that offset.  Caller holds
 * `lock` and the GIL. */
static uint32_t frame_intern_lasti(const struct raw_frame *r)
{
    int64_t key = LASTI_KEY(r->line_or_lasti);
    uint32_t index = slot_find(r->code, key);
    if (index != 0)
        return index;
    index = frame_intern(r->code, api.frame_line(r->frame));
    if (index >= MARKER_COUNT)
        (void)slot_put(r->code, key, index); /* else: retried next time */
    return index;
}

/* ---- frames of a thread that does not hold the GIL ----
 *
 * PyTorch releases the GIL around every tensor operation, so its
 * allocations never see a thread that holds it.  The thread's own frames
 * are still there and cannot change while it runs our code: only this
 * thread pushes and pops them, and they keep their code objects alive.
 * The public API cannot read them without the GIL (it creates frame
 * objects), but CPython's own fault handler can: _Py_DumpTraceback(fd,
 * tstate) writes "  File "f", line N in name" per frame, innermost first,
 * reading the frames without allocating or locking (documented as
 * signal-safe, used by faulthandler on threads that do not hold the GIL).
 * We hand it a private memfd, read the text back and intern the frames by
 * their strings.  It names functions by co_name (not co_qualname) and
 * escapes non-ASCII as \xNN; it writes character by character, so the cost
 * is a few µs per frame - paid only by allocations made without the GIL,
 * which in PyTorch are the caching allocator's cudaMalloc cache misses
 * (20-100 µs each on a real GPU).  CUMEMTRACE_PYTHON=0 turns Python frames
 * off altogether.  The fd's identity is checked before each use, so a host
 * that closed it and reused the number is never written to. */


/* String-keyed entries: (file, function) -> code_entry, whose address
 * then stands for a code object in the (code, line) slots. */
static struct code_entry **sslots;
static size_t scap, sused;

static size_t hash_names(const char *file, size_t flen, const char *fn, size_t fnlen)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < flen; i++)
        h = (h ^ (unsigned char)file[i]) * 0x100000001b3ull;
    h = (h ^ 0xff) * 0x100000001b3ull;
    for (size_t i = 0; i < fnlen; i++)
        h = (h ^ (unsigned char)fn[i]) * 0x100000001b3ull;
    return (size_t)(h ^ (h >> 29));
}

static bool names_equal(const struct code_entry *c, const char *file, size_t flen,
                        const char *fn, size_t fnlen)
{
    return strncmp(c->file, file, flen) == 0 && c->file[flen] == '\0' &&
           strncmp(c->function, fn, fnlen) == 0 && c->function[fnlen] == '\0';
}

/* Caller holds `lock`. */
static const struct code_entry *names_intern(const char *file, size_t flen,
                                             const char *fn, size_t fnlen)
{
    size_t h = hash_names(file, flen, fn, fnlen);
    if (scap != 0)
        for (size_t i = h & (scap - 1); sslots[i] != NULL; i = (i + 1) & (scap - 1))
            if (names_equal(sslots[i], file, flen, fn, fnlen))
                return sslots[i];
    if (2 * (sused + 1) > scap) {
        size_t ncap = scap ? 2 * scap : 256;
        struct code_entry **n = calloc(ncap, sizeof *n);
        if (n == NULL)
            return NULL;
        for (size_t j = 0; j < scap; j++) {
            if (sslots[j] == NULL)
                continue;
            size_t i = hash_names(sslots[j]->file, strlen(sslots[j]->file),
                                  sslots[j]->function, strlen(sslots[j]->function)) &
                       (ncap - 1);
            while (n[i] != NULL)
                i = (i + 1) & (ncap - 1);
            n[i] = sslots[j];
        }
        free(sslots);
        sslots = n;
        scap = ncap;
    }
    struct code_entry *c = malloc(sizeof *c);
    if (c == NULL)
        return NULL;
    c->code = NULL;
    c->file = strndup(file, flen);
    c->function = strndup(fn, fnlen);
    if (c->file == NULL || c->function == NULL) {
        free(c->file);
        free(c->function);
        free(c);
        return NULL;
    }
    size_t i = h & (scap - 1);
    while (sslots[i] != NULL)
        i = (i + 1) & (scap - 1);
    sslots[i] = c;
    sused++;
    return c;
}

/* Caller holds `lock`. */
static uint32_t names_frame_intern(const char *file, size_t flen, int line, const char *fn,
                                   size_t fnlen)
{
    const struct code_entry *c = names_intern(file, flen, fn, fnlen);
    if (c == NULL)
        return MARK_NO_MEMORY;
    py_object *key = (py_object *)(uintptr_t)c; /* never a real code object */
    uint32_t index = slot_find(key, LINE_KEY(line));
    return index != 0 ? index : frame_new(key, line, c);
}

/* Our memfd, still ours; -1 when it cannot be had.  Caller holds dump_lock. */
static int dump_file(void)
{
    struct stat st;
    if (dump_fd >= 0 &&
        (fstat(dump_fd, &st) != 0 || st.st_dev != dump_dev || st.st_ino != dump_ino))
        dump_fd = -1; /* closed by the host, maybe reused: not ours any more */
    if (dump_fd < 0) {
        int fd = memfd_create("cumemtrace-pyframes", MFD_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) != 0) {
            if (fd >= 0)
                close(fd);
            return -1;
        }
        dump_fd = fd;
        dump_dev = st.st_dev;
        dump_ino = st.st_ino;
    }
    return dump_fd;
}

/* Parses one `  File "F", line N in NAME` line; false for anything else. */
static bool parse_frame_line(const char *p, const char *end, const char **file,
                             size_t *flen, int *line, const char **fn, size_t *fnlen)
{
    static const char pre[] = "  File \"";
    if ((size_t)(end - p) < sizeof pre - 1 || memcmp(p, pre, sizeof pre - 1) != 0)
        return false;
    p += sizeof pre - 1;
    const char *q = memmem(p, (size_t)(end - p), "\", line ", 8);
    if (q == NULL)
        return false;
    *file = p;
    *flen = (size_t)(q - p);
    p = q + 8;
    int n = 0;
    while (p < end && *p >= '0' && *p <= '9' && n < 100000000)
        n = n * 10 + (*p++ - '0');
    if ((size_t)(end - p) < 4 || memcmp(p, " in ", 4) != 0)
        return false;
    *line = n;
    *fn = p + 4;
    *fnlen = (size_t)(end - (p + 4));
    return true;
}

/* Up to max tagged frames of thread state ts, read through the fault
 * handler's dumper; 0 when it cannot (the caller then uses the marker). */
static unsigned nogil_frames(void *ts, void **py, unsigned max, bool *more)
{
    unsigned m = 0;
    *more = false;
    int saved = errno;
    pthread_mutex_lock(&dump_lock);
    int64_t t0 = clock_now_ns();
    if (dump_spent_ns > NOGIL_GRACE_NS + t0 / (100 / NOGIL_BUDGET_PERCENT)) {
        pthread_mutex_unlock(&dump_lock);
        py[0] = tag(MARK_BUDGET);
        return 1;
    }
    int fd = dump_file();
    ssize_t got = -1;
    if (fd >= 0 && lseek(fd, 0, SEEK_SET) == 0) {
        api.dump_traceback(fd, ts);
        off_t end = lseek(fd, 0, SEEK_CUR);
        if (end > 0)
            got = pread(fd, dump_buf,
                        (size_t)end < sizeof dump_buf ? (size_t)end : sizeof dump_buf, 0);
    }
    if (got > 0) {
        pthread_mutex_lock(&lock);
        const char *p = dump_buf, *stop = dump_buf + got;
        while (p < stop) {
            const char *nl = memchr(p, '\n', (size_t)(stop - p));
            const char *eol = nl ? nl : stop;
            const char *file, *fn;
            size_t flen, fnlen;
            int line;
            if (nl != NULL && parse_frame_line(p, eol, &file, &flen, &line, &fn, &fnlen)) {
                if (m == max) {
                    *more = true;
                    break;
                }
                py[m++] = tag(names_frame_intern(file, flen, line, fn, fnlen));
            } else if (nl != NULL && m > 0 && eol - p >= 5 && memcmp(p, "  ...", 5) == 0) {
                *more = true; /* the dumper's own depth limit */
            }
            p = eol + 1;
        }
        pthread_mutex_unlock(&lock);
    }
    dump_spent_ns += clock_now_ns() - t0;
    pthread_mutex_unlock(&dump_lock);
    errno = saved;
    return m;
}

/* Tagged Python frames of the calling thread, innermost first, at most
 * `max` (>= 2): a marker alone when it does not hold the GIL, nothing when
 * the interpreter is not running or has no frame on this thread. */
static unsigned python_frames(void **py, unsigned max)
{
    if (!api.is_initialized())
        return 0;
    void *ts = held_thread_state();
    if (ts == NULL) {
        void *mine = api.dump_traceback != NULL ? api.this_thread_state() : NULL;
        bool more = false;
        unsigned m = mine != NULL ? nogil_frames(mine, py, max - 1, &more) : 0;
        if (m == 0) {
            py[0] = tag(MARK_NO_GIL);
            return 1;
        }
        if (more)
            py[m++] = tag(MARK_TRUNCATED);
        return m;
    }
    struct raw_frame raw[RECORD_MAX_DEPTH];
    if (max > RECORD_MAX_DEPTH)
        max = RECORD_MAX_DEPTH;
    int gc_was_on = api.gc_disable != NULL ? api.gc_disable() : 0;
    bool more;
    unsigned m = py_minor >= 9 ? walk(ts, raw, max - 1, &more)
                               : walk_38(raw, max - 1, &more);
    pthread_mutex_lock(&lock);
    for (unsigned i = 0; i < m; i++)
        py[i] = tag(api.frame_lasti != NULL ? frame_intern_lasti(&raw[i])
                                            : frame_intern(raw[i].code,
                                                           raw[i].line_or_lasti));
    pthread_mutex_unlock(&lock);
    if (gc_was_on)
        api.gc_enable();
    if (more)
        py[m++] = tag(MARK_TRUNCATED);
    return m;
}

/* ---- splicing ---- */

static bool is_eval(const void *ret)
{
    uintptr_t a = (uintptr_t)ret - 1; /* inside the call, not after it */
    return a >= eval_lo && a < eval_hi;
}

/* frames[0..n) with evaluation frames replaced by py[0..m) (see the top);
 * returns the new count, at most cap. */
static unsigned splice(void **frames, unsigned n, unsigned cap,
                       void *const *py, unsigned m, bool one_to_one)
{
    void *out[RECORD_MAX_DEPTH];
    unsigned o = 0, p = 0, evals = 0;
    if (cap > RECORD_MAX_DEPTH)
        cap = RECORD_MAX_DEPTH;
    for (unsigned i = 0; i < n && o < cap; i++) {
        if (!is_eval(frames[i])) {
            out[o++] = frames[i];
        } else if (one_to_one) {
            out[o++] = p < m ? py[p++] : frames[i];
        } else if (evals++ == 0) {
            while (p < m && o < cap)
                out[o++] = py[p++];
        }
    }
    while (p < m && o < cap)
        out[o++] = py[p++];
    memcpy(frames, out, o * sizeof *out);
    return o;
}

unsigned python_merge(void **frames, unsigned n, unsigned cap)
{
    if (__atomic_load_n(&python_mode, __ATOMIC_ACQUIRE) == PYTHON_PENDING)
        pthread_once(&attach_once, attach);
    if (__atomic_load_n(&python_mode, __ATOMIC_ACQUIRE) != PYTHON_ON || cap < 2)
        return n;
    /* Room for the Python frames: what the native frames other than the
     * evaluator's leave, so a "truncated" marker is never cut off. */
    unsigned keep = 0;
    for (unsigned i = 0; i < n; i++)
        keep += !is_eval(frames[i]);
    void *py[RECORD_MAX_DEPTH];
    unsigned m = python_frames(py, cap > keep + 2 ? cap - keep : 2);
    if (m == 0)
        return n;
    /* One for one up to 3.10, unless there are more evaluation frames than
     * Python frames (cannot be matched: all Python frames at the innermost
     * one); fewer is a native stack cut at CUMEMTRACE_DEPTH. */
    bool marker_only = m == 1 && (uintptr_t)py[0] == (uintptr_t)tag(MARK_NO_GIL);
    bool one_to_one = py_minor <= 10 && !marker_only && n - keep <= m;
    return splice(frames, n, cap, py, m, one_to_one);
}

bool python_layer_api(struct python_layer_api *out)
{
    if (__atomic_load_n(&python_mode, __ATOMIC_ACQUIRE) != PYTHON_ON ||
        api.add_pending == NULL || api.run_simple == NULL || api.unicode == NULL ||
        api.get_module == NULL)
        return false;
    out->add_pending = api.add_pending;
    out->run_simple = api.run_simple;
    out->unicode = (void *(*)(const char *))api.unicode;
    out->get_module = (void *(*)(void *))api.get_module;
    out->decref = (void (*)(void *))api.decref;
    return true;
}
