#!/bin/bash
# Tests of the tacl-cluster emulated multi-node tool: the environment and
# host name each rank sees in 2x2, 3x2 and 2+1 layouts, private /dev/shm,
# SysV IPC and PID namespaces per node, TCP between nodes, the shaped
# inter-node rate, exit codes, --timeout, SIGINT/SIGTERM, concurrent runs,
# --replace-node (a fresh node of the same identity, its /dev/shm gone,
# the others' kept), the storage node behind its own shaped link
# (--storage-rate, --storage-cmd running perf/storage_node.py), and
# that no namespace, mount or process is left
# behind (--cleanup after a SIGKILL).  Skips (exit 77) where the tool
# cannot run.
#
# Usage: test_cluster.sh PATH_TO_TACL_CLUSTER

TOOL=${1:?usage: test_cluster.sh PATH_TO_TACL_CLUSTER}
HERE=$(cd "$(dirname "$0")" && pwd)
NET="$HERE/cluster_net.py"
PY=/usr/bin/python3
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
. "$HERE/../common/checks.sh"

if ! "$TOOL" --check; then
    echo "SKIP: tacl-cluster --check failed: needs root and namespaces"
    exit 77
fi

# expect_same NAME WANTED_FILE GOT_FILE
expect_same() {
    checks=$((checks + 1))
    if ! diff -u "$2" "$3" > "$TMP/diff"; then
        fail "$1: output differs from what was expected:"
        cat "$TMP/diff"
    else
        ok "$1"
    fi
}

now_ms() {
    local t=${EPOCHREALTIME/./}
    echo $((t / 1000))
}

# no_leftovers NAME PID: nothing named after run PID may remain.
no_leftovers() {
    local left

    checks=$((checks + 1))
    left=$(ip netns list | grep -E "^tacl-$2(r[0-9]+)?-")
    left+=$(ip -o link | grep -E ": (tacl|n[0-9]+)[^:]*:")
    left+=$(grep -E "tacl-$2(r[0-9]+)?-" /proc/mounts)
    left+=$(ls -d "${TMPDIR:-/tmp}/tacl-cluster.$2."* 2> /dev/null)
    if [ -n "$left" ]; then
        fail "$1: run $2 left behind: $left"
    else
        ok "$1: no namespace, link, mount or status dir left"
    fi
}

# run_tool OUT_FILE ARGS...: run the tool in the background, wait for it,
# set rc and pid (the tool's pid, which names its namespaces).
run_tool() {
    local out=$1
    shift
    "$TOOL" "$@" > "$out" 2> "$out.err" &
    pid=$!
    wait "$pid"
    rc=$?
}

# 1. Layouts: every rank sees its place in the job, its node's host name,
# its node's address on the named interface, and the root address.
show='echo "$TACL_RANK $TACL_NRANKS $TACL_LOCAL_RANK $TACL_LOCAL_SIZE'
show+=' $TACL_NODE_ID $(hostname) $TACL_SOCKET_IFNAME $UCX_NET_DEVICES'
show+=' $(ip -4 -o addr show dev $TACL_SOCKET_IFNAME | cut -d" " -f7)'
show+=' $TACL_ROOT_ADDR $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE'
show+=' $GROUP_RANK $MASTER_ADDR:$MASTER_PORT"'

# expected_env LIST: what `show` prints for ranks-per-node LIST, sorted.
expected_env() {
    local -a rpn
    local i l r=0 n=0

    IFS=, read -r -a rpn <<< "$1"
    for i in "${rpn[@]}"; do
        n=$((n + i))
    done
    for i in "${!rpn[@]}"; do
        for ((l = 0; l < rpn[i]; l++)); do
            echo "$r $n $l ${rpn[i]} taclnode$i taclnode$i eth0 eth0" \
                "10.77.0.$((i + 1))/24 10.77.0.1:29500 $r $n $l" \
                "${rpn[i]} $i 10.77.0.1:29500"
            r=$((r + 1))
        done
    done | sort
}

for layout in "2 2 2,2" "3 2 2,2,2" "list 2,1 2,1"; do
    read -r a b list <<< "$layout"
    if [ "$a" = list ]; then
        args=(--ranks-per-node-list "$b")
    else
        args=(--nodes "$a" --ranks-per-node "$b")
    fi
    name="env ${args[*]}"
    run_tool "$TMP/env" "${args[@]}" --no-prefix --timeout 30 -- \
        sh -c "$show"
    expect_rc "$name" 0 "$rc"
    sort "$TMP/env" > "$TMP/env.sorted"
    expected_env "$list" > "$TMP/env.wanted"
    expect_same "$name: per-rank environment" "$TMP/env.wanted" \
        "$TMP/env.sorted"
    no_leftovers "$name" "$pid"
