/* frame_filter.h - which frames the views show: by default the
 * interpreter's own frames and process start-up are folded away, since the
 * Python frames stand for them and every stack ends in start-up, and so is
 * the framework machinery every PyTorch stack repeats (c10::, at::, the
 * caching allocator, pybind11, the C++ and CUDA runtimes) but for
 * an autograd node's frame;
 * --all-frames keeps them, --hide REGEX drops frames whose name matches
 * (pprof's --hide), --focus REGEX keeps only the samples whose stack has a
 * matching frame (pprof's --focus), --python-only / --native-only keep one
 * kind.  Applied
 * when a snapshot is read, so every view (report, diff, flamegraph,
 * timeline, html, export) sees the same stacks.  A stack never loses its
 * last frame to a filter. */
#ifndef CUMEMTRACE_CLI_FRAME_FILTER_H
#define CUMEMTRACE_CLI_FRAME_FILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapshot.h"

/* The process-wide filter, set before any snapshot is read (the options
 * are parsed in the command layer, cli.c's cli_frame_args): which frames
 * stay, and the --hide (focus false) or --focus regular expression, which
 * must outlive the filter.  frame_filter_regex returns 0, or -1 when `re`
 * is not an extended regular expression (the filter then has none). */
void frame_filter_show(bool all_frames, bool python_only, bool native_only);
int frame_filter_regex(bool focus, const char *re);

/* keep: the framework's frames stay (export: the viewers it writes for -
 * pprof, speedscope, memory_viz - fold as their users ask). */
void frame_filter_keep_framework(bool keep);

/* Whether a stack, as recorded (before any frame is hidden or folded, as
 * pprof's -focus sees the locations -hide will drop), has a frame whose
 * name matches --focus; true without --focus. */
bool frame_filter_focused(const struct snapctx *ctx, const uint32_t *frames, size_t n);

/* --focus REGEX as given, or NULL without it. */
const char *frame_filter_focus_text(void);

/* pprof's -focus on a snapshot read and checked: drops every group (live,
 * at_peak, churn, host, oom.live, oom.released; PyTorch's tensors, peak
 * tensors and growth by line) whose stack is out of focus
 * or absent, and marks such events unfocused (the views that attribute
 * events to call sites skip them; the device's totals and its curve stay
 * the whole process's, as pprof's total does).  Nothing without --focus. */
void frame_filter_focus(struct snapshot *s);

/* Whether a native frame's name (demangled) is an autograd node's apply,
 * which frames.c shows as "autograd: MulBackward0". */
bool frame_filter_autograd_node(const char *name);

/* Filters frames[0..n) of a stack in place; returns the new count. */
size_t frame_filter_apply(const struct snapctx *ctx, uint32_t *frames, size_t n);

#endif
