/* fuzz_snapshot.c - libFuzzer target for the snapshot reader and the views.
 *
 * Input: any bytes.  The reader must either load them or return one error
 * (never crash, leak, read out of bounds or loop); whatever loads is then
 * rendered by every view into /dev/null, so a hostile but well-formed
 * snapshot (huge counts, dangling ids the reader missed, odd orders) is
 * exercised too.  Build and run: `make fuzz FUZZ_SECONDS=60` (tests/cli.mk),
 * seeded with tests/golden/inputs/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "out.h"
#include "report.h"
#include "snapshot_read.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *sink;
    if (sink == NULL)
        sink = fopen("/dev/null", "w");
    /* The reader needs a writable copy with a NUL after the last byte. */
    char *buf = malloc(size + 1);
    if (buf == NULL)
        return 0;
    if (size > 0)
        memcpy(buf, data, size);
    buf[size] = '\0';
    struct snapctx ctx;
    snapshot_ctx_init(&ctx);
    struct snapshot s;
    struct cli_error err;
    if (snapshot_read_mem(&ctx, "fuzz.json", buf, size, &s, &err) == 0) {
        struct snapshot *one[2] = {&s, &s};
        out_opts.exact = (size & 1) != 0;
        report_text(sink, one, 1, 5);
        report_text(sink, one, 2, 5);
        report_json(sink, one, 1, 0);
        snapshot_free(&s);
    } else if (strchr(err.msg, '\n') != NULL) {
        abort(); /* every error is one line */
    }
    snapshot_ctx_free(&ctx);
    free(buf);
    return 0;
}
