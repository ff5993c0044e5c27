/* torch_layer.c - the library's side of the PyTorch layer: loading it
 * (here), and fresh figures before a dump (below).
 *
 * Loading: the layer must be in before PyTorch's CUDA initialises, so that
 * its history sees the program's first tensor.  In a process that runs
 * CPython from the start (python itself, under `cumemtrace run` or a plain
 * LD_PRELOAD) the constructor adds an audit hook in C (PySys_AddAuditHook,
 * before Py_Initialize: no Python hook sees it added, and no Python code
 * runs for it).  At each import it compares the event's name and, until
 * torch.cuda has the names cumemtrace_torch needs, looks it up in the
 * interpreter's modules; then it loads the layer, once, on that thread,
 * and takes itself out of CPython's list where it is the only hook in it
 * (below, add_hook_found): from then on an audited event costs what it
 * costs bare.  Where it cannot be taken out, it returns at its first test,
 * but each audited event of the process still builds its arguments and
 * calls it - the cost a Python audit hook had, there at every optimizer
 * step (the layer's own events, PyTorch's id()), less the Python call.
 *
 * Otherwise (Python found only at the first allocation: an embedder that
 * loads libpython later), at the first allocation of a process running
 * CPython we ask the interpreter to do the same at a safe point: Py_AddPendingCall needs neither the GIL
 * nor a thread state (we may be inside PyTorch's allocator lock), and
 * CPython runs the call in the main thread, with the GIL, between two
 * bytecodes.  It needs an interpreter, though: we ask only from a thread
 * that holds the GIL or from the main thread, while Py_IsInitialized()
 * (interpreter_takes_calls below); an allocation on any other thread leaves
 * it to a later one.  The code binds no name in __main__ (it runs in a dict of its
 * own), loads cumemtrace_torch from the torchboot directory beside the
 * library, and does nothing when the layer is already there. */
#include "python.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <fcntl.h>
#include <stdlib.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "allocator.h"
#include "clock.h"
#include "pyflags.h"
#include "resolve.h"
#include "torch_layer.h"
#include "torch_protocol.h"

static char layer_code[2048];
static int layer_armed, layer_tries;
static bool imports_watched; /* the audit hook is in: no pending call */
static struct python_layer_api py; /* set before the pending call is queued */
#define LAYER_TRIES 64 /* allocations that may look for torch */

/* True when the process has imported torch (asked without running Python
 * code: neither call creates a GC-tracked object). */
static bool torch_imported(void)
{
    void *name = py.unicode("torch");
    if (name == NULL)
        return false;
    void *m = py.get_module(name);
    py.decref(name);
    if (m == NULL)
        return false;
    py.decref(m);
    return true;
}

static int run_layer(void *arg)
{
    (void)arg;
    /* Not a PyTorch process (yet): run no Python code at all; a later
     * allocation looks again. */
    if (!torch_imported()) {
        __atomic_store_n(&layer_armed, 0, __ATOMIC_RELEASE);
        return 0;
    }
    py.run_simple(layer_code);
    return 0; /* a failure was said by the code itself */
}

/* The torchboot directory beside this library (build tree) or in its
 * prefix; false when neither holds cumemtrace_torch.py. */
static bool layer_dir(char *out, size_t n)
{
    Dl_info info;
    if (dladdr((void *)&python_arm_torch_layer, &info) == 0 || info.dli_fname == NULL)
        return false;
    char lib[960];
    if (strlen(info.dli_fname) >= sizeof lib)
        return false;
    memcpy(lib, info.dli_fname, strlen(info.dli_fname) + 1);
    char *slash = strrchr(lib, '/');
    if (slash == NULL)
        return false;
    *slash = '\0';
    static const char *const rel[] = {"/share/cumemtrace/torchboot",
                                      "/../share/cumemtrace/torchboot"};
    for (size_t i = 0; i < 2; i++) {
        char probe[1200];
        snprintf(out, n, "%s%s", lib, rel[i]);
        snprintf(probe, sizeof probe, "%s/cumemtrace_torch.py", out);
        if (access(probe, R_OK) == 0)
            return true;
    }
    return false;
}

