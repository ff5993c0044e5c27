/* timeline.c - `cumemtrace timeline FILE`: device memory over time, as
 * sparklines or a Chrome trace; docs/cli.md's `timeline` section says what
 * each track holds.
 *
 * The peak sample: thinning may drop the event that set the peak, so a
 * counter sample (peak_time_ns, peak_bytes) from the device record is
 * inserted when the log lacks it; the track then always reaches the peak.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json_out.h"
#include "out.h"
#include "timeline.h"
#include "outfile.h"

#define TIMELINE_COLS 60 /* cells: leaves room for labels in 80 columns */

struct track {
    int64_t device;       /* -1 pinned host memory */
    uint64_t peak;
    int64_t peak_time;    /* SNAP_UNKNOWN_I64 when unknown */
    uint64_t final;       /* current at the dump */
};

static int64_t log_end(const struct snapshot *s)
{
    int64_t end = s->process.dump_time_ns != SNAP_UNKNOWN_I64 ? s->process.dump_time_ns : 0;
    if (s->events.n > 0 && s->events.v[s->events.n - 1].t_ns > end)
        end = s->events.v[s->events.n - 1].t_ns;
    for (size_t i = 0; i < s->ndevices; i++)
        if (s->devices[i].peak_time_ns != SNAP_UNKNOWN_I64 && s->devices[i].peak_time_ns > end)
            end = s->devices[i].peak_time_ns;
    return end > 0 ? end : 1;
}

static size_t tracks_of(const struct snapshot *s, struct track *t, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < s->ndevices && n < max; i++) {
        const struct snap_device *d = &s->devices[i];
        t[n++] = (struct track){d->ordinal, d->peak_bytes, d->peak_time_ns, d->current_bytes};
    }
    if (s->host.present && s->host.stats.peak_bytes > 0 && n < max)
        t[n++] = (struct track){-1, s->host.stats.peak_bytes, s->host.stats.peak_time_ns,
                                s->host.stats.current_bytes};
    return n;
}

static size_t cell_of(int64_t t, int64_t end)
{
    if (t <= 0)
        return 0;
    size_t c = (size_t)((double)t / (double)end * TIMELINE_COLS);
    return c >= TIMELINE_COLS ? TIMELINE_COLS - 1 : c;
}

static void track_name(const struct track *t, char *buf, size_t n)
{
    if (t->device < 0)
        snprintf(buf, n, "host pinned");
    else
        snprintf(buf, n, "device %" PRId64, t->device);
}

/* ---- text ---- */

static void spark(FILE *f, const struct snapshot *s, const struct track *t, int64_t end,
                  bool ascii)
{
    static const char *const blocks[9] = {" ", "\u2581", "\u2582", "\u2583", "\u2584",
                                          "\u2585", "\u2586", "\u2587", "\u2588"};
    static const char ascii_levels[] = " _.-=+*#@";
    uint64_t cell[TIMELINE_COLS] = {0};
    uint64_t cur = 0;
    size_t e = 0, kept = 0;
    const struct snap_events *ev = &s->events;
    for (size_t c = 0; c < TIMELINE_COLS; c++) {
        uint64_t m = cur;
        /* Events up to the end of this cell's slice. */
        while (e < ev->n && cell_of(ev->v[e].t_ns, end) <= c) {
            if (ev->v[e].device == t->device) {
                cur = ev->v[e].current;
                kept++;
                if (cur > m)
                    m = cur;
            }
            e++;
        }
        cell[c] = m;
    }
    if (t->peak_time != SNAP_UNKNOWN_I64) {
        size_t c = cell_of(t->peak_time, end);
        if (cell[c] < t->peak)
            cell[c] = t->peak;
    }
    uint64_t top = t->peak;
    for (size_t c = 0; c < TIMELINE_COLS; c++)
        if (cell[c] > top)
            top = cell[c];

    char name[32], a[OUT_NUM], b[OUT_NUM], when[OUT_NUM];
    track_name(t, name, sizeof name);
    fprintf(f, "%s%s: peak %s at %s, now %s%s\n", out_color(OUT_BOLD), name,
            out_bytes(t->peak, a), out_duration(t->peak_time, when), out_bytes(t->final, b),
            out_color(OUT_RESET));
    char label[OUT_NUM];
    out_bytes(top, label);
    fprintf(f, "%10s |", label);
    for (size_t c = 0; c < TIMELINE_COLS; c++) {
        int lvl = cell[c] == 0 || top == 0
                      ? 0
                      : 1 + (int)((double)cell[c] / (double)top * 7.999);
        if (lvl > 8)
            lvl = 8;
        if (ascii)
            fputc(ascii_levels[lvl], f);
        else
            fputs(blocks[lvl], f);
    }
    fputs("|\n", f);
    char marks[TIMELINE_COLS + 1];
    memset(marks, ' ', TIMELINE_COLS);
    marks[TIMELINE_COLS] = '\0';
    if (t->peak_time != SNAP_UNKNOWN_I64)
        marks[cell_of(t->peak_time, end)] = '^';
    bool oom_here = s->oom.present && s->oom.device == t->device &&
                    s->oom.time_ns != SNAP_UNKNOWN_I64;
    if (oom_here)
        marks[cell_of(s->oom.time_ns, end)] = 'X';
    size_t last = TIMELINE_COLS;
    while (last > 0 && marks[last - 1] == ' ')
        last--;
    marks[last] = '\0';
    fprintf(f, "%10s  %s\n", "", marks);
    char e0[OUT_NUM];
    out_duration(end, e0);
    fprintf(f, "%10s  0 s%*s\n", "", (int)(TIMELINE_COLS - 3), e0);
    fprintf(f, "%10s  ^ peak%s; %zu events\n", "", oom_here ? ", X out of memory" : "", kept);
}