done

# 2. Output prefix: stdout and stderr lines carry "[node i rank r] ".
run_tool "$TMP/pfx" --ranks-per-node-list 2,1 --timeout 30 -- \
    sh -c 'echo out $TACL_RANK; echo err $TACL_RANK >&2'
expect_rc "prefix run" 0 "$rc"
printf '[node 0 rank 0] out 0\n[node 0 rank 1] out 1\n[node 1 rank 2] out 2\n' \
    > "$TMP/pfx.wanted"
sort "$TMP/pfx" > "$TMP/pfx.sorted"
expect_same "stdout prefixed" "$TMP/pfx.wanted" "$TMP/pfx.sorted"
sed 's/ out / err /' "$TMP/pfx.wanted" > "$TMP/pfx.err.wanted"
sort "$TMP/pfx.err" > "$TMP/pfx.err.sorted"
expect_same "stderr prefixed" "$TMP/pfx.err.wanted" "$TMP/pfx.err.sorted"

# 3. Isolation per node, 2 nodes x 2 ranks.  Each rank makes a file in
# /dev/shm and a SysV segment, waits (bounded) until it sees its node mate's
# file, then reports what it sees: only its own node's files and segments.
# PID 1 of every node is the node's launcher (a PID namespace per node, so
# CMA cannot reach another node's ranks).
tag="tacl-cluster-test-$$"
iso='ipcmk -M 4096 > /dev/null || exit 1
touch /dev/shm/'"$tag"'.$TACL_RANK || exit 1
for i in $(seq 100); do
    n=$(ls /dev/shm | grep -c "^'"$tag"'\.")
    [ "$n" -ge "$TACL_LOCAL_SIZE" ] && break
    sleep 0.05
done
sleep 0.5
echo "$TACL_RANK" \
    "shm=$(ls /dev/shm | grep "^'"$tag"'\." | tr "\n" ,)" \
    "ipc=$(ipcs -m | grep -c "^0x")" \
    "pid1=$(tr "\0" "\n" < /proc/1/cmdline | grep -cx -- --node-main)"'
run_tool "$TMP/iso" --nodes 2 --ranks-per-node 2 --no-prefix --timeout 30 \
    -- sh -c "$iso"
expect_rc "isolation run" 0 "$rc"
cut -d' ' -f1-4 "$TMP/iso" | sort > "$TMP/iso.sorted"
{
    echo "0 shm=$tag.0,$tag.1, ipc=2 pid1=1"
    echo "1 shm=$tag.0,$tag.1, ipc=2 pid1=1"
    echo "2 shm=$tag.2,$tag.3, ipc=2 pid1=1"
    echo "3 shm=$tag.2,$tag.3, ipc=2 pid1=1"
} > "$TMP/iso.wanted"
expect_same "/dev/shm, SysV IPC and PID 1 private per node" \
    "$TMP/iso.wanted" "$TMP/iso.sorted"
expect_not "host /dev/shm untouched" \
    "node /dev/shm files leaked into the host's /dev/shm" \
    compgen -G "/dev/shm/$tag*"
no_leftovers "isolation" "$pid"

# 4. TCP between nodes over 10.77.0.x: rank 0 hears from every rank with
# the right host name and source address.
run_tool "$TMP/ping" --ranks-per-node-list 2,1,1 --no-prefix --timeout 60 \
    -- "$PY" "$NET" ping
expect_rc "tcp ping 2+1+1" 0 "$rc"
{
    echo "got ack 0@taclnode0"
    echo "got ack 0@taclnode0"
    echo "got ack 0@taclnode0"
    echo "peers 1@taclnode0/10.77.0.1 2@taclnode1/10.77.0.2" \
        "3@taclnode2/10.77.0.3"
} > "$TMP/ping.wanted"
sort "$TMP/ping" > "$TMP/ping.sorted"
expect_same "tcp ping: every rank reached rank 0" "$TMP/ping.wanted" \
    "$TMP/ping.sorted"

# 5. Two runs at once do not collide.
"$TOOL" --nodes 2 --ranks-per-node 1 --no-prefix --timeout 60 -- \
    "$PY" "$NET" ping > "$TMP/c1" 2>&1 &
