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
 * A code object first seen by a thread that does not hold the GIL
 * (python_nogil.c) cannot be given a reference: its count belongs to the
 * GIL holder.  Its entry is "unheld": named from the code object's own
 * structs (python_walk.c), it keeps the code's identity (struct code_id)
 * and is used only while the object at that address still has it; a
 * mismatch (the code died, another took its address) makes a new entry.
 * A capture with the GIL that looks it up here takes the reference.
 * Slots are keyed by the entry, not the address, so a new entry for a
 * reused address starts with no stale (entry, offset) slots.
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
    "autograd's backward thread: no Python frames",
};

/* One code object, referenced for as long as the process lives (held),
 * or known by its identity (see the top). */
struct code_entry {
    py_object *code; /* NULL for entries known only by their names */
    char *file;      /* malloc'ed UTF-8 copies */
    char *function;
    bool held;       /* we own a reference on code */
    struct code_id id; /* unheld entries: what code must still have */
};

/* What a frame index names. */
struct frame_entry {
    const struct code_entry *code;
    int line;
};

/* Open-addressing slots of the table (entry, key) -> frame index, where key
 * is a line (LINE_KEY) or, from 3.11, an instruction offset (LASTI_KEY) that
 * saves computing the line on every capture.  Index 0 = empty (0 is a
 * marker, never an interned frame). */
struct frame_slot {
    const struct code_entry *code;
    int64_t key;
    uint32_t index;
};

#define LINE_KEY(line) ((int64_t)(uint32_t)(line))
#define LASTI_KEY(lasti) (((int64_t)1 << 32) | (uint32_t)(lasti))

/* 4096 chunks of 1024 entries: 4M distinct (code, line) pairs, far more lines
 * than any program allocates from; the chunk array costs 32 KiB. */
#define FRAME_CHUNK 1024u
#define FRAME_CHUNKS 4096u

static struct frame_entry *chunks[FRAME_CHUNKS];
static uint32_t nframes = MARKER_COUNT; /* next index */
static struct frame_slot *fslots;
static size_t fcap, fused;

/* An open-addressed table of entries, at most half full; `hash` places one. */
struct entry_table {
    struct code_entry **slots;
    size_t cap, used;
    size_t (*hash)(const struct code_entry *);
};

static size_t hash_ptr(const void *p, int64_t key)
{
    uint64_t h = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull;
    h ^= (uint64_t)key * 0xC2B2AE3D27D4EB4Full;
    return (size_t)(h ^ (h >> 29));
}

/* Puts c in t, grown first when needed; false when out of memory. */
static bool table_put(struct entry_table *t, struct code_entry *c)
{
    if (2 * (t->used + 1) > t->cap) {
        size_t ncap = t->cap ? 2 * t->cap : 256;
        struct code_entry **n = calloc(ncap, sizeof *n);
        if (n == NULL)
            return false;
        for (size_t j = 0; j < t->cap; j++) {
            if (t->slots[j] == NULL)
                continue;
            size_t i = t->hash(t->slots[j]) & (ncap - 1);
            while (n[i] != NULL)
                i = (i + 1) & (ncap - 1);
            n[i] = t->slots[j];
        }
        free(t->slots);
        t->slots = n;
        t->cap = ncap;
    }
    size_t i = t->hash(c) & (t->cap - 1);
    while (t->slots[i] != NULL)
        i = (i + 1) & (t->cap - 1);
    t->slots[i] = c;
    t->used++;
    return true;
}

static void entry_free(struct code_entry *c)
{
    free(c->file);
    free(c->function);
    free(c);
}

static size_t code_hash(const struct code_entry *c)
{
    return hash_ptr(c->code, 0);
}

static struct entry_table codes = {.hash = code_hash};

