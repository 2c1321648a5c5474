"""Run PyTorch's DistributedTest suite on gloo and on tacl, side by side.

    python conformance.py [--world-sizes 2 3 4 8] [--backends gloo tacl]
                          [--only NAMES_OR_FILE...] [--lift]
                          [--lifted NAMES_OR_FILE...] [--timeout 120]
                          [--start fork|spawn] [--out DIR] [--fresh]
                          [--table FILE] [--expect-pass]

NAMES_OR_FILE: test names, comma-separated, or a file of one name a line
("#" starts a comment).  Run it where tacl_torch imports (run.sh and
meson's torch_conformance start it through tests/torch/run_torch.sh).

For every world size and backend, one worker process runs the suite's
tests one after the other (cases.py: torch's own test class, configured
from the environment) and appends one JSON line per test to
DIR/<backend>-<world size>.jsonl: the test, its verdict (pass, fail,
skip, timeout), the reason (the first line of the exception a rank
raised, or the skip message) and its seconds.  Runs are sequential: one
test's ranks at a time.

Each test is limited to --timeout seconds by torch's own harness (it
kills the ranks and the test fails with "timed out"); should the worker
itself stop making progress, this driver kills it (its process group)
after the limit and a grace, records the test as timed out and starts a
new worker on the tests left.  A worker whose results file exists goes
on where it stopped, so an interrupted run can be resumed; --fresh
starts over.

--lift adds a run of tacl with upstream's backend-name gates lifted (the
suite sees "gloo", the groups are tacl's; cases.py), reported apart, for
the tests that pass on gloo and are skipped on tacl.

--lifted NAMES runs the named tests on tacl with the gates lifted,
whatever gloo does (the CI subset's gated tests).

--table writes a markdown table (test, world size, gloo verdict, tacl
verdict, reason) and the summary counts.  --expect-pass exits 1 unless
every selected test passes on every backend run (the CI subset).
"""
import argparse
import datetime
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
VERDICTS = ("pass", "fail", "skip", "timeout")


# --------------------------------------------------------------- worker --

def first_reason(text):
    """The first line of the exception a failed test raised.

    torch's harness reports "Process R exited with error code 10 and
    exception:" followed by the rank's traceback; the exception's own
    line is the last unindented "Name: message" line of the first rank's
    traceback.  Anything else: its first non-empty line."""
    blocks = re.split(r"Process \d+ exited with error code \d+ and "
                      r"exception:\n", text)
    block = blocks[1] if len(blocks) > 1 else text
    block = block.split("\n\nProcess ")[0]
    found = None
    for line in block.splitlines():
        if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Failure|Exit|"
                    r"Interrupt|Warning|Timeout)\b(:|$)", line):
            found = line
    if found is None:
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        found = lines[-1] if lines else ""
    return found.strip()[:300]


class _Result(unittest.TestResult):
    """Records the one test of a run as (verdict, reason)."""

    def __init__(self):
        super().__init__()
        self.verdict, self.reason = "pass", ""

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.verdict, self.reason = "skip", str(reason)

    def addError(self, test, err):
        super().addError(test, err)
        self._failed(test, err)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._failed(test, err)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self.verdict, self.reason = "pass", "expected failure"

    def _failed(self, test, err):
        text = self._exc_info_to_string(err, test)
        if re.search(r"terminated or timed out after", text):
            self.verdict = "timeout"
        else:
            self.verdict = "fail"
        self.reason = first_reason(text)


