/* config.c - CUMEMTRACE_* environment variables.  Read once, with
 * secure_getenv so a setuid host cannot be steered by its caller. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "event_log.h"
#include "log.h"
#include "record.h"
#include "settings.h"
#include "units.h"

struct config config = {
    .depth = CONFIG_DEFAULT_DEPTH,
    .event_cap = CONFIG_DEFAULT_EVENTS,
    .max_oom_dumps = CONFIG_DEFAULT_MAX_OOM_DUMPS,
    .output = CONFIG_DEFAULT_OUTPUT,
    .python = true,
    .native = true,
    .term_signals = true,
    .flush_ms = CONFIG_DEFAULT_FLUSH_MS,
    .stream_max = CONFIG_DEFAULT_STREAM_MAX,
    .interval_keep = CONFIG_DEFAULT_INTERVAL_KEEP,
};

/* Warnings wait for the first CUDA call (config_report_warnings): a shell
 * wrapper or DataLoader worker that never touches CUDA says nothing. */
#define PENDING_MAX 24  /* more than every variable can be wrong at once */
static char pending[PENDING_MAX][400];
static int npending;

static void config_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void config_warn(const char *fmt, ...)
{
    if (!log_enabled(LOG_WARN) || npending == PENDING_MAX)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pending[npending++], sizeof pending[0], fmt, ap);
    va_end(ap);
}

/* A setting's value quoted in a warning: long ones abbreviated, so that the
 * line keeps its advice (a log line holds 1 KiB). */
#define Q(v) log_abbrev((v), (char[72]){0}, 72)

void config_report_warnings(void)
{
    for (int i = 0; i < npending; i++)
        log_msg(LOG_WARN, "%s", pending[i]);
    npending = 0;
}

static bool parse_uint(const char *s, unsigned long long max,
                       unsigned long long *out)
{
    char *end;
    if (!isdigit((unsigned char)*s))
        return false;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > max)
        return false;
    *out = v;
    return true;
}

static void load_log(void)
{
    const char *v = secure_getenv("CUMEMTRACE_LOG");
    static const char *const names[] = {"error", "warn", "info", "debug"};
    if (v == NULL || *v == '\0')
        return;
    for (int i = 0; i < 4; i++)
        if (strcasecmp(v, names[i]) == 0) {
            log_threshold = (enum log_level)i;
            return;
        }
    if (strcasecmp(v, "warning") == 0)
        return;
    config_warn("ignoring CUMEMTRACE_LOG='%s': expected error, warn, "
                "info or debug; using warn", Q(v));
}

static void load_uint(const char *name, unsigned long long min,
                      unsigned long long max, unsigned long long *out)
{
    const char *v = secure_getenv(name);
    unsigned long long x;
    if (v == NULL || *v == '\0')
        return;
    if (parse_uint(v, max, &x) && x >= min) {
        *out = x;
        return;
    }
    config_warn("ignoring %s='%s': expected an integer from %llu to %llu; "
                "using %llu", name, Q(v), min, max, *out);
}

/* load_uint for a setting kept as an unsigned. */
static void load_unsigned(const char *name, unsigned min, unsigned max, unsigned *out)
{
    unsigned long long x = *out;
    load_uint(name, min, max, &x);
    *out = (unsigned)x;
}

/* A 1/0 (true/false, yes/no) switch; `what_default` ends the warning. */
static void load_bool(const char *name, bool *out, const char *what_default)
{
    const char *v = secure_getenv(name);
    if (v == NULL || *v == '\0')
        return;
    if (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 ||
        strcasecmp(v, "yes") == 0)
        *out = true;
    else if (strcmp(v, "0") == 0 || strcasecmp(v, "false") == 0 ||
             strcasecmp(v, "no") == 0)
        *out = false;
    else
        config_warn("ignoring %s='%s': expected 1 or 0; %s", name, Q(v),
            what_default);
}

