/* frames.h - names of frames and call sites, the identity diff matches on.
 *
 * Addresses change with every run (ASLR) and offsets with every rebuild, so
 * a frame is named by what survives both:
 *   Python frame              file:line:function
 *   native frame with symbol  module!demangled_symbol
 *   ... with debug info       module!function at file.c:42   (symbolize.h)
 *   native frame without      module+0xoffset   (only a fallback)
 *   marker                    [text]
 * Frames that print the same are one frame (one index in snapctx.frames).
 *
 * Call sites under a grouping (enum site_by):
 *   BY_STACK     the chain of named frames (Python, symbolised native and
 *                markers; unsymbolised frames are left out because their
 *                offsets move on a rebuild, unless the stack has nothing
 *                else) plus the entry point;
 *   BY_FUNCTION  the innermost Python frame when the stack has one, else the
 *                innermost named native frame (see site_label_frame);
 *   BY_MODULE    the module of the innermost frame (a Python frame's file).
 * Every site has a label: the BY_FUNCTION frame for BY_STACK and
 * BY_FUNCTION, the module for BY_MODULE.
 */
#ifndef CUMEMTRACE_CLI_FRAMES_H
#define CUMEMTRACE_CLI_FRAMES_H

#include <stddef.h>
#include <stdint.h>

#include "snapshot.h"

#define FRAMES_NONE UINT32_MAX

/* Demangles an Itanium C++ symbol ("_ZN3foo3barEv" -> "foo::bar()").
 * Returns a malloc'd string, or NULL when sym is not mangled or the
 * demangler refuses it (the caller then shows sym as it is). */
char *frames_demangle(const char *sym);

/* Intern a frame and return its index in ctx->frames, or FRAMES_NONE when
 * out of memory.  String arguments need not be interned; NULL module or
 * symbol is allowed (shown as "[unknown]" / module+offset).  line < 0 means
 * unknown. */
uint32_t frames_native(struct snapctx *ctx, const char *module, uint64_t offset,
                       const char *symbol);
/* A native frame named from debug information: module!function at
 * file:line, " (inlined)" when inlined into the next frame.  function is
 * required (mangled or plain); file and line may be unknown (NULL, 0). */
uint32_t frames_source(struct snapctx *ctx, const char *module, const char *function,
                       const char *file, int line, int inlined);
uint32_t frames_python(struct snapctx *ctx, const char *file, int64_t line,
                       const char *function);
uint32_t frames_marker(struct snapctx *ctx, const char *text);

/* Position in st->frames of the frame that labels the stack's call site
 * (innermost Python frame, else innermost named, else innermost non-marker
 * frame), or -1 when the stack has no such frame. */
int frames_label_pos(const struct snapctx *ctx, const struct snap_stack *st);

/* The site id of stack index `stack` of s under grouping by, computed on
 * first use and cached in the stack; stack may be SNAP_NO_STACK (groups the
 * file left unattributed share the site "[no stack]").  FRAMES_NONE when
 * out of memory. */
uint32_t frames_site(struct snapshot *s, uint32_t stack, enum site_by by);

/* The site with that id. */
const struct site *frames_site_get(const struct snapctx *ctx, enum site_by by,
                                   uint32_t id);

/* The site's identity under `by` as text (its key's names, each ending in
 * '\n'): equal for the same site in files loaded into different contexts,
 * which is how the multi-rank merge matches call sites (ranks.c).  Stack
 * may be SNAP_NO_STACK.  Returns a malloc'd string and its length in *len,
 * or NULL when out of memory. */
char *frames_site_text(struct snapshot *s, uint32_t stack, enum site_by by, size_t *len);

/* Label of the site a group belongs to under `by` (a stack-less group is
 * "[no stack]"); NULL when out of memory. */
const char *frames_group_label(struct snapshot *s, uint32_t stack, enum site_by by);

/* The callers of a stack's label frame, outward, as
 * "< caller < caller's caller", at most `max` frames; "" when there are
 * none.  Writes into buf and returns it. */
const char *frames_callers(const struct snapshot *s, uint32_t stack, unsigned max,
                           char *buf, size_t n);

#endif
