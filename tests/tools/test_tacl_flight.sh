#!/bin/sh
# Tests of tacl-flight on the dumps in testdata/flight, which
# tests/coll/test_flight.c wrote (FLIGHT_TEST_KEEP=1): three ranks, rank 2
# skipped the third all-reduce, rank 0 timed out waiting on it and rank 1
# on rank 0.  Also: the same lines inside ranks' logs, a collective that
# differs between ranks, and input without dumps.
#
# Usage: test_tacl_flight.sh PATH_TO_TACL_FLIGHT

TOOL=${1:?usage: test_tacl_flight.sh PATH_TO_TACL_FLIGHT}
HERE=$(dirname "$0")
DATA="$HERE/testdata/flight"
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
. "$HERE/../common/checks.sh"

# 1. The dump files: rank 2 is behind, seq 2 is where they part, and the
#    survivors' wait lists show who waits on whom.
"$TOOL" "$DATA/flight.0" "$DATA/flight.1" "$DATA/flight.2" > "$TMP/out" 2>&1
expect_rc "dump files" 0 $?
expect_line "rank 2 behind" "$TMP/out" "behind: rank 2 (last started seq 1"
ar="allreduce count=1024 dtype=float32"
expect_line "diverging seq" "$TMP/out" \
    "diverge at seq 2: $ar on ranks 0,1; never started on rank 2"
expect_line "rank 0 waits on 2" "$TMP/out" "waits: rank 0 -> rank 2 (recv"
expect_line "rank 1 waits on 0" "$TMP/out" "waits: rank 1 -> rank 0 (recv"

# 2. The same records as log lines, files given in another order.
for r in 2 0 1; do
    sed "s/^/host:4$r:4$r TACL WARN COLL /" "$DATA/flight.$r" \
        > "$TMP/log.$r"
done
"$TOOL" "$TMP/log.2" "$TMP/log.0" "$TMP/log.1" > "$TMP/out.log" 2>&1
expect_rc "logs" 0 $?
expect_line "logs: rank 2 behind" "$TMP/out.log" "behind: rank 2"
expect_line "logs: diverging seq" "$TMP/out.log" "diverge at seq 2:"

# 3. Rank 1 ran seq 1 with another count: the ranks part there.
sed 's/seq=1 coll=allreduce count=1024/seq=1 coll=allreduce count=2048/' \
    "$DATA/flight.1" > "$TMP/mixed.1"
"$TOOL" "$DATA/flight.0" "$TMP/mixed.1" "$DATA/flight.2" \
    > "$TMP/out.mixed" 2>&1
expect_rc "mismatch" 0 $?
expect_line "mismatch at seq 1" "$TMP/out.mixed" "diverge at seq 1: $ar on \
ranks 0,2; allreduce count=2048 dtype=float32 on rank 1"

# 4. A rank without a dump is named; no dumps at all is an error.
"$TOOL" "$DATA/flight.0" "$DATA/flight.1" > "$TMP/out.two" 2>&1
expect_rc "two ranks" 0 $?
expect_line "missing rank" "$TMP/out.two" "no dump from rank 2"
expect_line "end of the chain" "$TMP/out.two" \
    "waited on and waiting on nobody: rank 2"
echo "nothing here" > "$TMP/empty"
"$TOOL" "$TMP/empty" > "$TMP/out.empty" 2>&1
expect_rc "no dumps" 2 $?

finish
