/* serialise_read.h - what test_serialise.c asks of the CLI's reader
 * (serialise_read.c): a document read as `cumemtrace report` reads it, and
 * the figures the test compares with the tracker's state.  Plain types
 * only: the tracker's record.h and the reader's snapshot.h both name the
 * kinds KIND_*, so neither is included with the other. */
#ifndef CUMEMTRACE_TEST_SERIALISE_READ_H
#define CUMEMTRACE_TEST_SERIALISE_READ_H

#include <stddef.h>
#include <stdint.h>

#define READ_KINDS 8   /* more than format.h's kinds */
#define READ_DEVICES 4 /* as many as a test makes */

struct read_device {
    int64_t ordinal;
    uint64_t current, peak;
    uint64_t kind_current[READ_KINDS], kind_peak[READ_KINDS];
    uint64_t kind_allocs[READ_KINDS], kind_frees[READ_KINDS];
    uint64_t live_bytes, live_count; /* summed over its live groups */
    uint64_t at_peak_bytes;          /* summed over its at-peak groups */
    size_t nlive;                    /* live groups (call site and kind) */
};

struct read_totals {
    char reason[16];
    int64_t sequence;
    size_t ndevices;
    struct read_device dev[READ_DEVICES];
    uint64_t host_current, host_peak; /* host-pinned */
    size_t nstacks;
    int64_t stack_ids[16];          /* the first 16, ascending */
    char entry[16][32];             /* their entry points */
    uint64_t events;                /* event rows */
    int oom_present;
    uint64_t oom_requested, oom_shortfall, oom_attempts;
    int64_t oom_device;
    char oom_cause[32];
    uint64_t ooms_count;
};

/* Reads the document buf[0..len) (buf[len] must be '\0') with the CLI's
 * snapshot reader into *out.  Returns 0, or -1 with the reader's message
 * in err. */
int serialise_read(char *buf, size_t len, struct read_totals *out, char *err, size_t errlen);

#endif
