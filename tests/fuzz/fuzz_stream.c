/* fuzz_stream.c - libFuzzer target for the stream reader (stream_read.c).
 *
 * Input: any bytes, read as a stream file.  The reader must recover a
 * document or return one error line (never crash, read out of bounds or
 * loop); a recovered document then goes through the snapshot reader and
 * the report, as `cumemtrace report STREAM` does.  Seeds: tests/fuzz/
 * stream_seeds/ (a real stream of a killed process, and cut copies).
 * Build and run: `make fuzz-stream FUZZ_SECONDS=60` (tests/cli.mk).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "out.h"
#include "report.h"
#include "snapshot_read.h"
#include "stream_read.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *sink;
    if (sink == NULL)
        sink = fopen("/dev/null", "w");
    char *doc;
    size_t len;
    struct stream_info info;
    struct cli_error err;
    if (stream_recover("fuzz.stream", (const char *)data, size, &doc, &len, &info,
                       &err) != 0) {
        if (strchr(err.msg, '\n') != NULL)
            abort(); /* every error is one line */
        return 0;
    }
    if (strlen(info.stopped) == 0 || info.stopped_at > size)
        abort();
    char why[400];
    stream_staleness(&info, why, sizeof why);
    struct snapctx ctx;
    snapshot_ctx_init(&ctx);
    struct snapshot s;
    if (snapshot_read_mem(&ctx, "fuzz.stream", doc, len, &s, &err) == 0) {
        struct snapshot *one[1] = {&s};
        report_text(sink, one, 1, 5);
        snapshot_free(&s);
    } else if (strchr(err.msg, '\n') != NULL) {
        abort();
    }
    snapshot_ctx_free(&ctx);
    free(doc);
    return 0;
}
