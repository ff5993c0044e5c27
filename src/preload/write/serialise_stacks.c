/* serialise_stacks.c - the stacks of a snapshot, symbolised.
 *
 * Symbolisation happens here and only here: each native frame's module,
 * offset from its load base (stable across ASLR) and dynamic symbol, as
 * dladdr() of (return address - 1) names them, through a direct-mapped
 * cache because most frames repeat across stacks.  The addresses the
 * cache does not hold are first gathered from all stacks and resolved in
 * one batch (symtab.c: one pass over each object's symbol table, where
 * dladdr scans the whole table, libtorch's large one too, for every
 * address).
 * The cache also keeps each native frame's JSON text as first written:
 * 100k stacks of 22 frames are 2.2 M frames of a few hundred distinct
 * addresses, so most frames are one inlined lookup and one copy.
 * Memory: the cache (sized to the dump's frames, up to ~3.5 MiB for 32k
 * of them or more) and the texts live only while dumping -
 * except for the stream's checkpoints, which symbolise the same frames
 * every flush and keep a smaller cache between them (`kept`), so a
 * checkpoint resolves only the addresses new since the last.  The kept
 * cache is emptied when an object was unloaded (its addresses may be
 * reused) and when its texts pass KEPT_TEXT_CHUNKS.
 */
#include "serialise_stacks.h"

#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "modules.h"
#include "output.h"
#include "python.h"
#include "resolve.h"
#include "symtab.h"

struct sym {
    void *addr;
    const char *module; /* basename, points into dli_fname */
    const char *symbol;
    uintptr_t offset;
    uintptr_t base;     /* dli_fbase; 0 when dladdr knew no module */
    const char *json;   /* ,{"module":...,"symbol":...} as written, or NULL */
    uint32_t json_len;  /* with the leading comma */
    uint32_t listed;    /* the dump whose "modules" has this module (0 none) */
};

#define SYMCACHE_SIZE 65536 /* power of two: the most a dump's own cache has */
#define SYMCACHE_MIN 256    /* power of two: the least */
#define KEPT_SIZE 8192      /* power of two; ~0.5 MiB kept while streaming */
#define TEXT_CHUNK (1u << 20)
#define KEPT_TEXT_CHUNKS 4  /* then the kept cache starts afresh */

/* The frames' texts: chunks of TEXT_CHUNK bytes, freed after the dump. */
struct texts {
    char *chunk; /* current chunk; its first pointer-size bytes link the previous */
    size_t used;
    size_t chunks;
};

/* The checkpoints' cache; only the stream's thread uses it, under lock. */
static struct {
    pthread_mutex_t lock;
    struct sym *cache;       /* KEPT_SIZE entries, or NULL */
    struct texts texts;
    unsigned long long subs; /* unloads seen when it was filled */
} kept = {PTHREAD_MUTEX_INITIALIZER, NULL, {NULL, 0, 0}, 0};

static char *texts_alloc(struct texts *t, size_t n)
{
    size_t head = sizeof(char *);
    if (n + head > TEXT_CHUNK)
        return NULL;
    if (t->chunk == NULL || t->used + n > TEXT_CHUNK) {
        char *c = malloc(TEXT_CHUNK);
        if (c == NULL)
            return NULL;
        memcpy(c, &t->chunk, sizeof t->chunk);
        t->chunk = c;
        t->used = head;
        t->chunks++;
    }
    char *p = t->chunk + t->used;
    t->used += n;
    return p;
}

static void texts_free(struct texts *t)
{
    while (t->chunk != NULL) {
        char *prev;
        memcpy(&prev, t->chunk, sizeof prev);
        free(t->chunk);
        t->chunk = prev;
    }
    t->used = t->chunks = 0;
}

/* The addresses of this dump, resolved in one batch (symtab.c), sorted:
 * what a cache entry evicted by a colliding address is filled from again. */
struct resolved {
    struct symtab_query *q;
    size_t n;
};

/* Fills the cache entry `s` from a resolved address. */
static void fill(struct sym *s, void *addr, const struct symtab_query *q)
{
    uintptr_t a = (uintptr_t)addr;
    s->addr = addr;
    s->json = NULL;
    s->listed = 0;
    if (q != NULL && q->module != NULL) {
        const char *slash = strrchr(q->module, '/');
        s->module = slash ? slash + 1 : q->module;
        if (s->module[0] == '\0')
            s->module = output_process.exe;
        s->symbol = q->symbol;
        s->offset = a - 1 - q->base;
        s->base = q->base;
    } else {
        s->module = "?";
        s->symbol = NULL;
        s->offset = a - 1;
        s->base = 0;
    }
}

