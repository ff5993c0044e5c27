/* test_python.c - python.c against a fake CPython: splicing for each
 * version family (3.8 raw fields, 3.9-3.10 one evaluation frame per Python
 * call, 3.11+ inlined), the GIL rule, reference counts, the collector kept
 * off while frame objects may be created, the pending exception preserved,
 * line look-ups cached per instruction, truncation, and the look-up made
 * again at the first allocation.  The e2e tests (tests/e2e/test_python.py)
 * cover the machine's real CPython; this covers the versions it is not.
 *
 * The fake objects have CPython's head layout (ob_refcnt, ob_type, then for
 * frames ob_size, f_back, f_code as in 3.8); python.c reaches the fake API
 * through resolve_dlsym, defined here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "python.h"
#include "python_impl.h"
#include "record.h"
#include "resolve.h"
#include "unwind.h"

/* ---- what python.c links against besides the fake CPython ---- */

struct config config = {.depth = 32, .python = true, .native = true};
enum log_level log_threshold = LOG_ERROR;

void log_msg(enum log_level level, const char *fmt, ...)
{
    (void)level;
    (void)fmt;
}

/* unwind.c's end of native stacks, as python.c sets it */
static uintptr_t stop_lo, stop_hi;

void unwind_stop_at(uintptr_t lo, uintptr_t hi)
{
    stop_lo = lo;
    stop_hi = hi;
}

/* ---- the fake CPython ---- */

typedef struct py_object py_object; /* the same incomplete type python.c uses */

struct fake_obj {
    intptr_t refcnt;
    const void *type;
};

struct fake_code {
    struct fake_obj ob;
    const char *file, *qualname, *name;
};

struct fake_frame {
    struct fake_obj ob;
    intptr_t size;
    struct fake_frame *back;
    struct fake_code *code;
    int line, lasti;
};

struct fake_str {
    struct fake_obj ob;
    const char *utf8;
};

static char frame_type, code_type, str_type, unicode_type;
static const char *version = "3.11.4";
static int present = 1;                  /* symbols visible at all */
static int gil_held = 1, other_holds;    /* other_holds: check disabled */
/* tstate_mine is as big as a PyThreadState: the direct walk (3.11+) reads
 * its cframe pointer at byte 56 (python_walk.c's 3.11 layout). */
static void *tstate_mine[48];
static int tstate_other;
static int api_walks; /* PyThreadState_GetFrame calls */
static struct fake_frame *top;
static int gc_enabled = 1;
static int line_calls, live_strs;
static void *pending_err;
static void *eval_fn;                    /* a real function with a size */
static uintptr_t eval_lo;

static int minor(void)
{
    return atoi(version + 2);
}

static void check_gc_off(void)
{
    if (minor() >= 11)
        assert_int_equal(gc_enabled, 0); /* frame objects may be created */
}

static int fake_is_initialized(void) { return 1; }
static int fake_gil_check(void) { return gil_held || other_holds; }
static void *fake_this_thread(void) { return &tstate_mine; }

static void *fake_unchecked(void)
{
    return gil_held ? (void *)&tstate_mine
                    : other_holds ? (void *)&tstate_other : NULL;
}

static py_object *fake_thread_frame(void *ts)
{
    assert_ptr_equal(ts, &tstate_mine);
    check_gc_off();
    api_walks++;
    if (top != NULL)
        top->ob.refcnt++;
    return (py_object *)top;
}

static py_object *fake_eval_frame(void) { return (py_object *)top; }
static py_object *fake_frame_back(py_object *o)
{
    struct fake_frame *f = (struct fake_frame *)o;
    check_gc_off();
    if (f->back != NULL)
        f->back->ob.refcnt++;
    return (py_object *)f->back;
}

static py_object *fake_frame_code(py_object *o)
{
    struct fake_frame *f = (struct fake_frame *)o;
    f->code->ob.refcnt++;
    return (py_object *)f->code;
}


static int fake_frame_line(py_object *o)
{
    line_calls++;
    return ((struct fake_frame *)o)->line;
}

static int fake_frame_lasti(py_object *o)
{
    return ((struct fake_frame *)o)->lasti;
}

