"""How the tacl_torch extension is compiled, for setup.py (pip) and
build_here.py (torch's JIT builder, where pip or an index is missing).

libtacl comes from pkg-config: installed, or, for a build tree,
PKG_CONFIG_PATH=<build>/meson-uninstalled.  Its folders go into the
extension's rpath, so no LD_LIBRARY_PATH is needed.

CUDA: when torch has CUDA and its extension builder finds the toolkit,
the CUDA part (CUDA tensors on torch's streams) is compiled in
(TACL_TORCH_CUDA); TACL_TORCH_CUDA=0 in the environment leaves it out.
A torch without CUDA builds the CPU backend alone.
"""
import os
import shlex
import subprocess
import sys

SOURCES = ["csrc/backend.cpp", "csrc/compress.cpp"]


def pkg_config(*args):
    try:
        out = subprocess.run(["pkg-config", *args, "tacl"], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        sys.exit("tacl_torch: pkg-config cannot find tacl (install tacl, or "
                 "set PKG_CONFIG_PATH to <build>/meson-uninstalled): "
                 f"{getattr(err, 'stderr', '') or err}")
    return shlex.split(out)


def with_cuda():
    """(True, "") when the CUDA part is built, else (False, why)."""
    import torch
    from torch.utils import cpp_extension

    if os.environ.get("TACL_TORCH_CUDA", "") == "0":
        return False, "TACL_TORCH_CUDA=0"
    if torch.version.cuda is None:
        return False, f"torch {torch.__version__} has no CUDA"
    if cpp_extension.CUDA_HOME is None:
        return False, "torch's extension builder finds no CUDA toolkit"
    return True, ""


def extension_args():
    """Keyword arguments of CppExtension/CUDAExtension, and whether CUDA."""
    cuda, _ = with_cuda()
    library_dirs = [a[2:] for a in pkg_config("--libs-only-L")]
    return {
        "include_dirs": [a[2:] for a in pkg_config("--cflags-only-I")],
        "library_dirs": library_dirs,
        "libraries": [a[2:] for a in pkg_config("--libs-only-l")],
        # -g0: no debug information (python's flags ask for -g), so the
        # compile against torch's large headers is quicker.
        # Hidden visibility, as pybind11 asks of extension modules (its
        # types are hidden, so classes bound over them must be too); torch's
        # CUDA headers use hardware_destructive_interference_size, which
        # GCC warns about.
        "extra_compile_args": ["-O2", "-g0", "-Wall", "-Wextra", "-Werror",
                               "-Wno-unused-parameter",
                               "-fvisibility=hidden"] +
                              (["-Wno-interference-size"] if cuda else []) +
                              (["-DTACL_TORCH_CUDA"] if cuda else []),
        "extra_link_args": [f"-Wl,-rpath,{d}" for d in library_dirs],
    }, cuda
