/* python.h - Python frames merged into native stacks, found at run time in
 * whatever CPython (3.9 or newer) the process holds.  See python.c. */
#ifndef CUMEMTRACE_PYTHON_H
#define CUMEMTRACE_PYTHON_H

#include <stdbool.h>
#include <stdint.h>

/* A Python or marker frame is stored in record_stack.frames[] as this bit
 * plus an index into python.c's intern table.  No user-space return address
 * has it (x86-64 and aarch64 user addresses stay below 2^57), so native and
 * Python frames share one array and stack dedup compares them alike. */
#define PYTHON_TAG ((uintptr_t)1 << 63)

enum python_mode {
    PYTHON_OFF,     /* CUMEMTRACE_PYTHON=0, or no usable CPython: nothing to do */
    PYTHON_PENDING, /* not looked for yet: the first allocation looks, once */
    PYTHON_ON       /* CPython found: every capture asks it for frames */
};

/* Read on every capture: the only cost to a process without Python is one
 * branch on this.  Written once more at the first allocation, hence the
 * atomic load (a plain load on x86-64 and aarch64). */
extern enum python_mode python_mode __attribute__((visibility("hidden")));

static inline bool python_wanted(void)
{
    return __atomic_load_n(&python_mode, __ATOMIC_RELAXED) != PYTHON_OFF;
}

/* Sets python_mode from config.python.  Looks for no symbol yet (Python may
 * be dlopen'ed after we load); call once, from initialisation. */
void python_init(void);

/* Merges the calling thread's Python frames into frames[0..n) (native
 * return addresses, innermost first) and returns the new count, at most
 * `cap`.  Python frames take the place of the interpreter's evaluation
 * frames; when the thread does not hold the GIL one marker frame does.
 * Returns n unchanged when there is nothing to add.  Never takes the GIL,
 * never runs Python code. */
unsigned python_merge(void **frames, unsigned n, unsigned cap);

/* The first local of each Python frame of the calling thread (a method's
 * `self`) and its code's co_name object, innermost first, at most `max`;
 * 0 unless frames are read directly (CPython 3.11-3.13, layout proven).
 * For record_peak.c, at a device's new peak, from inside that allocation:
 * so that the PyTorch layer can tell which modules' forward() ran then (a
 * `self` is never dereferenced; the layer matches it to live modules'
 * id()).  Allocates nothing, takes no lock. */
unsigned python_selves(uintptr_t *selves, uintptr_t *names, unsigned max);

/* The part of CPython's API torch_layer.c uses, resolved at load time like
 * the rest (no dlsym inside a wrapper); false without a usable CPython. */
struct python_layer_api {
    int (*add_pending)(int (*)(void *), void *); /* Py_AddPendingCall */
    int (*run_simple)(const char *);             /* PyRun_SimpleString */
    void *(*unicode)(const char *);              /* PyUnicode_FromString */
    void *(*get_module)(void *);                 /* PyImport_GetModule */
    void (*decref)(void *);                      /* Py_DecRef */
    /* The refresh of the layer's figures before a dump (torch_layer.c);
     * call, exc_matches, exc_exception, gil_ensure, gil_release may be NULL
     * (then there is no refresh). */
    void (*incref)(void *);                      /* Py_IncRef */
    int (*is_initialized)(void);                 /* Py_IsInitialized */
    void *(*call)(void *, void *);               /* PyObject_CallObject */
    int (*exc_matches)(void *);                  /* PyErr_ExceptionMatches */
    void **exc_exception;                        /* &PyExc_Exception */
    void *false_obj;                             /* Py_False (&_Py_FalseStruct) */
    void (*err_fetch)(void **, void **, void **); /* PyErr_Fetch */
    void (*err_restore)(void *, void *, void *); /* PyErr_Restore */
    void *(*this_thread_state)(void);            /* PyGILState_GetThisThreadState */
    int (*gil_ensure)(void);                     /* PyGILState_Ensure */
    void (*gil_release)(int);                    /* PyGILState_Release */
};
bool python_layer_api(struct python_layer_api *out);

/* True when CPython runs and the calling thread holds its GIL (the test
 * python_merge uses, see python.c). */
bool python_holds_gil(void);

/* True when CPython is found and Py_IsInitialized() says an interpreter
 * runs: false before Py_Initialize, from Py_FinalizeEx's start on, and
 * without CPython.  Any thread may ask; without the GIL the answer may be
 * stale by the time it is used (torch_layer.c says when it is not). */
bool python_initialized(void);

/* Once per process, at an allocation (torch_layer.c): when CPython runs and
 * torch is imported, asks it to load the PyTorch layer
 * (src/torchboot/cumemtrace_torch.py) at its next safe point, unless
 * `cumemtrace run` already booted it.  Never blocks. */
void python_arm_torch_layer(void);

/* What one stored frame is, for the snapshot writer. */
enum python_frame_kind {
    PYTHON_FRAME_NATIVE, /* a return address: symbolise it */
    PYTHON_FRAME_PYTHON, /* file, line, function are set */
    PYTHON_FRAME_MARKER  /* marker is set */
};

struct python_frame {
    const char *file;     /* co_filename, as CPython has it */
    const char *function; /* co_qualname (3.11+) or co_name */
    int line;
    const char *marker;   /* e.g. "python frames unavailable: GIL not held" */
};

/* Decodes one entry of record_stack.frames[].  Safe without any lock for
 * frames of a published stack (entries are immutable once created). */
enum python_frame_kind python_frame_decode(const void *frame,
                                           struct python_frame *out);

static inline bool python_frame_is_tagged(const void *frame)
{
    return ((uintptr_t)frame & PYTHON_TAG) != 0;
}

#endif
