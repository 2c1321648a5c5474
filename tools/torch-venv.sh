#!/usr/bin/env bash
# Create (once) the cached Python virtual environment the PyTorch and
# DeepSpeed tests use, and print its folder on stdout.
#
# The environment lives outside any build tree, in $TACL_VENV (default
# ${XDG_CACHE_HOME:-$HOME/.cache}/tacl/venv), so a fresh build does not
# reinstall torch (about 3 GB, 1.5-2 minutes).  It is made with Debian's
# python (/usr/bin/python3), whose headers python3-dev provides for the
# binding's C++ extension.  When every package imports already, the script
# only checks and returns (well under a second).
#
# Exit status: 0 ready; 77 with "skipped: why" on stderr when the package
# index cannot be reached or Debian's python lacks venv (the tests then
# report SKIP); 1 on any other failure.
set -euo pipefail

venv=${TACL_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tacl/venv}
python=/usr/bin/python3
# import name -> pip requirement (expecttest: torch's own test modules
# import it, for the conformance runner in tests/torch/conformance)
modules=(torch deepspeed ninja numpy pybind11 expecttest)
requirements=(torch deepspeed ninja numpy pybind11 expecttest)

skip() { echo "skipped: $*" >&2; exit 77; }

have_all() {
    [ -x "$venv/bin/python" ] || return 1
    "$venv/bin/python" - "${modules[@]}" <<'PY' 2>/dev/null
import importlib.util, sys
sys.exit(0 if all(importlib.util.find_spec(m) for m in sys.argv[1:]) else 1)
PY
}

if have_all; then
    echo "$venv"
    exit 0
fi

[ -x "$python" ] || skip "no Debian python at $python (install python3-venv)"
"$python" -c 'import venv, ensurepip' 2>/dev/null ||
    skip "Debian's python has no venv/ensurepip (install python3-venv)"

# One installer at a time: meson runs tests in parallel and each may call us.
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
if ! flock -w 900 9; then
    echo "torch-venv: another install holds $venv.lock for 15 min" >&2
    exit 1
fi
if have_all; then
    echo "$venv"
    exit 0
fi

if [ ! -x "$venv/bin/python" ]; then
    echo "torch-venv: creating $venv" >&2
    "$python" -m venv "$venv" >&2
fi

# Reach the index before a long install, so an offline machine skips fast.
if ! "$venv/bin/python" -m pip download --no-deps --no-cache-dir \
        --dest "$venv/.probe" --quiet ninja >/dev/null 2>&1; then
    rm -rf "$venv/.probe"
    skip "the Python package index cannot be reached (pip download failed)"
fi
rm -rf "$venv/.probe"

echo "torch-venv: installing ${requirements[*]} (torch is ~3 GB)" >&2
log=$venv/pip-install.log
if ! "$venv/bin/python" -m pip install --quiet "${requirements[@]}" \
        >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    if grep -qiE 'connection|resolve|network|timed out|No matching distribution' \
            "$log"; then
        skip "pip could not fetch the packages (see $log)"
    fi
    echo "torch-venv: pip install failed (see $log)" >&2
    exit 1
fi
have_all || { echo "torch-venv: installed, but an import fails" >&2; exit 1; }
echo "$venv"
