/* python_table.c - the intern table of Python frames: a (code object, line)
 * pair gets a dense index, stored in the frames[] of record_stack as
 * PYTHON_TAG | index, so record.c dedups mixed stacks unchanged.  Indices
 * below MARKER_COUNT are the marker frames.  The table holds a reference
 * to every code object it names (Py_IncRef, under the GIL the caller
 * holds), so its address cannot be reused by another code object and a
 * cached name cannot turn stale.  Cost: memory for each distinct code
 * object seen in an allocating stack, never freed - bounded by the
 * program's code, except for code made at run time in a loop (exec, some
 * tracers).  Frames read without the GIL (python_nogil.c) are keyed by
 * their names instead.
 *
 * Threads: guarded by py_lock; the snapshot writer decodes frames without
 * it: entries are immutable and were written before the stack that names
 * them was published under the tracker's lock. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "python_impl.h"

pthread_mutex_t py_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const marker_text[MARKER_COUNT] = {
    "python frames unavailable: GIL not held",
    "python frames truncated",
    "python frame unavailable: out of memory",
    "python frames skipped: GIL not held and the no-GIL reader over its time budget",
};

/* One code object, referenced for as long as the process lives. */
struct code_entry {
    py_object *code;
    char *file;     /* malloc'ed UTF-8 copies */
    char *function;
};

/* What a frame index names. */
struct frame_entry {
    const struct code_entry *code;
    int line;
};

/* Open-addressing slots of the table (code, key) -> frame index, where key
 * is a line (LINE_KEY) or, from 3.11, an instruction offset (LASTI_KEY) that
 * saves computing the line on every capture.  Index 0 = empty (0 is a
 * marker, never an interned frame). */
struct frame_slot {
    py_object *code;
    int64_t key;
    uint32_t index;
};

/* 4096 chunks of 1024 entries: 4M distinct (code, line) pairs, far more lines
 * than any program allocates from; the chunk array costs 32 KiB. */
#define FRAME_CHUNK 1024u
#define FRAME_CHUNKS 4096u

static struct frame_entry *chunks[FRAME_CHUNKS];
static uint32_t nframes = MARKER_COUNT; /* next index */
static struct frame_slot *fslots;
static size_t fcap, fused;
static struct code_entry **cslots;
static size_t ccap, cused;

static size_t hash_ptr(const void *p, int64_t key)
{
    uint64_t h = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull;
    h ^= (uint64_t)key * 0xC2B2AE3D27D4EB4Full;
    return (size_t)(h ^ (h >> 29));
}

static const struct code_entry *code_find(py_object *code)
{
    if (ccap == 0)
        return NULL;
    for (size_t i = hash_ptr(code, 0) & (ccap - 1);; i = (i + 1) & (ccap - 1)) {
        if (cslots[i] == NULL)
            return NULL;
        if (cslots[i]->code == code)
            return cslots[i];
    }
}

static bool code_put(struct code_entry *c)
{
    if (2 * (cused + 1) > ccap) {
        size_t ncap = ccap ? 2 * ccap : 256;
        struct code_entry **n = calloc(ncap, sizeof *n);
        if (n == NULL)
            return false;
        for (size_t j = 0; j < ccap; j++) {
            if (cslots[j] == NULL)
                continue;
            size_t i = hash_ptr(cslots[j]->code, 0) & (ncap - 1);
            while (n[i] != NULL)
                i = (i + 1) & (ncap - 1);
            n[i] = cslots[j];
        }
        free(cslots);
        cslots = n;
        ccap = ncap;
    }
    size_t i = hash_ptr(c->code, 0) & (ccap - 1);
    while (cslots[i] != NULL)
        i = (i + 1) & (ccap - 1);
    cslots[i] = c;
    cused++;
    return true;
}

