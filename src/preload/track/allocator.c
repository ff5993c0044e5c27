/* allocator.c - a caching allocator's own figures: taken from
 * the caller's struct, the cause they show, and the latest state reported
 * through cumemtrace_allocator_state.  The figures of an allocator's OOM
 * (cumemtrace_allocator_oom) go to its post-mortem through oom.c; this file
 * only holds facts, so the serialiser and oom.c both read it. */
#include "allocator.h"

#include <pthread.h>
#include <string.h>

#include "clock.h"
#include "torch_protocol.h"
#include "config.h"
#include "log.h"
#include "record.h"

int64_t allocator_unallocated(const struct allocator_facts *f)
{
    if (f->reserved < 0 || f->allocated < 0)
        return -1;
    return f->reserved > f->allocated ? f->reserved - f->allocated : 0;
}

/* The larger of the two pools' largest free blocks (-1 unknown). */
static int64_t allocator_largest_free(const struct allocator_facts *f)
{
    return f->largest_free_small > f->largest_free_large ? f->largest_free_small
                                                         : f->largest_free_large;
}

enum format_cause allocator_cause(const struct allocator_facts *f)
{
    if (f->requested < 0)
        return FORMAT_CAUSE_NONE;
    /* PyTorch refuses when reserved + request would pass the fraction. */
    if (f->limit >= 0 && f->reserved >= 0 && f->reserved + f->requested > f->limit)
        return FORMAT_CAUSE_ALLOCATOR_LIMIT;
    int64_t un = allocator_unallocated(f), big = allocator_largest_free(f);
    if (un >= f->requested && big >= 0 && big < f->requested)
        return FORMAT_CAUSE_ALLOCATOR_FRAGMENTATION;
    return FORMAT_CAUSE_NONE;
}

static void copy_str(char *dst, size_t n, const char *src)
{
    size_t len = src ? strnlen(src, n - 1) : 0;
    if (len > 0)
        memcpy(dst, src, len);
    dst[len] = '\0';
}

/* The allocator's top tensor sites, when the caller has them. */
static void take_top(const struct cumemtrace_allocator_facts *in, struct allocator_facts *f)
{
    f->ntop = -1;
    if (in->ntop_tensors < 0 || (in->ntop_tensors > 0 && in->top_tensors == NULL))
        return;
    f->ntop = 0;
    for (int64_t i = 0; i < in->ntop_tensors && f->ntop < ALLOCATOR_TOP_TENSORS; i++) {
        struct allocator_tensor_site *t = &f->top[f->ntop++];
        copy_str(t->stack, sizeof t->stack, in->top_tensors[i].stack);
        char *cut = strrchr(t->stack, '\n');
        if (strlen(t->stack) == sizeof t->stack - 1 && cut != NULL)
            *cut = '\0'; /* cut to whole frames: the outermost ones go */
        t->bytes = in->top_tensors[i].bytes;
        t->count = in->top_tensors[i].count;
    }
}

/* The roles, when the caller has them and they add up to its
 * allocated bytes (else "not measured": a figure that does not add up would
 * be printed as if it did). */
static void take_roles(const struct cumemtrace_allocator_facts *in, struct allocator_facts *f)
{
    int64_t r[ALLOCATOR_ROLES] = {
        in->parameter_bytes, in->buffer_bytes, in->gradient_bytes, in->optimizer_state_bytes,
        in->other_tensor_bytes};
    int64_t sum = 0;
    bool ok = f->allocated >= 0;
    for (int i = 0; i < ALLOCATOR_ROLES && ok; i++) {
        ok = r[i] >= 0 && r[i] <= f->allocated - sum;
        sum += ok ? r[i] : 0;
    }
    ok = ok && sum == f->allocated;
    for (int i = 0; i < ALLOCATOR_ROLES; i++)
        f->roles[i] = ok ? r[i] : -1;
    if (ok)
        copy_str(f->optimizers, sizeof f->optimizers, in->optimizers);
}

bool allocator_take(int device, const struct cumemtrace_allocator_facts *in,
                 struct allocator_facts *out)
{
    if (in == NULL || device < 0 || device >= RECORD_MAX_DEVICES || config.disabled)
        return false;
    if (in->size != sizeof *in) {
        /* the layer and the library ship together: another size is another build */
        static int said;
        if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
            LOG(LOG_WARN, "the PyTorch layer passed %u bytes of allocator facts where "
                          "this library takes %zu: they come from different builds; "
                          "reinstall cumemtrace so that both are one version",
                (unsigned)in->size, sizeof *in);
        return false;
    }
    struct allocator_facts f;
    memset(&f, 0, sizeof f);
    copy_str(f.name, sizeof f.name, in->name);
    copy_str(f.version, sizeof f.version, in->version);
    copy_str(f.config, sizeof f.config, in->config);
    f.requested = in->requested_bytes;
    f.allocated = in->allocated_bytes;
    f.reserved = in->reserved_bytes;
    f.active = in->active_bytes;
    f.inactive_split = in->inactive_split_bytes;
    f.largest_free_small = in->largest_free_small_bytes;
    f.largest_free_large = in->largest_free_large_bytes;
    f.segments = in->segments;
    f.num_alloc_retries = in->num_alloc_retries;
    f.num_ooms = in->num_ooms;
    f.limit = in->limit_bytes;
    f.device_total = in->device_total_bytes;
    f.device_free = in->device_free_bytes;
    f.peak_allocated = in->peak_allocated_bytes;
    take_top(in, &f);
    take_roles(in, &f);
    f.step = in->step;
    f.peak_step = in->peak_step;
    f.reported_ns = clock_now_ns();
    *out = f;
    return true;
}

static pthread_mutex_t latest_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    bool set;
    struct allocator_facts f;
} latest[RECORD_MAX_DEVICES];

__attribute__((visibility("default"))) int
cumemtrace_allocator_state(int device, const struct cumemtrace_allocator_facts *in)
{
    struct allocator_facts f;
    if (!allocator_take(device, in, &f))
        return -1;
    pthread_mutex_lock(&latest_lock);
    latest[device].f = f;
    latest[device].set = true;
    pthread_mutex_unlock(&latest_lock);
    return 0;
}

bool allocator_latest(int device, struct allocator_facts *out)
{
    if (device < 0 || device >= RECORD_MAX_DEVICES)
        return false;
    pthread_mutex_lock(&latest_lock);
    bool set = latest[device].set;
    if (set)
        *out = latest[device].f;
    pthread_mutex_unlock(&latest_lock);
    return set;
}

/* Per thread: a dump's refresh and its document are written by one thread,
 * and two dumps on two threads must not swap theirs. */
static _Thread_local struct allocator_refresh refresh_here;

void allocator_refresh_note(const struct allocator_refresh *r)
{
    refresh_here = *r;
}

bool allocator_refresh_take(struct allocator_refresh *out)
{
    if (!refresh_here.asked)
        return false;
    *out = refresh_here;
    memset(&refresh_here, 0, sizeof refresh_here);
    return true;
}
