/* phases.c - per-thread stacks of open ranges, the table of phase paths,
 * and the log of closed ranges the timeline draws (phases.h).
 *
 * Workload: a push and a pop per range, from the host's own threads (NVTX
 * calls, cumemtrace_phase_push); an allocation only reads phase_current.
 * Costs: a push hashes the name and probes the path table without a lock
 * (a path is interned once, under `lock`, then only read); it takes its
 * own thread's lock (uncontended but for a start/end range ended by another
 * thread) and reads the clock.  A pop searches its thread's stack from the
 * top (the innermost range of its domain is almost always the top) and
 * writes one row of the ring.  O(1) per call, bounded by PHASE_MAX_DEPTH.
 *
 * Memory is bounded whatever the program names: PHASE_MAX_NODES paths of
 * at most PHASE_NAME_MAX bytes, a thread block per thread with ranges
 * (1 KiB), PHASE_MAX_OPEN start/end slots, a ring of PHASE_RING rows.
 * Past PHASE_MAX_NODES a new path is counted under PHASE_OVERFLOW.
 *
 * Threads: `lock` (a pthread mutex, never taken on the allocation path)
 * guards interning, the domains, the thread list and the start/end slots;
 * each thread block's spin lock guards its stack and its phase_current.
 * Order: `lock` before a block's lock.
 */
#include "phases.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "cumemtrace.h"

/* phase_current is a member of thread_hot (thread/thread_hot.c). */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- counters (relaxed atomics) ---- */

static struct phase_stats stats;
#define COUNT(field) __atomic_fetch_add(&stats.field, 1, __ATOMIC_RELAXED)

/* ---- domains ---- */

struct phase_domain {
    uint16_t index;
    char source[16];
    char name[64]; /* "" for none */
};
static struct phase_domain domains[PHASE_MAX_DOMAINS];
static unsigned ndomains; /* under lock; read relaxed */

static void copy_cut(char *dst, size_t cap, const char *src, size_t len);

struct phase_domain *phase_domain(const char *source, const char *name)
{
    if (source == NULL || source[0] == '\0')
        source = "api";
    if (name == NULL)
        name = "";
    pthread_mutex_lock(&lock);
    struct phase_domain *d = NULL;
    for (unsigned i = 0; i < ndomains && d == NULL; i++)
        if (strncmp(domains[i].source, source, sizeof domains[i].source - 1) == 0 &&
            strncmp(domains[i].name, name, sizeof domains[i].name - 1) == 0)
            d = &domains[i];
    if (d == NULL && ndomains < PHASE_MAX_DOMAINS) {
        d = &domains[ndomains];
        d->index = (uint16_t)ndomains;
        copy_cut(d->source, sizeof d->source, source, strlen(source));
        copy_cut(d->name, sizeof d->name, name, strlen(name));
        __atomic_store_n(&ndomains, ndomains + 1, __ATOMIC_RELEASE);
    }
    if (d == NULL)
        d = &domains[PHASE_MAX_DOMAINS - 1];
    pthread_mutex_unlock(&lock);
    return d;
}

/* ---- the path table ---- */

struct node {
    uint64_t hash;
    uint32_t parent;
    uint16_t domain;
    uint16_t len;
    char name[PHASE_NAME_MAX + 1];
};

/* Nodes live in chunks that are never freed or moved: a reader indexes
 * them without the lock once it saw the id published. */
#define CHUNK 256
static struct node *chunks[PHASE_MAX_NODES / CHUNK];
static uint32_t nnodes; /* ids 1..nnodes exist; release-published */
/* Open addressing on the hash, ids (0 empty), at most half full. */
#define SLOTS (2 * PHASE_MAX_NODES)
static uint32_t slots[SLOTS];

static inline struct node *node_at(uint32_t id)
{
    return &chunks[(id - 1) / CHUNK][(id - 1) % CHUNK];
}

/* Cuts at len bytes, not inside a UTF-8 sequence; always terminates. */
static void copy_cut(char *dst, size_t cap, const char *src, size_t len)
{
    if (len >= cap) {
        len = cap - 1;
        while (len > 0 && ((unsigned char)src[len] & 0xC0) == 0x80)
            len--; /* src[len] would begin the cut-off part */
    }
    memcpy(dst, src, len);
    dst[len] = '\0';
}

