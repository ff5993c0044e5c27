# noops.awk - from a stand-in's symbol list (one name a line, the imports of
# PyTorch's wheel), the generated half of the stand-in:
#   awk -v what=c   : a weak no-op per name returning 0 (CUBLAS_STATUS_SUCCESS,
#                     CUDNN_STATUS_SUCCESS, ncclSuccess); the hand-written
#                     definitions of the same names override them at link time
#     -v handle=FN -v plain=RE : the no-ops take the library's handle first
#                     and return FN(handle) - the library's status for a
#                     handle that is not a live one - except the names
#                     matching RE, which take none
#   awk -v what=map -v node=libcublas.so.13 : the version script exporting
#                     exactly the list, under that version node (node="" for an
#                     unversioned library, as NCCL is)
BEGIN {
    if (what == "c") {
        print "/* generated from " src " by src/simgpu/noops.awk - do not edit */"
        if (handle != "")
            print "int " handle "(void *handle);"
    }
    else
        print "/* generated from " src " by src/simgpu/noops.awk - do not edit */\n" node " {\n  global:"
}
/^[A-Za-z_][A-Za-z0-9_]*$/ {
    if (what == "c" && handle != "" && (plain == "" || $1 !~ plain))
        printf "int %s(void *handle) __attribute__((weak, visibility(\"default\")));\nint %s(void *handle) { return %s(handle); }\n", $1, $1, handle
    else if (what == "c")
        printf "int %s(void) __attribute__((weak, visibility(\"default\")));\nint %s(void) { return 0; }\n", $1, $1
    else
        printf "    %s;\n", $1
    next
}
NF { print "noops.awk: " FILENAME ":" NR ": not a symbol name: " $0 > "/dev/stderr"; exit 1 }
END {
    if (what != "c")
        print "  local: *;\n};"
}