/* Fills the cache entry `s` for addr (a miss of symbolize): from the
 * dump's batch, or on its own when the batch does not have it. */
static __attribute__((noinline)) struct sym *symbolize_into(struct sym *s, void *addr,
                                                            const struct resolved *r)
{
    /* A return address points after the call; -1 lands inside it. */
    uintptr_t key = (uintptr_t)addr - 1;
    size_t lo = 0, hi = r != NULL ? r->n : 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->q[mid].addr < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (r != NULL && lo < r->n && r->q[lo].addr == key) {
        fill(s, addr, &r->q[lo]);
    } else {
        struct symtab_query one = {.addr = key};
        symtab_resolve(&one, 1);
        fill(s, addr, &one);
    }
    return s;
}

/* The cache entry of addr, symbolised.  Inline: 100k stacks are 2.2 M
 * frames, nearly all hits. */
static inline struct sym *symbolize(struct sym *cache, size_t mask, void *addr,
                                    const struct resolved *r)
{
    uintptr_t a = (uintptr_t)addr;
    struct sym *s = &cache[(a ^ (a >> 16)) & mask];
    if (__builtin_expect(s->addr == addr && s->module != NULL, 1))
        return s;
    return symbolize_into(s, addr, r);
}

static int by_addr(const void *a, const void *b)
{
    uintptr_t x = ((const struct symtab_query *)a)->addr;
    uintptr_t y = ((const struct symtab_query *)b)->addr;
    return (x > y) - (x < y);
}

/* The native addresses of v's stacks that the cache does not hold yet,
 * resolved in one batch and put in the cache; *r keeps them (sorted) for
 * the entries a colliding address evicts.  Without memory r stays empty
 * and each miss is resolved on its own. */
static void resolve_all(const struct record_view *v, struct sym *cache, size_t mask,
                        struct resolved *r)
{
    size_t cap = 0;
    r->q = NULL;
    r->n = 0;
    for (size_t i = 0; i < v->nstacks; i++) {
        const struct record_stack *st = v->stacks[i];
        for (unsigned f = 0; f < st->depth; f++) {
            void *addr = st->frames[f];
            uintptr_t a = (uintptr_t)addr;
            if (python_frame_is_tagged(addr))
                continue;
            struct sym *s = &cache[(a ^ (a >> 16)) & mask];
            if (s->addr == addr)
                continue; /* resolved before, or already asked for */
            if (r->n == cap) {
                size_t ncap = cap ? 2 * cap : 1024;
                struct symtab_query *q = realloc(r->q, ncap * sizeof *q);
                if (q == NULL)
                    goto fail;
                r->q = q;
                cap = ncap;
            }
            r->q[r->n++] = (struct symtab_query){.addr = a - 1};
            *s = (struct sym){.addr = addr}; /* asked: module NULL until filled */
        }
    }
    if (r->n == 0)
        return; /* no native frame (CUMEMTRACE_NATIVE=0): qsort wants an array */
    qsort(r->q, r->n, sizeof *r->q, by_addr);
    size_t u = 0;
    for (size_t k = 0; k < r->n; k++)
        if (u == 0 || r->q[u - 1].addr != r->q[k].addr)
            r->q[u++] = r->q[k];
    r->n = u;
    symtab_resolve(r->q, r->n);
    for (size_t k = 0; k < r->n; k++) {
        void *addr = (void *)(r->q[k].addr + 1);
        uintptr_t a = (uintptr_t)addr;
        struct sym *s = &cache[(a ^ (a >> 16)) & mask];
        if (s->addr == addr && s->module == NULL)
            fill(s, addr, &r->q[k]);
    }
    return;
fail:
    free(r->q);
    r->q = NULL;
    r->n = 0;
}

static void write_native_frame(struct snapshot_json *w, const struct sym *y)
{
    snapshot_json_raw(w, "{\"module\":", 10);
    snapshot_json_str(w, y->module);
    snapshot_json_raw(w, ",\"offset\":", 10);
    snapshot_json_u64(w, y->offset);
    snapshot_json_raw(w, ",\"symbol\":", 10);
    snapshot_json_str(w, y->symbol);
    snapshot_json_raw(w, "}", 1);
}

/* The frame's text, after its comma unless it is the stack's first: from
 * the cache entry's copy when it has one, else written and copied there.
 * A text that cannot be copied (no memory, or too long for the buffer's
 * room) is written each time. */
