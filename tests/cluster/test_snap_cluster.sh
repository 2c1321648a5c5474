#!/bin/bash
# Snapshots on the emulated cluster (tacl-cluster, snap_node as the ranks).
#
#   1. A replaced node: 2 nodes x 2 ranks save snapshots (node failure
#      domain, m = 2); `--replace-node 1` tears node 1 down (its /dev/shm
#      store vanishes) and starts a fresh node 1; the fresh job restores
#      and every rank's bytes are identical to the newest version saved,
#      node 1's fetched from node 0.
#   2. Two of 4 nodes (1 rank each) replaced at once, group and ring
#      placement: the restore succeeds, bytes identical, exactly when the
#      placement leaves every rank a copy off the replaced nodes, and
#      otherwise fails on every rank naming the placement group.
#   3. Fault injection on 4 nodes x 1 rank and 4 x 2 (8 x 1 on request,
#      see SAMPLES_8X1; it adds half a minute): k = 1..3
#      nodes lost, group and ring placement (m = 2); every k-set once,
#      then random k-sets (seed SEED); each outcome as the placement
#      predicts, the restorable fraction over every set equal to the
#      exact probability (algorithms/placement), the sampled one within a
#      99.9% binomial bound.  The tables are printed.  Lost nodes lose
#      their stores inside one job (each lost node's ranks empty its
#      private /dev/shm of the trial's key), so hundreds of trials fit in
#      seconds; part 2 does the same with real replaced nodes.
#
# Skips (exit 77) where `tacl-cluster --check` fails (not root, no
# namespaces).  SEED (default 29) and the random sets per row, SAMPLES
# (4x1, default 40), SAMPLES_4X2 (20) and SAMPLES_8X1 (0: 8x1 not run),
# may be set in the environment.
#
# Usage: test_snap_cluster.sh TACL_CLUSTER SNAP_NODE

USAGE="usage: test_snap_cluster.sh TACL_CLUSTER SNAP_NODE"
TOOL=${1:?$USAGE}
SNAP=${2:?$USAGE}
SEED=${SEED:-29}
SAMPLES=${SAMPLES:-40}
SAMPLES_4X2=${SAMPLES_4X2:-20}
SAMPLES_8X1=${SAMPLES_8X1:-0}

if ! "$TOOL" --check; then
    echo "SKIP: tacl-cluster --check failed: the emulated cluster needs" \
        "root and network, PID, IPC and mount namespaces"
    exit 77
fi

# Every node sees the host's /tmp, so the saved bytes go there.
TMP=$(mktemp -d /tmp/tacl-snapcluster.XXXXXX) || exit 1
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/../common/checks.sh"

# expect_n NAME WANTED GOT: one check, that a count is what was wanted.
expect_n() {
    checks=$((checks + 1))
    if [ "$3" -eq "$2" ]; then
        ok "$1: $3"
    else
        fail "$1: $3, wanted $2"
    fi
}

key="sc$$"
"$TOOL" --nodes 2 --ranks-per-node 2 --replace-node 1 --timeout 120 -- \
    "$SNAP" replace "$key" "$TMP" > "$TMP/replace.log" 2>&1
rc=$?
cat "$TMP/replace.log"
expect_rc "replace node 1 between save and restore" 0 "$rc"
for r in 0 1 2 3; do
    expect_grep "rank $r restored the saved bytes" \
        "rank $r node [01]: restored version 3, [0-9]+ bytes identical" \
        "$TMP/replace.log"
done
expect_grep "node 1's ranks fetched their state from peers" \
    "rank 3 node 1: restored .* \(fetched from a peer\)" "$TMP/replace.log"
expect_no_grep "no check failed" "FAIL:" "$TMP/replace.log"

# 2. Two nodes replaced at once.  Group placement on 4 nodes pairs 0-1
# and 2-3; ring gives node u's copy to u + 1.
for run in "0,1 group fail" "1,2 group ok" "1,2 ring fail" "0,2 ring ok"; do
    read -r nodes place want <<< "$run"
    name="replace nodes $nodes, $place placement"
    mkdir -p "$TMP/$place.${nodes/,/_}"
    "$TOOL" --nodes 4 --ranks-per-node 1 --replace-node "$nodes" \
        --timeout 120 -- "$SNAP" replace "$key-${nodes/,/_}-$place" \
        "$TMP/$place.${nodes/,/_}" "$place" > "$TMP/r.log" 2>&1
    rc=$?
    grep -v "TACL WARN" "$TMP/r.log"
    expect_rc "$name" 0 "$rc"
    if [ "$want" = ok ]; then
        n=$(grep -cE "restored version 3, [0-9]+ bytes identical" \
            "$TMP/r.log")
    else
        n=$(grep -c "refused as the placement predicts: .*placement group" \
            "$TMP/r.log")
    fi
    expect_n "$name: ranks whose restore did as the placement predicts" \
        4 "$n"
done

# 3. Fault injection against the exact probabilities.
for run in "4 1 $SAMPLES" "4 2 $SAMPLES_4X2" "8 1 $SAMPLES_8X1"; do
    read -r nn rpn samples <<< "$run"
    if [ "$samples" -eq 0 ]; then
        echo "=== fault injection on $nn nodes x $rpn rank(s): not run" \
            "(no random sets asked for it)"
        continue
    fi
    name="fault injection, $nn nodes x $rpn rank(s), k = 1..3"
    t0=${EPOCHREALTIME/./}
    "$TOOL" --nodes "$nn" --ranks-per-node "$rpn" --no-prefix --timeout 150 \
        -- "$SNAP" trials "ft$$-$nn-$rpn" "$SEED" "$samples" \
        > "$TMP/trials.log" 2>&1
    rc=$?
    t1=${EPOCHREALTIME/./}
    echo "=== $name: $samples random sets a row, seed $SEED," \
        "$(((t1 - t0) / 1000)) ms"
    grep -v "TACL WARN" "$TMP/trials.log"
    expect_rc "$name" 0 "$rc"
    # The table: a header and one row per k (1..3) and placement (2).
    expect_n "$name: table rows" 6 \
        "$(grep -cE '^ *[123] (group|ring) ' "$TMP/trials.log")"
    expect_no_grep "$name: every trial as the placement predicts" "FAIL:" \
        "$TMP/trials.log"
done

finish
