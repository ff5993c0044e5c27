/* peak_phase.c - cumemtrace_peak_context, cumemtrace_peak_phase,
 * cumemtrace_peak_phase_ended, cumemtrace_step_end and cumemtrace_peak_step
 * (life/torch_protocol.h): the context the
 * tracker kept at a device's peak (record_peak.c) handed to a runtime
 * layer, and the phase that layer found from it given back to the peak, so
 * that snapshots and the report name it as they name a phase that was open
 * (devices[].peak_phase); or the phases the layer found ended by then
 * taken off it; and the training step in which each device's peak came. */
#include <stdbool.h>
#include <string.h>

#include "cumemtrace.h"

#include "torch_protocol.h"
#include "phases.h"
#include "record.h"

_Static_assert(CUMEMTRACE_PEAK_SELVES == RECORD_PEAK_SELVES, "one bound");

__attribute__((visibility("default"))) int
cumemtrace_peak_context(int device, struct cumemtrace_peak_context *out)
{
    struct record_peak_context c;
    if (out == NULL || !record_peak_context(device, &c))
        return 0;
    memset(out, 0, sizeof *out);
    out->peak_time_ns = c.peak_time;
    memcpy(out->thread, c.thread, sizeof out->thread);
    out->nselves = c.nselves;
    for (unsigned i = 0; i < c.nselves; i++)
        out->selves[i] = c.selves[i], out->names[i] = c.names[i];
    return 1;
}

__attribute__((visibility("default"))) int
cumemtrace_peak_phase(int device, int64_t peak_time_ns, const char *source, const char *path)
{
    if (path == NULL || path[0] == '\0')
        return 0;
    uint32_t id = phase_path(phase_domain(source, NULL), path);
    return id != 0 && record_peak_phase_name(device, peak_time_ns, id) ? 1 : 0;
}

struct ended {
    const char *source, *name;
};

/* `id` less the innermost phases of `arg` (struct ended) */
static uint32_t without_ended(uint32_t id, const void *arg)
{
    const struct ended *e = arg;
    struct phase_info pi;
    while (id != 0 && phase_get(id, &pi) && pi.source != NULL &&
           strcmp(pi.source, e->source) == 0 && strcmp(pi.name, e->name) == 0)
        id = pi.parent;
    return id;
}

__attribute__((visibility("default"))) int
cumemtrace_peak_phase_ended(int device, int64_t peak_time_ns, const char *source,
                            const char *name)
{
    if (source == NULL || name == NULL || name[0] == '\0')
        return 0;
    struct ended e = {source, name};
    return record_peak_phase_swap(device, peak_time_ns, without_ended, &e) ? 1 : 0;
}

/* Per device, the peak's time at the last step end that saw it move, and
 * that step (0: none noted).  Written at step ends and read at dumps, from
 * threads that may run at once (ctypes releases the GIL): each word atomic. */
static int64_t noted_time[RECORD_MAX_DEVICES];
static int noted_step[RECORD_MAX_DEVICES];

__attribute__((visibility("default"))) int
cumemtrace_step_end(const char *source, int pop, int step, int devices)
{
    int r = pop ? cumemtrace_phase_pop(source) : 0;
    if (step <= 0)
        return r;
    if (devices > RECORD_MAX_DEVICES)
        devices = RECORD_MAX_DEVICES;
    for (int d = 0; d < devices; d++) {
        struct record_mark m;
        uint64_t current;
        if (!record_mark_get(d, &m, &current))
            continue; /* no allocation on it yet: as cumemtrace_usage's 0 */
        if (__atomic_load_n(&noted_step[d], __ATOMIC_ACQUIRE) != 0 &&
            __atomic_load_n(&noted_time[d], __ATOMIC_RELAXED) == m.peak_time)
            continue;
        __atomic_store_n(&noted_time[d], m.peak_time, __ATOMIC_RELAXED);
        __atomic_store_n(&noted_step[d], step, __ATOMIC_RELEASE);
    }
    return r;
}

__attribute__((visibility("default"))) int
cumemtrace_peak_step(int device, int64_t *peak_time_ns)
{
    if (device < 0 || device >= RECORD_MAX_DEVICES)
        return -1;
    int step = __atomic_load_n(&noted_step[device], __ATOMIC_ACQUIRE);
    if (step == 0)
        return -1;
    if (peak_time_ns != NULL)
        *peak_time_ns = __atomic_load_n(&noted_time[device], __ATOMIC_RELAXED);
    return step;
}