/* The slot of code's entry, or NULL. */
static struct code_entry **code_find(py_object *code)
{
    if (codes.cap == 0)
        return NULL;
    for (size_t i = hash_ptr(code, 0) & (codes.cap - 1);; i = (i + 1) & (codes.cap - 1)) {
        if (codes.slots[i] == NULL)
            return NULL;
        if (codes.slots[i]->code == code)
            return &codes.slots[i];
    }
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

/* The same, read from the code object's struct (no GIL): "?" when the
 * field is not a str we can read. */
static char *field_copy(py_object *code, enum py_code_field which, bool safe)
{
    const void *s = py_code_field(code, which, safe);
    char *copy = s != NULL ? py_read_str(s, safe) : NULL;
    return copy != NULL ? copy : strdup("?");
}

/* A new entry for `code`, in its slot `at` when one is there (a dead code
 * object's), else a new slot.  With the GIL (gil): names through the API
 * and a reference taken; without: names from the struct, identity kept. */
static struct code_entry *code_new(py_object *code, struct code_entry **at, bool gil,
                                   bool safe, const struct code_id *id)
{
    struct code_entry *c = malloc(sizeof *c);
    if (c == NULL)
        return NULL;
    *c = (struct code_entry){.code = code, .held = gil};
    if (gil) {
        py_object *type, *value, *tb;
        pyapi.err_fetch(&type, &value, &tb);
        c->file = attr_copy(code, "co_filename");
        c->function = attr_copy(code, py_minor >= 11 ? "co_qualname" : "co_name");
        pyapi.err_restore(type, value, tb);
    } else {
        c->id = *id;
        c->file = field_copy(code, CODE_FILE, safe);
        c->function = field_copy(code, CODE_QUALNAME, safe);
    }
    if (c->file == NULL || c->function == NULL || (at == NULL && !table_put(&codes, c))) {
        entry_free(c);
        return NULL;
    }
    if (at != NULL)
        *at = c; /* the old entry stays: frames already name it */
    if (gil)
        pyapi.incref(code);
    return c;
}

/* The entry of `code`, created if new or if the one there is of a dead
 * code object.  Caller holds `py_lock`, and the GIL when `gil`; without
 * it, `id` is code's identity. */
static const struct code_entry *code_intern(py_object *code, bool gil, bool safe,
                                            const struct code_id *id)
{
    struct code_entry **at = code_find(code);
    if (at == NULL)
        return code_new(code, NULL, gil, safe, id);
    struct code_entry *c = *at;
    if (c->held)
        return c;
    struct code_id now;
    if (gil && !py_code_id(code, &now, false))
        return code_new(code, at, true, false, NULL);
    if (!py_same_id(&c->id, gil ? &now : id))
        return code_new(code, at, gil, safe, id);
    if (gil) { /* the same code object, alive: hold it from now on */
        pyapi.incref(code);
        c->held = true;
    }
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

/* The frame index stored under (entry, key), 0 if none. */
static uint32_t slot_find(const struct code_entry *code, int64_t key)
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

static bool slot_put(const struct code_entry *code, int64_t key, uint32_t index)
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

/* A new frame index for (c, line); MARK_NO_MEMORY when it cannot be had.
 * Caller holds `py_lock`. */
static uint32_t frame_new(const struct code_entry *c, int line)
{
    if (c == NULL || nframes >= FRAME_CHUNK * FRAME_CHUNKS)
        return MARK_NO_MEMORY;
    uint32_t index = nframes;
    struct frame_entry **chunk = &chunks[index / FRAME_CHUNK];
    if (*chunk == NULL && (*chunk = calloc(FRAME_CHUNK, sizeof **chunk)) == NULL)
        return MARK_NO_MEMORY;
    if (!slot_put(c, LINE_KEY(line), index))
        return MARK_NO_MEMORY;
    (*chunk)[index % FRAME_CHUNK] = (struct frame_entry){c, line};
    nframes++;
    return index;
}

/* The index of (c, line), made if new. */
static uint32_t line_index(const struct code_entry *c, int line)
{
    if (c == NULL)
        return MARK_NO_MEMORY;
    uint32_t index = slot_find(c, LINE_KEY(line));
    return index != 0 ? index : frame_new(c, line);
}

uint32_t py_frame_intern(py_object *code, int line)
{
    return line_index(code_intern(code, true, false, NULL), line);
}

uint32_t py_lasti_intern(py_object *code, int lasti, py_object *frame, enum py_how how,
                         bool *unheld)
{
    bool gil = py_how_gil(how), safe = how == PY_NOGIL_SAFE;
    struct code_id id;
    *unheld = false;
    if (!gil && !py_code_id(code, &id, safe))
        return MARK_NO_MEMORY;
    const struct code_entry *c = code_intern(code, gil, safe, &id);
    if (c == NULL)
        return MARK_NO_MEMORY;
    *unheld = !c->held;
    uint32_t index = slot_find(c, LASTI_KEY(lasti));
    if (index != 0)
        return index;
    /* PyCode_Addr2Line reads only the code's line table, as the fault
     * handler does without the GIL */
    int line = frame != NULL ? pyapi.frame_line(frame) : pyapi.addr2line(code, lasti);
    index = line_index(c, line);
    if (index >= MARKER_COUNT)
        (void)slot_put(c, LASTI_KEY(lasti), index); /* else: retried next time */
    return index;
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

static size_t names_hash(const struct code_entry *c)
{
    return hash_names(c->file, strlen(c->file), c->function, strlen(c->function));
}

/* String-keyed entries: (file, function) -> code_entry, whose address
 * then stands for a code object in the (code, line) slots. */
static struct entry_table names = {.hash = names_hash};

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
    if (names.cap != 0)
        for (size_t i = h & (names.cap - 1); names.slots[i] != NULL;
             i = (i + 1) & (names.cap - 1))
            if (names_equal(names.slots[i], file, flen, fn, fnlen))
                return names.slots[i];
    struct code_entry *c = malloc(sizeof *c);
    if (c == NULL)
        return NULL;
    *c = (struct code_entry){.code = NULL};
    c->file = strndup(file, flen);
    c->function = strndup(fn, fnlen);
    if (c->file == NULL || c->function == NULL || !table_put(&names, c)) {
        entry_free(c);
        return NULL;
    }
    return c;
}

/* Caller holds `py_lock`. */
uint32_t py_names_frame_intern(const char *file, size_t flen, int line, const char *fn,
                                   size_t fnlen)
{
    return line_index(names_intern(file, flen, fn, fnlen), line);
}
