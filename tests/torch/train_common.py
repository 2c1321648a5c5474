"""What the training scripts of tests/torch share: the data every backend
sees, and the per-step loss line compare_losses.py reads."""
import torch
import torch.distributed as dist


def batch(step, rank, size):
    """Rank `rank`'s batch of `size` samples for `step`: the same on every
    backend, different on every rank and step."""
    g = torch.Generator().manual_seed(100003 * step + rank)
    x = torch.randn(size, 16, generator=g)
    return x, torch.sin(x.sum(dim=1, keepdim=True))


def report_loss(step, loss):
    """Gather every rank's loss (all_gather copies, so exact on any
    backend); rank 0 prints "step S loss MEAN hex HEX ranks L0,L1,..." with
    the mean summed in rank order."""
    world = dist.get_world_size()
    mine = loss.detach().reshape(1).clone()
    every = torch.empty(world, dtype=mine.dtype)
    dist.all_gather_into_tensor(every, mine)
    if dist.get_rank() == 0:
        vals = [float(v) for v in every]
        mean = sum(vals) / world
        print(f"step {step} loss {mean:.9g} hex {mean.hex()} ranks "
              + ",".join(f"{v:.9g}" for v in vals), flush=True)
