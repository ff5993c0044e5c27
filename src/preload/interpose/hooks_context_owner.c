/* hooks_context_owner.c - which created context an allocation belongs
 * to, and the table of live created contexts behind it; the context
 * wrappers (hooks_context.c) fill and empty it, the per-call state
 * (call_state.c) asks it for each allocation.  Both sit above this file,
 * which calls neither.
 *
 * Processes that never call cuCtxCreate (every framework uses primary
 * contexts) pay nothing: owner 0 means "the primary context of its
 * device".  Created contexts get a number from `created` below, and while
 * any is alive each allocation asks the driver for the current context.
 * Beyond RECORD_MAX_CONTEXTS live created contexts (the owner has 10 bits
 * in a live entry) the further ones share the owner RECORD_CONTEXT_OVERFLOW,
 * and each keeps the addresses of what was allocated in it (`overflow`
 * below: a list per context, freed entries included until its destroy), so
 * that its destroy forgets its memory by address (record_drop_entries).
 *
 * Exit: after the first allocation (the runtime is initialised by then) an
 * atexit handler of ours is registered, which therefore runs before the
 * runtime's release of its primary contexts; from then on a context's end
 * forgets nothing (hooks_context_exiting, hooks_context.c's top).
 */
#include "hooks.h"

#include "clock.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static int exit_mark_registered;
static int exiting; /* set by mark_exiting: the process is ending */

static void mark_exiting(void)
{
    __atomic_store_n(&exiting, 1, __ATOMIC_RELAXED);
}

/* ---- created contexts: slot n-1 holds context n ---- */

static struct {
    CUcontext ctx;
    int device;
} created[RECORD_MAX_CONTEXTS];
static pthread_mutex_t created_lock = PTHREAD_MUTEX_INITIALIZER;
static int ncreated; /* live created contexts; atomic reads on the hot path */
int hooks_context_plain; /* exit guard armed and ncreated == 0 (hooks.h) */
/* hooks.h: here because update_plain writes it (HOOKS_SLOW_CONTEXT), and
 * this file may call none of the others that do. */
int hooks_slow = HOOKS_SLOW_INIT | HOOKS_SLOW_UNTOUCHED | HOOKS_SLOW_CONTEXT;

/* Created contexts past the numbered ones, under created_lock. */
static struct overflow {
    CUcontext ctx;
    int device;
    struct record_owned *v; /* what was allocated in it */
    size_t n, cap;
} *overflow;
static size_t noverflow, overflow_cap;
/* The overflow context hooks_context_owner last found current here. */
static __thread CUcontext owner_ctx __attribute__((tls_model("initial-exec")));

static struct overflow *overflow_find(CUcontext ctx)
{
    for (size_t i = 0; i < noverflow; i++)
        if (overflow[i].ctx == ctx)
            return &overflow[i];
    return NULL;
}

/* After the exit guard is armed or ncreated changed (under created_lock,
 * from the first allocation too). */
static void update_plain(void)
{
    int plain = __atomic_load_n(&exit_mark_registered, __ATOMIC_RELAXED) &&
                __atomic_load_n(&ncreated, __ATOMIC_RELAXED) == 0;
    __atomic_store_n(&hooks_context_plain, plain, __ATOMIC_RELAXED);
    /* the fast path's test of it, folded into the one it makes anyway */
    if (plain)
        __atomic_and_fetch(&hooks_slow, ~HOOKS_SLOW_CONTEXT, __ATOMIC_RELEASE);
    else
        __atomic_or_fetch(&hooks_slow, HOOKS_SLOW_CONTEXT, __ATOMIC_RELEASE);
}

/* Under created_lock: the number of ctx, 0 when not ours. */
static unsigned created_find(CUcontext ctx)
{
    for (unsigned i = 0; i < RECORD_MAX_CONTEXTS; i++)
        if (created[i].ctx == ctx)
            return i + 1;
    return 0;
}

bool hooks_context_exiting(void)
{
    return __atomic_load_n(&exiting, __ATOMIC_RELAXED) != 0;
}