static py_object *fake_getattr(py_object *o, const char *name)
{
    struct fake_code *c = (struct fake_code *)o;
    assert_ptr_equal(c->ob.type, &code_type);
    assert_null(pending_err); /* saved before, restored after */
    const char *v = NULL;
    if (strcmp(name, "co_filename") == 0)
        v = c->file;
    else if (strcmp(name, "co_qualname") == 0 && minor() >= 11)
        v = c->qualname;
    else if (strcmp(name, "co_name") == 0)
        v = c->name;
    else
        fail_msg("asked CPython %s for %s", version, name);
    struct fake_str *s = malloc(sizeof *s);
    assert_non_null(s);
    *s = (struct fake_str){{1, &str_type}, v};
    live_strs++;
    return (py_object *)s;
}

static const char *fake_as_utf8(py_object *o)
{
    return ((struct fake_str *)o)->utf8;
}

static void fake_incref(py_object *o) { ((struct fake_obj *)o)->refcnt++; }

static void fake_decref(py_object *o)
{
    struct fake_obj *ob = (struct fake_obj *)o;
    assert_true(ob->refcnt > 0);
    if (--ob->refcnt == 0) {
        assert_ptr_equal(ob->type, &str_type); /* only our strings may die */
        free(ob);
        live_strs--;
    }
}

static int fake_gc_disable(void)
{
    int was = gc_enabled;
    gc_enabled = 0;
    return was;
}

static int fake_gc_enable(void)
{
    int was = gc_enabled;
    gc_enabled = 1;
    return was;
}

static void fake_err_fetch(py_object **t, py_object **v, py_object **tb)
{
    *t = pending_err;
    *v = *tb = NULL;
    pending_err = NULL;
}

static void fake_err_restore(py_object *t, py_object *v, py_object *tb)
{
    (void)v;
    (void)tb;
    pending_err = t;
}

static const char *fake_version(void) { return version; }

/* The stacks' lines are a tenth of their offsets (stack_init, direct_init). */
static int fake_addr2line(py_object *code, int lasti)
{
    (void)code;
    return lasti / 10;
}

static void *fake_dlsym(void *handle, const char *name)
{
    static const struct {
        const char *name;
        void *fn;
    } table[] = {
        {"Py_IsInitialized", (void *)fake_is_initialized},
        {"PyGILState_Check", (void *)fake_gil_check},
        {"PyGILState_GetThisThreadState", (void *)fake_this_thread},
        {"_PyThreadState_UncheckedGet", (void *)fake_unchecked},
        {"PyThreadState_GetFrame", (void *)fake_thread_frame},
        {"PyFrame_GetBack", (void *)fake_frame_back},
        {"PyFrame_GetCode", (void *)fake_frame_code},
        {"PyFrame_GetLineNumber", (void *)fake_frame_line},
        {"PyFrame_GetLasti", (void *)fake_frame_lasti},
        {"PyObject_GetAttrString", (void *)fake_getattr},
        {"PyUnicode_AsUTF8", (void *)fake_as_utf8},
        {"Py_IncRef", (void *)fake_incref},
        {"Py_DecRef", (void *)fake_decref},
        {"PyGC_Disable", (void *)fake_gc_disable},
        {"PyGC_Enable", (void *)fake_gc_enable},
        {"PyErr_Fetch", (void *)fake_err_fetch},
        {"PyErr_Restore", (void *)fake_err_restore},
        {"Py_GetVersion", (void *)fake_version},
        {"PyCode_Type", &code_type},
        {"PyUnicode_Type", &unicode_type},
        {"PyCode_Addr2Line", (void *)fake_addr2line},
        /* what 3.8 offered instead of PyFrame_GetBack/GetCode: all a reader
         * of 3.8 would need, so that refusing it is the reader's choice */
        {"PyEval_GetFrame", (void *)fake_eval_frame},
        {"PyFrame_Type", &frame_type},
    };
    (void)handle;
    if (!present)
        return NULL;
    if (strcmp(name, "_PyEval_EvalFrameDefault") == 0)
        return eval_fn;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].name, name) == 0)
            return table[i].fn;
    return NULL;
}

