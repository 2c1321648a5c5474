#!/bin/bash
# What a new user meets first: --version on every tool and perf binary;
# tacl-info's sections (version, build, transports, configuration with
# each value's source, algorithms and cost model, topology, tuner); the
# warnings for a bad or unknown TACL_ variable; the default log
# subsystems; the perf binaries' nccl-tests flags, -d all, -o all, -J's
# precision, the header's algorithm and notes, and -A with a bad name;
# and that the quickstart's steps reach its -e.
#
# Usage: test_first_contact.sh VERSION BUILD_DIR SOURCE_DIR

VERSION=${1:?usage: test_first_contact.sh VERSION BUILD_DIR SOURCE_DIR}
BUILD=${2:?usage: test_first_contact.sh VERSION BUILD_DIR SOURCE_DIR}
SRC=${3:?usage: test_first_contact.sh VERSION BUILD_DIR SOURCE_DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
. "$HERE/../common/checks.sh"

RUN=$BUILD/tools/tacl-run
INFO=$BUILD/tools/tacl-info
PERF=$BUILD/perf
# The tests' own TACL_DEBUG aside, no TACL_ variable of the caller's.
for v in $(env | sed -n 's/^\(TACL_[A-Z0-9_]*\)=.*/\1/p'); do
    unset "$v"
done

echo "=== --version"
for tool in "$RUN" "$INFO" "$BUILD/tools/tacl-cluster" \
    "$BUILD/tools/tacl-flight" "$SRC/tools/tacl-cluster" \
    "$SRC/tools/tacl-flight" "$PERF"/*_perf; do
    [ -x "$tool" ] || continue
    "$tool" --version > "$TMP/version" 2>&1
    expect_rc "$tool --version" 0 $?
    expect_grep "$(basename "$tool") says $VERSION" \
        "^$(basename "$tool") \(tacl.*\) (tacl )?$VERSION\$" "$TMP/version"
done

echo "=== tacl-info, default environment"
"$INFO" > "$TMP/info" 2> "$TMP/info.err"
expect_rc "tacl-info" 0 $?
for section in version build transports config algorithms topology tuner; do
    expect_grep "section $section" "^== $section\$" "$TMP/info"
done
expect_grep "version line" "^tacl $VERSION \(CUDA (yes|no), UCX" "$TMP/info"
expect_grep "build: hwloc" "^hwloc +[0-9]" "$TMP/info"
expect_grep "transport shm" "^shm +same-node +host" "$TMP/info"
expect_grep "TACL_TIMEOUT from the default" \
    '^TACL_TIMEOUT +default +"60"$' "$TMP/info"
expect_grep "registry row" "^allgather +mics +hierarchical" "$TMP/info"
expect_grep "cost model table" "^net +[0-9.]+ +[0-9.]+$" "$TMP/info"
expect_grep "this machine detected" "^node [^ ]+ packages=[0-9]+ " \
    "$TMP/info"
expect_grep "tuner on 2x4" "^layout 2 nodes x 4 ranks" "$TMP/info"
expect_no_grep "no warning by default" "WARN" "$TMP/info.err"

echo "=== tacl-info, a bad and two unknown variables"
TACL_TIMEOUT=abc TACL_FOO=1 TACL_TIMEOT=5 "$INFO" --section config \
    > "$TMP/info" 2> "$TMP/info.err"
expect_rc "tacl-info with bad variables" 0 $?
expect_grep "TACL_TIMEOUT shown invalid, default used" \
    '^TACL_TIMEOUT +invalid +"60" +\("abc" refused' "$TMP/info"
expect_grep "WARN names variable, value and default" \
    'TACL WARN ENV TACL_TIMEOUT="abc" is invalid .*using the default "60"' \
    "$TMP/info.err"
expect_grep "unknown TACL_FOO warned" \
    "TACL WARN ENV unknown variable TACL_FOO is ignored" "$TMP/info.err"
expect_grep "near miss suggests the name" \
    "unknown variable TACL_TIMEOT is ignored; did you mean TACL_TIMEOUT" \
    "$TMP/info.err"
expect_no_grep "one section only" "^== (version|tuner)" "$TMP/info"
TACL_SHM_MAP=maybe TACL_CHUNK_SIZE=2M TACL_NET=carrier-pigeon \
    "$INFO" --section config > "$TMP/info" 2> "$TMP/info.err"
expect_grep "a boolean refused" '^TACL_SHM_MAP +invalid +"1"' "$TMP/info"
expect_grep "a size taken" '^TACL_CHUNK_SIZE +environment +"2M"' "$TMP/info"
expect_grep "a word refused, its choices named" \
    'TACL_NET="carrier-pigeon" is invalid \(expected one of auto\|ucx\|ofi\|none\)' \
    "$TMP/info.err"

echo "=== tacl-info --topo, --layout, --sizes"
"$INFO" --topo "$SRC/topologies/dgx-a100.topo" --layout 1x4 \
    --sizes 4K,64M > "$TMP/info" 2> "$TMP/info.err"
expect_rc "tacl-info --topo" 0 $?
expect_grep "the file's links" "^link net bw=200 lat=5$" "$TMP/info"
expect_grep "the file's nodes" "^node dgx-a100-1 " "$TMP/info"
expect_grep "tuner row 4K" "^ +4096 +[a-z]+ " "$TMP/info"
expect_grep "tuner row 64M" "^ +67108864 +[a-z]+ " "$TMP/info"
TACL_ALGO=allgather=bruck "$INFO" --section tuner --layout 1x4 \
    --sizes 64M > "$TMP/info" 2>&1
expect_grep "TACL_ALGO forces the tuner's pick" "^ +67108864 +bruck " \
    "$TMP/info"
printf 'tacl-topology 1\nlink net bw=fast lat=1\n' > "$TMP/bad.topo"
"$INFO" --topo "$TMP/bad.topo" > "$TMP/info" 2>&1
expect_rc "a topology file that does not parse" 1 $?
expect_grep "names the file and line" "bad.topo:2" "$TMP/info"
"$INFO" --layout 2by4 > "$TMP/info" 2>&1
expect_rc "a bad --layout" 2 $?
"$INFO" --sizes 4K,1T > "$TMP/info" 2>&1
expect_rc "a bad --sizes" 2 $?
expect_grep "a bad size named with why" \
    "^tacl-info: bad size '1T' in --sizes: unknown suffix" "$TMP/info"

echo "=== default log subsystems"
TACL_DEBUG=INFO "$RUN" -n 2 -- "$PERF/all_reduce_perf" -b 4K -e 4K -n 1 \
    -w 0 > "$TMP/log" 2>&1
expect_rc "all_reduce_perf at INFO" 0 $?
expect_grep "version banner at INFO" "TACL INFO INIT tacl $VERSION \(" \
    "$TMP/log"
expect_no_grep "no line per collective by default" "TACL INFO (COLL|TUNE)" \
    "$TMP/log"
TACL_DEBUG=INFO TACL_DEBUG_SUBSYS=ALL "$RUN" -n 2 -- \
    "$PERF/all_reduce_perf" -b 4K -e 4K -n 1 -w 0 > "$TMP/log" 2>&1
expect_grep "ALL shows the collectives" "TACL INFO COLL" "$TMP/log"

echo "=== perf: nccl-tests' flags"
"$PERF/all_gather_perf" -b 1K -e 4K -f 2 -n 1 -w 0 -t 1 -g 1 -p 0 -G 0 \
    -C 0 -y 0 -M 0 -u 0 -I 0 -N 2 -T 30 > "$TMP/out" 2>&1
expect_rc "all of them accepted" 0 $?
expect_grep "each noted in the header" \
    "^# note: nccl-tests flags without effect here: -t 1 .*-I 0 " \
    "$TMP/out"
checks=$((checks + 1))
rows=$(grep -c '^ *[0-9]' "$TMP/out")
if [ "$rows" -eq 6 ]; then
    ok "-N 2 runs the 3 sizes twice"
else
    fail "-N 2: $rows rows, wanted 6"
fi
"$PERF/all_gather_perf" -b 1K -e 1K -n 1 -w 0 -c 5 > "$TMP/out" 2>&1
expect_rc "nccl-tests' -c 5 (a count of checks)" 0 $?
expect_grep "-c 5 checks once, noted" "^# note: .*-c 5 \(one exact check" \
    "$TMP/out"
expect_grep "-c 5 still checks" "^ +1024 +256 +float +none +-1 .* 0$" \
    "$TMP/out"
"$PERF/all_gather_perf" -b 1K -e 4X > "$TMP/out" 2>&1
expect_rc "-e 4X refused" 2 $?
expect_grep "-e 4X says why" "bad value '4X' for -e: unknown suffix" \
    "$TMP/out"
"$PERF/all_gather_perf" -b 1K -e 4KiB -n 0 > "$TMP/out" 2>&1
expect_rc "-n 0 refused" 2 $?
expect_grep "-n 0 says why" "bad value '0' for -n: out of range \(1 to" \
    "$TMP/out"
"$PERF/all_gather_perf" -b 1K -e 1K -g 2 > "$TMP/out" 2>&1
expect_rc "-g 2 refused" 2 $?
expect_grep "-g 2 says why" "one rank per process" "$TMP/out"
"$PERF/all_gather_perf" -b 1K -e 3K -f 2 -n 1 -w 0 > "$TMP/out" 2>&1
expect_grep "an -e the steps miss is noted" \
    "^# note: the steps do not reach -e 3072: the last size is 2048" \
    "$TMP/out"

echo "=== perf: -d all, -o all, -J"
"$RUN" -n 2 -- "$PERF/all_reduce_perf" -b 1K -e 1K -n 1 -w 0 -d all \
    -o all -J "$TMP/all.json" > "$TMP/out" 2>&1
expect_rc "-d all -o all, checked" 0 $?
for t in int8 uint8 int32 uint32 int64 uint64 half float double bfloat16; do
    for o in sum prod max min avg; do
        expect_grep "row $t $o" "^ +1024 +[0-9]+ +$t +$o " "$TMP/out"
    done
done
expect_grep "JSON rows carry their dtype" \
    '"datatype": "bfloat16", "op": "avg"' "$TMP/all.json"
expect_grep "JSON numbers at full precision" \
    '"time_us": [0-9]+\.[0-9]{6,}' "$TMP/all.json"

echo "=== perf: forced and unknown algorithms"
"$RUN" -n 2 -- "$PERF/all_gather_perf" -b 64K -e 64K -n 1 -w 0 -A hring \
    > "$TMP/out" 2>&1
expect_rc "a forced algorithm that gives way still runs" 0 $?
expect_grep "WARN when it gives way" \
    "TACL WARN TUNE allgather: forced algorithm hring cannot serve" \
    "$TMP/out"
expect_grep "the header names what ran" \
    "algorithm: allgather=hring \(ran: ring, the forced algorithm gave way\)" \
    "$TMP/out"
"$PERF/all_gather_perf" -b 1K -e 1K -A bogus > "$TMP/out" 2>&1
rc=$?
checks=$((checks + 1))
if [ $rc -ne 0 ]; then
    ok "-A bogus fails (exit $rc)"
else
    fail "-A bogus ran"
fi
expect_grep "-A bogus lists the valid names" \
    "unknown algorithm 'bogus' for allgather.*allgather has: ring, bruck, rd" \
    "$TMP/out"

echo "=== the quickstart reaches its -e"
args=$(sed -n 's/.*all_gather_perf \(.*\)/\1/p' "$SRC/tools/quickstart.sh")
b=$(echo "$args" | sed -n 's/.*-b \([0-9]*\)M.*/\1/p')
e=$(echo "$args" | sed -n 's/.*-e \([0-9]*\)M.*/\1/p')
f=$(echo "$args" | sed -n 's/.*-f \([0-9]*\).*/\1/p')
size=$b
while [ -n "$size" ] && [ "$size" -lt "${e:-0}" ] && [ "${f:-1}" -gt 1 ]; do
    size=$((size * f))
done
checks=$((checks + 1))
if [ -n "$b" ] && [ "$size" = "$e" ]; then
    ok "quickstart: -b ${b}M times $f reaches -e ${e}M"
else
    fail "quickstart: '$args' steps past -e (last ${size:-?}M)"
fi

finish
