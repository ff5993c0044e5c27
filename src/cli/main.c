/* main.c - `cumemtrace`: dispatch to a subcommand. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "frame_filter.h"
#include "snapshot.h"

static const char usage[] =
    "usage: cumemtrace COMMAND [OPTIONS] [ARGS]\n"
    "\n"
    "GPU memory tracer: who holds the memory, when it peaked, why a request\n"
    "failed, and what changed since the last run.\n"
    "\n"
    "commands:\n"
    "  run          run a command with the tracer preloaded\n"
    "  fit          does a script fit on a card? runs it on simulated GPUs\n"
    "  report       report on snapshots (an OOM post-mortem first)\n"
    "  diff         compare two snapshots; a CI gate on peak growth and OOMs\n"
    "  flamegraph   folded stacks in bytes for flamegraph.pl / speedscope\n"
    "  timeline     memory over time: sparkline, or a Chrome/Perfetto trace\n"
    "  html         one self-contained HTML page: timeline, flame graph, sites\n"
    "  export       the snapshot for another viewer (speedscope, memory_viz,\n"
    "               pprof)\n"
    "  recover      a killed process's stream as an ordinary snapshot\n"
    "\n"
    "'cumemtrace COMMAND --help' describes each; docs/cli.md has it all.\n"
    "\n"
    "frames (all but run and fit; the interpreter's own frames and process\n"
    "start-up are folded away by default):\n"
    "  --all-frames     keep the interpreter's and process start-up frames\n"
    "  --hide REGEX     leave out frames whose name matches (extended regex)\n"
    "  --focus REGEX    only the memory whose stack has a frame that matches\n"
    "                   (pprof's -focus; sees the frames --hide leaves out)\n"
    "  --python-only    Python frames only; --native-only: native frames only\n"
    "  --segments       in a PyTorch process, who holds memory by the line that\n"
    "                   created each driver allocation (cached segment) instead\n"
    "                   of PyTorch's tensors by the user's line\n"
    "\n"
    "example: cumemtrace run -- python train.py\n"
    "         cumemtrace report cumemtrace.python.4242.json\n"
    "         cumemtrace diff yesterday.json today.json --max-growth 5%\n";

struct command {
    const char *name;
    int (*main)(int argc, char **argv);
};

static const struct command commands[] = {
    {"run", run_main},
    {"fit", fit_main},
    {"report", report_main},
    {"diff", diff_main},
    {"flamegraph", flamegraph_main},
    {"timeline", timeline_main},
    {"html", html_main},
    {"export", export_main},
    {"recover", recover_main},
};

static const struct command *find(const char *name)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return cli_usage(NULL, "no command given");
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        fputs(usage, stdout);
        return cli_finish_stdout();
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        printf("cumemtrace %s (snapshot format %d)\n", CUMEMTRACE_CLI_VERSION,
               SNAP_FORMAT_VERSION);
        return cli_finish_stdout();
    }
    if (strcmp(cmd, "help") == 0) {
        if (argc < 3) {
            fputs(usage, stdout);
            return cli_finish_stdout();
        }
        const struct command *c = find(argv[2]);
        if (c == NULL)
            return cli_usage(NULL, "unknown command '%s'", argv[2]);
        char *args[] = {argv[2], "--help", NULL};
        return c->main(2, args);
    }
    const struct command *c = find(cmd);
    if (c == NULL)
        return cli_usage(NULL, "unknown command '%s'", cmd);
    /* run's and fit's arguments belong to the command they run */
    if (c->main != run_main && c->main != fit_main) {
        int rc = cli_frame_args(cmd, &argc, argv);
        if (rc != 0)
            return rc;
    }
    return c->main(argc - 1, argv + 1);
}
