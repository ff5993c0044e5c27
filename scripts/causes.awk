# causes.awk - format.h's FORMAT_CAUSES from the rows of src/cli/text/oom_causes.c,
# so that a cause is one row there (its symbol, its name in the snapshot, its
# words) and the code that decides it.  Usage: awk -f scripts/causes.awk FILE
# Each line `    CAUSE(SYMBOL, "name", ...` becomes X(SYMBOL, "name"); a file
# with no such line is an error (the build stops rather than know no cause).
BEGIN { print "/* generated from src/cli/text/oom_causes.c by scripts/causes.awk - do not edit */"
        print "#define FORMAT_CAUSES(X) \\" }
match($0, /^ +CAUSE\([A-Z_]+, "[a-z_]+"/) {
    row = substr($0, RSTART, RLENGTH)
    sub(/^ +CAUSE\(/, "", row)
    printf "    X(%s) \\\n", row
    n++
}
END { print ""; if (n == 0) { print "causes.awk: no CAUSE( rows in " FILENAME > "/dev/stderr"; exit 1 } }
