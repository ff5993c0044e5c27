#!/bin/sh
# bench_cli.sh CLI A.json B.json - time the command-line tool on large
# snapshots (made by scripts/gen_big_snapshot.py): load+report (with and
# without resolving native frames from debug information), report --json,
# diff, flamegraph, timeline.  Prints wall time and peak memory of each.
set -eu
cli=$1 a=$2 b=$3
printf '%s: %s\n' "$(basename "$a")" "$(du -h "$a" | cut -f1)"
run() {
    name=$1
    shift
    start=$(date +%s.%N)
    if command -v /usr/bin/time >/dev/null 2>&1; then
        /usr/bin/time -f "%M" -o /tmp/cumemtrace-bench.$$ "$@" >/dev/null
        rss=$(tail -1 /tmp/cumemtrace-bench.$$)
        rm -f /tmp/cumemtrace-bench.$$
    else
        "$@" >/dev/null
        rss="?"
    fi
    end=$(date +%s.%N)
    printf '  %-22s %6.2f s  %8s KiB peak RSS\n' "$name" "$(echo "$end - $start" | bc)" "$rss"
}
run "report" "$cli" report "$a"
# Its native frames lie in a -g program: the same without resolving them.
run "report, debuginfo off" env CUMEMTRACE_DEBUGINFO=off "$cli" report "$a"
run "report --json" "$cli" report --json "$a"
run "diff" "$cli" diff "$a" "$b"
run "diff --by function" "$cli" diff --by function "$a" "$b"
run "flamegraph" "$cli" flamegraph "$a"
run "timeline --format chrome" "$cli" timeline --format chrome "$a"
