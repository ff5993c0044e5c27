/* test_config.c - the settings (config.c): defaults, every well-formed
 * value taken, a malformed one keeping its default with one warning that
 * names the variable and waits for config_report_warnings, and the limits
 * handed to the tracker per device. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "event_log.h"
#include "log.h"
#include "record.h"

/* ---- what config.c links against ---- */

enum log_level log_threshold = LOG_WARN;
static char logged[16][512];
static int nlogged;

void log_msg(enum log_level level, const char *fmt, ...)
{
    (void)level;
    if (nlogged == 16)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(logged[nlogged++], sizeof logged[0], fmt, ap);
    va_end(ap);
}

const char *log_abbrev(const char *s, char *buf, size_t n)
{
    snprintf(buf, n, "%s", s);
    return buf;
}

static size_t machine_cap = 1u << 20;
size_t event_log_machine_cap(void)
{
    return machine_cap;
}

static uint64_t limits[RECORD_MAX_DEVICES];
void record_set_limit(int device, uint64_t bytes)
{
    limits[device] = bytes;
}

/* ---- helpers ---- */

static struct config defaults;
static const char *const vars[] = {
    "CUMEMTRACE_DISABLE", "CUMEMTRACE_DEPTH", "CUMEMTRACE_EVENTS", "CUMEMTRACE_SIGNAL",
    "CUMEMTRACE_LIMIT", "CUMEMTRACE_LIMIT_3", "CUMEMTRACE_LIMIT_99", "CUMEMTRACE_OOM_DUMPS",
    "CUMEMTRACE_OUTPUT", "CUMEMTRACE_LOG", "CUMEMTRACE_PYTHON"};

static int fresh(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    config = defaults;
    memset(limits, 0xff, sizeof limits);
    nlogged = 0;
    config_report_warnings(); /* drops what an earlier test left */
    nlogged = 0;
    return 0;
}

static int logged_with(const char *what)
{
    int n = 0;
    for (int i = 0; i < nlogged; i++)
        n += strstr(logged[i], what) != NULL;
    return n;
}

/* ---- tests ---- */

static void nothing_set_keeps_the_defaults(void **state)
{
    (void)state;
    config_load();
    assert_false(config.disabled);
    assert_int_equal(config.depth, CONFIG_DEFAULT_DEPTH);
    assert_int_equal(config.event_cap, CONFIG_DEFAULT_EVENTS);
    assert_string_equal(config.output, CONFIG_DEFAULT_OUTPUT);
    assert_int_equal(config.dump_signal, 0);
    assert_true(config.python);
    for (int d = 0; d < RECORD_MAX_DEVICES; d++)
        assert_int_equal(limits[d], 0); /* every device told: no limit */
    config_report_warnings();
    assert_int_equal(nlogged, 0);
}

static void well_formed_values_are_taken(void **state)
{
    (void)state;
    setenv("CUMEMTRACE_DISABLE", "yes", 1);
    setenv("CUMEMTRACE_DEPTH", "8", 1);
    setenv("CUMEMTRACE_SIGNAL", "SIGUSR2", 1);
    setenv("CUMEMTRACE_LIMIT", "1GiB", 1);
    setenv("CUMEMTRACE_LIMIT_3", "512MiB", 1);
    setenv("CUMEMTRACE_OOM_DUMPS", "all", 1);
    setenv("CUMEMTRACE_OUTPUT", "/tmp/run.%p.json", 1);
    setenv("CUMEMTRACE_PYTHON", "0", 1);
    config_load();
    assert_true(config.disabled);
    assert_int_equal(config.depth, 8);
    assert_int_equal(config.dump_signal, SIGUSR2);
    assert_int_equal(config.limit_all, 1ull << 30);
    assert_int_equal(limits[0], 1ull << 30);
    assert_int_equal(limits[3], 512ull << 20);
    assert_true(config.oom_dumps_all);
    assert_string_equal(config.output, "/tmp/run.%p.json");
    assert_false(config.python);
    config_report_warnings();
    assert_int_equal(nlogged, 0);
}

static void malformed_values_keep_defaults_with_one_warning_each(void **state)
{
    (void)state;
    setenv("CUMEMTRACE_DISABLE", "maybe", 1);
    setenv("CUMEMTRACE_DEPTH", "deep", 1);
    setenv("CUMEMTRACE_SIGNAL", "HUP", 1);
    setenv("CUMEMTRACE_LIMIT_99", "1GiB", 1);
    setenv("CUMEMTRACE_OOM_DUMPS", "some", 1);
    config_load();
    assert_false(config.disabled);
    assert_int_equal(config.depth, CONFIG_DEFAULT_DEPTH);
    assert_int_equal(config.dump_signal, 0);
    assert_false(config.oom_dumps_all);
    for (int d = 0; d < RECORD_MAX_DEVICES; d++)
        assert_int_equal(limits[d], 0);
    assert_int_equal(nlogged, 0); /* kept until the first CUDA call */
    config_report_warnings();
    assert_int_equal(logged_with("CUMEMTRACE_DISABLE"), 1);
    assert_int_equal(logged_with("CUMEMTRACE_DEPTH"), 1);
    assert_int_equal(logged_with("CUMEMTRACE_SIGNAL"), 1);
    assert_int_equal(logged_with("CUMEMTRACE_LIMIT_99"), 1);
    assert_int_equal(logged_with("CUMEMTRACE_OOM_DUMPS"), 1);
    assert_int_equal(nlogged, 5);
    nlogged = 0;
    config_report_warnings(); /* once */
    assert_int_equal(nlogged, 0);
}

static void events_beyond_the_machine_are_capped(void **state)
{
    (void)state;
    setenv("CUMEMTRACE_EVENTS", "4194304", 1);
    config_load();
    assert_int_equal(config.event_cap, machine_cap);
    assert_int_equal(logged_with("CUMEMTRACE_EVENTS=4194304"), 1);
}

int main(void)
{
    defaults = config;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(nothing_set_keeps_the_defaults, fresh),
        cmocka_unit_test_setup(well_formed_values_are_taken, fresh),
        cmocka_unit_test_setup(malformed_values_keep_defaults_with_one_warning_each, fresh),
        cmocka_unit_test_setup(events_beyond_the_machine_are_capped, fresh),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