void *resolve_dlsym(void *handle, const char *name)
{
    return fake_dlsym(handle, name);
}

/* ---- stacks ---- */

/* A Python stack <module> -> main -> forward (innermost), with its own code
 * objects: each test has one, since interned code objects stay referenced
 * (and named as first seen) for the life of the process. */
struct fake_stack {
    struct fake_code code[3];
    struct fake_frame frame[3];
};

static struct fake_frame *stack_init(struct fake_stack *s)
{
    static const char *const q[3] = {"<module>", "main", "Model.forward"};
    static const char *const n[3] = {"<module>", "main", "forward"};
    static const char *const file[3] = {"/src/train.py", "/src/train.py",
                                        "/src/model.py"};
    for (int i = 0; i < 3; i++) {
        s->code[i] = (struct fake_code){{1, &code_type}, file[i], q[i], n[i]};
        s->frame[i] = (struct fake_frame){{1, &frame_type}, 0,
                                          i ? &s->frame[i - 1] : NULL,
                                          &s->code[i], 10 * (i + 1),
                                          100 * (i + 1)};
    }
    top = &s->frame[2];
    return top;
}

/* Every reference python.c took is given back, except the one the intern
 * table keeps on each code object it named. */
static void check_refs(const struct fake_stack *s, int interned)
{
    for (int i = 0; i < 3; i++) {
        assert_int_equal(s->frame[i].ob.refcnt, 1);
        assert_int_equal(s->code[i].ob.refcnt, 1 + (interned > 2 - i));
    }
    assert_int_equal(live_strs, 0);
    assert_int_equal(gc_enabled, 1);
}

#define A ((void *)0x10000)
#define B ((void *)0x20000)
#define C ((void *)0x30000)
#define D ((void *)0x40000)
#define E(i) ((void *)(eval_lo + 1 + (i))) /* return address inside eval */

/* "A forward:30 main:20 [gil] B" */
static const char *describe(void *const *frames, unsigned n)
{
    static char out[1024];
    size_t len = 0;
    out[0] = '\0';
    for (unsigned i = 0; i < n; i++) {
        struct python_frame py;
        char one[128];
        switch (python_frame_decode(frames[i], &py)) {
        case PYTHON_FRAME_PYTHON:
            snprintf(one, sizeof one, "%s:%d", py.function, py.line);
            assert_string_equal(py.file, strcmp(py.function, "forward") == 0 ||
                                                 strcmp(py.function, "Model.forward") == 0
                                             ? "/src/model.py"
                                             : "/src/train.py");
            break;
        case PYTHON_FRAME_MARKER:
            snprintf(one, sizeof one, "[%s]",
                     strstr(py.marker, "GIL") ? "gil"
                     : strstr(py.marker, "truncated") ? "truncated" : py.marker);
            break;
        default: {
            uintptr_t a = (uintptr_t)frames[i];
            const char *name = frames[i] == A ? "A" : frames[i] == B ? "B"
                             : frames[i] == C ? "C" : frames[i] == D ? "D"
                             : a > eval_lo && a < eval_lo + 64 ? "E" : "?";
            snprintf(one, sizeof one, "%s", name);
        }
        }
        len += (size_t)snprintf(out + len, sizeof out - len, "%s%s",
                                len ? " " : "", one);
    }
    return out;
}

static const char *merge(void **frames, unsigned n, unsigned cap)
{
    unsigned m = python_merge(frames, n, cap);
    assert_true(m <= cap);
    return describe(frames, m);
}

static void use(const char *v)
{
    version = v;
    present = 1;
    gil_held = 1;
    other_holds = 0;
    python_init(); /* a fresh look: test-only use of a call-once function */
    assert_int_equal(python_mode, PYTHON_ON);
}

/* ---- tests ---- */

