/* out.c - see out.h. */
#include "out.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "snapshot.h"
#include "units.h"

struct out_options out_opts;

int out_set_width(size_t n)
{
    if (n < OUT_WIDTH_MIN)
        return -1;
    out_opts.width = n;
    out_opts.width_given = true;
    return 0;
}

/* A terminal's width: COLUMNS (what the shell says), else the tty's own;
 * 0 when f is not a terminal.  Piped output keeps 80 columns so that what a
 * script or a test reads does not depend on who ran it. */
static size_t terminal_width(FILE *f)
{
    if (!isatty(fileno(f)))
        return 0;
    const char *c = getenv("COLUMNS");
    char *end;
    unsigned long v = c != NULL ? strtoul(c, &end, 10) : 0;
    if (c != NULL && *c != '\0' && *end == '\0' && v >= OUT_WIDTH_MIN && v <= 10000)
        return (size_t)v;
    struct winsize ws;
    if (ioctl(fileno(f), TIOCGWINSZ, &ws) == 0 && ws.ws_col >= OUT_WIDTH_MIN)
        return ws.ws_col;
    return 0;
}

void out_init(FILE *f, bool exact)
{
    const char *no = getenv("NO_COLOR");
    out_opts.color = isatty(fileno(f)) && (no == NULL || no[0] == '\0');
    out_opts.exact = exact;
    if (!out_opts.width_given) {
        size_t t = terminal_width(f);
        out_opts.width = t ? t : OUT_WIDTH_DEFAULT;
    }
}

const char *out_fit_chain(const char *s, size_t width, char *buf, size_t n)
{
    if (out_width(s) <= width)
        return s;
    /* Frame starts: every "< " at the start or after a blank. */
    static const char more[] = " < ...";
    size_t keep = 0; /* bytes of whole frames that fit with `more` after */
    for (size_t i = 1; s[i] != '\0'; i++) {
        if (s[i] == '<' && s[i + 1] == ' ' && s[i - 1] == ' ') {
            char tmp[2048];
            size_t len = i - 1 < sizeof tmp - 1 ? i - 1 : sizeof tmp - 1;
            memcpy(tmp, s, len);
            tmp[len] = '\0';
            if (out_width(tmp) + sizeof more - 1 > width)
                break;
            keep = len;
        }
    }
    if (keep == 0 || keep + sizeof more > n) {
        /* The first frame alone is too wide: cut inside it, no other
         * frame joins it. */
        char first[2048];
        const char *sep = strstr(s + 1, " < ");
        size_t len = sep ? (size_t)(sep - s) : strlen(s);
        if (len >= sizeof first)
            len = sizeof first - 1;
        memcpy(first, s, len);
        first[len] = '\0';
        return out_fit(first, width, buf, n) == first ? strcpy(buf, first) : buf;
    }
    memcpy(buf, s, keep);
    memcpy(buf + keep, more, sizeof more);
    return buf;
}

const char *out_color(enum out_color c)
{
    static const char *const seq[] = {
        "\033[0m", "\033[1m", "\033[31m", "\033[32m", "\033[33m", "\033[2m",
    };
    return out_opts.color ? seq[c] : "";
}

const char *out_bytes(uint64_t bytes, char buf[OUT_NUM])
{
    if (bytes == SNAP_UNKNOWN)
        snprintf(buf, OUT_NUM, "?");
    else if (out_opts.exact)
        snprintf(buf, OUT_NUM, "%" PRIu64 " B", bytes);
    else
        units_format_bytes(bytes, buf, OUT_NUM);
    return buf;
}

const char *out_sbytes(int64_t bytes, char buf[OUT_NUM])
{
    uint64_t mag = bytes < 0 ? (uint64_t)0 - (uint64_t)bytes : (uint64_t)bytes;
    const char *sign = bytes < 0 ? "-" : bytes > 0 ? "+" : "";
    char num[32];
    if (out_opts.exact)
        snprintf(num, sizeof num, "%" PRIu64 " B", mag);
    else
        units_format_bytes(mag, num, sizeof num);
    snprintf(buf, OUT_NUM, "%s%s", sign, num);
    return buf;
}

int64_t out_delta(uint64_t a, uint64_t b)
{
    if (b >= a)
        return b - a > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)(b - a);
    return a - b > (uint64_t)INT64_MAX ? -INT64_MAX : -(int64_t)(a - b);
}

