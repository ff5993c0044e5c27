/* hmap.c - see hmap.h. */
#include "hmap.h"

#include <stdlib.h>
#include <string.h>

#define HMAP_FIRST_SIZE 64 /* slots; grows by doubling */

void hmap_init(struct hmap *m, struct arena *arena)
{
    m->slots = NULL;
    m->mask = 0;
    m->count = 0;
    m->arena = arena;
}

/* Hashes n bytes (also used by callers that build composite keys). */
static uint64_t hmap_hash(const void *key, size_t n)
{
    const unsigned char *p = key;
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (uint64_t)n;
    uint64_t w;
    if (n >= 8) {
        const unsigned char *last = p + n - 8;
        while (p < last) {
            memcpy(&w, p, 8);
            h = (h ^ w) * 0x100000001b3ULL;
            h ^= h >> 29;
            p += 8;
        }
        /* The last 8 bytes, overlapping the word before when n is not a
         * multiple of 8 (n itself is in h): no byte-by-byte tail. */
        memcpy(&w, last, 8);
    } else {
        w = 0;
        for (size_t i = 0; i < n; i++)
            w |= (uint64_t)p[i] << (8 * i);
    }
    h = (h ^ w) * 0x100000001b3ULL;
    return hmap_mix(h);
}

static int grow(struct hmap *m)
{
    size_t size = m->slots ? (m->mask + 1) * 2 : HMAP_FIRST_SIZE;
    struct hmap_slot *slots = calloc(size, sizeof *slots);
    if (slots == NULL)
        return -1;
    if (m->slots != NULL) {
        for (size_t i = 0; i <= m->mask; i++) {
            struct hmap_slot *s = &m->slots[i];
            if (s->key == NULL)
                continue;
            size_t j = (size_t)s->hash & (size - 1);
            while (slots[j].key != NULL)
                j = (j + 1) & (size - 1);
            slots[j] = *s;
        }
        free(m->slots);
    }
    m->slots = slots;
    m->mask = size - 1;
    return 0;
}

/* Inlined into every lookup: a frame's bytes are looked up millions of
 * times while a snapshot loads. */
static inline __attribute__((always_inline)) struct hmap_slot *
probe(const struct hmap *m, const void *key, size_t n, uint64_t h)
{
    size_t i = (size_t)h & m->mask;
    for (;;) {
        struct hmap_slot *s = &m->slots[i];
        if (s->key == NULL ||
            (s->hash == h && s->len == n && memcmp(s->key, key, n) == 0))
            return s;
        i = (i + 1) & m->mask;
    }
}

int hmap_get_or_add(struct hmap *m, const void *key, size_t n,
                    uint32_t new_value, uint32_t *value,
                    const char **stored_key)
{
    return hmap_get_or_add_hashed(m, key, n, hmap_hash(key, n), new_value, value,
                                  stored_key);
}

int hmap_get_or_add_hashed(struct hmap *m, const void *key, size_t n, uint64_t h,
                           uint32_t new_value, uint32_t *value, const char **stored_key)
{
    if (n > UINT32_MAX)
        return -1;
    if ((m->count + 1) * 2 > m->mask + 1 && grow(m) != 0)
        return -1;
    struct hmap_slot *s = probe(m, key, n, h);
    if (s->key == NULL) {
        char *copy = arena_strndup(m->arena, key, n);
        if (copy == NULL)
            return -1;
        s->key = copy;
        s->hash = h;
        s->len = (uint32_t)n;
        s->value = new_value;
        m->count++;
    }
    *value = s->value;
    if (stored_key != NULL)
        *stored_key = s->key;
    return 0;
}

int hmap_find(const struct hmap *m, const void *key, size_t n,
              uint32_t *value)
{
    return hmap_find_hashed(m, key, n, hmap_hash(key, n), value);
}

int hmap_find_hashed(const struct hmap *m, const void *key, size_t n, uint64_t h,
                     uint32_t *value)
{
    if (m->slots == NULL || n > UINT32_MAX)
        return 0;
    struct hmap_slot *s = probe(m, key, n, h);
    if (s->key == NULL)
        return 0;
    *value = s->value;
    return 1;
}

void hmap_free(struct hmap *m)
{
    free(m->slots);
    hmap_init(m, m->arena);
}