/* Loads cumemtrace_torch without registering it in sys.modules (the host
 * sees no module of ours), unless the layer is there already (torch.cuda
 * carries its mark). */
static const char layer_fmt[] =
    "__import__('builtins').exec(\"\"\"\n"
    "import sys\n"
    "c = sys.modules.get('torch.cuda')\n"
    "if c is not None and not getattr(c, '_cumemtrace_layer', False):\n"
    "    try:\n"
    "        x = sys.modules['_frozen_importlib_external']\n"
    "        s = x.spec_from_file_location('cumemtrace_torch', '%s/cumemtrace_torch.py')\n"
    "        m = sys.modules['_frozen_importlib'].module_from_spec(s)\n"
    "        s.loader.exec_module(m)\n"
    "        m.install(%s)\n"
    "    except Exception as e:\n"
    "        sys.stderr.write('cumemtrace: warning: the PyTorch layer is off (%%s); '\n"
    "                         'post-mortems show driver-level figures only' %% e + chr(10))\n"
    "\"\"\", {})\n";

static pid_t this_tid(void);

/* Whether the calling thread may queue a pending call now.  CPython's
 * Py_AddPendingCall reads the interpreter it queues into: before
 * Py_Initialize and after Py_FinalizeEx there is none (3.11 dereferences a
 * NULL one: an embedder that loads libpython and allocates before it
 * initialises, or after it finalised, crashed in our hook - test_python.py),
 * and while Py_FinalizeEx tears it down its pending-call lock is freed.
 * Py_IsInitialized() turns false (with the finalizing flag) under the GIL,
 * before the teardown, so it is a safe answer only where the teardown cannot
 * run meanwhile: on a thread that holds the GIL, or on the main thread, which
 * is the one that would finalise (an allocation of its own during
 * Py_FinalizeEx comes after the flag).  Any other thread leaves it to a
 * later allocation on one of those: it cannot take the GIL here (we may be
 * inside PyTorch's allocator lock), and its answer could be stale by the
 * time CPython takes the lock. */
static bool interpreter_takes_calls(void)
{
    static _Thread_local signed char main_thread; /* 0 not known, 1 yes, -1 no */
    if (python_holds_gil())
        return true; /* it checked Py_IsInitialized() with the GIL */
    if (main_thread == 0)
        main_thread = this_tid() == getpid() ? 1 : -1;
    return main_thread > 0 && python_initialized();
}

/* The layer's loading code, in layer_code; false when there is no
 * torchboot directory beside the library or its path cannot be quoted.
 * `watch`: the layer waits for torch.cuda itself when it is not there yet
 * (no audit hook of ours does). */
static bool make_layer_code(bool watch)
{
    char dir[1024];
    if (!layer_dir(dir, sizeof dir))
        return false;
    for (const char *c = dir; *c; c++)
        if (*c == '\'' || *c == '"' || *c == '\\' || *c == '\n')
            return false; /* not a path we can quote safely: no layer */
    snprintf(layer_code, sizeof layer_code, layer_fmt, dir, watch ? "True" : "False");
    return true;
}

void python_arm_torch_layer(void)
{
    if (__atomic_load_n(&python_mode, __ATOMIC_ACQUIRE) != PYTHON_ON ||
        __atomic_load_n(&imports_watched, __ATOMIC_RELAXED) ||
        __atomic_load_n(&layer_armed, __ATOMIC_ACQUIRE) || !interpreter_takes_calls() ||
        __atomic_exchange_n(&layer_armed, 1, __ATOMIC_ACQ_REL) ||
        __atomic_add_fetch(&layer_tries, 1, __ATOMIC_RELAXED) > LAYER_TRIES)
        return;
    if (!python_layer_api(&py) || !make_layer_code(true))
        return;
    py.add_pending(run_layer, NULL);
}

