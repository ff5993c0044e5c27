/* cg_toggle.c - callgrind's client requests for a Python process (ctypes):
 * scripts/bench_torch_history.py starts a process under callgrind with
 * instrumentation off (importing torch under callgrind takes minutes), and
 * counts only the training steps it brackets with these.  Outside valgrind
 * each is a few no-op instructions. */
#include <valgrind/callgrind.h>

void cg_start(void);
void cg_stop(const char *label);

void cg_start(void)
{
    CALLGRIND_ZERO_STATS;
    CALLGRIND_START_INSTRUMENTATION;
}

void cg_stop(const char *label)
{
    CALLGRIND_STOP_INSTRUMENTATION;
    CALLGRIND_DUMP_STATS_AT(label);
}
