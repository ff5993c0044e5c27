/* test_unwind.c - the frame-rule walk (unwind.c, cfi.c) reports exactly
 * the return addresses glibc's backtrace() (libgcc_s's DWARF unwinder, the
 * library's other way) reports, through frames with and without frame
 * pointers, on the main thread and on others; and a frame whose registers
 * point off the stack ends the walk (-1: "use backtrace()") without reading
 * there. */
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cfi.h"
#include "resolve.h"
#include "unwind.h"

/* what unwind.c and cfi.c look symbols up with (resolve.c in the library) */
void *resolve_dlsym(void *handle, const char *name)
{
    return dlsym(handle, name);
}

static uintptr_t main_top;

struct probe {
    void *lib[80], *walk[80];
    int nlib, nwalk;
    uintptr_t sp, top;
};

static uintptr_t top_here(uintptr_t sp)
{
    if (main_top > sp && main_top - sp < (64u << 20))
        return main_top;
    return (uintptr_t)pthread_self();
}

/* Both unwinders from here; lib[0] is this function itself. */
static __attribute__((noinline)) void probe(struct probe *p)
{
    uintptr_t fa = (uintptr_t)__builtin_frame_address(0);
    p->nlib = backtrace(p->lib, 80);
    p->sp = fa + 16;
    p->top = top_here(fa);
    p->nwalk = unwind_walk(p->walk, 79, (uintptr_t)__builtin_return_address(0), fa + 16,
                           *(const uintptr_t *)fa, p->top);
}

typedef void (*body_fn)(struct probe *);
static void plain(int depth, struct probe *p, body_fn body);
static void framed(int depth, struct probe *p, body_fn body);

/* Every third frame keeps a frame pointer. */
static void next(int depth, struct probe *p, body_fn body)
{
    (depth % 3 == 0 ? framed : plain)(depth, p, body);
}

/* Frames without a frame pointer (-O2) ... */
static __attribute__((noinline)) void plain(int depth, struct probe *p, body_fn body)
{
    volatile int keep = depth;
    if (depth > 0)
        next(depth - 1, p, body);
    else
        body(p);
    (void)keep;
}

/* ... and with one: a variable-length array makes GCC and clang address
 * the frame from rbp. */
static __attribute__((noinline)) void framed(int depth, struct probe *p, body_fn body)
{
    volatile char vla[depth + 16];
    vla[0] = (char)depth;
    if (depth > 0)
        next(depth - 1, p, body);
    else
        body(p);
    (void)vla[0];
}

static void check_same(const struct probe *p, int least)
{
    assert_true(p->nwalk > 0);
    /* backtrace()'s first entry is probe itself - after a sanitizer's
     * interceptor frames, under one; then the same return addresses */
    int at = 1;
    while (at < 4 && at < p->nlib && p->lib[at] != p->walk[0])
        at++;
    int n = p->nlib - at < p->nwalk ? p->nlib - at : p->nwalk;
    assert_true(n >= least);
    for (int i = 0; i < n; i++)
        if (p->walk[i] != p->lib[i + at]) {
            fprintf(stderr, "frame %d: walk %p, backtrace %p\n", i, p->walk[i], p->lib[i + at]);
            fail();
        }
    assert_int_equal(p->nwalk, p->nlib - at);
}

static void same_as_backtrace_on_the_main_thread(void **state)
{
    (void)state;
    struct probe p;
    next(24, &p, probe);
    check_same(&p, 25);
    plain(40, &p, probe);
    check_same(&p, 41);
}

static void *thread_body(void *arg)
{
    struct probe *p = arg;
    next(30, p, probe);
    return NULL;
}

static void same_as_backtrace_on_another_thread(void **state)
{
    (void)state;
    struct probe p;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, thread_body, &p), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    check_same(&p, 31);
}

/* A return address whose rule takes the CFA from rbp, with rbp pointing
 * below the stack pointer, above the stack's top, or nowhere. */
static void bad_registers_end_the_walk_unread(void **state)
{
    (void)state;
    struct probe p;
    framed(6, &p, probe);
    check_same(&p, 7);
    int from_rbp = -1;
    for (int i = 0; i < p.nwalk && from_rbp < 0; i++) {
        struct cfi_rule r;
        if (cfi_rule((uintptr_t)p.walk[i], &r) && r.cfa_rbp)
            from_rbp = i;
    }
    assert_true(from_rbp >= 0);
    uintptr_t ra = (uintptr_t)p.walk[from_rbp];
    uintptr_t bad[] = {p.sp - 4096, p.top - 8, p.top + 4096, 0x10, 0xdead0000deadull,
                       p.sp + 3};
    void *out[8];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(unwind_walk(out, 8, ra, p.sp, bad[i], p.top), -1);
    /* no rule at all: not code */
    assert_int_equal(unwind_walk(out, 8, (uintptr_t)&p, p.sp, 0, p.top), -1);
}

int main(void)
{
    void **end = dlsym(RTLD_DEFAULT, "__libc_stack_end");
    if (end != NULL)
        main_top = ((uintptr_t)*end | 4095) + 1;
    if (!cfi_init()) {
        printf("test_unwind: skipped (needs glibc 2.35+)\n");
        return 0;
    }
#if !defined(__x86_64__)
    printf("test_unwind: skipped (the frame-rule walk is x86-64 only)\n");
    return 0;
#endif
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(same_as_backtrace_on_the_main_thread),
        cmocka_unit_test(same_as_backtrace_on_another_thread),
        cmocka_unit_test(bad_registers_end_the_walk_unread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
