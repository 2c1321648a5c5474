# What tools/gpu-prepare.sh (here) and tools/gpu-check.sh (on the GPU
# machine) share; sourced by both, from the repository root.

# The programs the check runs, as paths in a build folder; gpu-prepare.sh
# builds them into .gpu-prebuilt/ with the same layout.
GPU_PROGRAMS=(
    tools/gpu_probe
    tools/tacl-run
    tests/kernels/test_reduce_cuda
    tests/kernels/test_quant_cuda
    tests/transport/test_transport_cuda_ipc
    tests/transport/test_ucx_cuda
    tests/transport/test_ofi_cuda
    tests/cuda/test_coll_cuda
    perf/micro/cuda_kernel_bench
    perf/all_reduce_perf
    perf/all_gather_perf
    perf/reduce_scatter_perf
)

# The Debian packages the check may need there: pkg-config, hwloc,
# Criterion and the libraries it links, UCX, libfabric and the libraries
# they link.
GPU_PACKAGES=(
    pkgconf pkgconf-bin libpkgconf3
    libhwloc15 libhwloc-dev libnuma1 libudev1 libltdl7
    libcriterion3 libcriterion-dev libnanomsg5 libgit2-1.5
    libhttp-parser2.9 libmbedtls14 libmbedx509-1 libmbedcrypto7 libssh2-1
    libffi8 libpcre2-8-0 libgssapi-krb5-2 libkrb5-3 libk5crypto3
    libkrb5support0 libkeyutils1 libcom-err2
    libucx0 libucx-dev libibverbs1 librdmacm1 libnl-3-200 libnl-route-3-200
    libfabric1 libfabric-dev libpsm-infinipath1 libpsm2-2 libatomic1
    libssl3
)

# A hash of every source file a build reads (C, CUDA, headers, meson
# files), the same on any machine for the same tree: the prebuilt
# programs are used only where it matches the tree they run in.
gpu_source_hash() {
    find . \( -path ./.git -o -path './build*' -o -path ./.gpu-deps \
              -o -path ./.gpu-prebuilt -o -path ./.device \
              -o -path ./gpu-check-out -o -path ./bindings \) -prune \
           -o -type f \
           \( -name '*.c' -o -name '*.h' -o -name '*.cu' \
              -o -name meson.build -o -name meson_options.txt \) -print |
        LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16
}
