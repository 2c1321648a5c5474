#!/bin/bash
# ofi striping across the emulated nodes' rails (tacl-cluster --rails 2):
# a 64 MB ring all-gather over ofi, 2 nodes x 1 rank, results checked by
# all_gather_perf, must send bytes on both eth0 and eth1 of each node
# (their tx_bytes read in the node's namespace before and after), about
# as many on each; then eth1 of node 1 goes down in the middle of a long
# run, and the job must fail, not hang, with an error naming the peer
# and the rail (the pings on rail 1, or their missing answers, notice
# the cut within about a third of the communicator's timeout).  Skips
# (exit 77) where `tacl-cluster --check` fails (root and namespaces).
#
# Usage: test_ofi_rails.sh TACL_CLUSTER ALL_GATHER_PERF

USAGE="usage: test_ofi_rails.sh TACL_CLUSTER ALL_GATHER_PERF"
TOOL=${1:?$USAGE}
PERF=${2:?$USAGE}
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
. "$HERE/../common/checks.sh"

if ! "$TOOL" --check > /dev/null 2>&1; then
    echo "SKIP: tacl-cluster --check failed: needs root and namespaces"
    exit 77
fi

# What each rank runs: its node's eth0 and eth1 tx_bytes around the
# command (each rank is alone in its node's namespace).
cat > "$TMP/tx.sh" << 'EOS'
tx() { cat /sys/class/net/$1/statistics/tx_bytes; }
a0=$(tx eth0); a1=$(tx eth1)
"$@"; rc=$?
echo "tx eth0 $(( $(tx eth0) - a0 )) eth1 $(( $(tx eth1) - a1 ))"
exit $rc
EOS

# 1. Both rails carry the all-gather, and its result is right.
TACL_NET=ofi "$TOOL" --nodes 2 --ranks-per-node 1 --rails 2 \
    --inter-rate 1gbit --timeout 120 -- bash "$TMP/tx.sh" "$PERF" \
    -A allgather=ring -b 64M -e 64M -n 2 -w 1 -c 1 > "$TMP/ag.log" 2>&1
rc=$?
expect_rc "ofi over 2 rails: the 64 MB all-gather runs" 0 "$rc"
[ "$rc" -eq 0 ] || tail -20 "$TMP/ag.log"
expect_line "ofi over 2 rails: the results are right" "$TMP/ag.log" \
    "[node 0 rank 0] # Out of bounds values : 0 OK"
# 3 all-gathers of 32 MB out of each node: more than 40 MB on each rail,
# neither more than 1.5 times the other.
for n in 0 1; do
    line=$(grep -E "^\[node $n rank $n\] tx eth0 " "$TMP/ag.log")
    e0=$(echo "$line" | awk '{print $7}')
    e1=$(echo "$line" | awk '{print $9}')
    checks=$((checks + 1))
    if [ "${e0:-0}" -gt 40000000 ] && [ "${e1:-0}" -gt 40000000 ] &&
       [ $((e0 * 2)) -lt $((e1 * 3)) ] && [ $((e1 * 2)) -lt $((e0 * 3)) ]
    then
        ok "node $n sent on both rails: eth0 $e0, eth1 $e1 bytes"
    else
        fail "node $n: eth0 ${e0:-?}, eth1 ${e1:-?} bytes (wanted both" \
             "above 40 MB and within 1.5x of each other)"
    fi
done

# 2. A cut rail: eth1 of node 1 down 3 s into a long run.  TACL_TIMEOUT
# is 10 s: the job must end, failed, within 30 s of the cut.
cat > "$TMP/cut.sh" << 'EOS'
[ "$TACL_RANK" = 1 ] && (sleep 3; ip link set eth1 down) &
exec "$@"
EOS
start=$(date +%s)
TACL_NET=ofi TACL_TIMEOUT=10 "$TOOL" --nodes 2 --ranks-per-node 1 \
    --rails 2 --inter-rate 1gbit --timeout 120 -- bash "$TMP/cut.sh" \
    "$PERF" -A allgather=ring -b 64M -e 64M -n 200 -w 1 \
    > "$TMP/cut.log" 2>&1
rc=$?
took=$(( $(date +%s) - start ))
checks=$((checks + 1))
if [ "$rc" -ne 0 ] && [ "$took" -le 33 ]; then
    ok "a cut rail fails the job after ${took} s (exit $rc)"
else
    fail "a cut rail: exit $rc after ${took} s (wanted a failure within 33 s)"
    tail -20 "$TMP/cut.log"
fi
grep -m 2 -hE "is gone|aborted|failed: |timed out" "$TMP/cut.log" |
    cut -c 1-300 | sed 's/^/    /'
# The pings on rail 1 find the cut before the no-progress timeout would:
# either one is stuck behind data the cut holds, or the kernel took it
# and no answer came back on rail 1 while rail 0's did.
expect_grep "a cut rail: the error names the peer and the rail" \
    "rank [01]: (rank [01] is gone: a message to it on rail 1 \(eth1\)|rail 1 \(eth1\) to rank [01] is cut)" \
    "$TMP/cut.log"

finish
