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
 * The GIL rule: frames are read through the API only by a thread that
 * holds the GIL.  PyGILState_Check() alone is not enough: before 3.12 it
 * answers 1 for everybody once a sub-interpreter exists, and before
 * initialisation; so we also require the thread state that holds the GIL
 * (_PyThreadState_UncheckedGet, a global before 3.12) to be this thread's
 * own (PyGILState_GetThisThreadState); from 3.12 the unchecked getter is
 * thread-local and non-NULL exactly when this thread is attached.  We
 * never take the GIL and never call Python code.  A thread that has
 * released it (PyTorch's ops, ctypes.CDLL calls, autograd's backward
 * threads) still has its own Python frames, which nobody else changes
 * while it runs our hook: python_nogil.c reads them, directly from the
 * interpreter's structs once their layout is proven (python_walk.c), else
 * through CPython's fault-handler dumper.  A thread with no Python thread
 * state (a C thread) gets one marker frame, "python frames unavailable:
 * GIL not held", in place of the evaluation frames - or, on PyTorch's
 * autograd threads (named pt_autograd_N), "autograd's backward thread: no
 * Python frames", which is what they are.
 *
 * Walking: PyThreadState_GetFrame, PyFrame_GetBack, PyFrame_GetCode and
 * PyFrame_GetLineNumber, each reference returned released at once:
 * the running frames keep their code objects alive while we hold the GIL.
 * From 3.11 these calls create frame objects for frames that had none; in
 * 3.11 creating a GC-tracked object may run a collection on the spot, and a
 * collection runs finalizers - Python code, possibly freeing tensors into an
 * allocator that holds its own lock right now.  So from 3.11 the walk runs
 * between PyGC_Disable() and PyGC_Enable() (if collection was enabled):
 * the collection then happens at the interpreter's next allocation, as if we
 * had not been there.  3.8 and older have no PyFrame_GetBack/GetCode and
 * are not supported (PyTorch left 3.8 behind; docs/pytorch.md).
 *
 * Names, with the GIL: co_filename and co_qualname (3.11+; co_name before)
 * have no public getter before 3.12, so we read them with
 * PyObject_GetAttrString.  That runs
 * no Python code on a code object: the code type cannot be subclassed, uses
 * PyObject_GenericGetAttr, and these attributes are plain read-only member
 * descriptors without audit hooks.  It only allocates a str; the pending
 * exception, if any, is saved around it.  Done once per code object.
 *
 * Interning: python_table.c gives each (code object, line) a frame index
 * stored in record_stack.frames[].
 *
 * Splicing: Python frames take the place of the interpreter's evaluation
 * frames (return addresses inside _PyEval_EvalFrameDefault, whose extent is
 * its ELF symbol size from dladdr1).  Up to 3.10 each Python call is one C
 * call of the evaluator, so the i-th evaluation frame becomes the i-th
 * Python frame; when the counts do not match (more evaluation frames than
 * Python frames) all Python frames go at the innermost evaluation frame,
 * the other evaluation frames are dropped, and native frames between two
 * evaluations then appear outside all Python frames.  From 3.11
 * Python-to-Python calls are inlined in one C evaluation, and nothing says
 * which Python frame started a C evaluation: all Python frames go at the
 * innermost evaluation frame and end the stack.  What lay beyond it is the
 * interpreter calling itself, the process's main, and now and then a C
 * extension calling back into Python (it would stand outside all Python
 * frames, out of place): native unwinding stops there (unwind_stop_at), so
 * a stack of 30 Python frames costs what its innermost native frames cost.
 * Python frames left over (native stack cut at CUMEMTRACE_DEPTH) and those
 * of a stack with no evaluation frame at all go at the outer end.
 *
 * Threads: the intern table's lock (py_lock) is taken once per merge, and
 * never while the tracker's lock is held; fork handlers keep it and the
 * no-GIL reader's lock usable in a child.
 *
 * Limitations: one interpreter in mind (sub-interpreters' threads that hold
 * their GIL through a non-default thread state get the marker before
 * 3.12); free-threaded builds (3.13t) are not supported; at most
 * RECORD_MAX_DEPTH frames in all (the innermost are kept, then a
 * "truncated" marker).
 */
#include "python_impl.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

#include "config.h"
#include "log.h"
#include "record.h"
#include "resolve.h"
#include "unwind.h"

_Static_assert(sizeof(void *) == 8, "tagged frames need 64-bit pointers");

enum python_mode python_mode = PYTHON_OFF;
struct python_api pyapi;
int py_minor;
static uintptr_t eval_lo, eval_hi; /* _PyEval_EvalFrameDefault's code */
static pthread_once_t attach_once = PTHREAD_ONCE_INIT;

