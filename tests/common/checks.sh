# The bookkeeping the shell test scripts share; they source this file.
# A script counts its checks, reports each with ok or fail, and ends with
# finish, whose status is the script's verdict.  POSIX sh.

failures=0
checks=0
failed_names=""

fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
    failed_names="$failed_names
FAIL: $*"
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

# expect_match NAME FLAG PATTERN FILE: one check, that FILE has a line
# grep FLAG (-E: extended regular expression, -F: fixed text) finds;
# else FILE's start is shown.
expect_match() {
    checks=$((checks + 1))
    if grep "$2" -q -- "$3" "$4"; then
        ok "$1"
    else
        fail "$1: no line matches '$3' in:"
        sed 's/^/    /' "$4" | head -40
    fi
}

# expect_grep NAME PATTERN FILE: FILE has a line matching PATTERN (-E).
expect_grep() {
    expect_match "$1" -E "$2" "$3"
}

# expect_line NAME FILE TEXT: FILE has a line containing TEXT.
expect_line() {
    expect_match "$1" -F "$3" "$2"
}

# expect_no_grep NAME PATTERN FILE: one check, that no line of FILE does.
expect_no_grep() {
    checks=$((checks + 1))
    if grep -Eq -- "$2" "$3"; then
        fail "$1: a line matches '$2':"
        grep -E -- "$2" "$3" | head -5
    else
        ok "$1"
    fi
}

# expect_eq NAME WANTED GOT: one check, that two strings are equal.
expect_eq() {
    checks=$((checks + 1))
    if [ "$2" != "$3" ]; then
        fail "$1: got '$3', wanted '$2'"
    else
        ok "$1 ($3)"
    fi
}

# expect_count NAME N PATTERN FILE: one check, that exactly N lines of
# FILE match PATTERN (-E).
expect_count() {
    expect_eq "$1: lines matching '$3'" "$2" \
        "$(grep -Ec -- "$3" "$4")"
}

# expect_not OK FAILURE COMMAND [ARGS...]: one check, that COMMAND fails
# (finds nothing): reported as OK, else failed as FAILURE.  COMMAND's
# output is dropped.
expect_not() {
    en_ok=$1 en_fail=$2
    shift 2
    checks=$((checks + 1))
    if "$@" > /dev/null; then
        fail "$en_fail"
    else
        ok "$en_ok"
    fi
}

# finish: print the counts; succeeds only when no check failed.
# finish: the count, and the failed checks again, last, where a log cut
# to its tail (as CI keeps it) still shows them.
finish() {
    if [ "$failures" -gt 0 ]; then
        echo "failed checks:$failed_names"
    fi
    echo "$checks checks, $failures failures"
    [ "$failures" -eq 0 ]
}
