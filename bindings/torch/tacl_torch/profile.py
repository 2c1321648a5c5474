"""A model's step profiled for tacl's compression planner (tacl-plan,
docs/design/compression.md): the forward time, and every gradient in the
order backward makes it ready, with its bytes and the backward time
spent before it.

    prof = tacl_torch.profile_model(model, lambda: loss_fn(model(x), y),
                                    steps=3, after=opt.step)
    prof.write("model.profile")      # then: tacl-plan model.profile

Each trainable parameter gets a post-accumulate-grad hook, so a tensor is
ready when its gradient is whole (as DDP's buckets and FSDP2's
reduce-scatters see it).  A tensor's backward time is the time from the
one ready before it (from the start of backward for the first), the
median over the measured steps; the forward time is the median of the
forward calls.  Run it on the model alone, outside DDP or FSDP, so that
no communication is in the times.  The planner's other lines (comm,
codec) come from tacl-plan --estimate and the codec profiles.
"""
from __future__ import annotations

import statistics
import time
from typing import Callable, List, Optional, Tuple

import torch

__all__ = ["ModelProfile", "profile_model", "read_plan"]


class ModelProfile:
    """forward: seconds; tensors: (name, gradient bytes, backward
    seconds) in gradient-ready order."""

    def __init__(self, forward: float,
                 tensors: List[Tuple[str, int, float]], steps: int):
        self.forward = forward
        self.tensors = tensors
        self.steps = steps

    def write(self, path: str) -> None:
        """The profile in tacl-plan's format ("forward" and "tensor"
        lines, each tensor's name as a comment)."""
        total = sum(b for _, b, _ in self.tensors)
        with open(path, "w") as f:
            f.write(f"# tacl_torch.profile_model: {len(self.tensors)} "
                    f"tensors, {total} gradient bytes, medians of "
                    f"{self.steps} steps; gradient-ready order\n")
            f.write(f"forward {self.forward:.9f}\n")
            for name, nbytes, back in self.tensors:
                f.write(f"tensor {nbytes} {back:.9f}  # {name}\n")


def profile_model(model: torch.nn.Module, forward: Callable[[], torch.Tensor],
                  steps: int = 3, warmup: int = 1,
                  after: Optional[Callable[[], None]] = None
                  ) -> ModelProfile:
    """Run warmup + steps steps of forward() (returning the loss), its
    backward and after() (an optimizer step, zeroing the gradients), and
    return the profile of the measured ones.  ValueError for a model
    without trainable parameters or a bad count; RuntimeError naming a
    parameter that got no gradient, or when the order of readiness
    changes between steps."""
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"profile_model: steps {steps!r} (at least 1)")
    if not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"profile_model: warmup {warmup!r} (0 or more)")
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if not params:
        raise ValueError("profile_model: the model has no trainable "
                         "parameters")
    ready = {}

    def marker(name):
        def mark(_):
            ready.setdefault(name, time.perf_counter())
        return mark
    handles = [p.register_post_accumulate_grad_hook(marker(name))
               for name, p in params]
    forwards, gaps, order = [], [], None
    try:
        for i in range(warmup + steps):
            ready.clear()
            t0 = time.perf_counter()
            loss = forward()
            t1 = time.perf_counter()
            loss.backward()
            if after is not None:
                after()
            if i < warmup:
                continue
            missing = [n for n, _ in params if n not in ready]
            if missing:
                raise RuntimeError(f"profile_model: {len(missing)} "
                                   f"parameters got no gradient, first "
                                   f"{missing[0]!r}")
            now = sorted(ready, key=ready.get)
            if order is None:
                order = now
            elif now != order:
                raise RuntimeError("profile_model: the gradients became "
                                   "ready in another order than in the "
                                   "first measured step")
            starts = [t1] + [ready[n] for n in order[:-1]]
            gaps.append([ready[n] - s for n, s in zip(order, starts)])
            forwards.append(t1 - t0)
    finally:
        for h in handles:
            h.remove()
    size = {n: p.numel() * p.element_size() for n, p in params}
    tensors = [(n, size[n], statistics.median(g[k] for g in gaps))
               for k, n in enumerate(order)]
    return ModelProfile(statistics.median(forwards), tensors, steps)


def read_plan(path: str, profile: ModelProfile) -> List[Tuple[str, List[str]]]:
    """The groups tacl-plan printed (its table of first and last tensor,
    bytes and option) for `profile`, as CompressionState(plan="fusion",
    groups=...) takes them: (option, parameter names) in gradient-ready
    order.  ValueError when the file has no table, or its groups do not
    cover the profile's tensors once each, in order."""
    groups, table = [], False
    with open(path) as f:
        for line in f:
            w = line.split()
            if w == ["first", "last", "bytes", "option"]:
                table = True
                continue
            if not table or not w:
                continue
            if w[0] == "step" or len(w) != 4:
                break
            first, last = int(w[0]), int(w[1])
            want = groups[-1][1] + 1 if groups else 0
            if first != want or last < first or \
                    last >= len(profile.tensors):
                raise ValueError(f"read_plan: {path}: group {len(groups)} "
                                 f"spans tensors {first}-{last}; expected "
                                 f"to start at {want} and end before "
                                 f"{len(profile.tensors)}")
            groups.append((first, last, w[3]))
    if not groups:
        raise ValueError(f"read_plan: {path}: no table of groups (tacl-plan's "
                         "\"first last bytes option\")")
    if groups[-1][1] != len(profile.tensors) - 1:
        raise ValueError(f"read_plan: {path}: the groups end at tensor "
                         f"{groups[-1][1]}, the profile has "
                         f"{len(profile.tensors)}")
    return [(opt, [profile.tensors[i][0] for i in range(a, b + 1)])
            for a, b, opt in groups]
