"""torch.distributed.checkpoint in peer memory (tacl_torch.dcp; run by
run_torch.sh "self"):

1. dcp_checks.py on 2 ranks, saving, then loading in fresh processes:
   the round trip bit for bit, and each bad input refused naming why
   (a load with nothing saved among them).
2. examples/torch_dcp_resume.py on 2 ranks, DDP, then FSDP2: once
   uninterrupted, once with rank 1 killed in step KILL_AT under torchrun
   --max-restarts 1. The resumed run must load a step at most two
   behind the kill and print every loss equal to the uninterrupted
   run's, bit for bit (test_peer_resume.py's harness).
"""
import os
import sys
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from test_peer_resume import check_resumed, losses, torchrun  # noqa: E402

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parent.parent / "examples" / "torch_dcp_resume.py"
STEPS, KILL_AT = 16, 9


def remove_stores(key):
    """The node-local stores a failed run left: both sets of the key (its
    index KEY.i and its data KEY.d)."""
    shm = Path("/dev/shm")
    if shm.is_dir():
        for p in shm.glob(f"tacl-snap-{key}*"):
            p.unlink(missing_ok=True)


def checks(key):
    for phase in ("save", "load"):
        rc, out, err = torchrun(2, 0, HERE / "dcp_checks.py", phase, key)
        if rc != 0 or out.count(f"{phase} checks passed") != 2:
            sys.exit(f"dcp_checks.py {phase} failed ({rc}):\n{out}\n"
                     f"{err[-6000:]}")
    print("round trip and refusals: passed on 2 ranks")


def resume(key, *flags):
    name = "fsdp2" if "--fsdp" in flags else "ddp"
    rc, out, err = torchrun(2, 0, EXAMPLE, "--key", key + "-whole",
                            "--steps", STEPS, *flags)
    whole = losses(out)
    if rc != 0 or sorted(whole) != list(range(STEPS)):
        sys.exit(f"{name}: the uninterrupted run failed ({rc}):\n{out}\n"
                 f"{err[-6000:]}")

    rc, out, err = torchrun(2, 1, EXAMPLE, "--key", key + "-killed",
                            "--steps", STEPS, "--kill-at", KILL_AT, *flags)
    restored = check_resumed(name, whole, rc, out, err, STEPS, KILL_AT)
    print(f"{name}: killed in step {KILL_AT}, loaded step {restored} "
          f"through dcp.load, steps {restored + 1}-{STEPS - 1} "
          f"bit-identical to the uninterrupted run")


def main():
    key = f"dcp-{os.getpid()}"
    try:
        checks(key + "-checks")
        resume(key + "-ddp")
        resume(key + "-fsdp", "--fsdp")
    finally:
        remove_stores(key)


if __name__ == "__main__":
    main()