void hooks_context_add(CUcontext ctx, int device)
{
    pthread_mutex_lock(&created_lock);
    unsigned n = created_find(ctx); /* a reused address: the old one is gone */
    if (n == 0 && (n = created_find(NULL)) != 0) {
        __atomic_add_fetch(&ncreated, 1, __ATOMIC_RELAXED);
        update_plain();
    }
    if (n != 0) {
        created[n - 1].ctx = ctx;
        created[n - 1].device = device;
    } else if (overflow_find(ctx) == NULL) { /* every number is taken */
        if (noverflow == overflow_cap) {
            size_t cap = overflow_cap ? overflow_cap * 2 : 16;
            struct overflow *v = realloc(overflow, cap * sizeof *v);
            if (v != NULL) {
                overflow = v;
                overflow_cap = cap;
            }
        }
        if (noverflow < overflow_cap) {
            overflow[noverflow++] = (struct overflow){ctx, device, NULL, 0, 0};
            __atomic_add_fetch(&ncreated, 1, __ATOMIC_RELAXED);
            update_plain();
        }
    }
    pthread_mutex_unlock(&created_lock);
}

unsigned hooks_context_find(CUcontext ctx, int *device)
{
    pthread_mutex_lock(&created_lock);
    unsigned n = created_find(ctx);
    struct overflow *o = n == 0 ? overflow_find(ctx) : NULL;
    if (n != 0)
        *device = created[n - 1].device;
    else if (o != NULL)
        *device = o->device, n = RECORD_CONTEXT_OVERFLOW;
    pthread_mutex_unlock(&created_lock);
    return n;
}

void hooks_context_remove_overflow(CUcontext ctx, struct record_owned **v, size_t *n)
{
    *v = NULL;
    *n = 0;
    pthread_mutex_lock(&created_lock);
    struct overflow *o = overflow_find(ctx);
    if (o != NULL) {
        *v = o->v;
        *n = o->n;
        *o = overflow[--noverflow];
        __atomic_sub_fetch(&ncreated, 1, __ATOMIC_RELAXED);
        update_plain();
    }
    pthread_mutex_unlock(&created_lock);
}

void hooks_context_allocated(uintptr_t addr)
{
    struct record_owned rec = {addr, clock_now_ns()};
    pthread_mutex_lock(&created_lock);
    struct overflow *c = overflow_find(owner_ctx);
    if (c != NULL && c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        struct record_owned *v = realloc(c->v, cap * sizeof *v);
        if (v != NULL) {
            c->v = v;
            c->cap = cap;
        }
    }
    if (c != NULL && c->n < c->cap)
        c->v[c->n++] = rec; /* without memory for it: it stays counted */
    pthread_mutex_unlock(&created_lock);
}

void hooks_context_remove(unsigned n)
{
    pthread_mutex_lock(&created_lock);
    created[n - 1].ctx = NULL;
    __atomic_sub_fetch(&ncreated, 1, __ATOMIC_RELAXED);
    update_plain();
    pthread_mutex_unlock(&created_lock);
}

unsigned hooks_context_owner(void)
{
    if (__builtin_expect(!__atomic_load_n(&exit_mark_registered, __ATOMIC_RELAXED), 0) &&
        !__atomic_exchange_n(&exit_mark_registered, 1, __ATOMIC_ACQ_REL)) {
        atexit(mark_exiting);
        pthread_mutex_lock(&created_lock);
        update_plain();
        pthread_mutex_unlock(&created_lock);
    }
    if (__builtin_expect(__atomic_load_n(&ncreated, __ATOMIC_RELAXED) == 0, 1))
        return 0;
    PFN(cuCtxGetCurrent) get = REAL(cuCtxGetCurrent);
    CUcontext ctx = NULL;
    if (get == NULL || get(&ctx) != CUDA_SUCCESS || ctx == NULL)
        return 0;
    pthread_mutex_lock(&created_lock);
    unsigned n = created_find(ctx);
    if (n == 0 && overflow_find(ctx) != NULL) {
        owner_ctx = ctx;
        n = RECORD_CONTEXT_OVERFLOW;
    }
    pthread_mutex_unlock(&created_lock);
    return n;
}

void hooks_context_atfork_child(void)
{
    for (size_t i = 0; i < noverflow; i++)
        free(overflow[i].v);
    noverflow = 0;
    memset(created, 0, sizeof created);
    ncreated = 0;
    pthread_mutex_init(&created_lock, NULL);
    update_plain();
}
