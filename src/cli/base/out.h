/* out.h - how every view prints: sizes, times, colour, width.
 *
 * One place decides the look so that report, diff and timeline agree:
 * binary units (units_format_bytes) or exact byte counts (--bytes), "?" for
 * what the snapshot did not know, lines of at most OUT_WIDTH columns, and
 * colour only when stdout is a terminal and NO_COLOR is unset or empty.
 */
#ifndef CUMEMTRACE_CLI_OUT_H
#define CUMEMTRACE_CLI_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define OUT_WIDTH_DEFAULT 80 /* when stdout is not a terminal and no --width */
#define OUT_WIDTH_MIN 40
#define OUT_WIDTH_FULL ((size_t)1 << 20) /* --full: nothing is cut */
/* The width every view is laid out for (out_init, out_set_width). */
#define OUT_WIDTH (out_opts.width)

/* Buffers for the formatters: big enough for any 64-bit value with unit. */
#define OUT_NUM 40

struct out_options {
    bool color; /* emit ANSI colour sequences */
    bool exact; /* sizes as exact byte counts ("1610612736 B") */
    size_t width; /* columns: --width, else the terminal's, else 80 */
    bool width_given; /* --width or --full: out_init keeps it */
};

/* --width N (N >= OUT_WIDTH_MIN) or --full (n = OUT_WIDTH_FULL), before
 * out_init.  Returns 0, or -1 for a width too small to lay out. */
int out_set_width(size_t n);

/* "< a < b < c" cut to `width` columns at frame boundaries only: whole
 * trailing frames give way to "< ..." (the first one is cut in its middle
 * only when it alone is too wide).  Returns s or buf. */
const char *out_fit_chain(const char *s, size_t width, char *buf, size_t n);

/* The process-wide settings (set once by main; tests set them directly). */
extern struct out_options out_opts;

/* Decides colour for stream f: a terminal and NO_COLOR unset or empty. */
void out_init(FILE *f, bool exact);

enum out_color { OUT_RESET, OUT_BOLD, OUT_RED, OUT_GREEN, OUT_YELLOW, OUT_DIM };

/* The escape sequence, or "" when colour is off. */
const char *out_color(enum out_color c);

/* "1.50 GiB" (or "1610612736 B" when exact); "?" for SNAP_UNKNOWN. */
const char *out_bytes(uint64_t bytes, char buf[OUT_NUM]);

/* "+512 MiB", "-1.00 KiB", "0 B" (exact: "+536870912 B"). */
const char *out_sbytes(int64_t bytes, char buf[OUT_NUM]);

/* Signed difference b - a of two sizes, saturated to int64. */
int64_t out_delta(uint64_t a, uint64_t b);

/* num/den as "58.8%" ("-" when den is 0). */
const char *out_pct(uint64_t num, uint64_t den, char buf[OUT_NUM]);

/* "s" unless exactly one (an unknown count reads as more than one). */
static inline const char *out_plural(uint64_t n)
{
    return n == 1 ? "" : "s";
}

/* A signed change relative to base: "+6.25%", "new" when base is 0. */
const char *out_spct(int64_t change, uint64_t base, char buf[OUT_NUM]);

/* Nanoseconds as "850.2 ms", "12.35 s", "3m05s", "2h04m"; "?" unknown. */
const char *out_duration(int64_t ns, char buf[OUT_NUM]);

/* Display width of UTF-8 text (code points; no wide-character tables). */
size_t out_width(const char *s);

/* s shortened to at most width columns by cutting its middle ("..."), at
 * character boundaries.  Returns s itself when it fits, else buf. */
const char *out_fit(const char *s, size_t width, char *buf, size_t n);

/* Prints text word-wrapped to OUT_WIDTH: the first line after `first`, the
 * others after `rest` (both prefixes count towards the width). */
void out_wrap(FILE *f, const char *first, const char *rest, const char *text);

/* A table of text cells, printed with columns sized to their content.  The
 * last column takes what is left of OUT_WIDTH and is cut to fit. */
#define OUT_TABLE_MAX_COLS 8

struct out_table {
    int ncols;
    char align[OUT_TABLE_MAX_COLS]; /* 'l' or 'r' */
    char **cells;               /* row-major; a note row has cells[0] only */
    unsigned char *is_note;     /* per row */
    size_t nrows, cap;
    int indent;                 /* spaces before the first column */
    bool failed;                /* out of memory while filling */
};

/* Starts a table; aligns is a string of 'l'/'r', one per column. */
void out_table_init(struct out_table *t, const char *aligns, int indent);

/* Adds a row of ncols cells (copied). */
void out_table_row(struct out_table *t, ...);

/* Adds a line of text under the previous row, starting at the last column
 * (or further left when that keeps it whole). */
void out_table_note(struct out_table *t, const char *text);

/* Prints and frees the table; returns -1 if it ran out of memory. */
int out_table_print(struct out_table *t, FILE *f);

/* Frees the table without printing it. */
void out_table_free(struct out_table *t);

#endif
