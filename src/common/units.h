/* units.h - byte sizes as people write them ("24GiB", "512MiB", "1.5G").
 * Stateless; linked by the library, the CLI and the simulated device.
 */
#ifndef CUMEMTRACE_UNITS_H
#define CUMEMTRACE_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* units_parse_size's answer for a number without a unit ("8"): refused,
 * because 8 bytes is never what "--limit 8" meant. */
#define UNITS_ENOUNIT (-2)

/* Parses a size (docs/units.md): a decimal number (fraction allowed) and a
 * unit, case-insensitive: B, K/KiB, M/MiB, G/GiB, T/TiB (powers of 1024) or
 * KB/MB/GB/TB (powers of 1000).  Surrounding spaces are allowed.
 * Returns 0 and stores the rounded byte count in *out; UNITS_ENOUNIT for a
 * number with no unit; -1 for anything else malformed, or an overflowing
 * value.  *out is untouched on failure. */
int units_parse_size(const char *s, uint64_t *out);

/* Formats bytes with binary units and three significant digits ("1.50 GiB",
 * "512 B") into buf (at least 16 bytes) and returns buf. */
char *units_format_bytes(uint64_t bytes, char *buf, size_t len);

#endif