/* A UTF-8 copy of a str attribute of `o`, "?" when it has none. */
static char *attr_copy(py_object *o, const char *name)
{
    py_object *s = pyapi.getattr(o, name);
    const char *u = s != NULL ? pyapi.as_utf8(s) : NULL;
    char *copy = strdup(u != NULL ? u : "?");
    if (s != NULL)
        pyapi.decref(s);
    return copy;
}

/* The entry of `code`, created (names copied, code referenced) if new.
 * Caller holds `py_lock` and the GIL. */
static const struct code_entry *code_intern(py_object *code)
{
    const struct code_entry *found = code_find(code);
    if (found != NULL)
        return found;
    struct code_entry *c = malloc(sizeof *c);
    if (c == NULL)
        return NULL;
    py_object *type, *value, *tb;
    pyapi.err_fetch(&type, &value, &tb);
    c->file = attr_copy(code, "co_filename");
    c->function = attr_copy(code, py_minor >= 11 ? "co_qualname" : "co_name");
    pyapi.err_restore(type, value, tb);
    c->code = code;
    if (c->file == NULL || c->function == NULL || !code_put(c)) {
        free(c->file);
        free(c->function);
        free(c);
        return NULL;
    }
    pyapi.incref(code);
    return c;
}

static bool frame_slots_grow(void)
{
    size_t ncap = fcap ? 2 * fcap : 1024;
    struct frame_slot *n = calloc(ncap, sizeof *n);
    if (n == NULL)
        return false;
    for (size_t j = 0; j < fcap; j++) {
        if (fslots[j].index == 0)
            continue;
        size_t i = hash_ptr(fslots[j].code, fslots[j].key) & (ncap - 1);
        while (n[i].index != 0)
            i = (i + 1) & (ncap - 1);
        n[i] = fslots[j];
    }
    free(fslots);
    fslots = n;
    fcap = ncap;
    return true;
}

/* The frame index stored under (code, key), 0 if none. */
uint32_t py_slot_find(py_object *code, int64_t key)
{
    if (fcap == 0)
        return 0;
    for (size_t i = hash_ptr(code, key) & (fcap - 1);; i = (i + 1) & (fcap - 1)) {
        if (fslots[i].index == 0)
            return 0;
        if (fslots[i].code == code && fslots[i].key == key)
            return fslots[i].index;
    }
}

bool py_slot_put(py_object *code, int64_t key, uint32_t index)
{
    if (2 * (fused + 1) > fcap && !frame_slots_grow())
        return false;
    size_t i = hash_ptr(code, key) & (fcap - 1);
    while (fslots[i].index != 0)
        i = (i + 1) & (fcap - 1);
    fslots[i] = (struct frame_slot){code, key, index};
    fused++;
    return true;
}

/* A new frame index for (key, line), naming entry c; MARK_NO_MEMORY when
 * it cannot be had.  Caller holds `py_lock`. */
static uint32_t frame_new(py_object *key, int line, const struct code_entry *c)
{
    if (c == NULL || nframes >= FRAME_CHUNK * FRAME_CHUNKS)
        return MARK_NO_MEMORY;
    uint32_t index = nframes;
    struct frame_entry **chunk = &chunks[index / FRAME_CHUNK];
    if (*chunk == NULL && (*chunk = calloc(FRAME_CHUNK, sizeof **chunk)) == NULL)
        return MARK_NO_MEMORY;
    if (!py_slot_put(key, LINE_KEY(line), index))
        return MARK_NO_MEMORY;
    (*chunk)[index % FRAME_CHUNK] = (struct frame_entry){c, line};
    nframes++;
    return index;
}

/* The index of (code, line), interned if new; MARK_NO_MEMORY when it cannot
 * be.  Caller holds `py_lock` and the GIL. */
uint32_t py_frame_intern(py_object *code, int line)
{
    uint32_t index = py_slot_find(code, LINE_KEY(line));
    return index != 0 ? index : frame_new(code, line, code_intern(code));
}

