/* cg_requests.c - callgrind's client requests for a Python benchmark (ctypes):
 * scripts/bench_torch_history.py and tests/torch/scenarios/phases_cost.py
 * (scripts/bench_torch_phases.py) start a process under callgrind with
 * instrumentation off (importing torch under callgrind takes minutes) and
 * count only the steps they bracket with these - on every thread, which
 * --toggle-collect (one thread's calls) would not do for autograd's backward
 * thread.  A process may bracket several runs: each dump zeroes the counts.
 * Outside valgrind each is a few no-op instructions. */
#include <valgrind/callgrind.h>

void cg_start(void);
void cg_stop(const char *label);

/* Zeroes the counts and starts counting.  With instrumentation off nothing is
 * counted, so the order of the two requests changes nothing. */
void cg_start(void)
{
    CALLGRIND_ZERO_STATS;
    CALLGRIND_START_INSTRUMENTATION;
}

/* Dumps the counts since cg_start() as a part named `label` (callgrind's
 * "desc: Trigger: Client Request: <label>" line, which the scripts look for),
 * then stops counting.  In this order: a dump after the stop writes
 * "summary: 0" (valgrind 3.19), and bench_torch_phases.py reads the summary.
 * The caller keeps `label` valid for the call. */
void cg_stop(const char *label)
{
    CALLGRIND_DUMP_STATS_AT(label);
    CALLGRIND_STOP_INSTRUMENTATION;
}