def worker(args):
    """Runs the tests named in args.tests_file not yet in args.results."""
    # The suite's INIT_METHOD, read when it is imported: a file, as
    # upstream's run_test.py gives it, for the tests that make the
    # default group again (they are skipped with env://).  Removed before
    # every test, so no test meets a store file an earlier one left.
    skips = tempfile.mkdtemp(prefix="conformance-")
    init_file = os.path.join(skips, "init")
    os.environ["INIT_METHOD"] = "file://" + init_file
    os.environ["CONFORMANCE_SKIPS"] = skips
    sys.path.insert(0, HERE)
    import cases

    done = set(_load(args.results))
    names = [n.strip() for n in open(args.tests_file) if n.strip()]
    for name in names:
        if name in done:
            continue
        with open(args.results + ".running", "w") as running:
            running.write(name)
        if os.path.exists(init_file):
            os.unlink(init_file)
        result = _Result()
        start = time.monotonic()
        unittest.TestSuite([cases.Conformance(name)]).run(result)
        seconds = time.monotonic() - start
        stray = _end_stray_ranks()
        note = os.path.join(skips, name)
        if result.verdict == "skip" and os.path.exists(note):
            with open(note) as f:
                result.reason = f.read().strip() or result.reason
        if result.verdict == "timeout":
            result.reason = f"no result in {cases.TIMEOUT} s"
        if stray:
            result.reason += f" [rank(s) {stray} outlived the test, killed]"
        _append(args.results, name, result.verdict, result.reason, seconds)
    os.unlink(args.results + ".running")
    sys.stdout.flush()
    sys.stderr.flush()
    # Nothing is left to wait for: skip the interpreter's exit, which
    # would join any rank process and run torch's exit handlers.
    os._exit(0)


def _end_stray_ranks():
    """Kills the rank processes still alive after torch's harness ended a
    test, and returns their names.  The harness ends a test when one rank
    fails and terminates the others (SIGTERM); a rank that does not die
    of that (a signal handler of a library it loaded that hangs) would
    otherwise hold the worker at exit forever."""
    import multiprocessing
    stray = []
    for child in multiprocessing.active_children():
        child.join(timeout=5)
        if child.is_alive():
            stray.append(f"{child.name} (pid {child.pid})")
            child.kill()
            child.join(timeout=5)
    return ", ".join(stray)


def _append(path, name, verdict, reason, seconds):
    with open(path, "a") as f:
        f.write(json.dumps({"test": name, "verdict": verdict,
                            "reason": reason.splitlines()[0] if reason
                            else "", "seconds": round(seconds, 2)}) + "\n")


def _load(path):
    """{test: record} of a results file (the last record of a test)."""
    records = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.strip():
                    record = json.loads(line)
                    records[record["test"]] = record
    return records


# --------------------------------------------------------------- driver --

def _all_tests(env):
    """The suite's test names, from a process configured like a worker."""
    out = subprocess.run(
        [sys.executable, "-c",
         "import sys; sys.path.insert(0, sys.argv[1]); import cases; "
         "print('\\n'.join(cases.test_names()))", HERE],
        env=env, check=True, capture_output=True, text=True)
    return out.stdout.split()


def _select(only, names):
    if not only:
        return names
    wanted = []
    for item in only:
        if os.path.exists(item):
            with open(item) as f:
                wanted += [ln.split("#")[0].strip() for ln in f]
        else:
            wanted += item.split(",")
    wanted = [w for w in wanted if w]
    unknown = sorted(set(wanted) - set(names))
    if unknown:
        sys.exit(f"conformance: not tests of the suite: {', '.join(unknown)}")
    return [n for n in names if n in set(wanted)]