enum python_frame_kind python_frame_decode(const void *frame,
                                           struct python_frame *out)
{
    uintptr_t v = (uintptr_t)frame;
    if (!(v & PYTHON_TAG))
        return PYTHON_FRAME_NATIVE;
    uint32_t index = (uint32_t)(v & 0xffffffffu);
    memset(out, 0, sizeof *out);
    const struct frame_entry *chunk =
        index < FRAME_CHUNK * FRAME_CHUNKS ? chunks[index / FRAME_CHUNK] : NULL;
    if (index < MARKER_COUNT || chunk == NULL) {
        out->marker = index < MARKER_COUNT ? marker_text[index] : "?";
        return PYTHON_FRAME_MARKER;
    }
    const struct frame_entry *f = &chunk[index % FRAME_CHUNK];
    out->file = f->code->file;
    out->function = f->code->function;
    out->line = f->line;
    return PYTHON_FRAME_PYTHON;
}

/* String-keyed entries: (file, function) -> code_entry, whose address
 * then stands for a code object in the (code, line) slots. */
static struct code_entry **sslots;
static size_t scap, sused;

static size_t hash_names(const char *file, size_t flen, const char *fn, size_t fnlen)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < flen; i++)
        h = (h ^ (unsigned char)file[i]) * 0x100000001b3ull;
    h = (h ^ 0xff) * 0x100000001b3ull;
    for (size_t i = 0; i < fnlen; i++)
        h = (h ^ (unsigned char)fn[i]) * 0x100000001b3ull;
    return (size_t)(h ^ (h >> 29));
}

static bool names_equal(const struct code_entry *c, const char *file, size_t flen,
                        const char *fn, size_t fnlen)
{
    return strncmp(c->file, file, flen) == 0 && c->file[flen] == '\0' &&
           strncmp(c->function, fn, fnlen) == 0 && c->function[fnlen] == '\0';
}

/* Caller holds `py_lock`. */
static const struct code_entry *names_intern(const char *file, size_t flen,
                                             const char *fn, size_t fnlen)
{
    size_t h = hash_names(file, flen, fn, fnlen);
    if (scap != 0)
        for (size_t i = h & (scap - 1); sslots[i] != NULL; i = (i + 1) & (scap - 1))
            if (names_equal(sslots[i], file, flen, fn, fnlen))
                return sslots[i];
    if (2 * (sused + 1) > scap) {
        size_t ncap = scap ? 2 * scap : 256;
        struct code_entry **n = calloc(ncap, sizeof *n);
        if (n == NULL)
            return NULL;
        for (size_t j = 0; j < scap; j++) {
            if (sslots[j] == NULL)
                continue;
            size_t i = hash_names(sslots[j]->file, strlen(sslots[j]->file),
                                  sslots[j]->function, strlen(sslots[j]->function)) &
                       (ncap - 1);
            while (n[i] != NULL)
                i = (i + 1) & (ncap - 1);
            n[i] = sslots[j];
        }
        free(sslots);
        sslots = n;
        scap = ncap;
    }
    struct code_entry *c = malloc(sizeof *c);
    if (c == NULL)
        return NULL;
    c->code = NULL;
    c->file = strndup(file, flen);
    c->function = strndup(fn, fnlen);
    if (c->file == NULL || c->function == NULL) {
        free(c->file);
        free(c->function);
        free(c);
        return NULL;
    }
    size_t i = h & (scap - 1);
    while (sslots[i] != NULL)
        i = (i + 1) & (scap - 1);
    sslots[i] = c;
    sused++;
    return c;
}

/* Caller holds `py_lock`. */
uint32_t py_names_frame_intern(const char *file, size_t flen, int line, const char *fn,
                                   size_t fnlen)
{
    const struct code_entry *c = names_intern(file, flen, fn, fnlen);
    if (c == NULL)
        return MARK_NO_MEMORY;
    py_object *key = (py_object *)(uintptr_t)c; /* never a real code object */
    uint32_t index = py_slot_find(key, LINE_KEY(line));
    return index != 0 ? index : frame_new(key, line, c);
}
