#!/usr/bin/env bash
# Install what building and testing tacl needs, from Debian's packages.
# Safe to run again: it installs only what is missing.
set -euo pipefail

packages=(
    build-essential pkg-config meson ninja-build
    libcriterion-dev
    libhwloc-dev libucx-dev libibverbs-dev
    libfabric-dev libfabric-bin   # the ofi transport; fi_info
    libopenmpi-dev openmpi-bin
    iproute2
    libopenblas-dev         # the training engine (engine/)
    clang libclang-rt-dev   # .ci/run's libFuzzer harnesses (libFuzzer)
    python3-venv python3-dev g++   # the PyTorch binding (tools/torch-venv.sh)
)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
        missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "install-deps: need root to install: ${missing[*]}" >&2
        exit 1
    fi
    echo "install-deps: installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" \
        >/dev/null
fi