/* ---- the import watch (the top) ---- */

static struct {
    int (*is_initialized)(void);             /* Py_IsInitialized */
    int (*run_simple)(const char *);         /* PyRun_SimpleString */
    void *(*modules)(void);                  /* PyImport_GetModuleDict: borrowed */
    void *(*dict_get)(void *, const char *); /* PyDict_GetItemString: borrowed */
    void *(*module_dict)(void *);            /* PyModule_GetDict: borrowed */
    void *(*interp)(void);                   /* PyInterpreterState_Get */
    void *(*main_interp)(void);              /* PyInterpreterState_Main */
    void *(*err_occurred)(void);             /* PyErr_Occurred */
    void (*err_fetch)(void **, void **, void **);
    void (*err_restore)(void *, void *, void *);
    void (*decref)(void *);                  /* Py_DecRef */
} iw;
static int imports_done; /* written with the GIL held */

/* With the GIL, at an import: true once torch.cuda holds what
 * cumemtrace_torch._cuda_module waits for (it may still be importing its
 * own submodules; the layer queues its work for CUDA's initialisation).
 * Only dict look-ups: no Python code runs, no audited event is raised. */
static bool torch_cuda_ready(void)
{
    void *modules = iw.modules();
    void *cuda = modules != NULL ? iw.dict_get(modules, "torch.cuda") : NULL;
    if (cuda == NULL)
        return false;
    void *t = NULL, *v = NULL, *tb = NULL;
    iw.err_fetch(&t, &v, &tb); /* PyModule_GetDict sets one for a non-module */
    void *d = iw.module_dict(cuda);
    bool ready = d != NULL && iw.dict_get(d, "_lazy_call") != NULL &&
                 iw.dict_get(d, "is_initialized") != NULL &&
                 iw.dict_get(d, "_queued_calls") != NULL;
    if (d == NULL && iw.err_occurred() != NULL) {
        void *t2 = NULL, *v2 = NULL, *tb2 = NULL;
        iw.err_fetch(&t2, &v2, &tb2);
        iw.decref(t2);
        iw.decref(v2);
        iw.decref(tb2);
        ready = true; /* not a module: the layer's own code says what it is */
    }
    iw.err_restore(t, v, tb);
    return ready;
}

/* Taking the hook back out.  CPython offers no way: its C hooks are a
 * list, {next, function, data} an entry (3.8-3.13), whose head is a word
 * of _PyRuntime; while the head is NULL (and no Python hook is there) an
 * audited event builds nothing and calls nothing, as in the bare process.
 * Ours is found, not assumed: the one word of _PyRuntime (its symbol's
 * size) that PySys_AddAuditHook changed, from NULL to an entry holding
 * on_audit and no next.  Another C hook added before ours (none changed
 * then) or any other word changed: ours stays in.  The entry is never freed
 * (an interpreter of another GIL may be reading it); CPython's finalisation
 * then frees the hooks after it, as it would have. */
static void **hook_head;  /* the head's word, where ours is the only hook */
static void *hook_entry;

static void unhook(void)
{
    if (hook_head == NULL)
        return;
    void *e = hook_entry;
    if (__atomic_load_n(hook_head, __ATOMIC_ACQUIRE) == e)
        __atomic_store_n(hook_head, ((void **)e)[0], __ATOMIC_RELEASE);
    hook_head = NULL;
}

static int on_audit(const char *event, void *args, void *data);