const char *out_pct(uint64_t num, uint64_t den, char buf[OUT_NUM])
{
    if (den == 0 || den == SNAP_UNKNOWN || num == SNAP_UNKNOWN)
        snprintf(buf, OUT_NUM, "-");
    else
        snprintf(buf, OUT_NUM, "%.1f%%", 100.0 * (double)num / (double)den);
    return buf;
}

const char *out_spct(int64_t change, uint64_t base, char buf[OUT_NUM])
{
    if (base == 0 || base == SNAP_UNKNOWN)
        snprintf(buf, OUT_NUM, change == 0 ? "0%%" : "new");
    else
        snprintf(buf, OUT_NUM, "%+.2f%%", 100.0 * (double)change / (double)base);
    return buf;
}

const char *out_duration(int64_t ns, char buf[OUT_NUM])
{
    if (ns == SNAP_UNKNOWN_I64) {
        snprintf(buf, OUT_NUM, "?");
        return buf;
    }
    const char *sign = ns < 0 ? "-" : "";
    uint64_t a = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    if (a < 1000000000ULL) {
        snprintf(buf, OUT_NUM, "%s%.1f ms", sign, (double)a / 1e6);
    } else if (a < 60000000000ULL) {
        snprintf(buf, OUT_NUM, "%s%.2f s", sign, (double)a / 1e9);
    } else {
        uint64_t s = a / 1000000000ULL;
        if (s < 3600)
            snprintf(buf, OUT_NUM, "%s%" PRIu64 "m%02" PRIu64 "s", sign, s / 60, s % 60);
        else
            snprintf(buf, OUT_NUM, "%s%" PRIu64 "h%02" PRIu64 "m", sign, s / 3600,
                     (s / 60) % 60);
    }
    return buf;
}

size_t out_width(const char *s)
{
    size_t w = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xc0) != 0x80)
            w++;
    return w;
}

/* Byte offset just after the first `cols` characters of s. */
static size_t prefix_bytes(const char *s, size_t cols)
{
    size_t i = 0, w = 0;
    while (s[i]) {
        if (((unsigned char)s[i] & 0xc0) != 0x80) {
            if (w == cols)
                break;
            w++;
        }
        i++;
    }
    return i;
}

const char *out_fit(const char *s, size_t width, char *buf, size_t n)
{
    size_t w = out_width(s);
    if (w <= width)
        return s;
    if (width < 5) {
        size_t b = prefix_bytes(s, width);
        if (b >= n)
            b = n - 1;
        memcpy(buf, s, b);
        buf[b] = '\0';
        return buf;
    }
    /* Keep more of the end: a call site's function name and line are
     * there, the start is a module or directory. */
    size_t head = (width - 3) * 2 / 5;
    size_t tail = width - 3 - head;
    size_t hb = prefix_bytes(s, head);
    size_t tb = prefix_bytes(s, w - tail);
    size_t tlen = strlen(s + tb);
    if (hb + 3 + tlen + 1 > n)
        return s;
    memcpy(buf, s, hb);
    memcpy(buf + hb, "...", 3);
    memcpy(buf + hb + 3, s + tb, tlen + 1);
    return buf;
}

/* A blank between a number and its unit ("16.0 MiB") must not become a
 * line break. */
static bool glued(const char *p, size_t i)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "ms", "s"};
    /* Nor the blank before a dash that starts a clause ("x - try"). */
    if (p[i + 1] == '-' && p[i + 2] == ' ')
        return true;
    if (i == 0 || p[i - 1] < '0' || p[i - 1] > '9')
        return false;
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
        size_t n = strlen(units[u]);
        char after = p[i + 1 + n];
        if (strncmp(p + i + 1, units[u], n) == 0 &&
            !((after >= 'a' && after <= 'z') || (after >= 'A' && after <= 'Z')))
            return true;
    }
    return false;
}

void out_wrap(FILE *f, const char *first, const char *rest, const char *text)
{
    const char *prefix = first;
    const char *p = text;
    while (*p) {
        size_t avail = OUT_WIDTH - out_width(prefix);
        size_t len = strlen(p);
        size_t cut;
        if (out_width(p) <= avail) {
            cut = len;
        } else {
            size_t limit = prefix_bytes(p, avail);
            cut = limit;
            while (cut > 0 && (p[cut] != ' ' || glued(p, cut)))
                cut--;
            if (cut == 0) /* one word longer than the line */
                cut = limit;
        }
        fprintf(f, "%s%.*s\n", prefix, (int)cut, p);
        p += cut;
        while (*p == ' ')
            p++;
        prefix = rest;
    }
}

/* ---- tables ---- */

