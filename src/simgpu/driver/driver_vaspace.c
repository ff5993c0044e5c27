/* driver_vaspace.c - the simulated GPU's address-space allocator.
 *
 * Physical memory is an array of 2 MiB pages with one state byte each.  Large
 * allocations (>= 1 MiB) take the lowest run of enough contiguous free pages;
 * small ones take the lowest run of free 512-byte units among the pages
 * already shared, and share a new page only when none has room.  So the
 * layout is deterministic and fragmentation is real: enough free pages in
 * total but no contiguous run means no placement.
 *
 * Workload: a test makes at most thousands of allocations on devices of a
 * few thousand pages, so linear first-fit scans are fast enough and easy to
 * trust; nothing here is on a tracer's hot path.
 * Invariants (asserted): a page's state matches the structure that holds it;
 * nfree counts VS_FREE pages; a shared page's `used` is its set bits.
 */
#include "driver_vaspace.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "sim_common.h"

int driver_vaspace_pages_init(struct driver_vaspace_pages *p, uint64_t npages)
{
    memset(p, 0, sizeof *p);
    p->state = calloc(npages ? npages : 1, 1);
    if (p->state == NULL)
        return -1;
    p->npages = npages;
    p->nfree = npages;
    return 0;
}

uint64_t driver_vaspace_used(const struct driver_vaspace_pages *p)
{
    return p->npages - p->nfree - p->nreserved;
}

uint64_t driver_vaspace_offset(const struct driver_vaspace_block *b)
{
    assert(b->kind == VB_RUN || b->kind == VB_SMALL);
    return b->page * SIM_PAGE + (uint64_t)b->unit * SIM_UNIT;
}

/* ---- whole pages ---- */

static int find_run(const struct driver_vaspace_pages *p, uint64_t k, uint64_t *first)
{
    uint64_t run = 0;
    if (k > p->nfree)
        return -1;
    for (uint64_t i = 0; i < p->npages; i++) {
        if (p->state[i] != VS_FREE) {
            run = 0;
        } else if (++run == k) {
            *first = i + 1 - k;
            return 0;
        }
    }
    return -1;
}

static void set_pages(struct driver_vaspace_pages *p, uint64_t first, uint64_t k,
                      uint8_t from, uint8_t to)
{
    for (uint64_t i = first; i < first + k; i++) {
        assert(p->state[i] == from);
        (void)from;
        p->state[i] = to;
    }
    if (to == VS_FREE)
        p->nfree += k;
    else if (from == VS_FREE)
        p->nfree -= k;
}

/* ---- shared pages ---- */

static int unit_used(const struct driver_vaspace_small *s, uint32_t i)
{
    return (int)((s->bits[i / 64] >> (i % 64)) & 1);
}

/* Lowest run of `units` free units in s. */
static int find_units(const struct driver_vaspace_small *s, uint32_t units, uint32_t *out)
{
    uint32_t run = 0, start = 0, i = 0;
    while (i < SIM_UNITS_PER_PAGE) {
        uint64_t w = s->bits[i / 64];
        if (i % 64 == 0 && (w == 0 || w == UINT64_MAX)) { /* whole word at once */
            if (w == UINT64_MAX) {
                run = 0;
            } else {
                if (run == 0)
                    start = i;
                run += 64;
            }
            i += 64;
        } else {
            if (unit_used(s, i)) {
                run = 0;
            } else {
                if (run == 0)
                    start = i;
                run++;
            }
            i++;
        }
        if (run >= units) {
            *out = start;
            return 0;
        }
    }
    return -1;
}

static void mark_units(struct driver_vaspace_small *s, uint32_t unit, uint32_t units, int used)
{
    for (uint32_t i = unit; i < unit + units; i++) {
        assert(unit_used(s, i) != used);
        if (used)
            s->bits[i / 64] |= UINT64_C(1) << (i % 64);
        else
            s->bits[i / 64] &= ~(UINT64_C(1) << (i % 64));
    }
    if (used)
        s->used += units;
    else
        s->used -= units;
}

