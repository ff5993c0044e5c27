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
 * Beyond RECORD_MAX_CONTEXTS live created contexts the further ones are not
 * numbered.
 *
 * Exit: after the first allocation (the runtime is initialised by then) an
 * atexit handler of ours is registered, which therefore runs before the
 * runtime's release of its primary contexts; from then on a context's end
 * forgets nothing (hooks_context_exiting, hooks_context.c's top).
 */
#include "hooks.h"

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

/* After the exit guard is armed or ncreated changed (under created_lock,
 * or once, from the first allocation). */
static void update_plain(void)
{
    __atomic_store_n(&hooks_context_plain,
                     __atomic_load_n(&exit_mark_registered, __ATOMIC_RELAXED) &&
                         __atomic_load_n(&ncreated, __ATOMIC_RELAXED) == 0,
                     __ATOMIC_RELAXED);
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
    }
    pthread_mutex_unlock(&created_lock);
}

unsigned hooks_context_find(CUcontext ctx, int *device)
{
    pthread_mutex_lock(&created_lock);
    unsigned n = created_find(ctx);
    if (n != 0)
        *device = created[n - 1].device;
    pthread_mutex_unlock(&created_lock);
    return n;
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
    pthread_mutex_unlock(&created_lock);
    return n;
}

void hooks_context_atfork_child(void)
{
    memset(created, 0, sizeof created);
    ncreated = 0;
    pthread_mutex_init(&created_lock, NULL);
    update_plain();
}
