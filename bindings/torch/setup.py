"""Build the tacl_torch extension against libtacl found by pkg-config.

    pip install --no-build-isolation ./bindings/torch

torch must already be installed in the environment (hence no build
isolation).  tacl_build.py says how it is compiled (pkg-config, CUDA).
"""
import os
import sys

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension, \
    CUDAExtension

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tacl_build  # noqa: E402

args, cuda = tacl_build.extension_args()

setup(
    name="tacl_torch",
    version="0.1.0",
    description="torch.distributed backend 'tacl' on the tacl library",
    packages=["tacl_torch"],
    ext_modules=[
        (CUDAExtension if cuda else CppExtension)(
            "tacl_torch._C", tacl_build.SOURCES, **args)
    ],
    cmdclass={"build_ext": BuildExtension},
    entry_points={
        "torch.distributed.backends": ["tacl = tacl_torch:_register"],
    },
)