p1=$!
"$TOOL" --nodes 2 --ranks-per-node 1 --no-prefix --timeout 60 -- \
    "$PY" "$NET" ping > "$TMP/c2" 2>&1 &
p2=$!
wait "$p1"
expect_rc "concurrent run 1" 0 $?
wait "$p2"
expect_rc "concurrent run 2" 0 $?
no_leftovers "concurrent run 1" "$p1"
no_leftovers "concurrent run 2" "$p2"

# 6. A failing rank: the tool names it, stops the others quickly and exits
# with its status.
t0=$(now_ms)
run_tool "$TMP/fail" --nodes 2 --ranks-per-node 2 --timeout 60 -- \
    sh -c '[ "$TACL_RANK" = 2 ] && exit 3; exec sleep 31.7'
t1=$(now_ms)
expect_rc "failing rank" 3 "$rc"
checks=$((checks + 1))
if grep -q "rank 2 (node 1): exit status 3" "$TMP/fail.err" &&
    [ $((t1 - t0)) -lt 15000 ]; then
    ok "failing rank named, others stopped in $((t1 - t0)) ms"
else
    fail "failing rank: not named or slow ($((t1 - t0)) ms):" \
        "$(cat "$TMP/fail.err")"
fi
no_leftovers "failing rank" "$pid"
run_tool "$TMP/nf" --nodes 1 --ranks-per-node 1 -- /nonexistent/cmd
expect_rc "missing command" 127 "$rc"

# 7. --timeout kills every rank, even one that ignores SIGTERM, and
# cleans up.
t0=$(now_ms)
run_tool "$TMP/to" --nodes 2 --ranks-per-node 1 --timeout 1 -- \
    sh -c 'trap "" TERM; sleep 31.7; sleep 31.7'
t1=$(now_ms)
expect_rc "timeout" 124 "$rc"
checks=$((checks + 1))
if [ $((t1 - t0)) -lt 15000 ] && ! pgrep -f "^sleep 31.7" > /dev/null; then
    ok "timeout: all ranks gone after $((t1 - t0)) ms"
else
    fail "timeout: took $((t1 - t0)) ms or ranks survive"
fi
no_leftovers "timeout" "$pid"

# 8. SIGINT and SIGTERM stop the job and clean up.  (A background job of
# a script ignores SIGINT; env gives the tool back the default.)
for sig in INT TERM; do
    env --default-signal=INT "$TOOL" --nodes 2 --ranks-per-node 1 -- \
        sleep 31.7 > "$TMP/sig" 2>&1 &
    pid=$!
    for i in $(seq 100); do
        [ "$(pgrep -c -f "^sleep 31.7")" -ge 2 ] && break
        sleep 0.05
    done
    kill -"$sig" "$pid"
    wait "$pid"
    rc=$?
    want=130
    [ "$sig" = TERM ] && want=143
    expect_rc "SIG$sig" "$want" "$rc"
    expect_not "SIG$sig: ranks gone" "SIG$sig: ranks survive" \
        pgrep -f "^sleep 31.7"
    no_leftovers "SIG$sig" "$pid"
done

# 9. A SIGKILLed tool takes its ranks with it (parent-death signal) but
# leaves its namespaces behind; --cleanup removes them.
"$TOOL" --nodes 2 --ranks-per-node 1 -- sleep 31.7 > /dev/null 2>&1 &
pid=$!
for i in $(seq 100); do
    [ "$(pgrep -c -f "^sleep 31.7")" -ge 2 ] && break
    sleep 0.05
done
{
    kill -KILL "$pid"
    wait "$pid"
} 2> /dev/null
for i in $(seq 100); do
    pgrep -f "^sleep 31.7" > /dev/null || break
    sleep 0.05
done
expect_not "SIGKILL: ranks died with the tool" \
    "SIGKILL: ranks outlive the tool" pgrep -f "^sleep 31.7"
checks=$((checks + 1))
if [ "$(ip netns list | grep -cE "^tacl-$pid(r[0-9]+)?-")" -eq 3 ]; then
    ok "SIGKILL leaves 3 namespaces"
else
    fail "SIGKILL: expected 3 stale namespaces: $(ip netns list)"
fi
"$TOOL" --cleanup > "$TMP/cleanup" 2>&1
expect_rc "--cleanup" 0 $?
checks=$((checks + 1))
if grep -qE "removed namespace tacl-$pid(r[0-9]+)?-sw" "$TMP/cleanup"; then
    ok "--cleanup names what it removed"
else
    fail "--cleanup output: $(cat "$TMP/cleanup")"
fi
no_leftovers "--cleanup" "$pid"

