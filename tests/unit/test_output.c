/* test_output.c - snapshot file names and their safe publication
 * (output.c): the pattern's expansion and the reason suffix, a name too
 * long refused, a temporary file published without clobbering an existing
 * file or following a symlink, and only our own stale temporaries removed. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "log.h"
#include "output.h"

/* ---- what output.c links against ---- */

struct config config = {.output = CONFIG_DEFAULT_OUTPUT};
enum log_level log_threshold = LOG_ERROR;

void log_msg(enum log_level level, const char *fmt, ...)
{
    (void)level;
    (void)fmt;
}

const char *log_abbrev(const char *s, char *buf, size_t n)
{
    snprintf(buf, n, "%s", s);
    return buf;
}

/* ---- helpers ---- */

static char dir[256];

static int fresh_dir(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/test_output.XXXXXX");
    assert_non_null(mkdtemp(dir));
    return 0;
}

static int remove_dir(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void read_file(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t got = fread(buf, 1, n - 1, f);
    buf[got] = '\0';
    fclose(f);
}

/* ---- names ---- */

static void patterns_expand_and_reasons_go_before_json(void **state)
{
    (void)state;
    snprintf(output_process.exe, sizeof output_process.exe, "train");
    snprintf(output_process.host, sizeof output_process.host, "node7");
    output_process.rank = -1;
    char out[512], want[512];
    assert_int_equal(output_expand(CONFIG_DEFAULT_OUTPUT, "exit", 0, out, sizeof out), 0);
    snprintf(want, sizeof want, "cumemtrace.train.%d.json", (int)getpid());
    assert_string_equal(out, want);
    assert_int_equal(output_expand(CONFIG_DEFAULT_OUTPUT, "oom", 2, out, sizeof out), 0);
    snprintf(want, sizeof want, "cumemtrace.train.%d.oom.2.json", (int)getpid());
    assert_string_equal(out, want);
    output_process.rank = 3; /* the default name carries the rank */
    assert_int_equal(output_expand(CONFIG_DEFAULT_OUTPUT, "exit", 0, out, sizeof out), 0);
    snprintf(want, sizeof want, "cumemtrace.train.%d.3.json", (int)getpid());
    assert_string_equal(out, want);
    assert_int_equal(output_expand("/x/%h-%r-%%-%q.snap", "api", 1, out, sizeof out), 0);
    assert_string_equal(out, "/x/node7-3-%-%q.snap.api.1"); /* unknown %q kept */
    output_process.rank = -1;
    assert_int_equal(output_expand("%r.json", "exit", 0, out, sizeof out), 0);
    assert_string_equal(out, "norank.json");
}

static void a_directory_gets_the_default_name(void **state)
{
    (void)state;
    output_process.rank = -1;
    char out[512], want[600];
    assert_int_equal(output_expand(dir, "exit", 0, out, sizeof out), 0);
    snprintf(want, sizeof want, "%s/cumemtrace.train.%d.json", dir, (int)getpid());
    assert_string_equal(out, want);
}

static void a_name_that_does_not_fit_is_refused(void **state)
{
    (void)state;
    char out[16];
    assert_int_equal(output_expand("a-rather-long-name.json", "exit", 0, out, sizeof out), -1);
    assert_int_equal(output_expand("short.json", "periodic", 12345, out, sizeof out), -1);
}

/* ---- publication ---- */

static void commit_never_clobbers_a_file_or_follows_a_link(void **state)
{
    (void)state;
    char final[512], tmp[600], actual[600], buf[64];
    snprintf(final, sizeof final, "%s/snap.json", dir);
    write_file(final, "theirs");
    int fd = output_open_temp(final, tmp, sizeof tmp);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "ours", 4), 4);
    assert_int_equal(output_commit(tmp, final, false, actual, sizeof actual), 0);
    close(fd);
    char want[600];
    snprintf(want, sizeof want, "%s.1", final);
    assert_string_equal(actual, want); /* a free name beside it */
    read_file(final, buf, sizeof buf);
    assert_string_equal(buf, "theirs");
    read_file(actual, buf, sizeof buf);
    assert_string_equal(buf, "ours");
    assert_int_equal(access(tmp, F_OK), -1);

    /* a symlink at the name is not followed, nor replaced */
    char link_path[512], target[512];
    snprintf(link_path, sizeof link_path, "%s/link.json", dir);
    snprintf(target, sizeof target, "%s/target", dir);
    write_file(target, "kept");
    assert_int_equal(symlink(target, link_path), 0);
    fd = output_open_temp(link_path, tmp, sizeof tmp);
    assert_true(fd >= 0);
    assert_int_equal(output_commit(tmp, link_path, false, actual, sizeof actual), 0);
    close(fd);
    assert_string_not_equal(actual, link_path);
    read_file(target, buf, sizeof buf);
    assert_string_equal(buf, "kept");
    struct stat st;
    assert_int_equal(lstat(link_path, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
}

static void only_our_stale_temporaries_are_removed(void **state)
{
    (void)state;
    char final[512], tmp[600], other[600];
    snprintf(final, sizeof final, "%s/gone.json", dir);
    int fd = output_open_temp(final, tmp, sizeof tmp);
    assert_true(fd >= 0);
    output_clean_stale(dir); /* still locked by a live writer: kept */
    assert_int_equal(access(tmp, F_OK), 0);
    close(fd); /* the writer "died": its lock is gone */
    snprintf(other, sizeof other, "%s/notes.txt", dir);
    write_file(other, "not ours");
    output_clean_stale(dir);
    assert_int_equal(access(tmp, F_OK), -1);
    assert_int_equal(access(other, F_OK), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(patterns_expand_and_reasons_go_before_json),
        cmocka_unit_test_setup_teardown(a_directory_gets_the_default_name, fresh_dir,
                                        remove_dir),
        cmocka_unit_test(a_name_that_does_not_fit_is_refused),
        cmocka_unit_test_setup_teardown(commit_never_clobbers_a_file_or_follows_a_link,
                                        fresh_dir, remove_dir),
        cmocka_unit_test_setup_teardown(only_our_stale_temporaries_are_removed, fresh_dir,
                                        remove_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
