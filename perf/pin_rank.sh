#!/bin/sh
# Run a command pinned to one core: local rank i (tacl-run's
# TACL_LOCAL_RANK, or Open MPI's OMPI_COMM_WORLD_LOCAL_RANK) on core
# i mod the online cores, so that both libraries' ranks are placed alike
# (perf/latency.sh PIN=1).
# Usage: pin_rank.sh PROGRAM [ARGS...]
set -u
rank=${TACL_LOCAL_RANK:-${OMPI_COMM_WORLD_LOCAL_RANK:-0}}
cores=$(getconf _NPROCESSORS_ONLN)
exec taskset -c $((rank % cores)) "$@"
