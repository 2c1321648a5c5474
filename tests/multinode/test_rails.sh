#!/bin/bash
# Several rails per emulated node (tacl-cluster --rails): with --rails 2
# every node has two uplinks (eth0 on 10.77.0.0/24, eth1 on 10.77.1.0/24),
# each shaped on both of its ends, each rail its own bridge, and traffic to
# a rail-1 address leaves on eth1 only; the ranks' topology lists 2 NICs
# per node at the shaped rate (tacl-info, and the topology a whole job
# dumps); a job runs every collective across it; without --rails no rank
# is told of NICs (one rail behaves as before).  Bad --rails values and a
# TACL_NICS naming no interface fail with a message, not a crash.  Skips
# (exit 77) where `tacl-cluster --check` fails.
#
# Usage: test_rails.sh TACL_CLUSTER TACL_INFO MN_CHECK

USAGE="usage: test_rails.sh TACL_CLUSTER TACL_INFO MN_CHECK"
TOOL=${1:?$USAGE}
INFO=${2:?$USAGE}
CHECK=${3:?$USAGE}
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
. "$HERE/../common/checks.sh"

# 1. A TACL_NICS naming no interface is a clear error of the topology.
TACL_NICS=eth0,tacl-none9 "$INFO" --section topology > "$TMP/bad.log" 2>&1
rc=$?
checks=$((checks + 1))
if [ "$rc" -eq 0 ]; then
    fail "TACL_NICS naming no interface: tacl-info exited 0"
else
    ok "TACL_NICS naming no interface: tacl-info fails (exit $rc)"
fi
expect_line "TACL_NICS naming no interface: the message names it" \
    "$TMP/bad.log" "'tacl-none9' is no network interface"

if ! "$TOOL" --check; then
    echo "SKIP: tacl-cluster --check failed: needs root and namespaces"
    exit 77
fi

# 2. Bad counts of rails are refused before anything is made.
for bad in 0 9 x; do
    "$TOOL" --nodes 2 --ranks-per-node 1 --rails "$bad" -- true \
        > /dev/null 2> "$TMP/usage.$bad"
    expect_rc "--rails $bad is refused" 2 $?
    expect_line "--rails $bad: the message says why" "$TMP/usage.$bad" \
        "--rails wants 1..8"
done

# 3. The links: what each rank prints about its node (and node 0 about
# the switch, which it finds from its own namespace's name).
probe='me=$(ip netns identify); sw=${me%-n*}-sw; n=$((TACL_RANK + 1));'
probe+=' echo "nics $TACL_NICS";'
probe+=' for d in eth0 eth1; do'
probe+='  echo "addr $d $(ip -4 -o addr show dev $d | cut -d" " -f7)";'
probe+='  echo "shaped $d $(tc qdisc show dev $d | grep -c "tbf.*rate 200Mbit")";'
probe+=' done;'
probe+=' echo "route $(ip route get 10.77.1.$((3 - n)) | grep -o "dev [a-z0-9]*")";'
probe+=' echo "topo $('"$INFO"' --section topology | grep -o "nics=.*")";'
probe+=' [ "$TACL_RANK" = 0 ] || exit 0;'
probe+=' for k in 0 1; do'
probe+='  echo "bridge $k $(ip -n $sw -o link show master br$k |'
probe+='   cut -d" " -f2 | cut -d@ -f1 | sort | tr "\n" " ")";'
probe+=' done;'
probe+=' echo "switch shaped $(tc -n $sw qdisc show | grep -c "tbf.*rate 200Mbit")";'
probe+=' tx() { cat /sys/class/net/$1/statistics/tx_packets; };'
probe+=' a0=$(tx eth0); a1=$(tx eth1);'
probe+=' for i in $(seq 20); do (exec 3<> /dev/tcp/10.77.1.2/9) 2> /dev/null; done;'
probe+=' echo "sent eth0 $(( $(tx eth0) - a0 )) eth1 $(( $(tx eth1) - a1 ))"'
"$TOOL" --nodes 2 --ranks-per-node 1 --rails 2 --inter-rate 200mbit \
    --timeout 60 -- bash -c "$probe" > "$TMP/links.log" 2>&1
