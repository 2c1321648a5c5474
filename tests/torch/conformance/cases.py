"""PyTorch's own DistributedTest suite as one test class, on one backend.

torch ships the suite in its wheel
(torch/testing/_internal/distributed/distributed_test.py) and upstream
runs it from test/distributed/test_distributed_spawn.py: a class deriving
from TestDistBackend (which makes the process group, one process per
rank) and DistributedTest._DistTestBase (the tests).  The suite reads its
configuration from the environment when it is imported (BACKEND,
WORLD_SIZE; its skip decorators are evaluated then), so this module is
configured the same way and must be imported after the environment is
set.  A spawned rank imports it again and sees the same environment.

    BACKEND                the backend the suite sees ("gloo", "tacl")
    WORLD_SIZE             ranks per test
    CONFORMANCE_TIMEOUT    seconds a test may run before its ranks are
                           killed (default 120; replaces upstream's
                           per-test timeouts, which go up to 500)
    CONFORMANCE_START      "fork" (default) or "spawn" (as upstream)
    CONFORMANCE_LIFT       "1": the suite sees BACKEND "gloo" (so every
                           backend-name gate lets the test run) but every
                           process group it asks gloo for is made with
                           tacl; for trying the gated tests only
    CONFORMANCE_SKIPS      a folder where rank 0 writes the reason of a
                           skip decided inside the test body, which the
                           parent only sees as a generic exit code

"tacl" is registered by importing tacl_torch, and is added, as upstream
asks of a plugin backend, to DistTestCases.backend_feature["plugin"],
["ddp"] and ["subgroup"] -- at run time, in this process, never in the
installed torch.
"""
import logging
import os

TIMEOUT = int(os.environ.get("CONFORMANCE_TIMEOUT", "120"))
START = os.environ.get("CONFORMANCE_START", "fork")
LIFT = os.environ.get("CONFORMANCE_LIFT", "0") == "1"
# Read by common_distributed at import.
os.environ["DISTRIBUTED_TESTS_DEFAULT_TIMEOUT"] = str(TIMEOUT)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.distributed.distributed_c10d as c10d  # noqa: E402

import tacl_torch  # noqa: E402,F401  (registers the "tacl" backend)
from torch.testing._internal import common_distributed  # noqa: E402

for _feature in ("plugin", "ddp", "subgroup"):
    common_distributed.DistTestCases.backend_feature[_feature].add("tacl")
# One limit for every test, so a hung test costs TIMEOUT and no more.
common_distributed.TIMEOUT_DEFAULT = TIMEOUT
common_distributed.TIMEOUT_OVERRIDE.clear()

if LIFT:
    # Every group the suite asks of gloo is made with tacl instead.  The
    # suite itself keeps believing it runs gloo, so a test that compares
    # the backend's name with BACKEND fails in this mode: only the
    # verdicts of tests that the name gates skip are of interest here.
    _make_group = c10d._new_process_group_helper

    def _as_tacl(group_size, group_rank, global_ranks_in_group, backend,
                 *args, **kwargs):
        if isinstance(backend, str) and "gloo" in backend.lower():
            backend = backend.lower().replace("gloo", "tacl")
        return _make_group(group_size, group_rank, global_ranks_in_group,
                           backend, *args, **kwargs)

    c10d._new_process_group_helper = _as_tacl

from torch.testing._internal.distributed.distributed_test import (  # noqa
    DistributedTest,
    TestDistBackend,
)


class _SkipNote(logging.Handler):
    """Keeps the reason of a skip raised inside a rank: the parent hears
    only an exit code whose message says "look at subprocess log"."""

    def __init__(self, folder, test_name):
        super().__init__(logging.INFO)
        self.path = os.path.join(folder, test_name)

    def emit(self, record):
        if "skipping test" not in str(record.msg) or len(record.args) < 3:
            return
        with open(self.path, "w") as note:
            note.write(str(record.args[2]))


class Conformance(TestDistBackend, DistributedTest._DistTestBase):
    """The suite, one process per rank, forked or spawned."""

    def setUp(self):
        super().setUp()
        if START == "spawn":
            self._spawn_processes()
        else:
            self._start_processes(
                torch.multiprocessing.get_context("fork").Process)

    @classmethod
    def _run(cls, rank, test_name, file_name, pipe, **kwargs):
        folder = os.environ.get("CONFORMANCE_SKIPS")
        if rank == 0 and folder:
            common_distributed.logger.addHandler(_SkipNote(folder, test_name))
        super()._run(rank, test_name, file_name, pipe, **kwargs)


def test_names():
    """Every test of the suite, in the order unittest runs them."""
    import unittest
    return list(unittest.TestLoader().getTestCaseNames(Conformance))
