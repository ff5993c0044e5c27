/* hmap.h - an open-addressing hash map from byte strings to 32-bit values.
 *
 * Used to intern strings (module names, symbols, frame names), to dedupe
 * frames, and to group call sites by name.  Keys are copied into the
 * caller's arena, NUL-terminated, so a string key doubles as the interned
 * C string.  Workload: millions of lookups while a snapshot loads, no
 * deletions ever, so linear probing at load factor <= 1/2.
 */
#ifndef CUMEMTRACE_CLI_HMAP_H
#define CUMEMTRACE_CLI_HMAP_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"

struct hmap_slot {
    uint64_t hash;   /* full hash of the key; slot empty when key == NULL */
    const char *key; /* arena copy of the key, NUL-terminated */
    uint32_t len;    /* key length in bytes, without the NUL */
    uint32_t value;
};

struct hmap {
    struct hmap_slot *slots; /* power-of-two table, NULL until first insert */
    size_t mask;             /* table size - 1 */
    size_t count;            /* occupied slots */
    struct arena *arena;     /* where keys are copied; owned by the caller */
};

/* Prepares an empty map whose keys will live in arena. */
void hmap_init(struct hmap *m, struct arena *arena);

/* Looks key up; when absent inserts it with value new_value.  On success
 * returns 0, stores the value in the map in *value (new_value when it was
 * inserted) and, if stored_key is not NULL, the arena copy of the key.
 * Returns -1 when out of memory or the key is longer than 4 GiB. */
int hmap_get_or_add(struct hmap *m, const void *key, size_t n,
                    uint32_t new_value, uint32_t *value,
                    const char **stored_key);

/* Returns 1 and stores the value when key is present, 0 otherwise. */
int hmap_find(const struct hmap *m, const void *key, size_t n,
              uint32_t *value);

/* As hmap_get_or_add and hmap_find, with the key's hash h computed by the
 * caller (a pass that hashes bytes as it scans them): every call on one
 * map must then be a *_hashed one with hashes from one function, whose
 * low bits are well mixed (they index the table). */
int hmap_get_or_add_hashed(struct hmap *m, const void *key, size_t n, uint64_t h,
                           uint32_t new_value, uint32_t *value, const char **stored_key);
int hmap_find_hashed(const struct hmap *m, const void *key, size_t n, uint64_t h,
                     uint32_t *value);

/* Releases the table (not the keys: they belong to the arena). */
void hmap_free(struct hmap *m);

/* The finaliser of MurmurHash3 (public domain constants): every input bit
 * affects every output bit, so masking low bits is safe. */
static inline uint64_t hmap_mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 33);
}

#endif
