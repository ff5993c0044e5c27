/* cg_mark.c - callgrind's client requests for a Python benchmark
 * (tests/torch/scenarios/phases_cost.py loads it with ctypes): start
 * instrumenting and zero the counts before the measured steps, dump them
 * after, so only the steps are counted - on every thread, which
 * --toggle-collect (one thread's calls) would not do for autograd's
 * backward thread.  Outside valgrind the requests do nothing. */
#include <valgrind/callgrind.h>

void cg_mark_start(void);
void cg_mark_stop(void);

void cg_mark_start(void)
{
    CALLGRIND_START_INSTRUMENTATION;
    CALLGRIND_ZERO_STATS;
}

void cg_mark_stop(void)
{
    CALLGRIND_DUMP_STATS_AT("steps");
    CALLGRIND_STOP_INSTRUMENTATION;
}