static int timeline_text(FILE *f, const struct snapshot *s, bool ascii)
{
    struct track t[64];
    size_t n = tracks_of(s, t, 64);
    int64_t end = log_end(s);
    const struct snap_events *ev = &s->events;
    char rec[48] = "?";
    if (ev->recorded != SNAP_UNKNOWN)
        snprintf(rec, sizeof rec, "%" PRIu64, ev->recorded);
    fprintf(f, "%scumemtrace timeline: %s%s\n", out_color(OUT_BOLD), snapshot_display(s->ctx, s->file),
            out_color(OUT_RESET));
    if (ev->stride > 1 || ev->thinned == 1)
        fprintf(f, "  %zu of %s events kept (the log was thinned; peaks are exact)\n",
                ev->n, rec);
    else
        fprintf(f, "  %zu events\n", ev->n);
    if (n == 0)
        fprintf(f, "\nNo device saw tracked activity.\n");
    for (size_t i = 0; i < n; i++) {
        fputc('\n', f);
        spark(f, s, &t[i], end, ascii);
    }
    timeline_phase_bands(f, s, end, TIMELINE_COLS, ascii);
    return 0;
}

/* ---- Chrome trace events ---- */

static void counter(struct json_out *w, const char *name, int64_t pid, int64_t t, uint64_t bytes)
{
    timeline_event_head(w, name, NULL, "C", pid, 0, t);
    json_out_key_u64s(w, "args", true, (const char *const[]){"bytes"}, &bytes, 1);
    json_out_end_object(w);
}

static void kinds_counter(struct json_out *w, const char *name, int64_t pid, int64_t t,
                          const int64_t *k)
{
    uint64_t v[DEVICE_KINDS];
    for (int i = 0; i < DEVICE_KINDS; i++)
        v[i] = k[i] > 0 ? (uint64_t)k[i] : 0;
    timeline_event_head(w, name, NULL, "C", pid, 0, t);
    /* the by_kind keys come first among the kind names */
    json_out_key_u64s(w, "args", true, snapshot_kind_names, v, DEVICE_KINDS);
    json_out_end_object(w);
}