static inline size_t cut_len(const char *s, size_t len)
{
    if (len <= PHASE_NAME_MAX)
        return len;
    len = PHASE_NAME_MAX;
    while (len > 0 && ((unsigned char)s[len] & 0xC0) == 0x80)
        len--;
    return len;
}

/* 8 bytes a step (a name is a few words): the loads are memcpy'd so any
 * alignment is fine. */
static inline uint64_t name_hash(const char *s, size_t len, uint32_t parent, unsigned domain)
{
    const uint64_t k = 0x9E3779B97F4A7C15ULL;
    uint64_t h = ((uint64_t)parent << 16 | domain) * k ^ len;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * k;
        h ^= h >> 32;
    }
    uint64_t w = 0;
    memcpy(&w, s + i, len - i);
    h = (h ^ w) * k;
    return h ^ (h >> 29);
}

static inline bool node_is(const struct node *n, uint64_t h, uint32_t parent,
                           unsigned domain, const char *s, size_t len)
{
    return n->hash == h && n->parent == parent && n->domain == domain && n->len == len &&
           memcmp(n->name, s, len) == 0;
}

static bool node_make_locked(uint32_t id, uint64_t h, uint32_t parent, unsigned domain,
                             const char *s, size_t len)
{
    struct node **c = &chunks[(id - 1) / CHUNK];
    if (*c == NULL && (*c = calloc(CHUNK, sizeof **c)) == NULL)
        return false;
    struct node *n = node_at(id);
    n->hash = h;
    n->parent = parent;
    n->domain = (uint16_t)domain;
    n->len = (uint16_t)len;
    memcpy(n->name, s, len);
    n->name[len] = '\0';
    return true;
}

/* Id 1 is the overflow phase; made with the first path. */
static void overflow_make_locked(void)
{
    static const char name[] = "(ranges past the limit of distinct paths)";
    if (nnodes == 0 && node_make_locked(PHASE_OVERFLOW, 0, 0, 0, name, sizeof name - 1))
        __atomic_store_n(&nnodes, 1, __ATOMIC_RELEASE);
}

