#!/bin/sh
# The perf harness's exact check must catch a wrong element: a run with
# --inject-error exits 1 and reports FAILED, the same run without it
# exits 0 and reports OK.
#
# Usage: test_perf_check.sh PATH_TO_TACL_RUN PATH_TO_ALL_GATHER_PERF

RUN=${1:?usage: test_perf_check.sh TACL_RUN ALL_GATHER_PERF}
PERF=${2:?usage: test_perf_check.sh TACL_RUN ALL_GATHER_PERF}
OUT=$(mktemp) || exit 1
trap 'rm -f "$OUT"' EXIT
failures=0
args="-b 4K -e 4K -n 1 -w 0"

# shellcheck disable=SC2086
"$RUN" -n 2 --timeout 100 "$PERF" $args > "$OUT" 2>&1
rc=$?
if [ $rc -ne 0 ] || ! grep -q "^# Out of bounds values : 0 OK" "$OUT"; then
    echo "FAIL: clean run: exit $rc"
    cat "$OUT"
    failures=$((failures + 1))
else
    echo "ok: clean run passes its check"
fi

# shellcheck disable=SC2086
"$RUN" -n 2 --timeout 100 "$PERF" $args --inject-error > "$OUT" 2>&1
rc=$?
if [ $rc -ne 1 ] || ! grep -q "^# Out of bounds values : 2 FAILED" "$OUT"
then
    echo "FAIL: injected error: exit $rc, wanted 1 and 2 wrong values"
    cat "$OUT"
    failures=$((failures + 1))
else
    echo "ok: injected error caught (exit 1, 2 wrong values)"
fi
[ $failures -eq 0 ]