static void test_found_at_first_allocation_when_loaded_late(void **state)
{
    (void)state;
    static struct fake_stack s;
    present = 0;
    python_init();
    assert_int_equal(python_mode, PYTHON_PENDING);
    present = 1; /* libpython dlopen'ed before the first allocation */
    stack_init(&s);
    void *f[8] = {A, E(0), B};
    /* 3.11: the Python frames end the stack, and native unwinding stops
     * at the evaluator */
    assert_string_equal(merge(f, 3, 8), "A Model.forward:30 main:20 <module>:10");
    assert_true(stop_lo == eval_lo && stop_hi > stop_lo);
    assert_int_equal(python_mode, PYTHON_ON);
    check_refs(&s, 3);
}

static void test_310_one_evaluation_frame_per_call(void **state)
{
    (void)state;
    static struct fake_stack s;
    use("3.10.12");
    assert_true(stop_lo == 0 && stop_hi == 0); /* every evaluation frame counts */
    stack_init(&s);
    void *f[16] = {A, E(0), B, E(1), C, E(2), D};
    assert_string_equal(merge(f, 7, 16), "A forward:30 B main:20 C <module>:10 D");
    check_refs(&s, 3);
    /* native stack cut at CUMEMTRACE_DEPTH: the rest go at the outer end */
    void *g[16] = {A, E(0), B};
    assert_string_equal(merge(g, 3, 16), "A forward:30 B main:20 <module>:10");
    /* more evaluation frames than Python frames: all at the innermost */
    void *h[16] = {A, E(0), B, E(1), C, E(2), D, E(3)};
    assert_string_equal(merge(h, 8, 16), "A forward:30 main:20 <module>:10 B C D");
    check_refs(&s, 3);
}

/* 3.8 is not supported (docs/pytorch.md): stacks stay native. */
static void test_38_is_refused(void **state)
{
    (void)state;
    static struct fake_stack s;
    version = "3.8.10";
    python_init();
    version = "3.11.4";
    assert_int_equal(python_mode, PYTHON_OFF);
    stack_init(&s);
    void *f[16] = {A, E(0), B, E(1), C, E(2), D};
    assert_int_equal(python_merge(f, 7, 16), 7);
    assert_ptr_equal(f[1], E(0));
    check_refs(&s, 0);
}

static void test_311_inlined_calls_and_cached_lines(void **state)
{
    (void)state;
    static struct fake_stack s;
    use("3.11.4");
    stack_init(&s);
    pending_err = (void *)&tstate_other; /* an exception is pending */
    line_calls = 0;
    void *f[16] = {A, E(0), B, E(1), C};
    assert_string_equal(merge(f, 5, 16),
                        "A Model.forward:30 main:20 <module>:10");
    assert_ptr_equal(pending_err, &tstate_other);
    pending_err = NULL;
    assert_int_equal(line_calls, 3);
    void *g[16] = {A, E(0), B, E(1), C};
    unsigned n = python_merge(g, 5, 16);
    assert_memory_equal(f, g, n * sizeof *f); /* same stack, same frames */
    assert_int_equal(line_calls, 3);          /* offsets seen: no look-up */
    s.frame[2].lasti = 310;
    s.frame[2].line = 31;
    void *h[16] = {A, E(0), B};
    assert_string_equal(merge(h, 3, 16),
                        "A Model.forward:31 main:20 <module>:10");
    assert_int_equal(line_calls, 4);
    check_refs(&s, 3);
}

static void test_gil_not_held_gives_one_marker(void **state)
{
    (void)state;
    static struct fake_stack s;
    use("3.11.4");
    stack_init(&s);
    gil_held = 0;
    void *f[16] = {A, E(0), B, E(1), C};
    assert_string_equal(merge(f, 5, 16), "A [gil]");
    void *g[16] = {A, B}; /* a C thread: no evaluation frame */
    assert_string_equal(merge(g, 2, 16), "A B [gil]");
    /* PyGILState_Check says yes for everybody (a sub-interpreter exists)
     * but another thread holds the GIL */
    other_holds = 1;
    void *h[16] = {A, E(0), B};
    assert_string_equal(merge(h, 3, 16), "A [gil]");
    check_refs(&s, 0);
}