/* The node of (parent, domain, name): found without a lock, made under it. */
static uint32_t intern(uint32_t parent, unsigned domain, const char *s, size_t len)
{
    len = cut_len(s, len);
    uint64_t h = name_hash(s, len, parent, domain);
    uint32_t i = (uint32_t)h & (SLOTS - 1);
    for (;; i = (i + 1) & (SLOTS - 1)) {
        uint32_t id = __atomic_load_n(&slots[i], __ATOMIC_ACQUIRE);
        if (id == 0)
            break;
        if (node_is(node_at(id), h, parent, domain, s, len))
            return id;
    }
    pthread_mutex_lock(&lock);
    overflow_make_locked();
    uint32_t id = 0;
    for (;; i = (i + 1) & (SLOTS - 1)) { /* others may have added since */
        id = slots[i];
        if (id == 0 || node_is(node_at(id), h, parent, domain, s, len))
            break;
    }
    if (id == 0 && nnodes == 0) {
        id = PHASE_NONE; /* no memory for the table's first chunk: untracked */
    } else if (id == 0) {
        uint32_t next = nnodes + 1;
        if (next > PHASE_MAX_NODES ||
            !node_make_locked(next, h, parent, domain, s, len)) {
            id = PHASE_OVERFLOW;
            COUNT(overflow);
        } else {
            id = next;
            __atomic_store_n(&nnodes, next, __ATOMIC_RELEASE);
            __atomic_store_n(&slots[i], id, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&lock);
    return id;
}

uint32_t phase_path(struct phase_domain *d, const char *path)
{
    unsigned domain = d ? d->index : 0;
    uint32_t id = PHASE_NONE;
    for (const char *p = path; p != NULL && *p != '\0';) {
        const char *end = strchr(p, '/');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if ((id = intern(id, domain, p, len)) == PHASE_NONE)
            return PHASE_NONE;
        p = end ? end + 1 : NULL;
    }
    return id;
}

/* ---- registered strings ---- */

static uint32_t nnames;

const struct phase_name *phase_intern_name(const char *s, size_t len)
{
    if (s == NULL || __atomic_add_fetch(&nnames, 1, __ATOMIC_RELAXED) > PHASE_MAX_NODES)
        return NULL;
    struct phase_name *n = malloc(sizeof *n);
    if (n == NULL)
        return NULL;
    copy_cut(n->s, sizeof n->s, s, len);
    n->len = (uint32_t)strlen(n->s);
    return n;
}

/* ---- the ring of closed ranges ---- */

struct ring_slot {
    uint64_t seq; /* index + 1 once written; 0 while being written */
    int64_t start, end;
    uint32_t phase;
    uint32_t tid_kind; /* tid | kind << 30 (Linux tids are below 2^22) */
};
static struct ring_slot *ring;
static uint64_t ring_n; /* rows ever written */

static struct ring_slot *ring_get(void)
{
    struct ring_slot *r = __atomic_load_n(&ring, __ATOMIC_ACQUIRE);
    if (__builtin_expect(r != NULL, 1))
        return r;
    pthread_mutex_lock(&lock);
    if (ring == NULL)
        __atomic_store_n(&ring, calloc(PHASE_RING, sizeof *ring), __ATOMIC_RELEASE);
    r = ring;
    pthread_mutex_unlock(&lock);
    return r;
}

/* A seqlock row per range: a dump copies rows while threads write others. */
static void log_range(int64_t start, int64_t end, uint32_t phase, uint32_t tid, unsigned kind)
{
    struct ring_slot *r = ring_get();
    if (r == NULL) {
        COUNT(recorded); /* no ring: counted only */
        return;
    }
    uint64_t i = __atomic_fetch_add(&ring_n, 1, __ATOMIC_RELAXED);
    struct ring_slot *s = &r[i & (PHASE_RING - 1)];
    /* release stores rather than a fence (ThreadSanitizer knows no
     * fences; on x86 both are plain stores): each orders seq = 0 before it */
    __atomic_store_n(&s->seq, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->start, start, __ATOMIC_RELEASE);
    __atomic_store_n(&s->end, end, __ATOMIC_RELEASE);
    __atomic_store_n(&s->phase, phase, __ATOMIC_RELEASE);
    __atomic_store_n(&s->tid_kind, tid | (uint32_t)kind << 30, __ATOMIC_RELEASE);
    __atomic_store_n(&s->seq, i + 1, __ATOMIC_RELEASE);
}

/* ---- threads ---- */

struct entry {
    uint32_t node;
    uint16_t domain;
    uint16_t slot; /* start/end slot + 1, 0 for a push */
    int64_t start;
};

/* The paths this thread pushed last, by (name pointer, parent): a hit
 * compares the name's bytes with the path's and skips the hash and the
 * table.  A program names its ranges with the same few literals. */
#define NAME_CACHE 16
struct name_slot {
    const char *name;
    uint32_t parent, node;
    uint16_t domain;
};

struct block {
    int lock;
    uint32_t depth;       /* entries in e[]: at most PHASE_MAX_DEPTH */
    uint32_t deep_pushes; /* pushes made while e[] was full: counted only */
    uint32_t deep_starts; /* start/end ranges so started, not ended: counted only */
    uint32_t tid;
    uint32_t *current; /* the thread's phase_current */
    uint64_t pushes;   /* written by this thread only (relaxed), summed by dumps */
    struct block *prev, *next;
    struct entry e[PHASE_MAX_DEPTH];
    struct name_slot cache[NAME_CACHE];
};
static uint64_t pushes_gone; /* of threads that ended; under lock */
static __thread struct block *me __attribute__((tls_model("initial-exec")));
static struct block *threads; /* under lock */

static inline void block_lock(struct block *b)
{
    while (__atomic_exchange_n(&b->lock, 1, __ATOMIC_ACQUIRE))
        while (__atomic_load_n(&b->lock, __ATOMIC_RELAXED))
            sched_yield();
}

static inline void block_unlock(struct block *b)
{
    __atomic_store_n(&b->lock, 0, __ATOMIC_RELEASE);
}

/* The thread's phase is its top entry's; called with its block locked. */
static inline void set_current(struct block *b)
{
    unsigned d = b->depth;
    __atomic_store_n(b->current, d ? b->e[d - 1].node : PHASE_NONE, __ATOMIC_RELAXED);
}

/* ---- start/end slots ---- */

struct open_slot {
    uint32_t gen;        /* bumped at each use: a stale id never matches */
    bool used;
    bool deep;           /* started while its thread's stack was full: not in it */
    struct block *owner; /* NULL once the starting thread ended */
    uint32_t node, tid;
    int64_t start;
};
static struct open_slot open_slots[PHASE_MAX_OPEN]; /* under lock */

static pthread_key_t thread_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static bool key_made;

static void thread_gone(void *p)
{
    struct block *b = p;
    pthread_mutex_lock(&lock);
    if (b->prev)
        b->prev->next = b->next;
    else
        threads = b->next;
    if (b->next)
        b->next->prev = b->prev;
    pushes_gone += b->pushes;
    /* its start/end ranges stay open: any thread may end them */
    for (unsigned i = 0; i < PHASE_MAX_OPEN; i++)
        if (open_slots[i].used && open_slots[i].owner == b)
            open_slots[i].owner = NULL;
    pthread_mutex_unlock(&lock);
    if (me == b) {
        me = NULL;
        __atomic_store_n(&phase_current, PHASE_NONE, __ATOMIC_RELAXED);
    }
    free(b);
}

static void key_make(void)
{
    key_made = pthread_key_create(&thread_key, thread_gone) == 0;
}

static __attribute__((noinline)) struct block *block_new(void)
{
    pthread_once(&key_once, key_make);
    struct block *b = calloc(1, sizeof *b);
    if (b == NULL)
        return NULL;
    b->tid = (uint32_t)syscall(SYS_gettid);
    b->current = &phase_current;
    pthread_mutex_lock(&lock);
    b->next = threads;
    if (threads)
        threads->prev = b;
    threads = b;
    pthread_mutex_unlock(&lock);
    if (key_made)
        pthread_setspecific(thread_key, b);
    me = b;
    return b;
}

static inline struct block *block_get(void)
{
    struct block *b = me;
    return __builtin_expect(b != NULL, 1) ? b : block_new();
}

/* ---- push / pop ---- */

/* Puts (node, domain, slot) on b's stack, b locked; returns the level
 * (the phases open on the thread before it).  A full stack counts it
 * instead, as a deep push or a deep start (slot != 0), each taken off
 * the count when it closes. */
static inline int stack_push_locked(struct block *b, uint32_t node, unsigned domain,
                                    unsigned slot, int64_t start)
{
    unsigned level = b->depth + b->deep_pushes + b->deep_starts;
    if (b->depth < PHASE_MAX_DEPTH) {
        b->e[b->depth++] = (struct entry){node, (uint16_t)domain, (uint16_t)slot, start};
        __atomic_store_n(b->current, node, __ATOMIC_RELAXED);
    } else {
        if (slot != 0)
            b->deep_starts++;
        else
            b->deep_pushes++;
        COUNT(too_deep);
    }
    return (int)level;
}

/* Takes entry k out of b's stack (b locked). */
static inline void stack_remove_locked(struct block *b, unsigned k)
{
    memmove(&b->e[k], &b->e[k + 1], (b->depth - k - 1) * sizeof b->e[0]);
    b->depth--;
    set_current(b);
}

/* This thread's cache slot of (name pointer, parent). */
static inline struct name_slot *cache_slot(struct block *b, const char *name, uint32_t parent)
{
    return &b->cache[((uintptr_t)name >> 3 ^ parent * 0x9E3779B9u) % NAME_CACHE];
}

/* The node of (parent, domain, name[0..len)): this thread's cache, else
 * the table. */
static inline uint32_t lookup(struct block *b, uint32_t parent, unsigned domain,
                              const char *name, size_t len)
{
    struct name_slot *c = cache_slot(b, name, parent);
    if (c->name == name && c->parent == parent && c->domain == domain) {
        const struct node *n = node_at(c->node);
        if (n->len == cut_len(name, len) && memcmp(n->name, name, n->len) == 0)
            return c->node;
    }
    uint32_t node = intern(parent, domain, name, len);
    if (node != PHASE_NONE)
        *c = (struct name_slot){name, parent, node, (uint16_t)domain};
    return node;
}

/* The same for a NUL-terminated name (NVTX's and the API's), with no
 * strlen on a hit: the cached path's bytes are compared up to the name's
 * NUL, never reading the caller's string past it.  A path whose name was
 * cut (PHASE_NAME_MAX bytes) matches every name that begins so: they are
 * one path. */
static inline uint32_t lookup_str(struct block *b, uint32_t parent, unsigned domain,
                                  const char *name)
{
    struct name_slot *c = cache_slot(b, name, parent);
    if (c->name == name && c->parent == parent && c->domain == domain) {
        const struct node *n = node_at(c->node);
        size_t i = 0;
        while (i < n->len && name[i] == n->name[i])
            i++;
        if (i == n->len && (name[i] == '\0' || n->len == PHASE_NAME_MAX))
            return c->node;
    }
    uint32_t node = intern(parent, domain, name, strlen(name));
    if (node != PHASE_NONE)
        *c = (struct name_slot){name, parent, node, (uint16_t)domain};
    return node;
}

/* Puts `node` on the calling thread's stack. */
static inline int push_node(struct block *b, uint32_t node, unsigned domain)
{
    __atomic_store_n(&b->pushes, b->pushes + 1, __ATOMIC_RELAXED);
    int64_t now = clock_now_ns();
    block_lock(b);
    int level = stack_push_locked(b, node, domain, 0, now);
    block_unlock(b);
    return level;
}

/* The parent of a push is the thread's phase: its top entry, kept in
 * phase_current (a remote end changes it only under the block's lock, and
 * a range ended meanwhile is an acceptable parent). */
int phase_push(struct phase_domain *dom, const char *name, size_t len)
{
    struct block *b = block_get();
    if (__builtin_expect(b == NULL, 0))
        return -1;
    if (name == NULL)
        name = "", len = 0;
    unsigned domain = dom ? dom->index : 0;
    return push_node(b, lookup(b, phase_now(), domain, name, len), domain);
}

int phase_push_str(struct phase_domain *dom, const char *name)
{
    struct block *b = block_get();
    if (__builtin_expect(b == NULL, 0))
        return -1;
    if (name == NULL)
        name = "";
    unsigned domain = dom ? dom->index : 0;
    return push_node(b, lookup_str(b, phase_now(), domain, name), domain);
}

int phase_pop(struct phase_domain *dom)
{
    struct block *b = me;
    unsigned domain = dom ? dom->index : 0;
    if (b == NULL) {
        COUNT(unbalanced_pops);
        return -1;
    }
    int64_t now = clock_now_ns();
    block_lock(b);
    if (b->deep_pushes > 0) { /* a push the full stack only counted: the innermost */
        b->deep_pushes--;
        int level = (int)(b->depth + b->deep_pushes + b->deep_starts);
        block_unlock(b);
        return level;
    }
    unsigned k = b->depth;
    struct entry e;
    if (__builtin_expect(k > 0 && b->e[k - 1].domain == domain && b->e[k - 1].slot == 0, 1)) {
        e = b->e[--b->depth]; /* the innermost: nothing moves */
        __atomic_store_n(b->current, k > 1 ? b->e[k - 2].node : PHASE_NONE, __ATOMIC_RELAXED);
    } else {
        while (k > 0 && (b->e[k - 1].domain != domain || b->e[k - 1].slot != 0))
            k--;
        if (k == 0) {
            block_unlock(b);
            COUNT(unbalanced_pops);
            return -1;
        }
        e = b->e[k - 1];
        stack_remove_locked(b, k - 1);
    }
    block_unlock(b);
    log_range(e.start, now, e.node, b->tid, PHASE_RANGE_PUSH);
    return (int)k - 1;
}

uint64_t phase_start(struct phase_domain *dom, const char *name, size_t len)
{
    struct block *b = block_get();
    if (b == NULL)
        return 0;
    if (name == NULL)
        name = "", len = 0;
    unsigned domain = dom ? dom->index : 0;
    /* a start/end range is a root: it may outlive what is open now */
    uint32_t node = intern(PHASE_NONE, domain, name, len);
    __atomic_store_n(&b->pushes, b->pushes + 1, __ATOMIC_RELAXED);
    int64_t now = clock_now_ns();
    pthread_mutex_lock(&lock);
    unsigned i = 0;
    while (i < PHASE_MAX_OPEN && open_slots[i].used)
        i++;
    if (i == PHASE_MAX_OPEN) {
        pthread_mutex_unlock(&lock);
        COUNT(dropped_starts);
        return 0;
    }
    struct open_slot *s = &open_slots[i];
    s->used = true;
    s->gen++;
    s->owner = b;
    s->node = node;
    s->tid = b->tid;
    s->start = now;
    uint64_t id = (uint64_t)s->gen << 32 | (i + 1);
    block_lock(b);
    s->deep = b->depth >= PHASE_MAX_DEPTH;
    stack_push_locked(b, node, domain, i + 1, now);
    block_unlock(b);
    pthread_mutex_unlock(&lock);
    return id;
}

void phase_end(uint64_t id)
{
    uint32_t i = (uint32_t)id - 1, gen = (uint32_t)(id >> 32);
    int64_t now = clock_now_ns();
    pthread_mutex_lock(&lock);
    struct open_slot *s = i < PHASE_MAX_OPEN ? &open_slots[i] : NULL;
    if (s == NULL || !s->used || s->gen != gen) {
        pthread_mutex_unlock(&lock);
        COUNT(unbalanced_pops);
        return;
    }
    struct block *b = s->owner;
    if (b != NULL) {
        block_lock(b);
        if (s->deep)
            b->deep_starts--;
        for (unsigned k = s->deep ? 0 : b->depth; k > 0; k--)
            if (b->e[k - 1].slot == i + 1) {
                stack_remove_locked(b, k - 1);
                break;
            }
        block_unlock(b);
    }
    s->used = false;
    uint32_t node = s->node, tid = s->tid;
    int64_t start = s->start;
    pthread_mutex_unlock(&lock);
    log_range(start, now, node, tid, PHASE_RANGE_STARTEND);
}

void phase_mark(struct phase_domain *dom, const char *name, size_t len)
{
    struct block *b = block_get();
    if (b == NULL)
        return;
    if (name == NULL)
        name = "", len = 0;
    uint32_t node = intern(phase_now(), dom ? dom->index : 0, name, len);
    int64_t now = clock_now_ns();
    log_range(now, now, node, b->tid, PHASE_RANGE_MARK);
}

/* ---- the public API (include/cumemtrace.h) ---- */

/* The domain of an API source: the thread's last one when it matches. */
static __thread struct phase_domain *api_last __attribute__((tls_model("initial-exec")));

static struct phase_domain *api_domain(const char *source)
{
    struct phase_domain *d = api_last;
    if (source == NULL || source[0] == '\0')
        source = "api";
    if (d != NULL && d->name[0] == '\0' && strcmp(d->source, source) == 0)
        return d;
    return api_last = phase_domain(source, NULL);
}

__attribute__((visibility("default"))) int cumemtrace_phase_push(const char *source,
                                                                 const char *name)
{
    return phase_push_str(api_domain(source), name);
}

__attribute__((visibility("default"))) int cumemtrace_phase_pop(const char *source)
{
    return phase_pop(api_domain(source));
}

/* ---- what a snapshot reads ---- */

uint32_t phase_count(void)
{
    return __atomic_load_n(&nnodes, __ATOMIC_ACQUIRE);
}

bool phase_get(uint32_t id, struct phase_info *out)
{
    if (id == 0 || id > phase_count())
        return false;
    const struct node *n = node_at(id);
    const struct phase_domain *d = &domains[n->domain];
    out->id = id;
    out->parent = n->parent;
    out->name = n->name;
    out->source = id == PHASE_OVERFLOW ? "cumemtrace" : d->source;
    out->domain = id == PHASE_OVERFLOW || d->name[0] == '\0' ? NULL : d->name;
    return true;
}

void phase_get_stats(struct phase_stats *out)
{
    out->pushes = __atomic_load_n(&stats.pushes, __ATOMIC_RELAXED);
    out->overflow = __atomic_load_n(&stats.overflow, __ATOMIC_RELAXED);
    out->unbalanced_pops = __atomic_load_n(&stats.unbalanced_pops, __ATOMIC_RELAXED);
    out->too_deep = __atomic_load_n(&stats.too_deep, __ATOMIC_RELAXED);
    out->dropped_starts = __atomic_load_n(&stats.dropped_starts, __ATOMIC_RELAXED);
    out->recorded = __atomic_load_n(&stats.recorded, __ATOMIC_RELAXED) +
                    __atomic_load_n(&ring_n, __ATOMIC_RELAXED);
    pthread_mutex_lock(&lock);
    out->pushes += pushes_gone;
    for (struct block *b = threads; b; b = b->next)
        out->pushes += __atomic_load_n(&b->pushes, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&lock);
}

long phase_ranges(struct phase_range **out)
{
    *out = NULL;
    pthread_mutex_lock(&lock);
    size_t open = 0;
    for (struct block *b = threads; b; b = b->next) {
        block_lock(b);
        open += b->depth;
        block_unlock(b);
    }
    /* a thread may open more before they are copied: those are left out */
    for (unsigned i = 0; i < PHASE_MAX_OPEN; i++)
        open += open_slots[i].used && open_slots[i].owner == NULL;
    uint64_t n = __atomic_load_n(&ring_n, __ATOMIC_ACQUIRE);
    uint64_t first = n > PHASE_RING ? n - PHASE_RING : 0;
    size_t cap = (size_t)(n - first) + open;
    struct phase_range *v = cap ? malloc(cap * sizeof *v) : NULL;
    if (cap && v == NULL) {
        pthread_mutex_unlock(&lock);
        return -1;
    }
    size_t k = 0;
    for (uint64_t j = first; j < n && ring != NULL; j++) {
        const struct ring_slot *s = &ring[j & (PHASE_RING - 1)];
        uint64_t seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
        if (seq != j + 1)
            continue; /* being written, or overwritten since */
        struct phase_range r;
        /* acquire loads: the second read of seq comes after them */
        r.start_ns = __atomic_load_n(&s->start, __ATOMIC_ACQUIRE);
        r.end_ns = __atomic_load_n(&s->end, __ATOMIC_ACQUIRE);
        r.phase = __atomic_load_n(&s->phase, __ATOMIC_ACQUIRE);
        uint32_t tk = __atomic_load_n(&s->tid_kind, __ATOMIC_ACQUIRE);
        if (__atomic_load_n(&s->seq, __ATOMIC_RELAXED) != seq)
            continue;
        r.tid = tk & ((1u << 30) - 1);
        r.kind = (uint8_t)(tk >> 30);
        v[k++] = r;
    }
    for (struct block *b = threads; b; b = b->next) {
        block_lock(b);
        unsigned d = b->depth;
        for (unsigned i = 0; i < d && k < cap; i++)
            v[k++] = (struct phase_range){b->e[i].start, -1, b->e[i].node, b->tid,
                                          b->e[i].slot ? PHASE_RANGE_STARTEND
                                                       : PHASE_RANGE_PUSH};
        block_unlock(b);
    }
    for (unsigned i = 0; i < PHASE_MAX_OPEN && k < cap; i++)
        if (open_slots[i].used && open_slots[i].owner == NULL)
            v[k++] = (struct phase_range){open_slots[i].start, -1, open_slots[i].node,
                                          open_slots[i].tid, PHASE_RANGE_STARTEND};
    pthread_mutex_unlock(&lock);
    if (k == 0) {
        free(v);
        v = NULL;
    }
    *out = v;
    return (long)k;
}

void phase_atfork_prepare(void)
{
    pthread_mutex_lock(&lock);
}

void phase_atfork_parent(void)
{
    pthread_mutex_unlock(&lock);
}

void phase_atfork_child(void)
{
    /* Only this thread survives, holding `lock` (phase_atfork_prepare). */
    struct block *b = threads;
    while (b != NULL) {
        struct block *next = b->next;
        if (b != me)
            free(b);
        b = next;
    }
    threads = me;
    if (me != NULL) {
        me->prev = me->next = NULL;
        me->lock = 0;
        me->tid = (uint32_t)syscall(SYS_gettid);
    }
    for (unsigned i = 0; i < PHASE_MAX_OPEN; i++)
        if (open_slots[i].used && open_slots[i].owner != me)
            open_slots[i].used = false;
    for (unsigned i = 0; i < PHASE_MAX_OPEN && me != NULL; i++)
        if (open_slots[i].used)
            open_slots[i].tid = me->tid;
    __atomic_store_n(&ring_n, 0, __ATOMIC_RELAXED);
    memset(&stats, 0, sizeof stats);
    pushes_gone = 0;
    if (me != NULL)
        me->pushes = 0;
    pthread_mutex_unlock(&lock);
}
