#!/usr/bin/env bash
# Run a PyTorch test script under torchrun on this build's tacl.
#
#   run_torch.sh SOURCE_ROOT BUILD_ROOT NPROC SCRIPT [ARGS...]
#
# NPROC "self": the script runs under the environment's python and starts
# torchrun itself (after checks that may skip it, exit 77); NPROC
# "build": step 2 only.
#
# 1. The cached virtual environment with torch (tools/torch-venv.sh):
#    exit 77 (SKIP) with its reason when it cannot be made, for instance
#    when the package index cannot be reached.
# 2. The binding (bindings/torch) built against this build's libtacl
#    (pkg-config's uninstalled file, rpath to the library) and installed
#    into BUILD_ROOT/tests/torch/site, not into the shared environment, so
#    build trees (and worktrees) sharing the environment do not overwrite
#    one another's binding.  Skipped when its sources and the library's
#    header have not changed since the last install.
# 3. torchrun --standalone --nproc-per-node NPROC SCRIPT ARGS.
set -euo pipefail
src=$1 build=$2 nproc=$3
shift 3

rc=0
venv=$("$src/tools/torch-venv.sh") || rc=$?
if [ "$rc" -ne 0 ]; then
    [ "$rc" -eq 77 ] && exit 77
    echo "run_torch: tools/torch-venv.sh failed ($rc)" >&2
    exit 1
fi

site=$build/tests/torch/site
work=$build/tests/torch/binding
mkdir -p "$site" "$work"
stamp=$(cat "$src/include/tacl.h" "$src/bindings/torch/"*.py \
        "$src/bindings/torch/csrc/"* "$src/bindings/torch/tacl_torch/"* \
        | sha256sum | cut -c1-16)
(
    flock -w 1200 9 || { echo "run_torch: binding lock busy" >&2; exit 1; }
    if [ "$(cat "$site/.stamp" 2>/dev/null)" != "$stamp" ]; then
        echo "run_torch: building the tacl_torch binding" >&2
        # A copy in the build tree: setup.py's build folder stays out of
        # the source tree and its object files are reused next time.
        cp -r "$src/bindings/torch/." "$work/"
        PKG_CONFIG_PATH=$build/meson-uninstalled${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH} \
            "$venv/bin/python" -m pip install --no-build-isolation --no-deps \
            --no-index --upgrade --quiet --target "$site" "$work" >&2
        echo "$stamp" > "$site/.stamp"
    fi
) 9>"$build/tests/torch/.binding.lock"

# NPROC "build": the binding is built (or current); nothing runs.
[ "$nproc" = build ] && exit 0
export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
export OMP_NUM_THREADS=1
# Where the tests find the build's programs (tacl-plan).
export TACL_BUILD_ROOT=$build
[ "$nproc" = self ] && exec "$venv/bin/python" "$@"
exec "$venv/bin/torchrun" --standalone --nproc-per-node "$nproc" \
    --max-restarts 0 "$@"
