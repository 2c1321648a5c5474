"""Build the tacl_torch extension against libtacl found by pkg-config.

    pip install --no-build-isolation ./bindings/torch

torch must already be installed in the environment (hence no build
isolation).  pkg-config must find tacl: installed, or, for a build tree,
PKG_CONFIG_PATH=<build>/meson-uninstalled.  The library's folders go into
the extension's rpath, so no LD_LIBRARY_PATH is needed.
"""
import shlex
import subprocess
import sys

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension


def pkg_config(*args):
    try:
        out = subprocess.run(["pkg-config", *args, "tacl"], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        sys.exit("tacl_torch: pkg-config cannot find tacl (install tacl, or "
                 "set PKG_CONFIG_PATH to <build>/meson-uninstalled): "
                 f"{getattr(err, 'stderr', '') or err}")
    return shlex.split(out)


include_dirs = [a[2:] for a in pkg_config("--cflags-only-I")]
library_dirs = [a[2:] for a in pkg_config("--libs-only-L")]
libraries = [a[2:] for a in pkg_config("--libs-only-l")]

setup(
    name="tacl_torch",
    version="0.1.0",
    description="torch.distributed backend 'tacl' on the tacl library",
    packages=["tacl_torch"],
    ext_modules=[
        CppExtension(
            "tacl_torch._C",
            ["csrc/backend.cpp"],
            include_dirs=include_dirs,
            library_dirs=library_dirs,
            libraries=libraries,
            # -g0: no debug information (python's flags ask for -g), so the
            # compile against torch's large headers is quicker.
            extra_compile_args=["-O2", "-g0", "-Wall", "-Wextra", "-Werror",
                                "-Wno-unused-parameter"],
            extra_link_args=[f"-Wl,-rpath,{d}" for d in library_dirs],
        )
    ],
    cmdclass={"build_ext": BuildExtension},
    entry_points={
        "torch.distributed.backends": ["tacl = tacl_torch:_register"],
    },
)