static void test_python_only_and_truncation(void **state)
{
    (void)state;
    static struct fake_stack s;
    use("3.12.1");
    stack_init(&s);
    void *f[16];
    assert_string_equal(merge(f, 0, 16),
                        "Model.forward:30 main:20 <module>:10");
    assert_string_equal(merge(f, 0, 3), "Model.forward:30 main:20 [truncated]");
    /* native frames keep their room; the marker is never cut off */
    void *g[4] = {A, B, E(0), C};
    assert_string_equal(merge(g, 4, 4), "A B Model.forward:30 [truncated]");
    check_refs(&s, 3);
}

/* ---- the direct walk (python_walk.c), on 3.11's structs ---- */

/* Byte offsets from CPython 3.11's headers (64-bit), as python_walk.c has
 * them: PyThreadState.cframe, _PyCFrame.current_frame, _PyInterpreterFrame
 * f_code/previous/prev_instr/owner, PyCodeObject _co_firsttraceable and
 * co_code_adaptive. */
enum { TS_CFRAME = 56, CF_CURRENT = 8, F_CODE = 32, F_PREVIOUS = 48, F_INSTR = 56,
       F_OWNER = 69, CO_FIRST = 168, CO_CODE = 184 };

struct big_code {
    struct fake_code c;
    unsigned char rest[CO_CODE + 1024 - sizeof(struct fake_code)];
};
struct iframe {
    unsigned char b[80];
};

/* The same three frames as stack_init, with the interpreter frames the
 * direct walk reads; `extra` inserts an incomplete frame between main and
 * forward.  Sets the thread state's frame pointer. */
struct direct_stack {
    struct big_code code[4];
    struct fake_frame frame[3];
    struct iframe ifr[4];
    void *cframe[2];
};

static void put(void *at, size_t off, const void *v, size_t n)
{
    memcpy((char *)at + off, v, n);
}

static void iframe_set(struct direct_stack *s, int i, int code, int lasti, int owner,
                       struct iframe *prev)
{
    void *c = &s->code[code];
    char *instr = (char *)c + CO_CODE + lasti;
    unsigned char o = (unsigned char)owner;
    put(&s->ifr[i], F_CODE, &c, 8);
    put(&s->ifr[i], F_PREVIOUS, &prev, 8);
    put(&s->ifr[i], F_INSTR, &instr, 8);
    put(&s->ifr[i], F_OWNER, &o, 1);
}

static void direct_init(struct direct_stack *s, bool extra)
{
    static const char *const q[4] = {"<module>", "main", "Model.forward", "incomplete"};
    static const char *const file[4] = {"/src/train.py", "/src/train.py",
                                        "/src/model.py", "/src/x.py"};
    memset(s, 0, sizeof *s);
    for (int i = 0; i < 4; i++) {
        s->code[i].c = (struct fake_code){{1, &code_type}, file[i], q[i], q[i]};
        int first = i == 3 ? 4 : 0; /* code units before the first traceable one */
        put(&s->code[i], CO_FIRST, &first, 4);
    }
    for (int i = 0; i < 3; i++)
        s->frame[i] = (struct fake_frame){{1, &frame_type}, 0,
                                          i ? &s->frame[i - 1] : NULL,
                                          &s->code[i].c, 10 * (i + 1), 100 * (i + 1)};
    iframe_set(s, 0, 0, 100, 0, NULL);
    iframe_set(s, 1, 1, 200, 0, &s->ifr[0]);
    iframe_set(s, 3, 3, 2, 0, &s->ifr[1]); /* before its first traceable unit */
    iframe_set(s, 2, 2, 300, 0, extra ? &s->ifr[3] : &s->ifr[1]);
    s->cframe[1] = &s->ifr[2];
    tstate_mine[TS_CFRAME / 8] = s->cframe;
    top = &s->frame[2];
}