/* Adds on_audit, and finds its entry where that can be told (above). */
static bool add_hook_found(int (*add_hook)(int (*)(const char *, void *, void *), void *))
{
    void *rt = resolve_dlsym(RTLD_DEFAULT, "_PyRuntime");
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    size_t words = 0;
    if (rt != NULL && dladdr1(rt, &info, (void **)&sym, RTLD_DL_SYMENT) != 0 && sym != NULL &&
        sym->st_value != 0 && (uintptr_t)rt % sizeof(void *) == 0)
        words = sym->st_size / sizeof(void *);
    void **before = words != 0 && words <= (1u << 20) ? malloc(words * sizeof(void *)) : NULL;
    if (before != NULL)
        memcpy(before, rt, words * sizeof(void *));
    if (add_hook(on_audit, NULL) != 0) {
        free(before);
        return false;
    }
    if (before == NULL)
        return true;
    void **now = rt, **head = NULL;
    size_t changed = 0;
    for (size_t i = 0; i < words; i++) {
        if (now[i] == before[i])
            continue;
        changed++;
        head = before[i] == NULL ? &now[i] : NULL;
    }
    free(before);
    if (changed != 1 || head == NULL)
        return true;
    void **e = *head;
    if (e[0] == NULL && e[1] == (void *)on_audit && e[2] == NULL) {
        hook_entry = e;
        hook_head = head;
    }
    return true;
}

/* The audit hook: every audited event of the process calls it, with the
 * GIL, until it has loaded the layer and taken itself out (above).  Returns 0 always: it never aborts an event. */
static int on_audit(const char *event, void *args, void *data)
{
    (void)args;
    (void)data;
    if (imports_done || event[0] != 'i' || strcmp(event, "import") != 0)
        return 0;
    if (iw.interp() != iw.main_interp() || !torch_cuda_ready())
        return 0; /* a sub-interpreter's import, or torch.cuda not there yet */
    imports_done = 1; /* before: the layer's own imports come back here */
    iw.run_simple(layer_code); /* says its own failures */
    unhook();
    return 0;
}

#define IW(field, name) (*(void **)&iw.field = resolve_dlsym(RTLD_DEFAULT, name))

/* Resolved here, not through python.c: CUMEMTRACE_PYTHON=0 (no Python
 * frames in stacks) keeps the layer. */
void torch_layer_watch_imports(void)
{
    int (*add_hook)(int (*)(const char *, void *, void *), void *);
    *(void **)&add_hook = resolve_dlsym(RTLD_DEFAULT, "PySys_AddAuditHook");
    if (add_hook == NULL || IW(is_initialized, "Py_IsInitialized") == NULL ||
        iw.is_initialized())
        return; /* no CPython, or one running already: no hook of Python's
                   may see ours added */
    IW(run_simple, "PyRun_SimpleString");
    IW(modules, "PyImport_GetModuleDict");
    IW(dict_get, "PyDict_GetItemString");
    IW(module_dict, "PyModule_GetDict");
    IW(interp, "PyInterpreterState_Get");
    IW(main_interp, "PyInterpreterState_Main");
    IW(err_occurred, "PyErr_Occurred");
    IW(err_fetch, "PyErr_Fetch");
    IW(err_restore, "PyErr_Restore");
    IW(decref, "Py_DecRef");
    if (iw.run_simple == NULL || iw.modules == NULL || iw.dict_get == NULL ||
        iw.module_dict == NULL || iw.interp == NULL || iw.main_interp == NULL ||
        iw.err_occurred == NULL || iw.err_fetch == NULL || iw.err_restore == NULL ||
        iw.decref == NULL || !make_layer_code(false))
        return; /* the first allocation's pending call stands in */
    if (add_hook_found(add_hook))
        __atomic_store_n(&imports_watched, true, __ATOMIC_RELEASE);
}

