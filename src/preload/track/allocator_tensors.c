/* allocator_tensors.c - cumemtrace_allocator_tensors: PyTorch's live
 * tensors grouped by the user's line (and those at the peak, and the lines
 * that grow), as JSON text the PyTorch layer (src/torchboot) built.
 *
 * The writer copies the text into the snapshot verbatim, so a caller that
 * is not our layer (any code in the process can call an exported symbol)
 * must not be able to break a snapshot: the text is checked to be one
 * well-formed JSON object of valid UTF-8 with known members before it is
 * kept.  The check is a bounded recursive descent (depth <= DEPTH_MAX).
 * Kept as allocator_segments.c keeps layouts: per device the latest state
 * (tag CUMEMTRACE_LAYOUT_STATE) and the ALLOCATOR_KEPT latest OOM reports by tag
 * (PyTorch's num_ooms), so that a post-mortem shows its own reading. */
#include "allocator_tensors.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "record.h"
#include "torch_protocol.h"
#include "utf8.h"

#define DEPTH_MAX 64

const char *const allocator_tensors_names[ALLOCATOR_TENSORS_MEMBERS] = {
    "tensors", "peak_tensors", "growth", "tensor_series", "origin"};

struct report {
    int64_t tag;
    size_t span[ALLOCATOR_TENSORS_MEMBERS][2];
    size_t len;
    char text[]; /* the object as handed over */
};

static struct allocator_kept store = {PTHREAD_MUTEX_INITIALIZER, {{0}}, {0}};

/* ---- the check ---- */

struct scan {
    const unsigned char *p, *end;
};

static void skip_ws(struct scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

static bool hex4(struct scan *s)
{
    for (int i = 0; i < 4; i++, s->p++)
        if (s->p >= s->end || !((*s->p >= '0' && *s->p <= '9') ||
                                ((*s->p | 0x20) >= 'a' && (*s->p | 0x20) <= 'f')))
            return false;
    return true;
}

/* A string at s->p (on its opening quote); its raw bytes in [*a, *b). */
static bool string(struct scan *s, const unsigned char **a, const unsigned char **b)
{
    s->p++;
    *a = s->p;
    while (s->p < s->end) {
        unsigned char c = *s->p;
        if (c == '"') {
            *b = s->p++;
            return true;
        }
        if (c < 0x20)
            return false;
        if (c == '\\') {
            if (++s->p >= s->end)
                return false;
            c = *s->p++;
            if (c == 'u') {
                if (!hex4(s))
                    return false;
            } else if (!strchr("\"\\/bfnrt", c) || c == '\0') {
                return false;
            }
            continue;
        }
        uint32_t cp;
        size_t k = c < 0x80 ? 1 : utf8_decode(s->p, (size_t)(s->end - s->p), &cp);
        if (k == 0)
            return false;
        s->p += k;
    }
    return false;
}

static bool digits(struct scan *s)
{
    const unsigned char *from = s->p;
    while (s->p < s->end && *s->p >= '0' && *s->p <= '9')
        s->p++;
    return s->p > from;
}

static bool number(struct scan *s)
{
    if (*s->p == '-')
        s->p++;
    if (s->p < s->end && *s->p == '0')
        s->p++;
    else if (!digits(s))
        return false;
    if (s->p < s->end && *s->p == '.') {
        s->p++;
        if (!digits(s))
            return false;
    }
    if (s->p < s->end && (*s->p | 0x20) == 'e') {
        s->p++;
        if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
            s->p++;
        if (!digits(s))
            return false;
    }
    return true;
}

static bool literal(struct scan *s, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0)
        return false;
    s->p += n;
    return true;
}

static bool value(struct scan *s, int depth);

/* An object or array at s->p; `close` its closing bracket. */
static bool container(struct scan *s, int depth, bool object)
{
    if (depth >= DEPTH_MAX)
        return false;
    s->p++;
    skip_ws(s);
    if (s->p < s->end && *s->p == (object ? '}' : ']')) {
        s->p++;
        return true;
    }
    for (;;) {
        skip_ws(s);
        if (object) {
            const unsigned char *a, *b;
            if (s->p >= s->end || *s->p != '"' || !string(s, &a, &b))
                return false;
            skip_ws(s);
            if (s->p >= s->end || *s->p++ != ':')
                return false;
            skip_ws(s);
        }
        if (!value(s, depth + 1))
            return false;
        skip_ws(s);
        if (s->p >= s->end)
            return false;
        if (*s->p == ',') {
            s->p++;
            continue;
        }
        if (*s->p++ != (object ? '}' : ']'))
            return false;
        return true;
    }
}