static void test_311_direct_walk_once_proven(void **state)
{
    (void)state;
    static struct direct_stack s;
    use("3.11.4");
    direct_init(&s, true);
    api_walks = 0;
    const char *want = "A Model.forward:30 main:20 <module>:10";
    for (int i = 0; i < 3; i++) { /* proven against the API's walks */
        void *f[16] = {A, E(0), B, E(1), C};
        assert_string_equal(merge(f, 5, 16), want);
    }
    assert_int_equal(api_walks, 3);
    for (int i = 0; i < 3; i++) { /* then read directly, the same frames */
        void *f[16] = {A, E(0), B, E(1), C};
        assert_string_equal(merge(f, 5, 16), want);
    }
    assert_int_equal(api_walks, 3);
    /* the innermost frame moves on: its new line, still without the API */
    s.frame[2].lasti = 310;
    iframe_set(&s, 2, 2, 310, 0, &s.ifr[3]);
    void *g[16] = {A, E(0), B};
    assert_string_equal(merge(g, 3, 16), "A Model.forward:31 main:20 <module>:10");
    assert_int_equal(api_walks, 3);
    /* truncation: the marker, as through the API */
    void *h[4] = {A, B, E(0), C};
    assert_string_equal(merge(h, 4, 4), "A B Model.forward:31 [truncated]");
    assert_int_equal(api_walks, 3);
    /* a frame whose code object is not one: that capture goes through the API */
    s.code[1].c.ob.type = &frame_type;
    void *k[16] = {A, E(0), B};
    s.code[1].c.ob.type = &code_type; /* (the API's frames are fine) */
    void *bad = &s.frame[0];          /* f_code points at a frame object */
    put(&s.ifr[1], F_CODE, &bad, 8);
    assert_string_equal(merge(k, 3, 16), "A Model.forward:31 main:20 <module>:10");
    assert_int_equal(api_walks, 4);
    tstate_mine[TS_CFRAME / 8] = NULL;
    for (int i = 0; i < 3; i++)
        assert_int_equal(s.code[i].c.ob.refcnt, 2); /* the table's reference */
    assert_int_equal(gc_enabled, 1);
}

static void test_311_direct_walk_refused_when_structs_differ(void **state)
{
    (void)state;
    static struct direct_stack s;
    use("3.11.4");
    direct_init(&s, false);
    iframe_set(&s, 1, 1, 202, 0, &s.ifr[0]); /* not where the API says */
    api_walks = 0;
    for (int i = 0; i < 6; i++) {
        void *f[16] = {A, E(0), B, E(1), C};
        assert_string_equal(merge(f, 5, 16), "A Model.forward:30 main:20 <module>:10");
    }
    assert_int_equal(api_walks, 6); /* never trusted */
    /* a thread state whose frame pointer leads nowhere readable */
    use("3.11.4");
    tstate_mine[TS_CFRAME / 8] = (void *)0x8; /* page zero: a fault if read plainly */
    for (int i = 0; i < 4; i++) {
        void *f[16] = {A, E(0), B};
        errno = 4242; /* the refused read's EFAULT must not reach the host */
        assert_string_equal(merge(f, 3, 16), "A Model.forward:30 main:20 <module>:10");
        assert_int_equal(errno, 4242);
    }
    assert_int_equal(api_walks, 10);
    tstate_mine[TS_CFRAME / 8] = NULL;
}

/* A compact ASCII str as 3.11 lays it out (PyASCIIObject: 48 bytes, then
 * the characters), what the direct reader names code objects from. */
struct pystr {
    intptr_t refcnt;
    const void *type;
    int64_t length, hash;
    uint32_t state, pad;
    void *wstr;
    char data[32];
};
_Static_assert(offsetof(struct pystr, data) == 48, "3.11 PyASCIIObject");

enum { CO_FILENAME = 112, CO_QUALNAME = 128, CO_LINETABLE = 136 };

static void pystr_set(struct pystr *p, const char *text)
{
    *p = (struct pystr){.refcnt = 1, .type = &unicode_type,
                        .length = (int64_t)strlen(text),
                        .state = 1u << 2 | 1u << 5 | 1u << 6}; /* kind 1, compact, ascii */
    strcpy(p->data, text);
}