/* ---- finding CPython ---- */

static void *lookup(const char *name)
{
    return resolve_dlsym(RTLD_DEFAULT, name);
}

#define LOOKUP(field, name) (*(void **)&pyapi.field = lookup(name))

/* What only torch_layer.c calls, looked up with the rest (python.h); the
 * parts of pyapi it shares are added by python_layer_api. */
static struct python_layer_api layer;

#define LAYER(field, name) (*(void **)&layer.field = lookup(name))

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
    if (pyapi.gil_check == NULL)
        return PYTHON_PENDING;
    int major = 0;
    LOOKUP(version, "Py_GetVersion");
    const char *v = pyapi.version != NULL ? pyapi.version() : "?";
    if (sscanf(v, "%d.%d", &major, &py_minor) != 2 || major != 3 ||
        py_minor < 9) {
        LOG(LOG_WARN, "CPython '%.20s' is not supported (3.9 or newer is); "
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
    LAYER(add_pending, "Py_AddPendingCall");     /* optional: python_arm_torch_layer */
    LAYER(run_simple, "PyRun_SimpleString");
    LAYER(unicode, "PyUnicode_FromString");
    LAYER(get_module, "PyImport_GetModule");
    LAYER(call, "PyObject_CallObject");          /* optional: torch_layer.c's refresh */
    LAYER(exc_matches, "PyErr_ExceptionMatches");
    LAYER(exc_exception, "PyExc_Exception");
    LAYER(false_obj, "_Py_FalseStruct");
    LAYER(gil_ensure, "PyGILState_Ensure");
    LAYER(gil_release, "PyGILState_Release");
    LOOKUP(addr2line, "PyCode_Addr2Line");       /* optional: python_walk.c */
    pyapi.code_type = lookup("PyCode_Type");
    pyapi.unicode_type = lookup("PyUnicode_Type");
    bool ok = pyapi.is_initialized && pyapi.this_thread_state && pyapi.frame_line &&
              pyapi.getattr && pyapi.as_utf8 && pyapi.incref && pyapi.decref &&
              pyapi.err_fetch && pyapi.err_restore;
    LOOKUP(thread_frame, "PyThreadState_GetFrame");
    LOOKUP(frame_back, "PyFrame_GetBack");
    LOOKUP(frame_code, "PyFrame_GetCode");
    ok = ok && pyapi.thread_frame && pyapi.frame_back && pyapi.frame_code;
    if (py_minor >= 11) {
        LOOKUP(gc_disable, "PyGC_Disable");
        LOOKUP(gc_enable, "PyGC_Enable");
        LOOKUP(frame_lasti, "PyFrame_GetLasti");
        ok = ok && pyapi.gc_disable && pyapi.gc_enable && pyapi.frame_lasti;
    }
    if (!ok) {
        LOG(LOG_WARN, "CPython 3.%d lacks part of the C API we use; stacks "
                      "have no Python frames", py_minor);
        return PYTHON_OFF;
    }
    find_eval_range();
    py_walk_init();
    /* From 3.11 nothing beyond the first evaluation frame is kept (see the
     * top): native unwinding need not go further. */
    bool cut = py_minor >= 11;
    unwind_stop_at(cut ? eval_lo : 0, cut ? eval_hi : 0);
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

/* The locks in the order the readers nest them: dump_lock, verify_lock,
 * py_lock. */
static void fork_prepare(void)
{
    py_nogil_fork_prepare();
    py_walk_fork_prepare();
    pthread_mutex_lock(&py_lock);
}

static void fork_release(void)
{
    pthread_mutex_unlock(&py_lock);
    py_walk_fork_release();
    py_nogil_fork_release();
}

static void fork_child(void)
{
    pthread_mutex_unlock(&py_lock);
    py_walk_fork_release();
    py_nogil_fork_child();
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
    static bool forks_handled; /* once: a second set would wait on the first's locks */
    if (mode != PYTHON_OFF && !forks_handled) {
        forks_handled = true;
        pthread_atfork(fork_prepare, fork_release, fork_child);
    }
}

/* ---- walking ---- */

/* The calling thread's state if it holds the GIL, else NULL. */
static void *held_thread_state(void)
{
    if (pyapi.gil_check() != 1)
        return NULL;
    void *mine = pyapi.this_thread_state();
    void *cur = pyapi.current_thread_state ? pyapi.current_thread_state() : mine;
    if (cur == NULL || (py_minor < 12 && cur != mine))
        return NULL;
    return cur;
}

bool python_initialized(void)
{
    return __atomic_load_n(&python_mode, __ATOMIC_ACQUIRE) == PYTHON_ON && pyapi.is_initialized();
}

bool python_holds_gil(void)
{
    return python_initialized() && held_thread_state() != NULL;
}

/* Up to `max` frames, innermost first; *more when some are left.
 * From 3.11 PyFrame_GetLineNumber scans the code's location table - most of
 * a capture's cost - so the walk takes the instruction offset and the line
 * is looked up once per (code, offset). */
static unsigned walk(void *ts, struct raw_frame *raw, unsigned max, bool *more)
{
    unsigned m = 0;
    py_object *f = pyapi.thread_frame(ts);
    while (f != NULL && m < max) {
        py_object *code = pyapi.frame_code(f);
        raw[m].code = code;
        raw[m].frame = f;
        raw[m].line_or_lasti = pyapi.frame_lasti != NULL ? pyapi.frame_lasti(f)
                                                       : pyapi.frame_line(f);
        m++;
        pyapi.decref(code);
        py_object *back = pyapi.frame_back(f);
        pyapi.decref(f);
        f = back;
    }
    *more = f != NULL;
    if (f != NULL)
        pyapi.decref(f);
    return m;
}

/* Whether the calling thread is one of PyTorch's autograd device threads
 * (c10 names them pt_autograd_N when they start, before they allocate): C++
 * threads that run backward's nodes; PyTorch gives each a Python thread
 * state for its hooks, but no Python frame runs there while a node
 * allocates.  Asked once per thread. */
static bool autograd_thread(void)
{
    static _Thread_local signed char known; /* 0 not asked, 1 yes, -1 no */
    if (known == 0) {
        char name[17] = {0};
        known = prctl(PR_GET_NAME, name, 0, 0, 0) == 0 &&
                        strncmp(name, "pt_autograd", 11) == 0
                    ? 1
                    : -1;
    }
    return known > 0;
}

/* Tagged Python frames of the calling thread, innermost first, at most
 * `max` (>= 2): a marker alone when it does not hold the GIL, nothing when
 * the interpreter is not running or has no frame on this thread. */
static unsigned python_frames(void **py, unsigned max)
{
    if (!pyapi.is_initialized())
        return 0;
    void *ts = held_thread_state();
    if (ts == NULL) {
        void *mine = pyapi.this_thread_state();
        bool more = false;
        unsigned m = mine != NULL ? py_nogil_frames(mine, py, max - 1, &more) : 0;
        if (m == 0) {
            py[0] = py_tag(autograd_thread() ? MARK_AUTOGRAD : MARK_NO_GIL);
            return 1;
        }
        if (more)
            py[m++] = py_tag(MARK_TRUNCATED);
        return m;
    }
    struct raw_frame raw[RECORD_MAX_DEPTH];
    if (max > RECORD_MAX_DEPTH)
        max = RECORD_MAX_DEPTH;
    bool more = false;
    int direct = py_walk_proven() ? py_walk_direct(ts, raw, max - 1, &more) : -1;
    unsigned m;
    if (direct >= 0) {
        m = (unsigned)direct;
    } else {
        int gc_was_on = pyapi.gc_disable != NULL ? pyapi.gc_disable() : 0;
        m = walk(ts, raw, max - 1, &more);
        if (gc_was_on)
            pyapi.gc_enable();
        py_walk_verify(ts, raw, m, more);
    }
    py_index_frames(raw, m, py,
                    pyapi.frame_lasti == NULL ? PY_LINES : direct < 0 ? PY_API : PY_DIRECT);
    if (more)
        py[m++] = py_tag(MARK_TRUNCATED);
    return m;
}

/* ---- splicing ---- */

static bool is_eval(const void *ret)
{
    uintptr_t a = (uintptr_t)ret - 1; /* inside the call, not after it */
    return a >= eval_lo && a < eval_hi;
}

/* Up to 3.10: frames[0..n) with the i-th evaluation frame replaced by
 * py[i] (see the top); returns the new count, at most cap. */
static unsigned splice_one_to_one(void **frames, unsigned n, unsigned cap,
                                  void *const *py, unsigned m)
{
    void *out[RECORD_MAX_DEPTH];
    unsigned o = 0, p = 0;
    for (unsigned i = 0; i < n && o < cap; i++)
        out[o++] = !is_eval(frames[i]) ? frames[i] : p < m ? py[p++] : frames[i];
    while (p < m && o < cap)
        out[o++] = py[p++];
    memcpy(frames, out, o * sizeof *out);
    return o;
}

/* frames[0..n) with all of py[0..m) at the first evaluation frame,
 * frames[first], and the other evaluation frames dropped - with what lies
 * beyond them when `cut`; at the outer end when there is none (first ==
 * n).  Returns the new count, at most cap. */
static unsigned splice_at_first(void **frames, unsigned n, unsigned first, unsigned cap,
                                void *const *py, unsigned m, bool cut)
{
    void *tail[RECORD_MAX_DEPTH];
    unsigned t = 0;
    for (unsigned i = first + 1; !cut && i < n; i++)
        if (!is_eval(frames[i]))
            tail[t++] = frames[i];
    unsigned o = first < cap ? first : cap;
    unsigned c = m < cap - o ? m : cap - o;
    memcpy(frames + o, py, c * sizeof *py);
    o += c;
    c = t < cap - o ? t : cap - o;
    memcpy(frames + o, tail, c * sizeof *tail);
    return o + c;
}

unsigned python_merge(void **frames, unsigned n, unsigned cap)
{
    if (__atomic_load_n(&python_mode, __ATOMIC_ACQUIRE) == PYTHON_PENDING)
        pthread_once(&attach_once, attach);
    if (__atomic_load_n(&python_mode, __ATOMIC_ACQUIRE) != PYTHON_ON || cap < 2)
        return n;
    if (cap > RECORD_MAX_DEPTH)
        cap = RECORD_MAX_DEPTH;
    /* From 3.11 the Python frames end the stack (see the top). */
    bool cut = py_minor >= 11;
    /* Room for the Python frames: what the native frames other than the
     * evaluator's (and from 3.11 those beyond it) leave, so a "truncated"
     * marker is never cut off. */
    unsigned keep = 0, first = n;
    for (unsigned i = 0; i < n; i++) {
        if (!is_eval(frames[i])) {
            keep++;
        } else if (first == n) {
            first = i;
            if (cut)
                break;
        }
    }
    void *py[RECORD_MAX_DEPTH];
    unsigned m = python_frames(py, cap > keep + 2 ? cap - keep : 2);
    if (m == 0)
        return n;
    /* One for one up to 3.10, unless there are more evaluation frames than
     * Python frames (cannot be matched: all Python frames at the innermost
     * one); fewer is a native stack cut at CUMEMTRACE_DEPTH. */
    bool marker_only = m == 1 && ((uintptr_t)py[0] == (uintptr_t)py_tag(MARK_NO_GIL) ||
                                  (uintptr_t)py[0] == (uintptr_t)py_tag(MARK_AUTOGRAD));
    if (py_minor <= 10 && !marker_only && n - keep <= m)
        return splice_one_to_one(frames, n, cap, py, m);
    return splice_at_first(frames, n, first, cap, py, m, cut);
}

unsigned python_selves(uintptr_t *selves, uintptr_t *names, unsigned max)
{
    /* The caller is inside an allocation: the thread's frames are the ones
     * its capture just read, and stay until it returns (with the GIL or
     * without: only this thread pushes and pops them).  Read again here,
     * only at a new peak, so that captures pay nothing for it. */
    if (__atomic_load_n(&python_mode, __ATOMIC_ACQUIRE) != PYTHON_ON ||
        !pyapi.is_initialized())
        return 0;
    void *ts = held_thread_state();
    if (ts == NULL)
        ts = pyapi.this_thread_state();
    if (ts == NULL)
        return 0;
    struct raw_frame raw[RECORD_MAX_DEPTH];
    bool more = false;
    int n = py_walk_selves(ts, raw, max < RECORD_MAX_DEPTH ? max : RECORD_MAX_DEPTH, &more);
    for (int i = 0; i < n; i++) {
        /* code objects the walk checked (PyCode_Type), held by running frames */
        selves[i] = raw[i].self;
        names[i] = (uintptr_t)py_code_field(raw[i].code, CODE_NAME, false);
    }
    return n < 0 ? 0 : (unsigned)n;
}

bool python_layer_api(struct python_layer_api *out)
{
    if (__atomic_load_n(&python_mode, __ATOMIC_ACQUIRE) != PYTHON_ON ||
        layer.add_pending == NULL || layer.run_simple == NULL || layer.unicode == NULL ||
        layer.get_module == NULL)
        return false;
    *out = layer;
    out->decref = (void (*)(void *))pyapi.decref;
    out->incref = (void (*)(void *))pyapi.incref;
    out->is_initialized = pyapi.is_initialized;
    out->err_fetch = (void (*)(void **, void **, void **))pyapi.err_fetch;
    out->err_restore = (void (*)(void *, void *, void *))pyapi.err_restore;
    out->this_thread_state = pyapi.this_thread_state;
    return true;
}