/* ---- fresh figures before a dump ----
 *
 * PyTorch's own view (memory_stats, its allocation history, the roles) can
 * be read only from Python, with the GIL, outside its allocator's lock: the
 * layer does it at an OOM (its observer) and at exit (atexit).  For the
 * dumps in between - a signal, CUMEMTRACE_INTERVAL, cumemtrace_dump, the
 * pytest plugin's marks - the layer registers a callable that reports the
 * current figures through cumemtrace_allocator_state, and the dumping
 * thread has it run first:
 *   - on the dumping thread, when that thread holds the GIL (a C extension
 *     calling cumemtrace_dump) or is Python's main thread (ctypes released
 *     the GIL around the call; PyGILState_Ensure takes it back, as a ctypes
 *     callback does) - waiting for the main thread there would wait for
 *     ourselves;
 *   - else (our background thread, any thread without a Python thread
 *     state, another Python thread) through Py_AddPendingCall, which needs
 *     neither the GIL nor a thread state: CPython runs the call on its main
 *     thread, with the GIL, between two bytecodes.  The dump waits for the
 *     answer at most TORCH_REFRESH_WAIT_MS (CPython promises no delay: "if
 *     the main thread is busy executing a system call, func won't be called
 *     before the system call returns"), then goes ahead with the figures it
 *     has, and its document says so (allocator_refresh_note; each figure
 *     carries when it was reported).  One call is queued at a time; a later
 *     dump waits for the same one.
 * The host: the layer's callable catches every Exception.  What else comes
 * out of it is a signal handler's KeyboardInterrupt or SystemExit raised
 * while it ran on the main thread: the pending call returns -1 with it, so
 * the host gets it where it would have (between two bytecodes); on the
 * dumping thread it is handed to the main thread by a pending call.
 * Finalisation: Py_AddPendingCall on an interpreter being torn down reads
 * freed state, so the layer unregisters from Python's atexit (the
 * interpreter is whole then) and a call is queued only under refresh_lock
 * with the callable registered; unregistering takes the lock.  A call
 * queued before and run during the teardown finds no callable and returns.
 * Threads: `refresher` is read and written with the GIL held; the counters
 * under refresh_lock, which is never held while waiting for the GIL. */

#define HOLD_MS 5000 /* what the termination-signal handler waits, too */

static struct python_layer_api rp; /* set before `registered` is first set */
static void *refresher;      /* a PyObject * we hold a reference to */
static int registered;       /* refresher != NULL, for threads without the GIL */
static pthread_mutex_t refresh_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t refresh_cond;
static pthread_once_t cond_once = PTHREAD_ONCE_INIT;
static uint64_t asked, started, answered; /* tickets, under refresh_lock */
static bool deferred_call;       /* our call said "not now": the waiter asks again */
static bool queued;              /* our call is in CPython's queue */
static bool holding;             /* the main thread waits after answering */
static pid_t main_tid;           /* the thread that ran our call: Python's main */
static void *held_exc[3];        /* an exception for the main thread, with the GIL */

static bool cond_made;

static void cond_init(void)
{
    cond_made = true;
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&refresh_cond, &a);
    pthread_condattr_destroy(&a);
}

static pid_t this_tid(void)
{
    return (pid_t)syscall(SYS_gettid);
}

static pid_t python_main_tid(void)
{
    pid_t t = __atomic_load_n(&main_tid, __ATOMIC_ACQUIRE);
    return t != 0 ? t : getpid(); /* until our first call ran: the process's first thread */
}

/* ---- which interpreter asks ----
 * The layer's callable belongs to the interpreter it registered in (the
 * main one).  A dump asked from a sub-interpreter must not run it: through
 * ctypes.PyDLL that thread holds the GIL with the sub-interpreter's state,
 * and PyGILState_Ensure (which picks the main interpreter's state of the
 * thread) waited for that GIL forever; through ctypes.CDLL it ran the main
 * interpreter's layer in the middle of the sub-interpreter's call (its
 * ctypes types then did not match, and the layer turned the segment layout
 * off for good).  Such a dump is written with the figures last read, and
 * says nothing was asked (no `allocator_refresh`).  Told apart: a thread
 * state attached to another interpreter; and, on Python's main thread with
 * no thread state attached (the GIL released around a ctypes call), any
 * interpreter besides the layer's alive - the list of interpreters starts
 * with the newest, so one read of its head says it - since which one the
 * thread left cannot be seen then: a dump from the main interpreter's
 * ctypes.CDLL while a sub-interpreter exists keeps the figures last read
 * too. */