static bool value(struct scan *s, int depth)
{
    if (s->p >= s->end)
        return false;
    const unsigned char *a, *b;
    switch (*s->p) {
    case '{': return container(s, depth, true);
    case '[': return container(s, depth, false);
    case '"': return string(s, &a, &b);
    case 't': return literal(s, "true");
    case 'f': return literal(s, "false");
    case 'n': return literal(s, "null");
    default: return (*s->p == '-' || (*s->p >= '0' && *s->p <= '9')) && number(s);
    }
}

bool allocator_tensors_check(const char *json, size_t len,
                             size_t out[ALLOCATOR_TENSORS_MEMBERS][2])
{
    size_t span[ALLOCATOR_TENSORS_MEMBERS][2] = {{0, 0}};
    if (json == NULL)
        return false;
    struct scan s = {(const unsigned char *)json, (const unsigned char *)json + len};
    const unsigned char *base = s.p;
    skip_ws(&s);
    if (s.p >= s.end || *s.p != '{')
        return false;
    s.p++;
    skip_ws(&s);
    bool empty = s.p < s.end && *s.p == '}';
    if (empty)
        s.p++;
    while (!empty) {
        const unsigned char *a, *b;
        skip_ws(&s);
        if (s.p >= s.end || *s.p != '"' || !string(&s, &a, &b))
            return false;
        int m = 0;
        while (m < ALLOCATOR_TENSORS_MEMBERS &&
               ((size_t)(b - a) != strlen(allocator_tensors_names[m]) ||
                memcmp(a, allocator_tensors_names[m], (size_t)(b - a)) != 0))
            m++;
        if (m == ALLOCATOR_TENSORS_MEMBERS || span[m][1] != 0)
            return false; /* unknown, or twice */
        skip_ws(&s);
        if (s.p >= s.end || *s.p++ != ':')
            return false;
        skip_ws(&s);
        span[m][0] = (size_t)(s.p - base);
        if (!value(&s, 1))
            return false;
        span[m][1] = (size_t)(s.p - base);
        skip_ws(&s);
        if (s.p >= s.end)
            return false;
        if (*s.p == '}') {
            s.p++;
            break;
        }
        if (*s.p++ != ',')
            return false;
    }
    skip_ws(&s);
    if (s.p != s.end)
        return false; /* one object, nothing after it */
    if (out != NULL)
        memcpy(out, span, sizeof span);
    return true;
}

/* ---- keeping ---- */

__attribute__((visibility("default"))) int
cumemtrace_allocator_tensors(int device, int64_t tag, const char *json, size_t len)
{
    size_t span[ALLOCATOR_TENSORS_MEMBERS][2];
    if (device < 0 || device >= RECORD_MAX_DEVICES || config.disabled ||
        (tag < 0 && tag != CUMEMTRACE_LAYOUT_STATE) || len > TORCH_TENSORS_MAX ||
        !allocator_tensors_check(json, len, span))
        return -1;
    struct report *r = malloc(sizeof *r + len);
    if (r == NULL)
        return -1;
    r->tag = tag;
    r->len = len;
    memcpy(r->span, span, sizeof span);
    memcpy(r->text, json, len);
    allocator_kept_put(&store, device, r);
    return 0;
}

void allocator_tensors_write(int device, int64_t tag, enum allocator_tensors_member m,
                             struct snapshot_json *w)
{
    pthread_mutex_lock(&store.lock);
    const struct report *r = allocator_kept_find(&store, device, tag);
    if (r != NULL && r->span[m][1] > r->span[m][0])
        snapshot_json_raw(w, r->text + r->span[m][0], r->span[m][1] - r->span[m][0]);
    else
        snapshot_json_raw(w, "null", 4);
    pthread_mutex_unlock(&store.lock);
}

void allocator_tensors_atfork_child(void)
{
    allocator_kept_clear(&store);
}