# 10. Bad command lines are refused with exit 2.
for bad in "--nodes 2 --" "--nodes 0 --ranks-per-node 1 -- true" \
    "--nodes 2 --ranks-per-node-list 1 -- true" \
    "--ranks-per-node-list 1,0 -- true" \
    "--nodes 1 --ranks-per-node 1 --inter-rate fast -- true" \
    "--nodes 1 --ranks-per-node 1 --bogus -- true"; do
    # shellcheck disable=SC2086
    "$TOOL" $bad > /dev/null 2>&1
    expect_rc "refused: $bad" 2 $?
done

# 11. The shaped rate: 1 Gbit/s between two nodes, measured with TCP.
# Shaping guarantees a ceiling; how close a run gets to it depends on
# how busy the machine is, so only the ceiling (and that traffic flows)
# is asserted, and the rate is printed (0.95 Gbit/s on an idle machine).
run_tool "$TMP/rate" --nodes 2 --ranks-per-node 1 --inter-rate 1gbit \
    --no-prefix --timeout 60 -- "$PY" "$NET" rate 2
expect_rc "rate run" 0 "$rc"
cat "$TMP/rate"
gbit=$(sed -n 's/^rate_gbit=\([0-9.]*\).*/\1/p' "$TMP/rate")
checks=$((checks + 1))
if [ -n "$gbit" ] && "$PY" -c "import sys; v = float(sys.argv[1]);
sys.exit(0 if 0.05 <= v <= 1.02 else 1)" "$gbit"; then
    ok "shaped rate $gbit Gbit/s, under the 1 Gbit/s ceiling"
else
    fail "shaped rate '$gbit' Gbit/s: not capped at 1 Gbit/s, or no traffic"
fi
no_leftovers "rate" "$pid"

# 12. --quickack: every node's route to the others acknowledges at once
# (the route option), and without it none does.
for opt in --quickack ""; do
    # shellcheck disable=SC2086
    run_tool "$TMP/ack" --nodes 2 --ranks-per-node 1 --no-prefix \
        --timeout 30 $opt -- sh -c 'ip route show dev eth0'
    expect_rc "route run ${opt:-without --quickack}" 0 "$rc"
    checks=$((checks + 1))
    n=$(grep -c "^10\.77\.0\.0/24 .*quickack 1" "$TMP/ack")
    if { [ -n "$opt" ] && [ "$n" = 2 ]; } ||
        { [ -z "$opt" ] && [ "$n" = 0 ]; }; then
        ok "${opt:-no option}: $n of 2 nodes' routes with quickack"
    else
        fail "${opt:-no option}: $n of 2 nodes' routes with quickack:" \
            "$(cat "$TMP/ack")"
    fi
    no_leftovers "route${opt:+ $opt}" "$pid"
done

# 13. --replace-node 1 on 2x2: phase 1 leaves a file in each node's
# /dev/shm; in phase 2 node 1 is a fresh node (another mount namespace,
# its file gone) with the same host name, address and MAC address (so
# the other nodes' ARP caches hold), and node 0 is the
# same node, its file still there.  A failure in phase 1 ends the job.
rtag="tacl-cluster-repl-$$"
repl='[ "$TACL_CLUSTER_PHASE" = 1 ] && touch /dev/shm/'"$rtag"'.$TACL_RANK
sleep 0.3
echo "$TACL_CLUSTER_PHASE $TACL_RANK $(hostname)" \
    "$(ip -4 -o addr show dev eth0 | cut -d" " -f7)" \
    "$(cat /sys/class/net/eth0/address)" \
    "shm=$(ls /dev/shm | grep "^'"$rtag"'\." | tr "\n" ,)" \
    "repl=$TACL_CLUSTER_REPLACED $(readlink /proc/self/ns/mnt)"'
run_tool "$TMP/repl" --nodes 2 --ranks-per-node 2 --replace-node 1 \
    --no-prefix --timeout 30 -- sh -c "$repl"
expect_rc "replace-node run" 0 "$rc"
cut -d' ' -f1-7 "$TMP/repl" | sort > "$TMP/repl.sorted"
{
    for ph in 1 2; do
        s0="10.77.0.1/24 02:00:0a:4d:00:01 shm=$rtag.0,$rtag.1, repl=1"
        echo "$ph 0 taclnode0 $s0"
        echo "$ph 1 taclnode0 $s0"
        [ "$ph" = 1 ] && s1="$rtag.2,$rtag.3," || s1=""
        echo "$ph 2 taclnode1 10.77.0.2/24 02:00:0a:4d:00:02 shm=$s1 repl=1"
        echo "$ph 3 taclnode1 10.77.0.2/24 02:00:0a:4d:00:02 shm=$s1 repl=1"
    done
} > "$TMP/repl.wanted"
expect_same "replace-node: node 1 fresh, same identity, node 0 kept" \
    "$TMP/repl.wanted" "$TMP/repl.sorted"
