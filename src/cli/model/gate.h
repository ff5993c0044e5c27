/* gate.h - the CI gate of `cumemtrace diff --max-growth`: a percentage or
 * a size, compared in exact integer arithmetic (percent kept in millionths)
 * so a threshold test at the boundary is not at the mercy of rounding. */
#ifndef CUMEMTRACE_CLI_GATE_H
#define CUMEMTRACE_CLI_GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PCT_SCALE 1000000 /* --max-growth percent in millionths of a percent */

struct gate {
    bool on;
    bool percent;
    uint64_t value; /* bytes, or percent * PCT_SCALE */
    const char *text;
    bool allow_ooms; /* --allow-oom: only peaks decide, not OOMs */
};

/* What a run's OOMs were: chains, and the chains that failed for good
 * (never recovered: the OOMs the program saw). */
struct gate_ooms {
    uint64_t chains, failed;
};

/* "5%", "2.5%" or a size with its unit ("512MiB") into *g: 0,
 * UNITS_ENOUNIT for a bare number, or -1 when malformed. */
int gate_parse(const char *s, struct gate *g);

/* True when growing from base to new_peak breaks the gate (strictly more
 * than allowed; from a base of 0 any growth breaks a percentage). */
bool gate_fails(const struct gate *g, uint64_t base, uint64_t new_peak);

/* True when NEW ran out of memory more than BASE - more chains, or more
 * chains that failed for good - and --allow-oom is not given; `why` then
 * says so in one line.  False when the gate is off. */
bool gate_ooms_fail(const struct gate *g, struct gate_ooms base, struct gate_ooms now,
                    char *why, size_t n);

#endif
