#!/bin/sh
# The report's Open MPI run across emulated nodes: tacl-cluster with one
# job per node, node 0 starting mpirun whose launch agent
# (perf/netns_agent.sh) enters the other node's network namespace with
# `ip netns exec`, 2 nodes x 2 ranks of mpi_coll_perf, exactly as
# report.sh launches it.  Checks that the 4 ranks ran (the header's
# nRanks), that every result was exact, and that the nodes' Open MPI
# shared-memory segments did not collide (each node has its own host
# name and /dev/shm).  Skips (exit 77) without root and namespaces or
# without mpirun.
#
# Usage: test_mpi_netns.sh TACL_CLUSTER REPORT_SH NETNS_AGENT MPI_COLL_PERF

CLUSTER=${1:?usage: test_mpi_netns.sh TACL_CLUSTER REPORT_SH AGENT MPI_PERF}
REPORT=${2:?usage: test_mpi_netns.sh TACL_CLUSTER REPORT_SH AGENT MPI_PERF}
AGENT=${3:?usage: test_mpi_netns.sh TACL_CLUSTER REPORT_SH AGENT MPI_PERF}
PERF=${4:?usage: test_mpi_netns.sh TACL_CLUSTER REPORT_SH AGENT MPI_PERF}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../common/checks.sh"

if ! "$CLUSTER" --check > /dev/null 2>&1; then
    echo "SKIP: tacl-cluster --check failed: needs root and namespaces"
    exit 77
fi
if ! command -v mpirun > /dev/null; then
    echo "SKIP: no mpirun (Debian's openmpi-bin)"
    exit 77
fi
# tacl-cluster shares /tmp between nodes, not $TMPDIR.
dir=$(mktemp -d /tmp/tacl-mpi-netns.XXXXXX) || exit 1
trap 'rm -rf "$dir"' EXIT
log=$dir/log
mkdir "$dir/job" || exit 1
"$CLUSTER" --nodes 2 --ranks-per-node 1 --timeout 120 --no-prefix -- \
    "$REPORT" --mpi-node-job "$dir/job" "$AGENT" 2 -- \
    "$PERF" all_gather -b 64K -e 256K -f 4 -n 2 -w 1 -z 1 > "$log" 2>&1
rc=$?
expect_rc "mpirun across 2 emulated nodes" 0 $rc
checks=$((checks + 1))
if grep -q "nRanks 4 " "$log"; then
    ok "4 ranks on 2 nodes"
else
    fail "the header does not say nRanks 4"
fi
checks=$((checks + 1))
if grep -q "Out of bounds values : 0 OK" "$log"; then
    ok "every result exact"
else
    fail "no exact results"
fi
checks=$((checks + 1))
if grep -q "vader_segment\|shared memory initialization" "$log"; then
    fail "the nodes' shared-memory segments collided"
else
    ok "each node has its own shared memory"
fi
# shellcheck disable=SC2154 # failures: counted by checks.sh
[ "$failures" -eq 0 ] || cat "$log"
finish
