/* crc.h - the checksums of a stream's records (docs/stream-format.md).
 * Stateless; linked by the library (which writes them) and the CLI (which
 * checks them).
 */
#ifndef CUMEMTRACE_CRC_H
#define CUMEMTRACE_CRC_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, initial value and
 * final xor 0xFFFFFFFF: "123456789" gives 0xE3069283), the records'
 * checksum since stream version 2.  With SSE4.2's crc32 instruction where
 * the CPU has it, eight table lookups a step elsewhere. */
uint32_t crc32c(const void *p, size_t n);

/* crc32c without the instruction: what a CPU without SSE4.2 runs (and the
 * unit test checks beside the instruction's). */
uint32_t crc32c_portable(const void *p, size_t n);

#endif