/* Index in p->small of the shared page `page`, or where it would go. */
static size_t small_index(const struct driver_vaspace_pages *p, uint64_t page)
{
    size_t lo = 0, hi = p->nsmall;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->small[mid]->page < page)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int new_small_page(struct driver_vaspace_pages *p, struct driver_vaspace_small **out)
{
    uint64_t page;
    if (find_run(p, 1, &page) != 0)
        return -1;
    if (sim_common_grow(&p->small, p->nsmall, &p->capsmall, sizeof *p->small, 16) != 0)
        return -2;
    struct driver_vaspace_small *s = calloc(1, sizeof *s);
    if (s == NULL)
        return -2;
    s->page = page;
    size_t at = small_index(p, page);
    memmove(&p->small[at + 1], &p->small[at], (p->nsmall - at) * sizeof *p->small);
    p->small[at] = s;
    p->nsmall++;
    set_pages(p, page, 1, VS_FREE, VS_SMALL);
    *out = s;
    return 0;
}

static int place_small(struct driver_vaspace_pages *p, uint64_t size,
                       struct driver_vaspace_block *b)
{
    uint32_t units = (uint32_t)((size + SIM_UNIT - 1) / SIM_UNIT), unit = 0;
    struct driver_vaspace_small *s = NULL;
    for (size_t i = 0; i < p->nsmall; i++) {
        if (SIM_UNITS_PER_PAGE - p->small[i]->used >= units &&
            find_units(p->small[i], units, &unit) == 0) {
            s = p->small[i];
            break;
        }
    }
    if (s == NULL) {
        int rc = new_small_page(p, &s);
        if (rc != 0)
            return rc;
        unit = 0;
    }
    mark_units(s, unit, units, 1);
    *b = (struct driver_vaspace_block){.kind = VB_SMALL, .page = s->page, .unit = unit,
                                       .units = units};
    return 0;
}

static void release_small(struct driver_vaspace_pages *p, struct driver_vaspace_block *b)
{
    size_t at = small_index(p, b->page);
    assert(at < p->nsmall && p->small[at]->page == b->page);
    struct driver_vaspace_small *s = p->small[at];
    mark_units(s, b->unit, b->units, 0);
    if (s->used == 0) { /* an empty shared page goes back to the free pages */
        set_pages(p, s->page, 1, VS_SMALL, VS_FREE);
        memmove(&p->small[at], &p->small[at + 1], (p->nsmall - at - 1) * sizeof *p->small);
        p->nsmall--;
        free(s);
    }
}

/* ---- placements ---- */

int driver_vaspace_place(struct driver_vaspace_pages *p, uint64_t size,
                         struct driver_vaspace_block *b)
{
    assert(size > 0);
    if (size < SIM_LARGE_MIN)
        return place_small(p, size, b);
    uint64_t k = size / SIM_PAGE + (size % SIM_PAGE != 0), first;
    if (find_run(p, k, &first) != 0)
        return -1;
    set_pages(p, first, k, VS_FREE, VS_RUN);
    *b = (struct driver_vaspace_block){.kind = VB_RUN, .page = first, .npages = k};
    return 0;
}

int driver_vaspace_scatter(struct driver_vaspace_pages *p, uint64_t npages,
                           struct driver_vaspace_block *b)
{
    assert(npages > 0);
    if (npages > p->nfree)
        return -1;
    uint64_t *pages = malloc(npages * sizeof *pages);
    if (pages == NULL)
        return -2;
    uint64_t got = 0;
    for (uint64_t i = 0; i < p->npages && got < npages; i++)
        if (p->state[i] == VS_FREE)
            pages[got++] = i;
    assert(got == npages);
    for (uint64_t i = 0; i < npages; i++)
        set_pages(p, pages[i], 1, VS_FREE, VS_SCATTER);
    *b = (struct driver_vaspace_block){.kind = VB_SCATTER, .npages = npages, .pages = pages};
    return 0;
}