static inline void write_cached_frame(struct snapshot_json *w, struct sym *y, struct texts *t,
                                      bool first)
{
    if (__builtin_expect(y->json != NULL, 1)) {
        snapshot_json_raw(w, y->json + first, y->json_len - first);
        return;
    }
    if (!first)
        snapshot_json_raw(w, ",", 1);
    /* escapes take at most 6 bytes a byte; 64 for the keys and digits */
    size_t need = 6 * (strlen(y->module) + (y->symbol ? strlen(y->symbol) : 0)) + 64;
    if (need > sizeof w->buf) {
        write_native_frame(w, y);
        return;
    }
    if (sizeof w->buf - w->n < need)
        snapshot_json_flush(w);
    size_t start = w->n;
    write_native_frame(w, y);
    size_t len = w->n - start;
    char *copy = w->err == 0 ? texts_alloc(t, len + 1) : NULL;
    if (copy != NULL) {
        copy[0] = ',';
        memcpy(copy + 1, w->buf + start, len);
        y->json = copy;
        y->json_len = (uint32_t)(len + 1);
    }
}

/* A Python frame {module:"python", file, line, function} or a marker
 * frame {marker} (python.c). */
static void write_python_frame(struct snapshot_json *w, enum python_frame_kind k,
                               const struct python_frame *py)
{
    if (k == PYTHON_FRAME_MARKER) {
        snapshot_json_s(w, "{\"marker\":");
        snapshot_json_str(w, py->marker);
    } else {
        snapshot_json_s(w, "{\"module\":\"python\",\"file\":");
        snapshot_json_str(w, py->file);
        snapshot_json_s(w, ",\"line\":");
        snapshot_json_i64(w, py->line);
        snapshot_json_s(w, ",\"function\":");
        snapshot_json_str(w, py->function);
    }
    snapshot_json_s(w, "}");
}

/* The modules the stacks' native frames lie in, one row each, before the
 * stacks (the CLI reads in one pass): path, build-id and the ELF vaddr of
 * offset 0, so that DWARF can be consulted later, elsewhere. */
static void write_modules(struct snapshot_json *w, const struct record_view *v, struct sym *cache,
                          size_t mask, uint32_t dump, const struct resolved *r)
{
    struct module_info *mods = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < v->nstacks && cache != NULL; i++) {
        const struct record_stack *s = v->stacks[i];
        for (unsigned f = 0; f < s->depth; f++) {
            if (python_frame_is_tagged(s->frames[f]))
                continue;
            struct sym *y = symbolize(cache, mask, s->frames[f], r);
            /* an entry filled since this dump began is looked up once */
            if (y->base == 0 || y->listed == dump)
                continue;
            y->listed = dump;
            size_t k = 0;
            while (k < n && mods[k].base != y->base)
                k++;
            if (k < n)
                continue;
            if (n == cap) {
                size_t ncap = cap ? 2 * cap : 16;
                struct module_info *m = realloc(mods, ncap * sizeof *m);
                if (m == NULL)
                    goto out;
                mods = m;
                cap = ncap;
            }
            mods[n].base = y->base;
            mods[n].name = y->module;
            n++;
        }
    }
    modules_describe(mods, n);
    snapshot_json_s(w, "\"modules\":[");
    bool first = true;
    for (size_t k = 0; k < n; k++) {
        const struct module_info *m = &mods[k];
        if (!m->found)
            continue;
        snapshot_json_s(w, first ? "\n {\"name\":" : ",\n {\"name\":");
        first = false;
        snapshot_json_str(w, m->name);
        snapshot_json_s(w, ",\"path\":");
        snapshot_json_str(w, m->path[0] ? m->path : NULL);
        snapshot_json_s(w, ",\"build_id\":");
        if (m->build_id_len == 0) {
            snapshot_json_s(w, "null");
        } else {
            snapshot_json_raw(w, "\"", 1);
            snapshot_json_hex(w, m->build_id, m->build_id_len);
            snapshot_json_raw(w, "\"", 1);
        }
        snapshot_json_s(w, ",\"vaddr_base\":");
        snapshot_json_u64(w, m->vaddr_base);
        snapshot_json_s(w, "}");
    }
    snapshot_json_s(w, "],\n");
out:
    free(mods);
}

static int unloads_seen(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    *(unsigned long long *)data = info->dlpi_subs;
    return 1; /* the first object carries the process-wide counter */
}

/* The kept cache, valid for this process's objects now, or NULL (the
 * caller then uses its own); the caller unlocks kept.lock when not NULL. */
static struct sym *kept_cache(void)
{
    if (pthread_mutex_trylock(&kept.lock) != 0)
        return NULL;
    unsigned long long subs = 0;
    dl_iterate_phdr(unloads_seen, &subs);
    if (kept.cache != NULL && (subs != kept.subs || kept.texts.chunks > KEPT_TEXT_CHUNKS)) {
        texts_free(&kept.texts);
        memset(kept.cache, 0, KEPT_SIZE * sizeof *kept.cache);
    }
    if (kept.cache == NULL)
        kept.cache = calloc(KEPT_SIZE, sizeof *kept.cache);
    kept.subs = subs;
    if (kept.cache == NULL)
        pthread_mutex_unlock(&kept.lock);
    return kept.cache;
}