checks=$((checks + 1))
# Node 1's freshness is its empty /dev/shm above: a namespace's inode
# number cannot show it, since the kernel may give the new mount
# namespace the number the torn-down one had (seen in CI).
m0=$(awk '$2 == 0 || $2 == 1 { print $8 }' "$TMP/repl" | sort -u | wc -l)
m01=$(awk '$1 == 2 { print $8 }' "$TMP/repl" | sort -u | wc -l)
if [ "$m0" = 1 ] && [ "$m01" = 2 ]; then
    ok "replace-node: node 0 keeps its mount namespace, node 1 has its own"
else
    fail "replace-node: mount namespaces of node 0 over both phases $m0" \
        "(want 1), of phase 2's nodes $m01 (want 2): $(cat "$TMP/repl")"
fi
no_leftovers "replace-node" "$pid"
run_tool "$TMP/replf" --nodes 2 --ranks-per-node 1 --replace-node 0 \
    --timeout 30 -- sh -c 'echo phase $TACL_CLUSTER_PHASE; exit $TACL_RANK'
expect_rc "replace-node: a failing phase 1" 1 "$rc"
expect_not "replace-node: no phase 2 after a failing phase 1" \
    "replace-node: phase 2 ran after phase 1 failed" \
    grep -q "phase 2" "$TMP/replf"
no_leftovers "replace-node failing" "$pid"
for bad in "--replace-node 2" "--replace-node 1,x"; do
    # shellcheck disable=SC2086
    "$TOOL" --nodes 2 --ranks-per-node 1 $bad -- true > /dev/null 2>&1
    expect_rc "refused: $bad" 2 $?
done

# 14. A storage node (--storage-rate 100mbit) runs --storage-cmd, the
# ranks see its address, each of 2 ranks puts a 4 MiB file on it at once
# and gets it back intact; the slowest put cannot beat the link's
# ceiling (8 MiB at 100 Mbit/s is 0.67 s), and nothing is left behind.
STORE="$HERE/../../perf/storage_node.py"
mkdir -p "$TMP/storage"
head -c 4194304 /dev/urandom > "$TMP/blob"
# shellcheck disable=SC2016
run_tool "$TMP/st" --nodes 2 --ranks-per-node 1 --no-prefix --timeout 60 \
    --storage-rate 100mbit \
    --storage-cmd "exec $PY '$STORE' serve '$TMP/storage' 29710" -- sh -c '
    echo "addr $TACL_CLUSTER_STORAGE"
    '"$PY"' "$1" put "$TACL_CLUSTER_STORAGE:29710" "$2" "b$TACL_RANK" &&
    '"$PY"' "$1" get "$TACL_CLUSTER_STORAGE:29710" "b$TACL_RANK" \
        "$2.$TACL_RANK" && cmp "$2" "$2.$TACL_RANK" && echo same' \
    sh "$STORE" "$TMP/blob"
expect_rc "storage node run" 0 "$rc"
checks=$((checks + 1))
if [ "$(grep -c '^addr 10\.77\.0\.250$' "$TMP/st")" = 2 ] &&
    [ "$(grep -c '^same$' "$TMP/st")" = 2 ]; then
    ok "storage node: both ranks reach 10.77.0.250, files come back intact"
else
    fail "storage node: $(cat "$TMP/st" "$TMP/st.err")"
fi
slow=$(awk '$1 == "put" && $4 > m { m = $4 } END { print m + 0 }' "$TMP/st")
checks=$((checks + 1))
if "$PY" -c "import sys; sys.exit(0 if float(sys.argv[1]) >= 0.5 else 1)" \
    "$slow"; then
    ok "storage link capped: the slowest put took $slow s (0.67 s at least)"
else
    fail "storage link not capped: 8 MiB put in $slow s"
fi
no_leftovers "storage node" "$pid"
for bad in "--storage-cmd true" "--storage-rate fast"; do
    # shellcheck disable=SC2086
    "$TOOL" --nodes 1 --ranks-per-node 1 $bad -- true > /dev/null 2>&1
    expect_rc "refused: $bad" 2 $?
done

finish
