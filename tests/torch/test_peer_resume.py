"""Peer checkpoints through torch (run by run_torch.sh "self"):

1. peer_checkpoint_checks.py on 2 ranks: PeerCheckpointer's contract.
2. examples/torch_peer_resume.py on 4 ranks twice: uninterrupted, and
   with rank 1 killed (SIGKILL) in step KILL_AT of the first attempt
   under torchrun --max-restarts 1. The resumed run must restore a step
   at most two behind the kill (a save still travelling may be lost, never
   an older one) and every loss it prints must equal the uninterrupted
   run's loss of that step, bit for bit.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parent.parent / "examples" / "torch_peer_resume.py"
STEPS, KILL_AT = 20, 12


def torchrun(nproc, restarts, *args):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           "--nproc-per-node", str(nproc), "--max-restarts", str(restarts),
           *map(str, args)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def losses(out):
    return {int(m.group(1)): m.group(2)
            for m in re.finditer(r"^loss (\d+) (\S+)$", out, re.M)}


def remove_stores(key):
    """The node-local stores a failed run left (named shared memory,
    /dev/shm/tacl-snap-KEY-...): a passing run purges its own."""
    shm = Path("/dev/shm")
    if shm.is_dir():
        for p in shm.glob(f"tacl-snap-{key}-*"):
            p.unlink(missing_ok=True)


def main():
    key = f"peer-resume-{os.getpid()}"
    try:
        run(key)
    finally:
        remove_stores(key)


def run(key):
    rc, out, err = torchrun(2, 0, HERE / "peer_checkpoint_checks.py",
                            key + "-checks")
    if rc != 0 or out.count("checks passed") != 2:
        sys.exit(f"peer_checkpoint_checks.py failed ({rc}):\n{out}\n"
                 f"{err[-4000:]}")
    print("contract: passed on 2 ranks")

    rc, out, err = torchrun(4, 0, EXAMPLE, "--key", key + "-whole",
                            "--steps", STEPS)
    whole = losses(out)
    if rc != 0 or sorted(whole) != list(range(STEPS)):
        sys.exit(f"the uninterrupted run failed ({rc}):\n{out}\n"
                 f"{err[-4000:]}")

    rc, out, err = torchrun(4, 1, EXAMPLE, "--key", key + "-killed",
                            "--steps", STEPS, "--kill-at", KILL_AT)
    restored = check_resumed("peer resume", whole, rc, out, err, STEPS,
                             KILL_AT)
    print(f"killed in step {KILL_AT}, restored step {restored} from peer "
          f"memory, steps {restored + 1}-{STEPS - 1} bit-identical to the "
          f"uninterrupted run")


def check_resumed(name, whole, rc, out, err, steps, kill_at):
    """A run killed in step kill_at and resumed under torchrun (its exit
    status and output) against the uninterrupted run's losses `whole`:
    the step restored ("attempt 1: restored step N") must be at most two
    behind the kill, and every loss before the kill and after the
    restore equal bit for bit; else exit naming the first difference.
    Returns the step restored."""
    m = re.search(r"attempt 1: restored step (\d+)", out)
    if rc != 0 or m is None:
        sys.exit(f"{name}: the killed run did not resume ({rc}):\n{out}\n"
                 f"{err[-6000:]}")
    restored = int(m.group(1))
    if not kill_at - 2 <= restored < kill_at:
        sys.exit(f"{name}: restored step {restored}, killed in step "
                 f"{kill_at}")
    after = losses(out[m.end():])
    if sorted(after) != list(range(restored + 1, steps)):
        sys.exit(f"{name}: after the restore the steps run were "
                 f"{sorted(after)}")
    for step, value in sorted(losses(out[:m.start()]).items()) + \
            sorted(after.items()):
        if value != whole[step]:
            sys.exit(f"{name}: step {step}: loss {value} after the kill, "
                     f"{whole[step]} uninterrupted")
    return restored

if __name__ == "__main__":
    main()