static void *layer_interp;                /* where the refresher registered */
static void *(*current_state)(void);      /* PyThreadState_GetUnchecked */
static void *(*state_interp)(void *);     /* PyThreadState_GetInterpreter */
static void *(*interp_head)(void);        /* PyInterpreterState_Head */

/* With the GIL, at registration (a ctypes call, not a wrapper: the loader
 * may be entered). */
static void note_interpreter(void)
{
    if (current_state == NULL) {
        *(void **)&current_state = resolve_dlsym(RTLD_DEFAULT, "PyThreadState_GetUnchecked");
        if (current_state == NULL)
            *(void **)&current_state =
                resolve_dlsym(RTLD_DEFAULT, "_PyThreadState_UncheckedGet");
        *(void **)&state_interp = resolve_dlsym(RTLD_DEFAULT, "PyThreadState_GetInterpreter");
        *(void **)&interp_head = resolve_dlsym(RTLD_DEFAULT, "PyInterpreterState_Head");
    }
    void *ts = current_state != NULL ? current_state() : NULL;
    __atomic_store_n(&layer_interp, ts != NULL && state_interp != NULL ? state_interp(ts) : NULL,
                     __ATOMIC_RELEASE);
}

/* True when the calling thread may be inside an interpreter other than the
 * layer's (above). */
static bool other_interpreter(bool main)
{
    void *mine = __atomic_load_n(&layer_interp, __ATOMIC_ACQUIRE);
    if (mine == NULL || current_state == NULL || state_interp == NULL)
        return false;
    void *ts = current_state();
    if (ts != NULL)
        return state_interp(ts) != mine;
    return main && interp_head != NULL && interp_head() != mine;
}

static bool refresh_api(void)
{
    return rp.call != NULL && rp.exc_matches != NULL && rp.exc_exception != NULL &&
           rp.err_fetch != NULL && rp.err_restore != NULL && rp.incref != NULL;
}

/* With the GIL: the exception of the main thread's next bytecode. */
static int reraise(void *arg)
{
    (void)arg;
    if (held_exc[0] == NULL)
        return 0;
    rp.err_restore(held_exc[0], held_exc[1], held_exc[2]);
    held_exc[0] = held_exc[1] = held_exc[2] = NULL;
    return -1;
}

/* Runs the refresher, with the GIL.  Returns 0, or -1 with what it raised
 * that is no Exception still set, when `to_main` is false; with `to_main`
 * that goes to the main thread instead.  *deferred: it answered False, "not
 * now" (the main thread is inside an import, which the layer's reading
 * could break: PyTorch's first memory snapshot imports torch._inductor). */
static int64_t mono_ns(void);
static int64_t reading_ns; /* the layer's readings, in total (torch_layer.h) */

int64_t torch_layer_reading_ns(void)
{
    return __atomic_load_n(&reading_ns, __ATOMIC_RELAXED);
}

static int call_refresher(bool to_main, bool *deferred)
{
    *deferred = false;
    void *fn = refresher;
    if (fn == NULL)
        return 0;
    rp.incref(fn); /* it may unregister itself */
    int64_t t0 = mono_ns();
    void *r = rp.call(fn, NULL);
    __atomic_add_fetch(&reading_ns, mono_ns() - t0, __ATOMIC_RELAXED);
    rp.decref(fn);
    if (r != NULL) {
        *deferred = rp.false_obj != NULL && r == rp.false_obj;
        rp.decref(r);
        return 0;
    }
    void *t = NULL, *v = NULL, *tb = NULL;
    if (rp.exc_matches(*rp.exc_exception)) {
        rp.err_fetch(&t, &v, &tb); /* the layer says its own failures */
        rp.decref(t);
        rp.decref(v);
        rp.decref(tb);
        return 0;
    }
    if (!to_main)
        return -1;
    rp.err_fetch(&t, &v, &tb);
    if (held_exc[0] == NULL && rp.add_pending(reraise, NULL) == 0) {
        held_exc[0] = t;
        held_exc[1] = v;
        held_exc[2] = tb;
    } else {
        rp.decref(t);
        rp.decref(v);
        rp.decref(tb);
    }
    return 0;
}