/* A positive size with its unit; otherwise one warning that says what to
 * write instead and what happens meanwhile (`fallback`). */
static bool load_size(const char *name, const char *v, uint64_t *out,
                      const char *fallback)
{
    uint64_t bytes;
    int rc = units_parse_size(v, &bytes);
    if (rc == 0 && bytes > 0) {
        *out = bytes;
        return true;
    }
    if (rc == UNITS_ENOUNIT)
        config_warn("ignoring %s='%s': a size needs a unit, e.g. %sGiB, %sMiB "
                    "or %sB (docs/units.md); %s", name, Q(v), Q(v), Q(v), Q(v),
                    fallback);
    else
        config_warn("ignoring %s='%s': expected a size like 24GiB "
                    "(docs/units.md); %s", name, Q(v), fallback);
    return false;
}

/* A duration: a number with ms, s, m or h (10m, 90s, 1h). */
static void load_duration(const char *name, uint64_t *out_ms, const char *fallback)
{
    const char *v = secure_getenv(name);
    if (v == NULL || *v == '\0')
        return;
    char *end;
    errno = 0;
    unsigned long long n = isdigit((unsigned char)*v) ? strtoull(v, &end, 10) : 0;
    static const struct { const char *unit; uint64_t ms; } units[] = {
        {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
    if (n > 0 && errno == 0 && n < (1ull << 40))
        for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
            if (strcmp(end, units[i].unit) == 0) {
                *out_ms = n * units[i].ms;
                return;
            }
    config_warn("ignoring %s='%s': expected a duration like 10m, 90s, 500ms "
                "or 1h; %s", name, Q(v), fallback);
}

static void load_durability(void)
{
    load_bool("CUMEMTRACE_TERM_SIGNALS", &config.term_signals,
              "snapshots on termination signals stay on");
    load_unsigned("CUMEMTRACE_FLUSH_MS", 10, 3600000, &config.flush_ms);
    const char *v = secure_getenv("CUMEMTRACE_STREAM");
    if (v != NULL && *v != '\0') {
        if (strcasecmp(v, "auto") == 0)
            config.stream = CONFIG_STREAM_AUTO;
        else if (strcasecmp(v, "keep") == 0)
            config.stream = CONFIG_STREAM_KEEP;
        else if (strcasecmp(v, "off") == 0 || strcmp(v, "0") == 0)
            config.stream = CONFIG_STREAM_OFF;
        else
            config_warn("ignoring CUMEMTRACE_STREAM='%s': expected auto, keep "
                        "or off; using auto", Q(v));
    }
    v = secure_getenv("CUMEMTRACE_STREAM_MAX");
    uint64_t bytes;
    if (v != NULL && *v != '\0' &&
        load_size("CUMEMTRACE_STREAM_MAX", v, &bytes, "using 256MiB"))
        config.stream_max = bytes < (64u << 10) ? (64u << 10) : bytes;
    load_duration("CUMEMTRACE_INTERVAL", &config.interval_ms, "no periodic snapshots");
    load_unsigned("CUMEMTRACE_INTERVAL_KEEP", 1, 1000000, &config.interval_keep);
}

static void load_limits(void)
{
    const char *v = secure_getenv("CUMEMTRACE_LIMIT");
    uint64_t bytes;
    if (v != NULL && *v != '\0')
        load_size("CUMEMTRACE_LIMIT", v, &config.limit_all,
                  "running without a limit");
    for (int d = 0; d < RECORD_MAX_DEVICES; d++)
        record_set_limit(d, config.limit_all);
    /* Per-device overrides: CUMEMTRACE_LIMIT_<n>. */
    extern char **environ;
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "CUMEMTRACE_LIMIT_", 17) != 0)
            continue;
        char name[64];
        const char *eq = strchr(*e, '=');
        if (eq == NULL || (size_t)(eq - *e) >= sizeof name)
            continue;
        memcpy(name, *e, (size_t)(eq - *e));
        name[eq - *e] = '\0';
        unsigned long long dev;
        const char *val = secure_getenv(name);
        if (val == NULL)
            continue;
        if (!parse_uint(name + 17, RECORD_MAX_DEVICES - 1, &dev)) {
            config_warn("ignoring %s: the suffix must be a device ordinal "
                        "from 0 to %d", name, RECORD_MAX_DEVICES - 1);
            continue;
        }
        if (load_size(name, val, &bytes, config.limit_all
                                             ? "that device keeps CUMEMTRACE_LIMIT"
                                             : "no limit on that device"))
            record_set_limit((int)dev, bytes);
    }
}