static void chrome_track(struct json_out *w, const struct snapshot *s, const struct track *t,
                         int64_t pid, bool by_kind)
{
    char name[48], kname[64];
    track_name(t, name, sizeof name);
    snprintf(kname, sizeof kname, "%s by kind", name);
    const struct snap_events *ev = &s->events;
    bool peak_done = t->peak_time == SNAP_UNKNOWN_I64;
    bool started = false;
    int64_t kinds[DEVICE_KINDS] = {0};
    int64_t last_t = 0;
    for (size_t i = 0; i < ev->n; i++) {
        const struct snap_event *e = &ev->v[i];
        if (e->device != t->device)
            continue;
        if (!started) {
            started = true;
            if (e->t_ns > 0)
                counter(w, name, pid, 0, 0);
        }
        if (!peak_done && e->t_ns > t->peak_time) {
            counter(w, name, pid, t->peak_time, t->peak);
            peak_done = true;
        }
        counter(w, name, pid, e->t_ns, e->current);
        if (e->t_ns == t->peak_time && e->current == t->peak)
            peak_done = true;
        if (by_kind && e->kind < DEVICE_KINDS) {
            kinds[e->kind] += e->delta;
            kinds_counter(w, kname, pid, e->t_ns, kinds);
        }
        last_t = e->t_ns;
    }
    if (!started)
        counter(w, name, pid, 0, 0);
    if (!peak_done) {
        counter(w, name, pid, t->peak_time, t->peak);
        if (t->peak_time > last_t)
            last_t = t->peak_time;
    }
    int64_t end = s->process.dump_time_ns;
    if (end != SNAP_UNKNOWN_I64 && end >= last_t)
        counter(w, name, pid, end, t->final);
    if (t->peak_time != SNAP_UNKNOWN_I64) {
        char pname[64];
        snprintf(pname, sizeof pname, "peak %s", name);
        timeline_event_head(w, pname, NULL, "i", pid, 0, t->peak_time);
        json_out_key_string(w, "s", "p");
        json_out_key_u64s(w, "args", true, (const char *const[]){"peak_bytes"}, &t->peak, 1);
        json_out_end_object(w);
    }
}

static int timeline_chrome(FILE *f, struct snapshot *s, unsigned sites)
{
    struct track t[64];
    size_t n = tracks_of(s, t, 64);
    int64_t pid = s->process.pid != SNAP_UNKNOWN_I64 ? s->process.pid : 0;
    bool by_kind = s->events.stride <= 1 && s->events.thinned != 1;
    struct json_out w;
    json_out_init(&w, f, false);
    w.break_depth = 2; /* inside traceEvents */
    json_out_begin_object(&w);
    json_out_key(&w, "traceEvents");
    json_out_begin_array(&w);
    char pname[256];
    snprintf(pname, sizeof pname, "%s (pid %" PRId64 ")",
             s->process.exe ? s->process.exe : "?", pid);
    json_out_begin_object(&w);
    json_out_key_string(&w, "name", "process_name");
    json_out_key_string(&w, "ph", "M");
    json_out_key_i64(&w, "pid", pid);
    json_out_key_i64(&w, "tid", 0);
    json_out_key(&w, "args");
    json_out_begin_object(&w);
    json_out_key_string(&w, "name", pname);
    json_out_end_object(&w);
    json_out_end_object(&w);
    for (size_t i = 0; i < n; i++)
        chrome_track(&w, s, &t[i], pid, by_kind);
    if (by_kind && timeline_site_tracks(&w, s, pid, sites) != 0)
        return -1;
    int tensor_tracks = timeline_tensor_tracks(&w, s, pid,
                                               sites ? sites : TIMELINE_SITES_DEFAULT);
    if (tensor_tracks < 0)
        return -1;
    timeline_phase_slices(&w, s, pid);
    for (size_t i = 0; i < s->ooms.nattempts; i++) {
        const struct snap_attempt *a = &s->ooms.attempts[i];
        bool recovered = a->outcome && strcmp(a->outcome, "recovered") == 0;
        const char *name = recovered ? "recovered"
                           : a->attempt <= 1 ? "out of memory" : "retry failed";
        timeline_event_head(&w, name, NULL, "i", pid, 0, a->t_ns);
        json_out_key_string(&w, "s", "g");
        json_out_key(&w, "args");
        json_out_begin_object(&w);
        json_out_key_i64(&w, "device", a->device);
        json_out_key_u64(&w, "requested_bytes", a->requested_bytes);
        json_out_key_u64(&w, "chain", a->chain);
        json_out_key_u64(&w, "attempt", a->attempt);
        json_out_end_object(&w);
        json_out_end_object(&w);
    }
    json_out_end_array(&w);
    json_out_key_string(&w, "displayTimeUnit", "ms");
    json_out_key(&w, "otherData");
    json_out_begin_object(&w);
    json_out_key_string(&w, "source", "cumemtrace");
    json_out_key_string(&w, "file", s->file);
    json_out_key_u64(&w, "events_recorded", s->events.recorded);
    json_out_key_u64(&w, "events_kept", s->events.n);
    json_out_key_u64(&w, "stride", s->events.stride);
    json_out_key(&w, "by_kind_tracks");
    json_out_string(&w, by_kind ? "exact" : "omitted: the event log was thinned");
    json_out_key(&w, "site_tracks");
    json_out_string(&w, !by_kind ? "omitted: the event log was thinned"
                        : sites ? "exact" : "omitted: --sites 0");
    if (tensor_tracks > 0) {
        json_out_key(&w, "tensor_tracks");
        json_out_string(&w, "PyTorch's tensors by line at the readings the file holds (the "
                        "peak's, the failure's, the dump's, and the PyTorch layer's "
                        "between dumps): exact at each sample, held between them");
    }
    json_out_end_object(&w);
    json_out_end_object(&w);
    json_out_finish(&w);
    return 0;
}

