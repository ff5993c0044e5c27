/* record_vmm.c - the tracker's virtual-memory bookkeeping (cuMemAddressReserve,
 * cuMemMap and cuMemCreate handle references), the memory limit
 * (CUMEMTRACE_LIMIT) and the driver's latest free/total per device.
 * Threads: record_lock (record_impl.h) guards the range tables, like every
 * table of the tracker; the limit itself is set once at start-up and read
 * atomically. */
#include "record_impl.h"

#include <assert.h>
#include <stdlib.h>

/* A range of virtual addresses: reserved (cuMemAddressReserve) or mapped
 * to a handle (cuMemMap).  Kept in an address table (record_table.h) as
 * its `e`, a pointer the table only stores and compares, converted back
 * here: a map and an unmap are a probe each, and a range comes from the
 * spare list, not malloc (PyTorch's expandable segments map a 2 MiB chunk
 * at a time): a cuMemCreate+cuMemMap / cuMemUnmap+cuMemRelease pair at
 * depth 32 runs 342 fewer instructions under callgrind than with uthash
 * and a malloc per range. */
struct range {
    uintptr_t addr;
    uint64_t size;
    uint32_t pool;
    struct range *next_spare;
};

static struct addr_table mappings, reservations;
static struct range *spare;

static inline struct range *range_at(const struct table_slot *slot)
{
    return (struct range *)(void *)slot->e;
}

/* Adds a range at `addr` to `t`, and its size to `*bytes` and that
 * counter's peak.  False when the address is already there or memory ran
 * out. */
static bool range_add_locked(struct addr_table *t, uintptr_t addr, uint64_t size,
                             uint32_t pool, uint64_t *bytes, uint64_t *peak)
{
    RECORD_ASSERT_LOCKED();
    struct table_slot *slot = table_slot(t, addr);
    if (slot == NULL || slot->e != NULL)
        return false;
    struct range *r = spare;
    if (r != NULL)
        spare = r->next_spare;
    else if ((r = malloc(sizeof *r)) == NULL)
        return false;
    *r = (struct range){addr, size, pool, NULL};
    slot->key = addr;
    slot->e = (struct live *)(void *)r;
    t->count++;
    *bytes += size;
    if (*bytes > *peak)
        *peak = *bytes;
    record_pools[pool].active = true;
    return true;
}

/* Takes the range at `slot` out of `t`: returned, spare until the next add. */
static struct range *range_remove_locked(struct addr_table *t, struct table_slot *slot)
{
    struct range *r = range_at(slot);
    table_remove(t, slot);
    r->next_spare = spare;
    spare = r;
    return r;
}

void record_vmm_reserve(int device, uintptr_t addr, uint64_t size)
{
    uint32_t pool = record_pool_of(KIND_VMM, device);
    record_lock_take(&record_lock);
    struct record_vmm_stats *v = &record_pools[pool].vmm;
    range_add_locked(&reservations, addr, size, pool, &v->reserved, &v->reserved_peak);
    record_lock_drop(&record_lock);
}

void record_vmm_unreserve(uintptr_t addr)
{
    record_lock_take(&record_lock);
    struct table_slot *slot = table_find(&reservations, addr);
    if (slot != NULL) {
        struct range *r = range_remove_locked(&reservations, slot);
        record_pools[r->pool].vmm.reserved -= r->size;
    }
    record_lock_drop(&record_lock);
}

void record_vmm_map(uintptr_t addr, uint64_t size, uintptr_t handle)
{
    record_lock_take(&record_lock);
    struct table_slot *slot = table_find(&record_handles, handle);
    struct live *h = slot != NULL ? slot->e : NULL;
    /* Imported handles (IPC, fabric) are not ours: their mappings are not
     * this process's memory either. */
    if (h != NULL) {
        uint32_t pool = site_of(h)->s.pool;
        struct record_vmm_stats *v = &record_pools[pool].vmm;
        range_add_locked(&mappings, addr, size, pool, &v->mapped, &v->mapped_peak);
    }
    record_lock_drop(&record_lock);
}

void record_vmm_unmap(uintptr_t addr, uint64_t size)
{
    record_lock_take(&record_lock);
    uintptr_t a = addr, end = addr + size;
    while (a < end) {
        struct table_slot *slot = table_find(&mappings, a);
        if (slot == NULL)
            break;
        struct range *m = range_remove_locked(&mappings, slot);
        record_pools[m->pool].vmm.mapped -= m->size;
        a += m->size ? m->size : end - a;
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
    struct addr_table *tables[2] = {&mappings, &reservations};
    for (unsigned k = 0; k < 2; k++) {
        for (uint32_t i = 0; i < table_size(tables[k]); i++)
            if (tables[k]->slots[i].e != NULL)
                free(range_at(&tables[k]->slots[i]));
        table_clear(tables[k]);
    }
    while (spare != NULL) {
        struct range *next = spare->next_spare;
        free(spare);
        spare = next;
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