/* A number for each dump, never 0: what sym.listed compares with. */
static uint32_t next_dump(void)
{
    static uint32_t dumps;
    uint32_t d;
    while ((d = __atomic_add_fetch(&dumps, 1, __ATOMIC_RELAXED)) == 0)
        ;
    return d;
}

/* ,"entry":"name","frames":[ for the stack's entry point, formatted once
 * per run of stacks with the same entry (most stacks share one). */
struct entry_text {
    unsigned entry; /* > 0xffff: none yet */
    size_t len;     /* 0: too long to keep, written each time */
    char text[128];
};

static void write_entry(struct snapshot_json *w, struct entry_text *e, unsigned entry)
{
    if (e->entry == entry && e->len > 0) {
        snapshot_json_raw(w, e->text, e->len);
        return;
    }
    const char *name = entry == 0xffff ? "unknown" : resolve_name(entry);
    /* escapes take at most 6 bytes a byte; 32 for the keys */
    bool fits = 6 * strlen(name) + 32 <= sizeof e->text;
    e->entry = entry;
    e->len = 0;
    if (fits && sizeof w->buf - w->n < sizeof e->text)
        snapshot_json_flush(w); /* then nothing below flushes: the text is in buf */
    size_t start = w->n;
    snapshot_json_s(w, ",\"entry\":");
    snapshot_json_str(w, name);
    snapshot_json_s(w, ",\"frames\":[");
    if (fits && w->err == 0) {
        e->len = w->n - start;
        memcpy(e->text, w->buf + start, e->len);
    }
}

/* The dump's own cache: four times its native frames (repeats included), a
 * power of two, at most SYMCACHE_SIZE.  A cache sized for the largest dump
 * was 3.5 MiB cleared for every dump - by calloc byte by byte once the
 * host's heap has grown - when a small run's dump has
 * a few dozen frames. */
static size_t own_cache_size(const struct record_view *v)
{
    size_t frames = 0;
    for (size_t i = 0; i < v->nstacks && frames < SYMCACHE_SIZE; i++)
        frames += v->stacks[i]->depth;
    size_t n = SYMCACHE_MIN;
    while (n < 4 * frames && n < SYMCACHE_SIZE)
        n *= 2;
    return n;
}

void serialise_stacks(struct snapshot_json *w, const struct record_view *v, bool keep)
{
    struct sym *cache = keep ? kept_cache() : NULL;
    bool kept_one = cache != NULL;
    size_t mask = kept_one ? KEPT_SIZE - 1 : SYMCACHE_SIZE - 1;
    struct texts own = {NULL, 0, 0};
    struct texts *texts = kept_one ? &kept.texts : &own;
    if (!kept_one) {
        mask = own_cache_size(v) - 1;
        cache = calloc(mask + 1, sizeof *cache);
    }
    struct resolved r = {NULL, 0};
    if (cache != NULL)
        resolve_all(v, cache, mask, &r);
    write_modules(w, v, cache, mask, next_dump(), &r);
    snapshot_json_s(w, "\"stacks\":[");
    struct entry_text entry = {.entry = 0x10000};
    for (size_t i = 0; i < v->nstacks; i++) {
        const struct record_stack *s = v->stacks[i];
        snapshot_json_s(w, i ? ",\n {\"id\":" : "\n {\"id\":");
        snapshot_json_u64(w, s->id);
        write_entry(w, &entry, s->entry);
        for (unsigned f = 0; f < s->depth; f++) {
            if (cache != NULL && !python_frame_is_tagged(s->frames[f])) {
                write_cached_frame(w, symbolize(cache, mask, s->frames[f], &r), texts,
                                   f == 0);
                continue;
            }
            struct python_frame py;
            enum python_frame_kind k = python_frame_decode(s->frames[f], &py);
            if (f != 0)
                snapshot_json_raw(w, ",", 1);
            if (k != PYTHON_FRAME_NATIVE) {
                write_python_frame(w, k, &py);
            } else {
                struct sym one;
                memset(&one, 0, sizeof one);
                write_native_frame(w, symbolize(&one, 0, s->frames[f], NULL)); /* cache of one */
            }
        }
        snapshot_json_s(w, "]}");
    }
    snapshot_json_s(w, "]\n");
    free(r.q);
    if (kept_one) {
        pthread_mutex_unlock(&kept.lock);
    } else {
        texts_free(&own);
        free(cache);
    }
}
