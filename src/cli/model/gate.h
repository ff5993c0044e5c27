/* gate.h - the CI gate of `cumemtrace diff --max-growth`: a percentage or
 * a size, compared in exact integer arithmetic (percent kept in millionths)
 * so a threshold test at the boundary is not at the mercy of rounding. */
#ifndef CUMEMTRACE_CLI_GATE_H
#define CUMEMTRACE_CLI_GATE_H

#include <stdbool.h>
#include <stdint.h>

#define PCT_SCALE 1000000 /* --max-growth percent in millionths of a percent */

struct gate {
    bool on;
    bool percent;
    uint64_t value; /* bytes, or percent * PCT_SCALE */
    const char *text;
};

/* "5%", "2.5%" or a size with its unit ("512MiB") into *g: 0,
 * UNITS_ENOUNIT for a bare number, or -1 when malformed. */
int gate_parse(const char *s, struct gate *g);

/* True when growing from base to new_peak breaks the gate (strictly more
 * than allowed; from a base of 0 any growth breaks a percentage). */
bool gate_fails(const struct gate *g, uint64_t base, uint64_t new_peak);

#endif
