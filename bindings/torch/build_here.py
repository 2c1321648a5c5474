"""Build tacl_torch into a folder with torch's own extension builder (ninja
and a C++ compiler; no pip, no package index), for machines where pip
cannot install (tools/gpu-check.sh on a GPU machine):

    python3 bindings/torch/build_here.py TARGET

leaves TARGET/tacl_torch (the package and its _C extension); put TARGET
on PYTHONPATH.  pkg-config must find tacl (tacl_build.py).  Prints one
line saying what was built.
"""
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tacl_build  # noqa: E402


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: build_here.py TARGET")
    target = os.path.abspath(sys.argv[1])
    import torch
    from torch.utils import cpp_extension

    args, cuda = tacl_build.extension_args()
    _, why = tacl_build.with_cuda()
    # No CUDA source is compiled, but torch's builder wants architectures
    # and asks the GPU for them when this is not set.
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    work = tempfile.mkdtemp(prefix="tacl_torch_build_")
    start = time.time()
    # The module is named _C, so its file and PyInit match the package's
    # "from ._C import".
    module = cpp_extension.load(
        name="_C",
        sources=[os.path.join(HERE, s) for s in tacl_build.SOURCES],
        extra_include_paths=args["include_dirs"],
        extra_cflags=args["extra_compile_args"],
        extra_ldflags=[f"-L{d}" for d in args["library_dirs"]] +
        [f"-l{lib}" for lib in args["libraries"]] + args["extra_link_args"],
        with_cuda=cuda,
        build_directory=work,
        verbose=False)
    package = os.path.join(target, "tacl_torch")
    os.makedirs(package, exist_ok=True)
    for name in os.listdir(os.path.join(HERE, "tacl_torch")):
        if name.endswith(".py"):
            shutil.copy(os.path.join(HERE, "tacl_torch", name), package)
    shutil.copy(module.__file__, package)
    shutil.rmtree(work, ignore_errors=True)
    print(f"build_here: tacl_torch for torch {torch.__version__} in "
          f"{package}, {'with CUDA' if cuda else 'CPU only (' + why + ')'}, "
          f"{time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
