/* python_impl.h - what the files behind python.h share: the CPython API
 * resolved at load time (python.c), the intern table (python_table.c), the
 * no-GIL reader (python_nogil.c) and the direct frame walk (python_walk.c).
 * Not an interface of the preload: python.h is. */
#ifndef CUMEMTRACE_PYTHON_IMPL_H
#define CUMEMTRACE_PYTHON_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "python.h"

/* CPython's PyObject, never looked into except by python_walk.c. */
typedef struct py_object py_object;

/* The public C API we use, resolved once by python.c's find_api(). */
struct python_api {
    int (*is_initialized)(void);
    int (*gil_check)(void);
    void *(*this_thread_state)(void);    /* PyGILState_GetThisThreadState */
    void *(*current_thread_state)(void); /* may be NULL: then trust gil_check */
    py_object *(*thread_frame)(void *);  /* new reference */
    py_object *(*frame_back)(py_object *);
    py_object *(*frame_code)(py_object *);
    int (*frame_line)(py_object *);
    int (*frame_lasti)(py_object *);     /* 3.11+ */
    int (*addr2line)(py_object *, int);  /* PyCode_Addr2Line, may be NULL */
    py_object *(*getattr)(py_object *, const char *);
    const char *(*as_utf8)(py_object *);
    void (*incref)(py_object *);
    void (*decref)(py_object *);
    int (*gc_disable)(void);             /* 3.11+ only, see python.c */
    int (*gc_enable)(void);
    void (*err_fetch)(py_object **, py_object **, py_object **);
    void (*err_restore)(py_object *, py_object *, py_object *);
    const char *(*version)(void);
    const void *code_type;              /* &PyCode_Type */
    const void *unicode_type;           /* &PyUnicode_Type: python_walk.c's names */
    void (*dump_traceback)(int, void *); /* _Py_DumpTraceback, may be NULL */
};
extern struct python_api pyapi;
extern int py_minor; /* CPython 3.<py_minor> */

/* Frame indices below MARKER_COUNT are the marker frames. */
enum { MARK_NO_GIL, MARK_TRUNCATED, MARK_NO_MEMORY, MARK_AUTOGRAD, MARKER_COUNT };

static inline void *py_tag(uint32_t index)
{
    return (void *)(PYTHON_TAG | index);
}

/* ---- the intern table (python_table.c), guarded by py_lock ---- */

extern pthread_mutex_t py_lock;

/* What a code object's names and lines come from: its co_filename,
 * co_qualname and co_linetable objects, its first line and its size.  A
 * code object first seen without the GIL cannot be given a reference (its
 * count is the GIL holder's to change), so it may die and another take its
 * address; an entry made then is trusted only while the object at that
 * address still has all of these. */
struct code_id {
    const void *file, *name, *lines;
    uint64_t shape; /* ob_size << 32 | co_firstlineno */
};

static inline bool py_same_id(const struct code_id *a, const struct code_id *b)
{
    return a->file == b->file && a->name == b->name && a->lines == b->lines &&
           a->shape == b->shape;
}

/* How py_index_frames and py_lasti_intern read a frame they have not seen. */
enum py_how {
    PY_LINES,     /* up to 3.10: raw frames carry lines; GIL held, API names */
    PY_API,       /* 3.11+, from the API's walk (frame objects set); GIL held */
    PY_DIRECT,    /* 3.11+, from the direct walk; GIL held, API names */
    PY_NOGIL,     /* 3.11+, direct walk without the GIL: names read directly */
    PY_NOGIL_SAFE /* the same before the layout is proven: every read through
                   * the probe (the caller holds py_probe_lock) */
};

static inline bool py_how_gil(enum py_how how)
{
    return how <= PY_DIRECT;
}

/* The index of (code, line) up to 3.10, interned if new (names copied,
 * code referenced); MARK_NO_MEMORY when it cannot be.  Caller holds
 * py_lock and the GIL. */
uint32_t py_frame_intern(py_object *code, int line);

/* 3.11+: the index of (code, instruction offset `lasti`), interned if new
 * (the line from `frame` when set, else PyCode_Addr2Line); MARK_NO_MEMORY
 * when it cannot be.  *unheld: the entry holds no reference (made without
 * the GIL): a cache of it must check the code's identity (py_code_id).
 * Caller holds py_lock (and the GIL when py_how_gil(how)). */
