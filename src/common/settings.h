/* settings.h - the ranges of settings that the library (CUMEMTRACE_*) and
 * `cumemtrace run` both accept: defined once, so that the two cannot
 * disagree (docs/units.md lists them with the size units). */
#ifndef CUMEMTRACE_SETTINGS_H
#define CUMEMTRACE_SETTINGS_H

/* CUMEMTRACE_DEPTH / run --depth: native frames captured per stack.  0
 * captures none (Python frames and the entry point remain); 256 is the
 * tracker's fixed per-call frame buffer, far deeper than a real host's
 * stacks (PyTorch's are 30-60 frames). */
#define SETTINGS_DEPTH_MIN 0
#define SETTINGS_DEPTH_MAX 256

#endif