expect_rc "--rails 2: the probe runs on both nodes" 0 $?
for n in 0 1; do
    p="[node $n rank $n]"
    a=$((n + 1))
    expect_line "node $n: TACL_NICS lists both rails at the rate" \
        "$TMP/links.log" "$p nics eth0@0.2,eth1@0.2"
    expect_line "node $n: eth0 on rail 0's subnet" "$TMP/links.log" \
        "$p addr eth0 10.77.0.$a/24"
    expect_line "node $n: eth1 on rail 1's subnet" "$TMP/links.log" \
        "$p addr eth1 10.77.1.$a/24"
    expect_line "node $n: eth0 shaped" "$TMP/links.log" "$p shaped eth0 1"
    expect_line "node $n: eth1 shaped" "$TMP/links.log" "$p shaped eth1 1"
    expect_line "node $n: the peer's rail-1 address goes out on eth1" \
        "$TMP/links.log" "$p route dev eth1"
    expect_line "node $n: tacl's topology sees 2 NICs of 0.2 Gbit/s" \
        "$TMP/links.log" "$p topo nics=2 nic_gbps=0.2"
done
p="[node 0 rank 0]"
expect_line "rail 0's bridge holds only the nodes' rail-0 ports" \
    "$TMP/links.log" "$p bridge 0 n0 n1 "
expect_line "rail 1's bridge holds only the nodes' rail-1 ports" \
    "$TMP/links.log" "$p bridge 1 n0r1 n1r1 "
expect_line "the switch shapes its end of all 4 links" "$TMP/links.log" \
    "$p switch shaped 4"
# 20 refused connections to 10.77.1.2: at least 20 SYNs on eth1, and
# nothing of them on eth0 (which stays idle meanwhile).
expect_grep "traffic to rail 1 leaves on eth1, not eth0" \
    "^\[node 0 rank 0\] sent eth0 [0-9] eth1 (2[0-9]|[3-9][0-9])$" \
    "$TMP/links.log"

# 4. One rail (the default) tells the ranks of no NICs: as before.
"$TOOL" --nodes 2 --ranks-per-node 1 --timeout 60 -- \
    bash -c 'echo "nics [${TACL_NICS-unset}] $(ls /sys/class/net | tr "\n" " ")"' \
    > "$TMP/one.log" 2>&1
expect_rc "one rail: the job runs" 0 $?
expect_line "one rail: no TACL_NICS, only lo and eth0" "$TMP/one.log" \
    "[node 1 rank 1] nics [unset] eth0 lo "

# 5. A job across 2 rails: every collective on 2 nodes of 2 ranks, and
# the topology the communicator dumps has 2 NICs on both nodes.
mkdir -p "$TMP/barrier"
TACL_TOPO_DUMP_FILE="$TMP/topo" "$TOOL" --ranks-per-node-list 2,2 \
    --rails 2 --inter-rate 1gbit --timeout 200 -- \
    "$CHECK" check 2,2 "$TMP/barrier" > "$TMP/job.log" 2>&1
rc=$?
expect_rc "--rails 2: every collective across 2 nodes" 0 "$rc"
[ "$rc" -eq 0 ] || tail -20 "$TMP/job.log"
checks=$((checks + 1))
got=$(grep -c "^node .* nics=2 nic_gbps=1$" "$TMP/topo" 2> /dev/null)
if [ "${got:-0}" -eq 2 ]; then
    ok "the job's topology has 2 NICs on each of its 2 nodes"
else
    fail "the job's topology: ${got:-0} of 2 nodes with nics=2:"
    sed 's/^/    /' "$TMP/topo" 2> /dev/null | head -20
fi

finish