void config_load(void)
{
    load_log();
    load_bool("CUMEMTRACE_DISABLE", &config.disabled, "tracing stays on");
    load_unsigned("CUMEMTRACE_DEPTH", SETTINGS_DEPTH_MIN, SETTINGS_DEPTH_MAX, &config.depth);
    unsigned long long x = config.event_cap;
    load_uint("CUMEMTRACE_EVENTS", 0, CONFIG_MAX_EVENTS, &x);
    if (x > event_log_machine_cap()) {
        LOG(LOG_WARN, "CUMEMTRACE_EVENTS=%llu needs %llu MiB, more than an "
                      "eighth of this machine's memory: keeping at most %zu "
                      "events (set CUMEMTRACE_EVENTS=%zu or less to silence this)",
            x, x * sizeof(struct record_event) >> 20, event_log_machine_cap(),
            event_log_machine_cap());
        x = event_log_machine_cap();
    }
    config.event_cap = (size_t)x;
    load_unsigned("CUMEMTRACE_MAX_OOM_DUMPS", 0, 1000000, &config.max_oom_dumps);
    const char *v = secure_getenv("CUMEMTRACE_OOM_DUMPS");
    if (v != NULL && *v != '\0') {
        if (strcmp(v, "all") == 0)
            config.oom_dumps_all = true;
        else if (strcmp(v, "failed") != 0)
            config_warn("ignoring CUMEMTRACE_OOM_DUMPS='%s': expected 'failed' or 'all'; "
                        "post-mortems of recovered retry chains are removed", Q(v));
    }
    load_bool("CUMEMTRACE_PYTHON", &config.python,
              "Python frames stay on");
    load_bool("CUMEMTRACE_NATIVE", &config.native,
              "native frames stay on");
    load_duration("CUMEMTRACE_TEMPORARY", &config.temporary_ms,
                  "temporary frees are those with no allocation in between");

    v = secure_getenv("CUMEMTRACE_OUTPUT");
    if (v != NULL && *v != '\0') {
        if (strlen(v) < sizeof config.output)
            strcpy(config.output, v);
        else
            config_warn("ignoring CUMEMTRACE_OUTPUT: longer than %zu bytes; "
                        "writing to the current directory",
                sizeof config.output - 1);
    }
    v = secure_getenv("CUMEMTRACE_MANIFEST");
    if (v != NULL && strlen(v) < sizeof config.manifest)
        strcpy(config.manifest, v);
    v = secure_getenv("CUMEMTRACE_MANIFEST_KEY");
    if (v != NULL && strlen(v) < sizeof config.manifest_key)
        strcpy(config.manifest_key, v);
    v = secure_getenv("CUMEMTRACE_SIGNAL");
    if (v != NULL && *v != '\0') {
        const char *name = strncasecmp(v, "SIG", 3) == 0 ? v + 3 : v;
        if (strcasecmp(name, "USR1") == 0)
            config.dump_signal = SIGUSR1;
        else if (strcasecmp(name, "USR2") == 0)
            config.dump_signal = SIGUSR2;
        else
            config_warn("ignoring CUMEMTRACE_SIGNAL='%s': expected USR1 or "
                        "USR2; no signal handler installed", Q(v));
    }
    load_limits();
    load_durability();
}