uint32_t py_lasti_intern(py_object *code, int lasti, py_object *frame, enum py_how how,
                         bool *unheld);

/* The index of a frame known only by its names (the no-GIL reader's
 * text).  Caller holds py_lock. */
uint32_t py_names_frame_intern(const char *file, size_t flen, int line,
                               const char *fn, size_t fnlen);

/* One frame seen by a walk.  References are borrowed: the running frames
 * hold their frame objects and code objects while we hold the GIL. */
struct raw_frame {
    py_object *code;
    py_object *frame;  /* the API's walks only: for the line on a miss */
    int line_or_lasti; /* the line up to 3.10, the instruction offset after */
    uintptr_t self;    /* py_walk_selves only: the frame's first local (a
                        * method's `self`), never dereferenced */
};

/* ---- the direct walk and the per-thread cache (python_walk.c) ---- */

/* Picks the layout of CPython 3.<py_minor>, if we know it; once, after the
 * API is resolved. */
void py_walk_init(void);

/* py_walk_direct's walk that also reads each frame's first local (raw's
 * `self`): for python_selves only, so that captures do not pay for it. */
int py_walk_selves(void *ts, struct raw_frame *raw, unsigned max, bool *more);

/* True once direct walks have been proven right in this process. */
bool py_walk_proven(void);

/* Up to max frames of the calling thread (state ts, GIL held), innermost
 * first, read from the interpreter's structs; -1 when a frame is not as
 * expected: walk through the API instead.  Only once py_walk_proven(). */
int py_walk_direct(void *ts, struct raw_frame *raw, unsigned max, bool *more);

/* After a walk through the API of m frames: walks again directly with
 * reads that cannot fault and compares; decides py_walk_proven(). */
void py_walk_verify(void *ts, const struct raw_frame *api_raw, unsigned m, bool more);

/* py[0..m) = the tagged frame indices of raw[0..m), reusing those of the
 * frames this thread's last stack shares with it; interns the rest under
 * py_lock (with the collector off when the GIL is held, from 3.11).  `how`
 * says how the frames were read. */
void py_index_frames(const struct raw_frame *raw, unsigned m, void **py, enum py_how how);

/* Reads code's identity (struct code_id) directly; `safe`: through the
 * probe (caller holds py_probe_lock).  False when unreadable. */
bool py_code_id(py_object *code, struct code_id *id, bool safe);

/* A malloc'ed UTF-8 copy of the str object at `s`, read from its struct
 * (compact strings, as CPython makes them); NULL when it is not one or
 * cannot be read.  `safe`: through the probe.  Needs no GIL: the caller's
 * own frames keep the code object, and so its names, alive. */
char *py_read_str(const void *s, bool safe);

/* The code object's co_filename / co_qualname / co_name objects (3.11+). */
enum py_code_field { CODE_FILE, CODE_QUALNAME, CODE_NAME };
const void *py_code_field(py_object *code, enum py_code_field which, bool safe);

/* The probe: reads that cannot fault, for frames not yet proven.  True
 * with the lock taken and the probe ready. */
bool py_probe_lock(void);
void py_probe_unlock(void);

/* Under py_probe_lock: the direct walk with reads that cannot fault;
 * *skipped counts the incomplete frames passed over. */
int py_walk_safe(void *ts, struct raw_frame *raw, unsigned max, bool *more,
                 unsigned *skipped);

/* Under py_probe_lock: a stack read both ways agreed or not; `counts`: it
 * has two frames or more.  Decides py_walk_proven() as py_walk_verify does
 * (VERIFY_STACKS agreeing stacks prove, one disagreement refuses). */
void py_walk_judged(bool agree, bool counts);

/* True while direct walks are neither proven nor refused. */
bool py_walk_unproven(void);

/* ---- the no-GIL reader (python_nogil.c) ---- */

/* Up to max tagged frames of thread state ts, which does not hold the GIL:
 * read directly once the layout is proven, else through CPython's
 * fault-handler dumper (whose text also proves the layout); 0 when it
 * cannot (the caller then uses the marker).  Takes py_lock itself. */
unsigned py_nogil_frames(void *ts, void **py, unsigned max, bool *more);

/* Fork handlers of the readers' locks and memfd (python.c registers them). */
void py_walk_fork_prepare(void);
void py_walk_fork_release(void);
void py_nogil_fork_prepare(void);
void py_nogil_fork_release(void);
void py_nogil_fork_child(void);

#endif
