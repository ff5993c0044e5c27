/* config.h - settings read once from the environment at initialisation. */
#ifndef CUMEMTRACE_CONFIG_H
#define CUMEMTRACE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct config {
    bool disabled;          /* CUMEMTRACE_DISABLE=1: pure pass-through */
    unsigned depth;         /* CUMEMTRACE_DEPTH, native frames per stack */
    char output[4096];      /* CUMEMTRACE_OUTPUT pattern or directory */
    size_t event_cap;       /* CUMEMTRACE_EVENTS */
    unsigned max_oom_dumps; /* CUMEMTRACE_MAX_OOM_DUMPS */
    bool oom_dumps_all;     /* CUMEMTRACE_OOM_DUMPS=all: keep recovered chains' */
    uint64_t limit_all;     /* CUMEMTRACE_LIMIT, 0 = none */
    char manifest[4096];    /* CUMEMTRACE_MANIFEST (set by `cumemtrace run`) */
    char manifest_key[72];  /* CUMEMTRACE_MANIFEST_KEY: the list's first line */
    int dump_signal;        /* CUMEMTRACE_SIGNAL: USR1/USR2 asks for a dump */
    bool python;            /* CUMEMTRACE_PYTHON=0: no Python frames */
    bool native;            /* CUMEMTRACE_NATIVE=0: Python frames only */
    bool term_signals;      /* CUMEMTRACE_TERM_SIGNALS=0: no dump on SIGTERM & co */
    unsigned flush_ms;      /* CUMEMTRACE_FLUSH_MS: stream flush period */
    int stream;             /* CUMEMTRACE_STREAM: CONFIG_STREAM_* */
    uint64_t stream_max;    /* CUMEMTRACE_STREAM_MAX: bytes on disk per process */
    uint64_t interval_ms;   /* CUMEMTRACE_INTERVAL: periodic snapshots, 0 none */
    unsigned interval_keep; /* CUMEMTRACE_INTERVAL_KEEP: periodic files kept */
    uint64_t temporary_ms;  /* CUMEMTRACE_TEMPORARY: a free this soon after its
                               allocation is temporary too; 0: only heaptrack's
                               rule (no allocation in between) */
};

enum { CONFIG_STREAM_AUTO, CONFIG_STREAM_KEEP, CONFIG_STREAM_OFF };

extern struct config config __attribute__((visibility("hidden")));

#define CONFIG_DEFAULT_DEPTH 32
#define CONFIG_DEFAULT_EVENTS 262144 /* 8 MiB of 32-byte events */
/* 8 GiB of events; lowered further to an eighth of the machine's memory */
#define CONFIG_MAX_EVENTS (1ULL << 28)
#define CONFIG_DEFAULT_MAX_OOM_DUMPS 8
#define CONFIG_DEFAULT_FLUSH_MS 1000
#define CONFIG_DEFAULT_STREAM_MAX (256ull << 20)
#define CONFIG_DEFAULT_INTERVAL_KEEP 3
#define CONFIG_DEFAULT_OUTPUT "cumemtrace.%e.%p.json"

/* Reads every CUMEMTRACE_* variable with secure_getenv.  A malformed value
 * gets one warning naming the variable and the default used instead, kept
 * until config_report_warnings. */
void config_load(void);

/* Prints the warnings config_load kept (at the first CUDA call: processes
 * that never touch CUDA stay silent), once. */
void config_report_warnings(void);

#endif
