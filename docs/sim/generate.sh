#!/bin/bash
# Rebuilds tacl-sim and rewrites docs/sim's p4d and p5 pages, their plots
# and docs/sim/results.csv, every cell simulated again: roughly a quarter
# of an hour of CPU, three quarters of it at 128 nodes, two simulations
# at a time by default; progress, with the CPU spent so far, on stderr.
# Arguments after BUILD_DIR go to make_pages.py: --reuse keeps
# results.csv's rows and simulates only the missing ones (resuming an
# interrupted run), --pages-only simulates nothing, --jobs N, --direct,
# and --nodes/--sizes/--topos/--colls for a smaller grid (see
# make_pages.py --help).
#
# Usage: docs/sim/generate.sh BUILD_DIR [make_pages.py options]
set -eu
build=${1:?usage: generate.sh BUILD_DIR [make_pages.py options]}
shift
HERE=$(cd "$(dirname "$0")" && pwd)
ninja -C "$build" tools/tacl-sim >/dev/null
exec /usr/bin/python3 "$HERE/make_pages.py" --build "$build" "$@"
