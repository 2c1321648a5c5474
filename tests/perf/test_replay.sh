#!/bin/sh
# The replay harness on a tiny profile: every policy runs and its table
# row is printed; the uncompressed results equal the exact sum and every
# policy's are the same on all ranks (--check: the buffers are reduced in
# place, so this also shows that every step starts from the same values),
# the peak memory is printed, and a wrong value is caught
# (--inject-error); bad options and a bad profile are named.
#
# Usage: test_replay.sh TACL_RUN REPLAY PROFILE

RUN=${1:?usage: test_replay.sh TACL_RUN REPLAY PROFILE}
REPLAY=${2:?usage: test_replay.sh TACL_RUN REPLAY PROFILE}
PROFILE=${3:?usage: test_replay.sh TACL_RUN REPLAY PROFILE}
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
. "$HERE/../common/checks.sh"

echo "=== every policy on 4 ranks as 2 nodes of 2, checked"
"$RUN" -n 4 --timeout 100 sh -c \
    'TACL_NODE_ID=replaynode$((TACL_RANK / 2)) exec "$@"' sh \
    "$REPLAY" --profile "$PROFILE" --steps 3 --warmup 1 --check \
    > "$TMP/out" 2>&1
expect_rc "replay --check" 0 $?
for p in uncompressed layerwise threshold bucket-2MB bucket-4MB bucket-8MB \
    bucket-16MB bucket-32MB bucket-64MB even-2 even-4 even-8 even-16 \
    even-32 planned; do
    expect_grep "row $p with times" \
        "^\| $p +\| +[0-9]+ \| +[0-9]+ \| +[0-9.]+ \| +[0-9.]+ \|" \
        "$TMP/out"
done
# The tiny profile has six tensors; only one is above the 1 MiB threshold:
# 1048576 bytes is not above the 1 MiB threshold, 2097152 is.
expect_grep "layerwise compresses all six" \
    "^\| layerwise +\| +6 \| +6 \|" "$TMP/out"
expect_grep "threshold compresses one" "^\| threshold +\| +6 \| +1 \|" \
    "$TMP/out"
expect_grep "uncompressed: DDP's buckets (1 MB, then 25 MB)" \
    "^\| uncompressed +\| +2 \| +0 \|" "$TMP/out"
expect_grep "planner line" "^- planner: 6 tensors, [0-9]+ groups" \
    "$TMP/out"
# Four routes timed, each a planner option: the codec's own scheme over
# the hops quicker for the layer-wise policies first, then the other
# hops, then shuffle over both; the planned groups are counted by route.
expect_grep "route 0: gather, the layer-wise policies'" \
    "^- route gather/(all|inter) \\(layer-wise policies\\): the compressed call [0-9.e-]+ s \\+ [0-9.e-]+ s/B; .*planned groups [0-9]+$" \
    "$TMP/out"
expect_count "gather over both hops, shuffle over both" 4 \
    "^- route (gather/all|gather/inter|shuffle/all|shuffle/inter)[ :]" \
    "$TMP/out"
for r in gather/all gather/inter shuffle/all shuffle/inter; do
    expect_grep "route $r offered" "^- route $r[ :]" "$TMP/out"
done
planned=$(awk -F'|' '$2 ~ /^ *planned / {print $4 + 0}' "$TMP/out")
routed=$(sed -n 's/^- route .*planned groups \([0-9]*\)$/\1/p' "$TMP/out" |
    awk '{s += $1} END {print s + 0}')
expect_eq "the routes' planned groups are the planned row's compressed" \
    "$planned" "$routed"
expect_grep "the peak memory and the gradients' 3.4 MB, once (in place)" \
    "^memory: peak RSS [0-9]+ to [0-9]+ MB a rank; the harness holds 3 MB" \
    "$TMP/out"
expect_grep "the check passed" \
    "^check: every policy's result is the same on all 4 ranks" "$TMP/out"

echo "=== one node: every hop only; --schemes own: no shuffle"
"$RUN" -n 2 --timeout 100 "$REPLAY" --profile "$PROFILE" --steps 1 \
    --warmup 0 --policies planned > "$TMP/out" 2>&1
expect_rc "replay on one node" 0 $?
expect_count "on one node, gather and shuffle over every hop" 2 \
    "^- route (gather|shuffle)/all[ :]" "$TMP/out"
expect_count "no inter route on one node" 0 "^- route [a-z]+/inter" \
    "$TMP/out"
"$RUN" -n 4 --timeout 100 sh -c \
    'TACL_NODE_ID=replaynode$((TACL_RANK / 2)) exec "$@"' sh \
    "$REPLAY" --profile "$PROFILE" --steps 1 --warmup 0 --policies planned \
    --schemes own --hops inter > "$TMP/out" 2>&1
expect_rc "replay --schemes own --hops inter" 0 $?
expect_count "one route: gather between nodes" 1 "^- route " "$TMP/out"
expect_grep "and it is gather/inter" "^- route gather/inter " "$TMP/out"

echo "=== a wrong value is caught"
"$RUN" -n 2 --timeout 100 "$REPLAY" --profile "$PROFILE" --steps 1 \
    --warmup 0 --policies uncompressed --inject-error > "$TMP/out" 2>&1
expect_rc "replay --inject-error" 1 $?
expect_grep "named as a wrong sum" \
    "check uncompressed: values differ from the exact sum" "$TMP/out"

echo "=== bad options and profiles are named"
bad() {
    name=$1
    pattern=$2
    shift 2
    "$REPLAY" "$@" > "$TMP/out" 2>&1
    expect_rc "$name" 2 $?
    expect_grep "$name: named" "$pattern" "$TMP/out"
}
bad "no such model" "bad value 'nosuch' for --model" --model nosuch
bad "no such codec" "bad value 'zip' for --codec" --model vgg16 \
    --codec zip
bad "steps not a number" "bad value 'abc' for --steps" --model vgg16 \
    --steps abc
bad "density out of range" "bad value '2' for --density" --model vgg16 \
    --density 2
bad "unknown hops" "bad value 'some' for --hops" --model vgg16 \
    --hops some
bad "unknown schemes" "bad value 'some' for --schemes" --model vgg16 \
    --schemes some
bad "unknown policy" "bad value 'uncompressed,fast' for --policies" \
    --model vgg16 --policies uncompressed,fast
bad "unknown option" "unknown option '--mod'" --mod vgg16
bad "a value missing" "--steps needs a value" --model vgg16 --steps
bad "no model" "name one of --model and --profile" --steps 3
printf 'forward 0.01\ntensor 6 0.001\n' > "$TMP/odd.profile"
bad "bytes not float32" "odd.profile:2: the bytes must be a positive" \
    --profile "$TMP/odd.profile"
printf 'forward 0.01\ntensr 8 0.001\n' > "$TMP/typo.profile"
bad "a line not understood" "typo.profile:2: expected 'forward" \
    --profile "$TMP/typo.profile"
"$REPLAY" --version > "$TMP/out" 2>&1
expect_rc "--version" 0 $?
expect_grep "--version names the tool" "^replay \(tacl .*\) tacl [0-9]" \
    "$TMP/out"
finish