static struct timespec deadline_in(int64_t ms)
{
    struct timespec d;
    clock_gettime(CLOCK_MONOTONIC, &d);
    d.tv_sec += ms / 1000;
    d.tv_nsec += (ms % 1000) * 1000000;
    if (d.tv_nsec >= 1000000000) {
        d.tv_sec++;
        d.tv_nsec -= 1000000000;
    }
    return d;
}

/* Py_AddPendingCall's function: on the main thread, with the GIL. */
static int pending_refresh(void *arg)
{
    (void)arg;
    __atomic_store_n(&main_tid, this_tid(), __ATOMIC_RELEASE);
    pthread_mutex_lock(&refresh_lock);
    queued = false; /* a dump asking from now on queues another call */
    uint64_t ticket = asked, before = started;
    started = ticket;
    pthread_cond_broadcast(&refresh_cond);
    pthread_mutex_unlock(&refresh_lock);
    bool later;
    int rc = call_refresher(false, &later);
    pthread_mutex_lock(&refresh_lock);
    if (later) {
        started = before;
        deferred_call = true;
    } else if (answered < ticket) {
        answered = ticket;
    }
    pthread_cond_broadcast(&refresh_cond);
    struct timespec until = deadline_in(HOLD_MS);
    while (!later && holding &&
           pthread_cond_timedwait(&refresh_cond, &refresh_lock, &until) != ETIMEDOUT)
        ;
    if (!later)
        holding = false;
    pthread_mutex_unlock(&refresh_lock);
    return rc;
}

static int64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Under refresh_lock: waits for `ticket`'s answer - TORCH_REFRESH_WAIT_MS
 * for the main thread to take it up, then TORCH_REFRESH_RUN_MS for the
 * layer's reading - asking again every 10 ms while it says "not now".
 * True when answered. */
static bool wait_answer(uint64_t ticket)
{
    int64_t start_by = mono_ns() + (int64_t)TORCH_REFRESH_WAIT_MS * 1000000, run_by = 0;
    for (;;) {
        if (answered >= ticket)
            return true;
        int64_t now = mono_ns();
        if (started >= ticket && run_by == 0)
            run_by = now + (int64_t)TORCH_REFRESH_RUN_MS * 1000000;
        if (now >= (run_by != 0 ? run_by : start_by))
            return false;
        if (deferred_call && !queued && __atomic_load_n(&registered, __ATOMIC_ACQUIRE)) {
            deferred_call = false;
            run_by = 0;
            if (rp.add_pending(pending_refresh, NULL) != 0)
                return false;
            queued = true;
        }
        int64_t next = now + 10000000, end = run_by != 0 ? run_by : start_by;
        struct timespec until = deadline_in(((next < end ? next : end) - now) / 1000000 + 1);
        pthread_cond_timedwait(&refresh_cond, &refresh_lock, &until);
    }
}