void out_table_init(struct out_table *t, const char *aligns, int indent)
{
    memset(t, 0, sizeof *t);
    t->ncols = (int)strlen(aligns);
    if (t->ncols > OUT_TABLE_MAX_COLS)
        t->ncols = OUT_TABLE_MAX_COLS;
    memcpy(t->align, aligns, (size_t)t->ncols);
    t->indent = indent;
}

static char **new_row(struct out_table *t, bool note)
{
    if (t->failed)
        return NULL;
    if (t->nrows == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        char **cells = realloc(t->cells, cap * OUT_TABLE_MAX_COLS * sizeof *cells);
        if (cells == NULL) {
            t->failed = true;
            return NULL;
        }
        t->cells = cells;
        unsigned char *notes = realloc(t->is_note, cap);
        if (notes == NULL) {
            t->failed = true;
            return NULL;
        }
        t->is_note = notes;
        t->cap = cap;
    }
    char **row = &t->cells[t->nrows * OUT_TABLE_MAX_COLS];
    memset(row, 0, OUT_TABLE_MAX_COLS * sizeof *row);
    t->is_note[t->nrows++] = note;
    return row;
}

void out_table_row(struct out_table *t, ...)
{
    char **row = new_row(t, false);
    if (row == NULL)
        return;
    va_list ap;
    va_start(ap, t);
    for (int i = 0; i < t->ncols; i++) {
        const char *s = va_arg(ap, const char *);
        row[i] = strdup(s ? s : "");
        if (row[i] == NULL)
            t->failed = true;
    }
    va_end(ap);
}

void out_table_note(struct out_table *t, const char *text)
{
    char **row = new_row(t, true);
    if (row == NULL)
        return;
    row[0] = strdup(text);
    if (row[0] == NULL)
        t->failed = true;
}

void out_table_free(struct out_table *t)
{
    for (size_t r = 0; r < t->nrows; r++)
        for (int c = 0; c < OUT_TABLE_MAX_COLS; c++)
            free(t->cells[r * OUT_TABLE_MAX_COLS + c]);
    free(t->cells);
    free(t->is_note);
    memset(t, 0, sizeof *t);
}

int out_table_print(struct out_table *t, FILE *f)
{
    size_t width[OUT_TABLE_MAX_COLS] = {0};
    int last = t->ncols - 1;
    for (size_t r = 0; r < t->nrows && !t->failed; r++) {
        if (t->is_note[r])
            continue;
        for (int c = 0; c < t->ncols; c++) {
            size_t w = out_width(t->cells[r * OUT_TABLE_MAX_COLS + c]);
            if (w > width[c])
                width[c] = w;
        }
    }
    size_t used = (size_t)t->indent;
    for (int c = 0; c < last; c++)
        used += width[c] + 2;
    size_t room = used + 8 < OUT_WIDTH ? OUT_WIDTH - used : 8;
    if (width[last] > room)
        width[last] = room;
    char fit[1024];
    for (size_t r = 0; r < t->nrows && !t->failed; r++) {
        char **row = &t->cells[r * OUT_TABLE_MAX_COLS];
        if (t->is_note[r]) {
            /* Under the last column; moved left (down to indent + 4) when
             * that keeps it whole. */
            size_t w = out_width(row[0]), start = used;
            size_t min = (size_t)t->indent + 4;
            if (start + w > OUT_WIDTH)
                start = OUT_WIDTH - w > min && w < OUT_WIDTH ? OUT_WIDTH - w : min;
            if (start > used)
                start = used;
            fprintf(f, "%*s%s\n", (int)start, "",
                    row[0][0] == '<' ? out_fit_chain(row[0], OUT_WIDTH - start, fit, sizeof fit)
                                     : out_fit(row[0], OUT_WIDTH - start, fit, sizeof fit));
            continue;
        }
        fprintf(f, "%*s", t->indent, "");
        for (int c = 0; c < t->ncols; c++) {
            const char *s = c == last ? out_fit(row[c], room, fit, sizeof fit) : row[c];
            size_t pad = width[c] - out_width(s);
            if (c == last && t->align[c] == 'l') {
                fputs(s, f); /* no trailing blanks */
            } else if (t->align[c] == 'r') {
                fprintf(f, "%*s%s", (int)pad, "", s);
            } else {
                fprintf(f, "%s%*s", s, (int)pad, "");
            }
            if (c < last)
                fputs("  ", f);
        }
        fputc('\n', f);
    }
    int rc = t->failed ? -1 : 0;
    out_table_free(t);
    return rc;
}
