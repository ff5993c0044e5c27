/* cli.h - the subcommands and what they share: loading snapshots, option
 * values, usage text.  Each subcommand lives in its own file and exports
 * <stem>_main(argc, argv) with argv[0] the subcommand's name; main.c only
 * dispatches.  Exit codes: 0 success, 1 a CI gate failed (diff), 2 usage
 * or input error; `run` exits with its child's status. */
#ifndef CUMEMTRACE_CLI_CLI_H
#define CUMEMTRACE_CLI_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "errors.h"
#include "snapshot.h"
#include "cli_usage.h"

/* The tool's version is the library's (include/cumemtrace.h, through
 * format.h): they ship together and agree on the snapshot format. */
#include "format.h"
#define CUMEMTRACE_CLI_VERSION FORMAT_TOOL_VERSION

/* Takes the frame filter's options (--all-frames, --hide, --focus,
 * --python-only, --native-only) and --segments (the driver's view of who
 * holds memory, holders.h) out of argv - they may stand anywhere before
 * the files - and sets the process-wide filter (frame_filter.h).
 * Returns 0, or the exit status of a usage error already printed. */
int cli_frame_args(const char *cmd, int *argc, char **argv);

int report_main(int argc, char **argv);
int diff_main(int argc, char **argv);
int flamegraph_main(int argc, char **argv);
int timeline_main(int argc, char **argv);
int run_main(int argc, char **argv);
/* fit.c: the command on simulated cards, one table of verdicts. */
int fit_main(int argc, char **argv);
int html_main(int argc, char **argv);
int export_main(int argc, char **argv);
int recover_main(int argc, char **argv);

/* Loaded snapshots: all share ctx; each is allocated on its own so that
 * pointers to it stay valid. */
struct cli_inputs {
    struct snapctx ctx;
    struct snapshot **snaps;
    size_t n;
};

/* Loads every path into in (which it initialises).  On the first failure
 * prints the error line to stderr, frees everything and returns a CLI_E*
 * code: the caller exits 2 with nothing on stdout. */
int cli_load(struct cli_inputs *in, char **paths, size_t n);

/* As cli_load, for a view that reads no event rows (events.n is 0, the
 * rows are still checked and counted in events.rows). */
int cli_load_without_events(struct cli_inputs *in, char **paths, size_t n);

void cli_inputs_free(struct cli_inputs *in);

/* Parses a decimal count (no sign, no unit); -1 when malformed. */
int cli_parse_count(const char *s, uint64_t *out);

/* Parses "stack", "function" or "module"; -1 when unknown. */
int cli_parse_by(const char *s);

/* Flushes stdout and reports a write failure (full disk, closed pipe). */
int cli_finish_stdout(void);

#endif