def run_one(args, backend, world_size, lift, names):
    """All of `names` on one backend and world size; returns the records."""
    tag = f"{backend}{'-lifted' if lift else ''}-{world_size}"
    results = os.path.join(args.out, tag + ".jsonl")
    if args.fresh and os.path.exists(results):
        os.unlink(results)
    # No GPU is shown to the suite: it runs the CPU backends' tests, and
    # its harness skips every test where a GPU is seen but fewer GPUs
    # than ranks, which would leave a one-GPU machine with no verdicts.
    env = dict(os.environ, BACKEND="gloo" if lift else backend,
               WORLD_SIZE=str(world_size), CUDA_VISIBLE_DEVICES="",
               CONFORMANCE_TIMEOUT=str(args.timeout),
               CONFORMANCE_START=args.start,
               CONFORMANCE_LIFT="1" if lift else "0")
    tests_file = os.path.join(args.out, tag + ".tests")
    with open(tests_file, "w") as f:
        f.write("\n".join(names) + "\n")
    log = open(os.path.join(args.out, tag + ".log"), "a")
    grace = 90
    while True:
        left = [n for n in names if n not in _load(results)]
        if not left:
            break
        print(f"conformance: {tag}: {len(left)} tests to run", flush=True)
        proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker",
             "--results", results, "--tests-file", tests_file],
            env=env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, cwd=args.out)
        running, since = None, time.monotonic()
        while proc.poll() is None:
            time.sleep(1)
            try:
                with open(results + ".running") as f:
                    now_running = f.read().strip()
            except FileNotFoundError:
                now_running = None
            if now_running != running:
                running, since = now_running, time.monotonic()
            elif time.monotonic() - since > args.timeout + grace:
                # The worker is stuck beyond torch's own limit: end it,
                # with the ranks it started (its process group).
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                if running:
                    _append(results, running, "timeout",
                            f"worker stuck for {args.timeout + grace} s",
                            time.monotonic() - since)
                break
        if proc.returncode not in (0, -signal.SIGKILL):
            # A worker that died on its own: the test it ran crashed it.
            try:
                with open(results + ".running") as f:
                    crashed = f.read().strip()
            except FileNotFoundError:
                crashed = None
            if crashed and crashed not in _load(results):
                _append(results, crashed, "fail",
                        f"worker died (exit status {proc.returncode})", 0)
            elif not crashed:
                sys.exit(f"conformance: {tag}: the worker failed "
                         f"({proc.returncode}); see {log.name}")
    records = _load(results)
    counts = {v: sum(records[n]["verdict"] == v for n in names)
              for v in VERDICTS}
    print(f"conformance: {tag}: " +
          ", ".join(f"{counts[v]} {v}" for v in VERDICTS), flush=True)
    return {n: records[n] for n in names}


def _cell(text):
    return text.replace("|", "\\|").replace("\n", " ")