void driver_vaspace_release(struct driver_vaspace_pages *p, struct driver_vaspace_block *b)
{
    switch (b->kind) {
    case VB_NONE:
        break;
    case VB_RUN:
        set_pages(p, b->page, b->npages, VS_RUN, VS_FREE);
        break;
    case VB_SMALL:
        release_small(p, b);
        break;
    case VB_SCATTER:
        for (uint64_t i = 0; i < b->npages; i++)
            set_pages(p, b->pages[i], 1, VS_SCATTER, VS_FREE);
        free(b->pages);
        break;
    }
    memset(b, 0, sizeof *b);
}

/* Moves up to npages of the highest pages in state `from` to `to`. */
static uint64_t move_top(struct driver_vaspace_pages *p, uint64_t npages, uint8_t from,
                         uint8_t to)
{
    uint64_t got = 0;
    for (uint64_t i = p->npages; i > 0 && got < npages; i--) {
        if (p->state[i - 1] == from) {
            set_pages(p, i - 1, 1, from, to);
            got++;
        }
    }
    return got;
}

uint64_t driver_vaspace_reserve_top(struct driver_vaspace_pages *p, uint64_t npages)
{
    uint64_t got = move_top(p, npages, VS_FREE, VS_RESERVED);
    p->nreserved += got;
    return got;
}

uint64_t driver_vaspace_unreserve_top(struct driver_vaspace_pages *p, uint64_t npages)
{
    uint64_t got = move_top(p, npages, VS_RESERVED, VS_FREE);
    p->nreserved -= got;
    return got;
}

/* ---- virtual address ranges ---- */

void driver_vaspace_range_init(struct driver_vaspace_range *r, uint64_t base, uint64_t end)
{
    memset(r, 0, sizeof *r);
    r->base = base;
    r->end = end;
}

int driver_vaspace_range_covers(const struct driver_vaspace_range *r, uint64_t addr)
{
    return addr >= r->base && addr < r->end;
}

static uint64_t align_up(uint64_t v, uint64_t align)
{
    return (v + align - 1) & ~(align - 1);
}

/* Whether [start, start+size) is inside the window and overlaps no span;
 * *at is where a span starting there would be inserted. */
static int range_is_free(const struct driver_vaspace_range *r, uint64_t start,
                         uint64_t size, size_t *at)
{
    if (start < r->base || start > r->end || size > r->end - start)
        return 0;
    size_t i = 0;
    while (i < r->n && r->span[i].start + r->span[i].size <= start)
        i++;
    *at = i;
    return i == r->n || r->span[i].start >= start + size;
}

static int insert_span(struct driver_vaspace_range *r, size_t at, uint64_t start, uint64_t size)
{
    if (sim_common_grow(&r->span, r->n, &r->cap, sizeof *r->span, 16) != 0)
        return -2;
    memmove(&r->span[at + 1], &r->span[at], (r->n - at) * sizeof *r->span);
    r->span[at].start = start;
    r->span[at].size = size;
    r->n++;
    return 0;
}

int driver_vaspace_range_alloc(struct driver_vaspace_range *r, uint64_t size,
                               uint64_t align, uint64_t hint, uint64_t *out)
{
    size_t at;
    assert(align != 0 && (align & (align - 1)) == 0);
    if (size == 0 || size > r->end - r->base)
        return -1;
    if (hint != 0 && hint % align == 0 && range_is_free(r, hint, size, &at)) {
        if (insert_span(r, at, hint, size) != 0)
            return -2;
        *out = hint;
        return 0;
    }
    uint64_t cur = align_up(r->base, align);
    for (at = 0; at <= r->n; at++) {
        uint64_t limit = at < r->n ? r->span[at].start : r->end;
        if (cur <= limit && size <= limit - cur) {
            if (insert_span(r, at, cur, size) != 0)
                return -2;
            *out = cur;
            return 0;
        }
        if (at < r->n)
            cur = align_up(r->span[at].start + r->span[at].size, align);
    }
    return -1;
}

int driver_vaspace_range_free(struct driver_vaspace_range *r, uint64_t start, uint64_t size)
{
    for (size_t i = 0; i < r->n; i++) {
        if (r->span[i].start == start) {
            if (r->span[i].size != size)
                return -1;
            memmove(&r->span[i], &r->span[i + 1], (r->n - i - 1) * sizeof *r->span);
            r->n--;
            return 0;
        }
    }
    return -1;
}
