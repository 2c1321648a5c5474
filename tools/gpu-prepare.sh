#!/usr/bin/env bash
# Run here, before sending the tree to a GPU machine that cannot reach a
# package index and is lent for a few minutes.  Two git-ignored folders,
# which the device tool carries when named (with the tree, 64 MiB in all):
#
# .gpu-deps/      the Debian packages tools/gpu-check.sh may need there and
#                 the image may lack (tools/gpu-lib.sh lists them: pkgconf,
#                 hwloc, Criterion and what it links, UCX and what it
#                 links), and meson.pyz, this machine's meson as a zip
#                 application, for an image without meson.  Only what is
#                 missing is fetched.
# .gpu-prebuilt/  plan A of the check: the programs it runs (probe, CUDA
#                 tests, benchmarks, tacl-run; tools/gpu-lib.sh) and
#                 libtacl with its header and a pkg-config file (for the
#                 torch binding), built here for sm_90 only (release, the
#                 static CUDA runtime, no MPI, stripped), laid out as a
#                 build folder, with MANIFEST naming the sources' hash.
#                 The check uses them where they start and the hash
#                 matches its tree; else it builds there (plan B).
#
# Usage: tools/gpu-prepare.sh [--no-build]    (JOBS: ninja jobs, default 2)
# It ends by printing what the device call carries.
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/gpu-lib.sh
build_too=1
[ "${1:-}" = --no-build ] && build_too=0

# --- .gpu-deps -------------------------------------------------------------
mkdir -p .gpu-deps
missing=()
for p in "${GPU_PACKAGES[@]}"; do
    compgen -G ".gpu-deps/${p}_*.deb" > /dev/null || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    (cd .gpu-deps && apt-get download "${missing[@]}")
fi
if [ ! -f .gpu-deps/meson.pyz ] ||
   ! python3 .gpu-deps/meson.pyz --version > /dev/null 2>&1; then
    mesonbuild=$(python3 -c 'import mesonbuild, os
print(os.path.dirname(mesonbuild.__file__))' 2>/dev/null ||
                 find /usr/lib/python3/dist-packages -maxdepth 1 \
                     -name mesonbuild | head -1)
    [ -n "$mesonbuild" ] || { echo "gpu-prepare: no mesonbuild here" >&2
                              exit 1; }
    stage=$(mktemp -d)
    cp -r "$mesonbuild" "$stage/"
    find "$stage" -name __pycache__ -prune -exec rm -rf {} +
    printf 'import sys\nfrom mesonbuild.mesonmain import main\n%s\n' \
        'sys.exit(main())' > "$stage/__main__.py"
    python3 -m zipapp "$stage" -o .gpu-deps/meson.pyz -c
    rm -rf "$stage"
fi
echo "gpu-prepare: .gpu-deps: $(ls .gpu-deps/*.deb | wc -l) packages and" \
     "meson $(python3 .gpu-deps/meson.pyz --version)"

# --- .gpu-prebuilt ---------------------------------------------------------
if [ $build_too -eq 1 ]; then
    b=build-prebuilt
    opts=(--buildtype=release -Dcuda=enabled -Dgpu_arch=90 -Dwerror=false
          -Dmpi=disabled)
    if [ -d "$b" ]; then
        meson setup --reconfigure "$b" "${opts[@]}" > /dev/null
    else
        meson setup "$b" "${opts[@]}" > /dev/null
    fi
    grep -q '^#define TACL_HAVE_CUDA 1' "$b/core/tacl_build_config.h" || {
        echo "gpu-prepare: $b was configured without CUDA" >&2; exit 1; }
    version=$(sed -n "s/^ *version : '\(.*\)',/\1/p" meson.build | head -1)
    ninja -C "$b" -j "${JOBS:-2}" "${GPU_PROGRAMS[@]}" \
        "lib/libtacl.so.$version"
    rm -rf .gpu-prebuilt
    for prog in "${GPU_PROGRAMS[@]}"; do
        if [ -f "$b/$prog" ]; then
            mkdir -p ".gpu-prebuilt/$(dirname "$prog")"
            strip -o ".gpu-prebuilt/$prog" "$b/$prog"
        fi
    done
    mkdir -p .gpu-prebuilt/lib/pkgconfig .gpu-prebuilt/include
    so=$(readlink -f "$b/lib/libtacl.so")
    strip --strip-unneeded -o ".gpu-prebuilt/lib/$(basename "$so")" "$so"
    ln -sf "$(basename "$so")" .gpu-prebuilt/lib/libtacl.so.0
    ln -sf libtacl.so.0 .gpu-prebuilt/lib/libtacl.so
    cp include/tacl.h .gpu-prebuilt/include/
    cat > .gpu-prebuilt/lib/pkgconfig/tacl.pc <<EOF
prefix=\${pcfiledir}/../..
includedir=\${prefix}/include
libdir=\${prefix}/lib

Name: tacl
Description: Topology-aware collective-communication library (prebuilt)
Version: $version
Libs: -L\${libdir} -ltacl
Cflags: -I\${includedir}
EOF
    {
        echo "source_hash $(gpu_source_hash)"
        echo "built $(date -u +%Y-%m-%dT%H:%MZ)"
        echo "gpu_arch 90"
        echo "glibc $(ldd --version | head -1 | awk '{print $NF}')"
        echo "nvcc $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
        echo "ucx $([ -f .gpu-prebuilt/tests/transport/test_ucx_cuda ] &&
                   echo yes || echo no)"
    } > .gpu-prebuilt/MANIFEST
    echo "gpu-prepare: .gpu-prebuilt: $(find .gpu-prebuilt -type f | wc -l)" \
         "files; $(tr '\n' ' ' < .gpu-prebuilt/MANIFEST)"
fi

# --- what the device call carries ------------------------------------------
mib() { du -sm --apparent-size "$@" | awk '{ s += $1 } END { print s }'; }
tree=$(git ls-files -co --exclude-standard -z | du -cb --files0-from=- |
       tail -1 | awk '{ printf "%d", $1 / 1048576 + 1 }')
deps=$(mib .gpu-deps)
pre=$( [ -d .gpu-prebuilt ] && mib .gpu-prebuilt || echo 0)
echo "gpu-prepare: the tree ~${tree} MiB + .gpu-deps ${deps} MiB +" \
     ".gpu-prebuilt ${pre} MiB = $((tree + deps + pre)) MiB of the 64" \
     "the device call carries (carry: [\".gpu-deps\", \".gpu-prebuilt\"])"
if [ $((tree + deps + pre)) -gt 64 ]; then
    echo "gpu-prepare: over 64 MiB: carry .gpu-deps alone (the check then" \
         "builds there)" >&2
    exit 1
fi
