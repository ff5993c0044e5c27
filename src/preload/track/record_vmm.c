/* record_vmm.c - the tracker's virtual-memory bookkeeping (cuMemAddressReserve,
 * cuMemMap and cuMemCreate handle references), the memory limit
 * (CUMEMTRACE_LIMIT) and the driver's latest free/total per device.
 * Threads: record_lock (record_impl.h) guards the range tables, like every
 * table of the tracker; the limit itself is set once at start-up and read
 * atomically. */
#include "record_impl.h"

#include <assert.h>
#include <stdlib.h>

/* Ranges of virtual addresses: mapped to a handle, or reserved. */
static struct range *mappings, *reservations;

/* ---- VMM ---- */

/* Adds `r` to `*table`, and its size to `*bytes` and that counter's peak.
 * False when the address is already there or memory ran out. */
static bool range_add_locked(struct range **table, struct range *r,
                             uint64_t *bytes, uint64_t *peak)
{
    RECORD_ASSERT_LOCKED();
    struct range *old;
    HASH_FIND(hh, *table, &r->addr, sizeof r->addr, old);
    if (old != NULL)
        return false;
    HASH_ADD(hh, *table, addr, sizeof r->addr, r);
    if (record_nomem) {
        record_nomem = false;
        return false;
    }
    *bytes += r->size;
    if (*bytes > *peak)
        *peak = *bytes;
    record_pools[r->pool].active = true;
    return true;
}

void record_vmm_reserve(int device, uintptr_t addr, uint64_t size)
{
    struct range *r = malloc(sizeof *r);
    if (r == NULL)
        return;
    r->addr = addr;
    r->size = size;
    r->pool = record_pool_of(KIND_VMM, device);
    record_lock_take(&record_lock);
    struct record_vmm_stats *v = &record_pools[r->pool].vmm;
    if (range_add_locked(&reservations, r, &v->reserved, &v->reserved_peak))
        r = NULL;
    record_lock_drop(&record_lock);
    free(r);
}

void record_vmm_unreserve(uintptr_t addr)
{
    struct range *r;
    record_lock_take(&record_lock);
    HASH_FIND(hh, reservations, &addr, sizeof addr, r);
    if (r != NULL) {
        HASH_DELETE(hh, reservations, r);
        record_pools[r->pool].vmm.reserved -= r->size;
    }
    record_lock_drop(&record_lock);
    free(r);
}

void record_vmm_map(uintptr_t addr, uint64_t size, uintptr_t handle)
{
    struct range *m = malloc(sizeof *m);
    if (m == NULL)
        return;
    record_lock_take(&record_lock);
    struct table_slot *slot = table_find(&record_handles, handle);
    struct live *h = slot != NULL ? slot->e : NULL;
    /* Imported handles (IPC, fabric) are not ours: their mappings are not
     * this process's memory either. */
    if (h != NULL) {
        m->addr = addr;
        m->size = size;
        m->pool = site_of(h)->s.pool;
        struct record_vmm_stats *v = &record_pools[m->pool].vmm;
        if (range_add_locked(&mappings, m, &v->mapped, &v->mapped_peak))
            m = NULL;
    }
    record_lock_drop(&record_lock);
    free(m);
}

void record_vmm_unmap(uintptr_t addr, uint64_t size)
{
    record_lock_take(&record_lock);
    uintptr_t a = addr, end = addr + size;
    while (a < end) {
        struct range *m;
        HASH_FIND(hh, mappings, &a, sizeof a, m);
        if (m == NULL)
            break;
        HASH_DELETE(hh, mappings, m);
        record_pools[m->pool].vmm.mapped -= m->size;
        a += m->size ? m->size : end - a;
        free(m);
    }
    record_lock_drop(&record_lock);
}

bool record_vmm_retain(uintptr_t handle)
{
    record_lock_take(&record_lock);
    struct table_slot *slot = table_find(&record_handles, handle);
    struct live *h = slot != NULL ? slot->e : NULL;
    if (h != NULL)
        set_extra(h, entry_extra(h) + 1u);
    record_lock_drop(&record_lock);
    return h != NULL;
}

void *record_vmm_release(uintptr_t handle, int64_t now)
{
    record_lock_take(&record_lock);
    struct table_slot *slot = table_find(&record_handles, handle);
    struct live *h = slot != NULL ? slot->e : NULL;
    if (h != NULL) {
        if (entry_extra(h) > 1) {
            set_extra(h, entry_extra(h) - 1u);
            h = NULL;
        } else {
            table_remove(&record_handles, slot);
            record_account_locked(site_of(h), -(int64_t)entry_size(h), now);
        }
    }
    record_lock_drop(&record_lock);
    return h;
}

void record_vmm_reset_locked(void)
{
    RECORD_ASSERT_LOCKED();
    struct range *m, *mt;
    HASH_ITER(hh, mappings, m, mt) {
        HASH_DELETE(hh, mappings, m);
        free(m);
    }
    struct range *r, *rt;
    HASH_ITER(hh, reservations, r, rt) {
        HASH_DELETE(hh, reservations, r);
        free(r);
    }
}

/* ---- limit and device truth ---- */

void record_set_limit(int device, uint64_t bytes)
{
    __atomic_store_n(&record_limits[record_pool_of(KIND_DEVICE, device)].limit, bytes,
                     __ATOMIC_RELAXED);
}

uint64_t record_limit(int device)
{
    return __atomic_load_n(&record_limits[record_pool_of(KIND_DEVICE, device)].limit,
                           __ATOMIC_RELAXED);
}

bool record_limit_reserve(int device, uint64_t bytes)
{
    uint32_t i = record_pool_of(KIND_DEVICE, device);
    struct pool_limit *l = &record_limits[i];
    /* set once at init, before any hook runs */
    if (__atomic_load_n(&l->limit, __ATOMIC_RELAXED) == 0)
        return true;
    bool ok;
    record_lock_take(&record_lock);
    uint64_t held = record_pools[i].current + l->inflight;
    ok = held + bytes <= l->limit && held + bytes >= bytes;
    if (ok)
        l->inflight += bytes;
    record_lock_drop(&record_lock);
    return ok;
}

void record_limit_settle(int device, uint64_t bytes)
{
    struct pool_limit *l = &record_limits[record_pool_of(KIND_DEVICE, device)];
    if (__atomic_load_n(&l->limit, __ATOMIC_RELAXED) == 0)
        return;
    record_lock_take(&record_lock);
    assert(l->inflight >= bytes);
    l->inflight -= bytes;
    record_lock_drop(&record_lock);
}

void record_meminfo(int device, uint64_t free_bytes, uint64_t total_bytes)
{
    record_lock_take(&record_lock);
    struct pool *p = &record_pools[record_pool_of(KIND_DEVICE, device)];
    p->free_bytes = (int64_t)free_bytes;
    p->total_bytes = (int64_t)total_bytes;
    record_lock_drop(&record_lock);
}