def _revision():
    """The source tree's commit (with "+changes" when it has some)."""
    try:
        head = subprocess.run(["git", "-C", HERE, "rev-parse", "--short",
                               "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", HERE, "status", "--porcelain",
                                "--untracked-files=no"],
                               capture_output=True, text=True).stdout
        return head + (" +changes" if dirty.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def write_table(args, runs, names):
    """The markdown table: per test and world size, then the counts."""
    import torch
    lines = [
        "# PyTorch's DistributedTest suite on gloo and on tacl", "",
        f"- made by: `{args.command}`, at commit {_revision()}",
        f"- torch {torch.__version__}, "
        f"{datetime.date.today().isoformat()}, "
        f"{args.start}ed ranks, {args.timeout} s per test", "",
        "## Summary", "",
        "| world size | tests | gloo pass | tacl pass | passed on gloo, "
        "skipped on tacl | passed on gloo, fails on tacl | passed on tacl, "
        "not on gloo |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for ws in args.world_sizes:
        gloo, tacl = runs.get(("gloo", ws, False)), runs.get(("tacl", ws,
                                                               False))
        if not gloo or not tacl:
            continue
        v = {n: (gloo[n]["verdict"], tacl[n]["verdict"]) for n in names}
        lines.append(
            f"| {ws} | {len(names)} "
            f"| {sum(g == 'pass' for g, _ in v.values())} "
            f"| {sum(t == 'pass' for _, t in v.values())} "
            f"| {sum(g == 'pass' and t == 'skip' for g, t in v.values())} "
            f"| {sum(g == 'pass' and t in ('fail', 'timeout') for g, t in v.values())} "
            f"| {sum(t == 'pass' and g != 'pass' for g, t in v.values())} |")
    lifted = [(ws, runs[("tacl", ws, True)]) for ws in args.world_sizes
              if ("tacl", ws, True) in runs]
    if lifted:
        lines += ["", "## Name gates lifted", "",
                  "Tests that pass on gloo and that upstream's backend-name "
                  "gates skip on tacl, run on tacl with the suite believing "
                  "it runs gloo (cases.py, CONFORMANCE_LIFT).", "",
                  "| world size | test | tacl, gate lifted | reason |",
                  "| --- | --- | --- | --- |"]
        for ws, run in lifted:
            gloo, tacl = runs.get(("gloo", ws, False)), \
                runs.get(("tacl", ws, False))
            if not gloo or not tacl:
                continue
            for n in names:
                if gloo[n]["verdict"] == "pass" and \
                        tacl[n]["verdict"] == "skip":
                    r = run[n]
                    lines.append(f"| {ws} | {n} | {r['verdict']} "
                                 f"| {_cell(r['reason'])} |")
    lines += ["", "## Every test", "",
              "The reason is tacl's where tacl did not pass, else gloo's.",
              "", "| test | world size | gloo | tacl | reason |",
              "| --- | --- | --- | --- | --- |"]
    for n in names:
        for ws in args.world_sizes:
            gloo, tacl = runs.get(("gloo", ws, False)), \
                runs.get(("tacl", ws, False))
            if not gloo or not tacl:
                continue
            g, t = gloo[n], tacl[n]
            reason = t["reason"] if t["verdict"] != "pass" else g["reason"]
            lines.append(f"| {n} | {ws} | {g['verdict']} | {t['verdict']} "
                         f"| {_cell(reason)} |")
    with open(args.table, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"conformance: wrote {args.table}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--world-sizes", type=int, nargs="+",
                        default=[2, 3, 4, 8])
    parser.add_argument("--backends", nargs="+", default=["gloo", "tacl"])
    parser.add_argument("--lift", action="store_true")
    parser.add_argument("--lifted", nargs="+")
    parser.add_argument("--only", nargs="+")
    parser.add_argument("--timeout", type=int, default=120)
    parser.add_argument("--start", choices=["fork", "spawn"], default="fork")
    parser.add_argument("--out", default="conformance-results")
    parser.add_argument("--table")
    parser.add_argument("--fresh", action="store_true")
    parser.add_argument("--expect-pass", action="store_true")
    parser.add_argument("--worker", action="store_true",
                        help=argparse.SUPPRESS)
    parser.add_argument("--results", help=argparse.SUPPRESS)
    parser.add_argument("--tests-file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    args.command = os.environ.get("CONFORMANCE_COMMAND") or \
        "conformance.py " + " ".join(sys.argv[1:])
    # The workers run in the results folder: what the ranks leave in
    # their working directory (backtrace files that libfabric's psm
    # providers write when a rank is terminated) stays there.
    args.out = os.path.abspath(args.out)
    os.makedirs(args.out, exist_ok=True)
    env = dict(os.environ, BACKEND="gloo", WORLD_SIZE="2")
    every = _all_tests(env)
    names = _select(args.only, every)
    lifted = _select(args.lifted, every) if args.lifted else []
    start = time.monotonic()
    runs = {}
    for ws in args.world_sizes:
        for backend in args.backends:
            runs[(backend, ws, False)] = run_one(args, backend, ws, False,
                                                 names)
        if args.lift and "gloo" in args.backends and "tacl" in args.backends:
            gated = [n for n in names
                     if runs[("gloo", ws, False)][n]["verdict"] == "pass"
                     and runs[("tacl", ws, False)][n]["verdict"] == "skip"]
            runs[("tacl", ws, True)] = run_one(args, "tacl", ws, True, gated)
        elif lifted:
            runs[("tacl", ws, True)] = run_one(args, "tacl", ws, True, lifted)
    print(f"conformance: {time.monotonic() - start:.0f} s in all")
    if args.table:
        write_table(args, runs, names)
    if args.expect_pass:
        # A test the suite skips for the world size alone (it needs 4
        # ranks, or 8) is not a failure of this world size.
        bad = [f"{backend} at {ws}: {n}: {r['verdict']}: {r['reason']}"
               + (" (gates lifted)" if lift else "")
               for (backend, ws, lift), run in runs.items()
               for n, r in run.items() if r["verdict"] != "pass" and not
               (r["verdict"] == "skip" and "world size" in r["reason"])]
        for line in bad:
            print("conformance: FAILED " + line)
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