static void test_311_direct_walk_without_the_gil(void **state)
{
    (void)state;
    static struct direct_stack s, t;
    static struct pystr names[3][2], lines[3];
    static const char *const q[3] = {"<module>", "main", "Model.forward"};
    use("3.11.4");
    direct_init(&s, false);
    for (int i = 0; i < 3; i++) { /* proven with the GIL, against the API */
        void *f[16] = {A, E(0), B};
        merge(f, 3, 16);
    }
    /* new code objects, first seen by a thread that released the GIL: named
     * from their own str objects, no reference taken */
    direct_init(&t, false);
    for (int i = 0; i < 3; i++) {
        pystr_set(&names[i][0], i == 2 ? "/src/model.py" : "/src/train.py");
        pystr_set(&names[i][1], q[i]);
        void *file = &names[i][0], *qual = &names[i][1], *lt = &lines[i];
        put(&t.code[i], CO_FILENAME, &file, 8);
        put(&t.code[i], CO_QUALNAME, &qual, 8);
        put(&t.code[i], CO_LINETABLE, &lt, 8);
        t.code[i].c.qualname = "not read without the GIL";
    }
    gil_held = 0;
    api_walks = 0;
    const char *want = "A Model.forward:30 main:20 <module>:10";
    for (int i = 0; i < 2; i++) {
        void *f[16] = {A, E(0), B};
        assert_string_equal(merge(f, 3, 16), want);
    }
    assert_int_equal(api_walks, 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(t.code[i].c.ob.refcnt, 1);
    /* the innermost code object dies and another takes its address, with
     * other objects: a new entry, not the dead one's name */
    static struct pystr other;
    pystr_set(&other, "Other.forward");
    void *op = &other, *lt2 = &names[2][0];
    put(&t.code[2], CO_QUALNAME, &op, 8);
    put(&t.code[2], CO_LINETABLE, &lt2, 8);
    void *g[16] = {A, E(0), B};
    assert_int_equal(python_merge(g, 3, 16), 4);
    struct python_frame py;
    assert_int_equal(python_frame_decode(g[1], &py), PYTHON_FRAME_PYTHON);
    assert_string_equal(py.function, "Other.forward");
    assert_int_equal(py.line, 30);
    /* met again with the GIL: the innermost, changed back, is looked up
     * in the table and takes a reference (a new entry named through the
     * API); the outer two still match this thread's cache, as they are */
    put(&t.code[2], CO_QUALNAME, &(void *){&names[2][1]}, 8);
    put(&t.code[2], CO_LINETABLE, &(void *){&lines[2]}, 8);
    for (int i = 0; i < 3; i++)
        t.code[i].c.qualname = q[i];
    gil_held = 1;
    for (int i = 0; i < 4; i++) {
        void *f[16] = {A, E(0), B};
        assert_string_equal(merge(f, 3, 16), want);
    }
    for (int i = 0; i < 3; i++)
        assert_int_equal(t.code[i].c.ob.refcnt, i == 2 ? 2 : 1);
    tstate_mine[TS_CFRAME / 8] = NULL;
}

/* Non-ASCII names: CPython keeps them one, two or four bytes a character
 * (after PyCompactUnicodeObject, 72 bytes in 3.11); read as UTF-8. */
struct pystr_wide {
    intptr_t refcnt;
    const void *type;
    int64_t length, hash;
    uint32_t state, pad;
    void *wstr;
    int64_t utf8_length;
    char *utf8;
    int64_t wstr_length;
    unsigned char data[32];
};
_Static_assert(offsetof(struct pystr_wide, data) == 72, "3.11 PyCompactUnicodeObject");

static void test_311_names_read_from_str_objects(void **state)
{
    (void)state;
    use("3.11.4");
    static struct pystr_wide w;
    /* "é" in latin-1 (kind 1), "λ" (kind 2), "😀" (kind 4), and a lone
     * surrogate, which UTF-8 cannot hold */
    static const struct {
        unsigned kind, n;
        uint32_t cp[3];
        const char *utf8;
    } cases[] = {
        {1, 2, {'a', 0xe9}, "a\xc3\xa9"},
        {2, 2, {0x3bb, 'x'}, "\xce\xbbx"},
        {4, 2, {0x1f600, 'y'}, "\xf0\x9f\x98\x80y"},
        {2, 1, {0xd800}, "\xef\xbf\xbd"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memset(&w, 0, sizeof w);
        w.refcnt = 1;
        w.type = &unicode_type;
        w.length = cases[i].n;
        w.state = cases[i].kind << 2 | 1u << 5; /* compact, not ascii */
        for (unsigned k = 0; k < cases[i].n; k++) {
            uint32_t c = cases[i].cp[k];
            if (cases[i].kind == 1)
                w.data[k] = (unsigned char)c;
            else if (cases[i].kind == 2)
                memcpy(w.data + 2 * k, &(uint16_t){(uint16_t)c}, 2);
            else
                memcpy(w.data + 4 * k, &c, 4);
        }
        for (int safe = 0; safe < 2; safe++) {
            if (safe && !py_probe_lock())
                break; /* unproven in this process: the probe is there */
            char *got = py_read_str(&w, safe);
            if (safe)
                py_probe_unlock();
            assert_non_null(got);
            assert_string_equal(got, cases[i].utf8);
            free(got);
        }
    }
    /* not a str, or not compact: nothing */
    w.type = &code_type;
    assert_null(py_read_str(&w, false));
    w.type = &unicode_type;
    w.state = 1u << 2;
    assert_null(py_read_str(&w, false));
}

static void test_off(void **state)
{
    (void)state;
    static struct fake_stack s;
    stack_init(&s);
    config.python = false;
    python_init();
    config.python = true;
    assert_int_equal(python_mode, PYTHON_OFF);
    void *f[4] = {A, E(0), B};
    assert_int_equal(python_merge(f, 3, 4), 3);
    assert_ptr_equal(f[1], E(0));
    check_refs(&s, 0);
}

/* A thread probing the layout when the host forks: the child's first probe
 * must not wait for a lock held by a thread it does not have (python.c's
 * fork handlers hold the probe's lock across fork). */
static atomic_int probing;

static void *hold_the_probe(void *arg)
{
    (void)arg;
    if (!py_probe_lock()) {
        atomic_store(&probing, -1);
        return NULL;
    }
    atomic_store(&probing, 1);
    usleep(200 * 1000);
    py_probe_unlock();
    return NULL;
}

static void test_fork_while_a_thread_probes(void **state)
{
    (void)state;
    use("3.11.4");
    assert_true(py_walk_unproven());
    atomic_store(&probing, 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, hold_the_probe, NULL), 0);
    while (!atomic_load(&probing))
        usleep(1000);
    assert_int_equal(atomic_load(&probing), 1);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (py_probe_lock())
            py_probe_unlock();
        _exit(0);
    }
    int status = -1;
    for (int i = 0; i < 500 && waitpid(pid, &status, WNOHANG) == 0; i++)
        usleep(10 * 1000);
    if (status == -1) { /* still waiting after 5 s: hung */
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        fail_msg("the child's probe hung on the lock its parent's thread held at fork");
    }
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    pthread_join(t, NULL);
}