static const char usage[] =
    "usage: cumemtrace timeline [--ascii] [--format text|chrome] [--chrome OUT]\n"
    "                           [--sites N] FILE\n"
    "\n"
    "Shows device memory over time.  By default a sparkline per device in the\n"
    "terminal (^ marks the peak, X an OOM).  --format chrome prints, and\n"
    "--chrome OUT writes, Chrome trace-event JSON that opens in Perfetto\n"
    "(ui.perfetto.dev) or chrome://tracing: a counter track per device and\n"
    "kind, a counter per call site (the top N at each device's peak, and\n"
    "other), and instant events for the peak, each out-of-memory failure,\n"
    "retry and recovery.\n"
    "\n"
    "  --ascii          plain ASCII sparkline instead of block characters\n"
    "  --format F       text (default) or chrome\n"
    "  --chrome OUT     write the Chrome trace to OUT\n"
    "  --sites N        call-site counters per device in the trace (default 8,\n"
    "                   0 for none)\n"
    "\n"
    "example: cumemtrace timeline --chrome trace.json cumemtrace.python.4242.json\n";

int timeline_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"ascii", no_argument, NULL, 'a'},
        {"format", required_argument, NULL, 'f'},
        {"chrome", required_argument, NULL, 'c'},
        {"sites", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool ascii = false, chrome = false;
    uint64_t sites = TIMELINE_SITES_DEFAULT;
    const char *out_path = NULL;
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'a': ascii = true; break;
        case 'f':
            if (strcmp(optarg, "chrome") == 0)
                chrome = true;
            else if (strcmp(optarg, "text") == 0)
                chrome = false;
            else
                return cli_usage("timeline", "--format wants text or chrome, not '%s'",
                                 optarg);
            break;
        case 'c': out_path = optarg; chrome = true; break;
        case 's':
            if (cli_parse_count(optarg, &sites) != 0 || sites > 1000)
                return cli_usage("timeline", "--sites wants a count from 0 to 1000, not '%s'",
                                 optarg);
            break;
        case 'h': fputs(usage, stdout); return cli_finish_stdout();
        case ':': return cli_usage("timeline", "%s needs a value", argv[optind - 1]);
        default: return cli_usage("timeline", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (argc - optind != 1)
        return cli_usage("timeline", "wants one snapshot file");
    struct cli_inputs in;
    if (cli_load(&in, argv + optind, 1) != 0)
        return CLI_EXIT_ERROR;
    out_init(stdout, false);
    int rc = 0;
    if (!chrome) {
        rc = timeline_text(stdout, in.snaps[0], ascii);
    } else if (out_path == NULL) {
        rc = timeline_chrome(stdout, in.snaps[0], (unsigned)sites);
    } else {
        struct outfile of;
        struct cli_error err = {0, ""};
        if (outfile_open(&of, "timeline", out_path, true, &err) != 0) {
            errors_print(&err);
            cli_inputs_free(&in);
            return CLI_EXIT_ERROR;
        }
        rc = timeline_chrome(of.f, in.snaps[0], (unsigned)sites);
        if (rc != 0) {
            outfile_abort(&of);
            errors_set(&err, CLI_EWRITE, "timeline: cannot write '%s': out of memory",
                       out_path);
        }
        if (rc != 0 || outfile_commit(&of, "timeline", &err) != 0) {
            errors_print(&err);
            cli_inputs_free(&in);
            return CLI_EXIT_ERROR;
        }
        errors_line("cumemtrace: ", "wrote %s (open it in ui.perfetto.dev)", out_path);
    }
    cli_inputs_free(&in);
    if (rc != 0)
        return CLI_EXIT_ERROR;
    return cli_finish_stdout() ? CLI_EXIT_ERROR : CLI_EXIT_OK;
}
