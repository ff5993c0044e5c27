/* arena.c - see arena.h. */
#include "arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* 64 KiB first, doubling to 1 MiB: small snapshots stay small, large ones
 * make a few hundred mallocs instead of millions. */
#define ARENA_FIRST_CHUNK ((size_t)64 << 10)
#define ARENA_MAX_CHUNK ((size_t)1 << 20)
#define ARENA_ALIGN ((size_t)16)

struct arena_chunk {
    struct arena_chunk *next; /* older chunk */
    size_t size;              /* usable bytes in data[] */
    size_t used;              /* bytes handed out */
    _Alignas(16) unsigned char data[];
};

void arena_init(struct arena *a)
{
    a->head = NULL;
    a->next_size = ARENA_FIRST_CHUNK;
}

void *arena_alloc(struct arena *a, size_t n)
{
    if (n == 0)
        n = 1;
    if (n > SIZE_MAX - ARENA_ALIGN)
        return NULL;
    n = (n + ARENA_ALIGN - 1) & ~(ARENA_ALIGN - 1);
    struct arena_chunk *c = a->head;
    if (c == NULL || c->size - c->used < n) {
        size_t size = a->next_size;
        /* A request larger than a chunk gets a chunk of its own, placed
         * behind the head so the head's free space is not abandoned. */
        if (n > size / 4) {
            struct arena_chunk *big = malloc(sizeof *big + n);
            if (big == NULL)
                return NULL;
            big->size = n;
            big->used = n;
            if (c != NULL) {
                big->next = c->next;
                c->next = big;
            } else {
                big->next = NULL;
                a->head = big;
            }
            return big->data;
        }
        c = malloc(sizeof *c + size);
        if (c == NULL)
            return NULL;
        c->size = size;
        c->used = 0;
        c->next = a->head;
        a->head = c;
        if (a->next_size < ARENA_MAX_CHUNK)
            a->next_size *= 2;
    }
    void *p = c->data + c->used;
    c->used += n;
    return p;
}

char *arena_strndup(struct arena *a, const char *s, size_t n)
{
    char *d = arena_alloc(a, n + 1);
    if (d == NULL)
        return NULL;
    if (n > 0)
        memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

void arena_free(struct arena *a)
{
    struct arena_chunk *c = a->head;
    while (c != NULL) {
        struct arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    arena_init(a);
}
