/* report_main.c - the `cumemtrace report` command: its options, then the
 * view of one process's files (report.c, or report_json.c for --json) or
 * of a job's ranks (ranks_report.c, which prints each rank with report.c's
 * and report_json.c's printers).  The dispatch lives here, above those
 * views, so none calls another back.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "out.h"
#include "ranks.h"
#include "report.h"
#include "report_churn.h"

static const char usage[] =
    "usage: cumemtrace report [--json] [--bytes] [--top N] [--rank N] [--width N] [--full]\n"
    "                         [--sort allocs|bytes|temporary] [--by stack|range] FILE|DIR...\n"
    "\n"
    "Reports a snapshot: per device the peak and when, memory by kind, the\n"
    "call sites that held memory at the peak, what was still live (leaks),\n"
    "fragmentation; for an OOM post-mortem the failure, its cause and advice\n"
    "first.  With several files or a directory (the ranks of one job): a row\n"
    "per rank (peak, when, at the end, OOMs, why each file was written), the\n"
    "imbalance, which rank failed first, who held memory summed over ranks with\n"
    "its spread (PyTorch's tensors by line; --segments: call sites), then the\n"
    "details of the first rank to fail (else of the highest peak); one\n"
    "process's files (post-mortems, exit, periodic): a line per file (when,\n"
    "its peak; alike ones merged), then its first post-mortem, else its exit\n"
    "snapshot (--full: each file in full).\n"
    "\n"
    "  --json     print the normalised model as JSON (docs/cli.md)\n"
    "  --bytes    print sizes as exact byte counts\n"
    "  --top N    call sites per table (default 10; --json: all)\n"
    "  --rank N   only rank N of the files given (its newest file)\n"
    "  --width N  lay out for N columns (default: the terminal's, 80 when piped)\n"
    "  --full     cut nothing: whole call-site names and caller chains, and for\n"
    "             a post-mortem every table (by default it fits one screen)\n"
    "  --sort K   order the churn table (allocations and frees over the run, per\n"
    "             call site) by allocs (default), bytes or temporary\n"
    "  --by range the peak by the program's own ranges (NVTX, PyTorch's phases,\n"
    "             cumemtrace_phase_push) instead of by call site: each range's\n"
    "             bytes at the peak, exact, and what it holds now\n"
    "\n"
    "example: cumemtrace report cumemtrace.python.4242.json\n"
    "         cumemtrace report run-dir/ --rank 3\n";

int report_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},
        {"bytes", no_argument, NULL, 'b'},
        {"top", required_argument, NULL, 't'},
        {"rank", required_argument, NULL, 'r'},
        {"width", required_argument, NULL, 'w'},
        {"full", no_argument, NULL, 'F'},
        {"sort", required_argument, NULL, 's'},
        {"by", required_argument, NULL, 'B'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool json = false, exact = false, top_given = false, one = false;
    uint64_t top = REPORT_TOP_DEFAULT, rank = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'j': json = true; break;
        case 'b': exact = true; break;
        case 't':
            if (cli_parse_count(optarg, &top) != 0 || top == 0 || top > 1000000)
                return cli_usage("report", "--top wants a count from 1, not '%s'", optarg);
            top_given = true;
            break;
        case 'r':
            if (cli_parse_count(optarg, &rank) != 0 || rank > INT64_MAX)
                return cli_usage("report", "--rank wants a rank number, not '%s'", optarg);
            one = true;
            break;
        case 'w': {
            uint64_t w;
            if (cli_parse_count(optarg, &w) != 0 || w > 10000 || out_set_width((size_t)w) != 0)
                return cli_usage("report", "--width wants columns from %d to 10000, not '%s'",
                                 OUT_WIDTH_MIN, optarg);
            break;
        }
        case 'F':
            out_set_width(OUT_WIDTH_FULL);
            report_options.full = true;
            break;
        case 's': {
            int by = churn_sort_parse(optarg);
            if (by < 0)
                return cli_usage("report", "--sort wants allocs, bytes or temporary, not '%s'",
                                 optarg);
            report_options.sort = (enum churn_sort)by;
            break;
        }
        case 'B':
            if (strcmp(optarg, "range") != 0 && strcmp(optarg, "stack") != 0)
                return cli_usage("report", "--by wants stack or range, not '%s'", optarg);
            report_options.by_range = strcmp(optarg, "range") == 0;
            break;
        case 'h': fputs(usage, stdout); return cli_finish_stdout();
        case ':': return cli_usage("report", "%s needs a value", argv[optind - 1]);
        default: return cli_usage("report", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return cli_usage("report", "no snapshot file given");
    char **paths;
    size_t npaths;
    if (ranks_expand(argv + optind, (size_t)(argc - optind), &paths, &npaths) != 0)
        return CLI_EXIT_ERROR;
    out_init(stdout, exact);
    if (one || (npaths > 1 && !json)) {
        int st = ranks_report_main(paths, npaths, json, json && !top_given ? 0 : (unsigned)top,
                                   one, (int64_t)rank);
        ranks_paths_free(paths, npaths);
        return st;
    }
    struct cli_inputs in;
    if (cli_load_without_events(&in, paths, npaths) != 0) {
        ranks_paths_free(paths, npaths);
        return CLI_EXIT_ERROR;
    }
    /* Scripts get every call site unless they ask for fewer. */
    int rc = json ? report_json(stdout, in.snaps, in.n, top_given ? (unsigned)top : 0)
                  : report_text(stdout, in.snaps, in.n, (unsigned)top);
    cli_inputs_free(&in);
    ranks_paths_free(paths, npaths); /* the snapshots named their files by them */
    if (rc != 0) {
        fprintf(stderr, "cumemtrace: report: out of memory\n");
        return CLI_EXIT_ERROR;
    }
    return cli_finish_stdout() ? CLI_EXIT_ERROR : CLI_EXIT_OK;
}
