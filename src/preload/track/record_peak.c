/* record_peak.c - who ran when a pool reached its peak: the allocating
 * thread's name and the first locals of its Python frames, kept at each
 * new peak (under the lock, from record_fast.h's accounting), so that the
 * PyTorch layer can name the peak's phase and module at a dump without a
 * hook on every module call (src/torchboot/layer/phases.py): a `self` of
 * a running forward() is the module, autograd's device threads are
 * PyTorch's backward.  A new peak is rare under a caching allocator
 * (PyTorch's asks the driver only when it grows): a copy of the frames'
 * locals, and the thread's name read once per thread. */
#include "record_impl.h"

#include <stdbool.h>
#include <string.h>
#include <sys/prctl.h>

unsigned (*record_peak_selves)(uintptr_t *selves, uintptr_t *names, unsigned max);

static struct record_peak_context contexts[RECORD_POOLS]; /* under the lock */

void record_peak_note_locked(const struct pool *p)
{
    struct record_peak_context *c = &contexts[p - record_pools];
    unsigned (*selves)(uintptr_t *, uintptr_t *, unsigned) =
        __atomic_load_n(&record_peak_selves, __ATOMIC_ACQUIRE);
    c->peak_time = p->peak_time;
    c->nselves = selves != NULL ? selves(c->selves, c->names, RECORD_PEAK_SELVES) : 0;
    /* Read once a thread: a program that only grows makes every allocation
     * a new peak, and threads are named as they start (PyTorch's autograd
     * threads before their first allocation). */
    static __thread char name[16];
    static __thread bool named;
    if (!named) {
        named = true;
        if (prctl(PR_GET_NAME, name) != 0)
            name[0] = '\0';
        name[sizeof name - 1] = '\0';
    }
    memcpy(c->thread, name, sizeof c->thread);
}

bool record_peak_context(int device, struct record_peak_context *out)
{
    if (device < 0 || device >= RECORD_MAX_DEVICES)
        return false;
    const struct pool *p = &record_pools[record_pool_of(KIND_DEVICE, device)];
    record_lock_take(&record_lock);
    bool ok = p->peak > 0;
    if (ok)
        *out = contexts[p - record_pools];
    record_lock_drop(&record_lock);
    return ok;
}

bool record_peak_phase_name(int device, int64_t peak_time, uint32_t phase)
{
    if (device < 0 || device >= RECORD_MAX_DEVICES)
        return false;
    struct pool *p = &record_pools[record_pool_of(KIND_DEVICE, device)];
    record_lock_take(&record_lock);
    /* only the peak that was asked about, and never over a phase the
     * program itself had open then */
    bool ok = p->peak > 0 && p->peak_time == peak_time && p->peak_phase == 0;
    if (ok)
        p->peak_phase = phase;
    record_lock_drop(&record_lock);
    return ok;
}

bool record_peak_phase_swap(int device, int64_t peak_time,
                            uint32_t (*replace)(uint32_t, const void *), const void *arg)
{
    if (device < 0 || device >= RECORD_MAX_DEVICES)
        return false;
    struct pool *p = &record_pools[record_pool_of(KIND_DEVICE, device)];
    record_lock_take(&record_lock);
    bool ok = p->peak > 0 && p->peak_time == peak_time && p->peak_phase != 0;
    if (ok) {
        uint32_t now = replace(p->peak_phase, arg);
        ok = now != p->peak_phase;
        p->peak_phase = now;
    }
    record_lock_drop(&record_lock);
    return ok;
}