void torch_layer_refresh(bool hold)
{
    if (!__atomic_load_n(&registered, __ATOMIC_ACQUIRE))
        return;
    pthread_once(&cond_once, cond_init);
    bool main = this_tid() == python_main_tid();
    if (other_interpreter(main))
        return; /* not asked: the figures last read (above) */
    struct allocator_refresh r = {.asked = true, .asked_ns = clock_now_ns(),
                                  .wait_ms = TORCH_REFRESH_WAIT_MS};
    bool later = false;
    if (python_holds_gil()) {
        r.direct = true;
        call_refresher(true, &later);
        r.answered = !later;
    } else if (main && rp.gil_ensure != NULL && rp.gil_release != NULL &&
               rp.this_thread_state() != NULL && rp.is_initialized()) {
        /* Python's main thread, the GIL released around a call into us:
         * nobody else can answer for it. */
        r.direct = true;
        int g = rp.gil_ensure();
        call_refresher(true, &later);
        rp.gil_release(g);
        r.answered = !later;
    } else if (!main) {
        pthread_mutex_lock(&refresh_lock);
        uint64_t ticket = ++asked;
        bool ok = __atomic_load_n(&registered, __ATOMIC_ACQUIRE);
        if (ok && !queued) {
            ok = rp.add_pending(pending_refresh, NULL) == 0;
            queued = ok;
        }
        if (ok) {
            holding = hold;
            r.answered = wait_answer(ticket);
            if (!r.answered)
                holding = false; /* a call that runs after the dump must not wait */
        }
        pthread_mutex_unlock(&refresh_lock);
    }
    r.waited_ns = clock_now_ns() - r.asked_ns;
    allocator_refresh_note(&r);
}

void torch_layer_atfork_child(void)
{
    /* The forking thread is the child's only one, and Python's main thread
     * there (os.fork from Python); nothing of ours is queued or waiting. */
    pthread_mutex_init(&refresh_lock, NULL);
    if (cond_made)
        cond_init();
    __atomic_store_n(&main_tid, 0, __ATOMIC_RELEASE);
    queued = holding = deferred_call = false;
    answered = started = asked;
}

bool torch_layer_main_thread_answers(void)
{
    return __atomic_load_n(&registered, __ATOMIC_ACQUIRE) &&
           this_tid() == python_main_tid();
}

/* The PyTorch layer's entry point (torch_protocol.h), with the GIL. */
__attribute__((visibility("default"))) int cumemtrace_allocator_refresher(void *callable)
{
    if (!python_holds_gil())
        return -1; /* no CPython we use, or called without the GIL (ctypes.CDLL) */
    if (rp.call == NULL && (!python_layer_api(&rp) || !refresh_api())) {
        memset(&rp, 0, sizeof rp);
        return -1;
    }
    if (callable != NULL) {
        rp.incref(callable);
        note_interpreter();
    }
    pthread_mutex_lock(&refresh_lock);
    void *old = refresher;
    refresher = callable;
    __atomic_store_n(&registered, callable != NULL, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&refresh_lock);
    rp.decref(old);
    return 0;
}

/* ---- PYTHONPATH for a Python that ignores it ---- */

#define TORCHBOOT_TAIL "/share/cumemtrace/torchboot" /* run.c's python_path */

void torch_layer_python_env(void)
{
    const char *was = getenv("CUMEMTRACE_PYTHONPATH");
    const char *now = getenv("PYTHONPATH");
    if (was == NULL || now == NULL)
        return; /* not under `run`, or sitecustomize's work to do */
    static char cmd[4096];
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, cmd, sizeof cmd - 1);
    close(fd);
    if (n <= 0)
        return;
    cmd[n] = '\0'; /* a longer line is cut: its options come first */
    char *argv[64];
    int argc = 0;
    for (char *p = cmd; p < cmd + n && argc < 63; p += strlen(p) + 1)
        argv[argc++] = p;
    argv[argc] = NULL;
    if (!pyflags_skips_site(argv))
        return;
    /* our directory first, as run.c put it; the rest as the parent left it */
    const char *colon = strchr(now, ':');
    size_t first = colon ? (size_t)(colon - now) : strlen(now);
    size_t tail = strlen(TORCHBOOT_TAIL);
    if (first < tail || memcmp(now + first - tail, TORCHBOOT_TAIL, tail) != 0)
        return;
    if (colon != NULL && colon[1] != '\0') {
        char *rest = strdup(colon + 1);
        if (rest == NULL)
            return;
        setenv("PYTHONPATH", rest, 1);
        free(rest);
    } else if (was[0] == '=') {
        setenv("PYTHONPATH", was + 1, 1);
    } else {
        unsetenv("PYTHONPATH");
    }
    unsetenv("CUMEMTRACE_PYTHONPATH");
}
