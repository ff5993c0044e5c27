/* symbolize.h - native frames to function, source file and line, from the
 * module's .symtab and DWARF (elfutils' libdwfl), in the CLI only.
 *
 * A snapshot names each module it saw (path as loaded, GNU build-id, the
 * ELF vaddr of frame offset 0; docs/snapshot-format.md "modules").  Debug
 * information is used only from a file whose build-id is the one that ran:
 * the file at the recorded path, else a separate debug file under
 * /usr/lib/debug/.build-id/ (or debuginfod, when DEBUGINFOD_URLS is set).
 * Without it a frame keeps what the snapshot recorded (dynamic symbol, then
 * module+offset).  CUMEMTRACE_DEBUGINFO=off turns the lookup off.
 */
#ifndef CUMEMTRACE_CLI_SYMBOLIZE_H
#define CUMEMTRACE_CLI_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>

struct symbolizer;

/* One source-level frame; an inlined call yields several, innermost first. */
struct src_frame {
    const char *function; /* linkage (mangled) or plain name; NULL: unknown */
    const char *file;     /* source file as DWARF has it; NULL: unknown */
    int line;             /* 0: unknown */
    int inlined;          /* 1: inlined into the next frame */
};

#define SYMBOLIZE_MAX_INLINE 8

/* NULL when debug information is turned off (or out of memory). */
struct symbolizer *symbolizer_new(void);
void symbolizer_free(struct symbolizer *s);

/* Returns the handle of a module (opened once per path and build-id, shared
 * by every file read), or -1 when no matching file with symbols can be
 * found; a mismatching build-id is said once on stderr. */
int symbolizer_module(struct symbolizer *s, const char *name, const char *path,
                      const char *build_id_hex, uint64_t vaddr_base);

/* Resolves offset (a frame's offset from the module's base) in module m.
 * Fills out[0..n) innermost first and returns n, 0 when nothing is known.
 * The strings live as long as the symbolizer. */
size_t symbolizer_lookup(struct symbolizer *s, int m, uint64_t offset,
                         struct src_frame *out, size_t max);

#endif
