#!/usr/bin/env bash
# The whole conformance table: PyTorch's DistributedTest suite on gloo and
# on tacl side by side (conformance.py), with the name gates lifted in a
# third run, written to docs/bench/conformance.md.
#
#   tests/torch/conformance/run.sh BUILD_ROOT [conformance.py options]
#
# e.g. run.sh build --world-sizes 2 4; the default is 2 3 4 8.  Results
# per backend and world size go to BUILD_ROOT/tests/torch/conformance
# (an interrupted run goes on from there; --fresh starts over).  One
# test's ranks run at a time.  Exits 77 where tools/torch-venv.sh cannot
# make the environment.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../../.." && pwd)
build=$(cd "${1:?usage: run.sh BUILD_ROOT [conformance.py options]}" && pwd)
shift
export CONFORMANCE_COMMAND="tests/torch/conformance/run.sh BUILD $*"
exec "$src/tests/torch/run_torch.sh" "$src" "$build" self \
    "$here/conformance.py" --lift --out "$build/tests/torch/conformance" \
    --table "$src/docs/bench/conformance.md" "$@"
