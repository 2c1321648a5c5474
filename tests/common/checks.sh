# The bookkeeping the shell test scripts share; they source this file.
# A script counts its checks, reports each with ok or fail, and ends with
# finish, whose status is the script's verdict.  POSIX sh.

failures=0
checks=0

fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

ok() {
    echo "ok: $*"
}

# expect_rc NAME WANTED GOT: one check, that a command exited WANTED.
expect_rc() {
    checks=$((checks + 1))
    if [ "$2" -ne "$3" ]; then
        fail "$1: exit code $3, wanted $2"
    else
        ok "$1 (exit $3)"
    fi
}

# finish: print the counts; succeeds only when no check failed.
finish() {
    echo "$checks checks, $failures failures"
    [ "$failures" -eq 0 ]
}
