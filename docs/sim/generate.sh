#!/bin/bash
# Rebuilds tacl-sim and rewrites docs/sim's p4d and p5 pages, their plots
# and docs/sim/results.csv (every cell simulated again; about 10 minutes
# of two cores, progress on stderr).  Arguments after BUILD_DIR go to
# make_pages.py: --reuse rewrites the pages from results.csv without
# simulating (and resumes an interrupted run), --jobs N, --direct, and
# --nodes/--sizes/--topos for a smaller grid (see make_pages.py --help).
#
# Usage: docs/sim/generate.sh BUILD_DIR [make_pages.py options]
set -eu
build=${1:?usage: generate.sh BUILD_DIR [make_pages.py options]}
shift
HERE=$(cd "$(dirname "$0")" && pwd)
ninja -C "$build" tools/tacl-sim >/dev/null
exec /usr/bin/python3 "$HERE/make_pages.py" --build "$build" "$@"
