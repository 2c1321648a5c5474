#!/usr/bin/env bash
# Install dependencies, build tacl, and run the main job: an all-gather
# benchmark across 4 local ranks (nccl-tests columns, busbw in GB/s).
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/install-deps.sh
[ -d build ] || meson setup build --buildtype=release
ninja -C build
exec build/tools/tacl-run -n "${NRANKS:-4}" -- \
    build/perf/all_gather_perf -b 2M -e 128M -f 4 -n 10 -w 3
