/* hooks_thread.h - what a thread's calls share (interpose/call_state.c):
 * the re-entry guard, the device cache, a free's entry in flight.  Types
 * only: the state itself is a member of the thread's hot TLS block
 * (thread/thread_hot.h), named hooks_thread (hooks.h).
 */
#ifndef CUMEMTRACE_HOOKS_THREAD_H
#define CUMEMTRACE_HOOKS_THREAD_H

#include <stdbool.h>
#include <stdint.h>

struct hooks_guard {
    unsigned char layer; /* of the traced outermost allocation/free call */
    unsigned char busy;  /* in our bookkeeping */
} __attribute__((aligned(2))); /* read as one 16-bit word: hooks_passthrough */
struct hooks_device_cache {
    unsigned gen; /* 0: empty */
    int device;   /* >= 0 when filled */
};
struct hooks_thread_state {
    union {
        struct {
            int depth;                /* the re-entry guard: hooks_depth */
            struct hooks_guard guard; /* hooks_guard, below */
            bool known;               /* this thread's exit will give back
                                         what the library holds for it,
                                         and the tracker knows its id */
            unsigned char zero;       /* never written: see hooks_word */
        };
        uint64_t word; /* the four above as one: hooks_word, hooks_word_set */
    };
    unsigned device_epoch;    /* bumped by this thread's device switches */
    struct hooks_device_cache device[2]; /* see hooks_device() */
    void *inflight_token;     /* a free's entry, taken out before the real free */
};

#endif
