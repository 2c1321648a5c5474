#!/bin/sh
# Runs shrink_example on 8 ranks under tacl-run --keep-going: rank 3 is
# killed, so tacl-run must exit with 137 (128 + SIGKILL), and each of the
# 7 survivors must print "ok".
#
# Usage: shrink_example.sh PATH_TO_TACL_RUN PATH_TO_SHRINK_EXAMPLE
RUN=${1:?usage: shrink_example.sh TACL_RUN SHRINK_EXAMPLE}
EXE=${2:?usage: shrink_example.sh TACL_RUN SHRINK_EXAMPLE}
OUT=$(mktemp) || exit 1
trap 'rm -f "$OUT"' EXIT

"$RUN" -n 8 --keep-going --tag --timeout 100 "$EXE" >"$OUT" 2>&1
rc=$?
cat "$OUT"
ok=$(grep -c ': ok, exact' "$OUT")
if [ "$rc" -ne 137 ] || [ "$ok" -ne 7 ]; then
    echo "FAIL: tacl-run exited $rc (want 137), $ok of 7 survivors ok"
    exit 1
fi
echo "PASS: 7 survivors ok after rank 3 was killed"