int main(void)
{
    /* a real function with an ELF size stands for _PyEval_EvalFrameDefault */
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    eval_fn = dlsym(RTLD_DEFAULT, "gethostbyname_r");
    if (eval_fn == NULL || dladdr1(eval_fn, &info, (void **)&sym,
                                   RTLD_DL_SYMENT) == 0 ||
        sym == NULL || sym->st_size < 64) {
        fprintf(stderr, "test_python: no sized libc function to stand for "
                        "the evaluator\n");
        return 1;
    }
    eval_lo = (uintptr_t)eval_fn;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_found_at_first_allocation_when_loaded_late),
        cmocka_unit_test(test_310_one_evaluation_frame_per_call),
        cmocka_unit_test(test_38_is_refused),
        cmocka_unit_test(test_311_inlined_calls_and_cached_lines),
        cmocka_unit_test(test_gil_not_held_gives_one_marker),
        cmocka_unit_test(test_python_only_and_truncation),
        cmocka_unit_test(test_311_direct_walk_once_proven),
        cmocka_unit_test(test_311_direct_walk_refused_when_structs_differ),
        cmocka_unit_test(test_311_direct_walk_without_the_gil),
        cmocka_unit_test(test_311_names_read_from_str_objects),
        cmocka_unit_test(test_fork_while_a_thread_probes),
        cmocka_unit_test(test_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
