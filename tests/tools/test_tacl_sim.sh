#!/bin/sh
# Tests of tacl-sim: the table and its JSON for several algorithms, the
# tuner's lines, a quantized run, and clear errors for bad command lines
# and bad topology files.
#
# Usage: test_tacl_sim.sh PATH_TO_TACL_SIM TOPOLOGIES_DIR

SIM=${1:?usage: test_tacl_sim.sh PATH_TO_TACL_SIM TOPOLOGIES_DIR}
TOPOS=${2:?usage: test_tacl_sim.sh PATH_TO_TACL_SIM TOPOLOGIES_DIR}
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/../common/checks.sh"

# 1. Two algorithms, two sizes: a row per size per algorithm, each with a
# bytes line, and the JSON holds the same four entries.
"$SIM" --topo "$TOPOS/p4d.24xlarge.topo" --nodes 2 -b 1M -e 4M -f 4 \
    -A ring,mics -J "$TMP/out.json" > "$TMP/out" 2>&1
expect_rc "two algorithms" 0 $?
checks=$((checks + 1))
rows=$(grep -c '^ *[0-9][0-9]* ' "$TMP/out")
[ "$rows" -eq 4 ] || fail "$rows table rows, wanted 4"
checks=$((checks + 1))
grep -q '^#   mics: bytes self 0 host 0 gpu [0-9]* net [0-9]*' "$TMP/out" ||
    fail "no bytes line for mics"
checks=$((checks + 1))
entries=$(grep -o '"algorithm": "[a-z]*", "nodes"' "$TMP/out.json" | wc -l)
[ "$entries" -eq 4 ] || fail "$entries JSON entries, wanted 4"

# 2. The tuner: one line per size, naming both choices.
"$SIM" --topo "$TOPOS/p4d.24xlarge.topo" --nodes 2 -b 1M -e 1M \
    --coll reduce_scatter --tuner > "$TMP/tuner" 2>&1
expect_rc "tuner" 0 $?
checks=$((checks + 1))
grep -A2 '^# tuner' "$TMP/tuner" | grep -q '^ *1048576  *[a-z]' ||
    fail "no tuner line"

# 3. A quantized all-gather runs qwZ.
"$SIM" --topo "$TOPOS/p5.48xlarge.topo" --nodes 2 -b 8M -e 8M -d half \
    -Q 8 > "$TMP/quant" 2>&1
expect_rc "quantized" 0 $?
checks=$((checks + 1))
grep -q '^#   qwz: bytes' "$TMP/quant" || fail "the quantized run was not qwZ"

# 4. Bad command lines and files: exit 2 or 1 with a message, no crash.
for args in "" "--topo" "--topo $TOPOS/p4d.24xlarge.topo --nodes 0" \
    "--topo $TOPOS/p4d.24xlarge.topo --coll gather" \
    "--topo $TOPOS/p4d.24xlarge.topo --mem gpu" \
    "--topo $TOPOS/p4d.24xlarge.topo -b 4M -e 1M"; do
    # shellcheck disable=SC2086
    "$SIM" $args > "$TMP/bad" 2>&1
    expect_rc "bad command line '$args'" 2 $?
    checks=$((checks + 1))
    grep -q "tacl-sim\|usage" "$TMP/bad" || fail "no message for '$args'"
done
# A bad size or count names the flag, the value and what is wrong.
"$SIM" --topo "$TOPOS/p4d.24xlarge.topo" -b 1.5M > "$TMP/bad" 2>&1
expect_rc "size 1.5M" 2 $?
expect_line "size 1.5M refused with its reason" "$TMP/bad" \
    "bad value '1.5M' for -b: unknown suffix"
"$SIM" --topo "$TOPOS/p4d.24xlarge.topo" -e -4K > "$TMP/bad" 2>&1
expect_rc "size -4K" 2 $?
expect_line "size -4K refused with its reason" "$TMP/bad" \
    "bad value '-4K' for -e: negative values are not allowed"
"$SIM" --topo "$TOPOS/p4d.24xlarge.topo" --nodes 2x > "$TMP/bad" 2>&1
expect_rc "--nodes 2x" 2 $?
expect_line "--nodes 2x refused with its reason" "$TMP/bad" \
    "tacl-sim: bad value '2x' for --nodes: unexpected characters"
printf 'tacl-topology 1\nnode a cores=2\n' > "$TMP/nolinks.topo"
"$SIM" --topo "$TMP/nolinks.topo" > "$TMP/bad" 2>&1
expect_rc "topology without bandwidths" 1 $?
checks=$((checks + 1))
grep -q "bandwidth" "$TMP/bad" || fail "no message naming the bandwidth"
"$SIM" --topo "$TMP/missing.topo" > "$TMP/bad" 2>&1
expect_rc "missing topology" 1 $?
"$SIM" --topo "$TOPOS/p4d.24xlarge.topo" -A nosuch > "$TMP/bad" 2>&1
expect_rc "unknown algorithm" 1 $?
checks=$((checks + 1))
grep -q "nosuch" "$TMP/bad" || fail "no message naming the algorithm"

finish
