/* arena.h - bump allocation for data that lives as long as a loaded snapshot.
 *
 * A snapshot with 100 000 stacks holds millions of small objects (frames,
 * interned strings, hash keys) that are all released together, so one
 * malloc per object would cost more than the parse itself.
 */
#ifndef CUMEMTRACE_CLI_ARENA_H
#define CUMEMTRACE_CLI_ARENA_H

#include <stddef.h>

struct arena_chunk;

struct arena {
    struct arena_chunk *head; /* newest chunk, where allocation happens */
    size_t next_size;         /* size of the next chunk (doubles to a cap) */
};

/* Prepares an empty arena; it allocates nothing until used. */
void arena_init(struct arena *a);

/* Returns n bytes aligned for any type, or NULL when out of memory.  The
 * memory is uninitialised and stays valid until arena_free(). */
void *arena_alloc(struct arena *a, size_t n);

/* Copies s[0..n) plus a terminating NUL into the arena; NULL on OOM. */
char *arena_strndup(struct arena *a, const char *s, size_t n);

/* Releases every chunk; the arena is empty and reusable afterwards. */
void arena_free(struct arena *a);

#endif
