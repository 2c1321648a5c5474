"""DistributedDataParallel with a sparse word embedding on the tacl
backend: its gradient travels through tacl's sparse all-reduce.

    torchrun --standalone --nproc-per-node 4 examples/torch_sparse_ddp.py

A bag-of-words classifier: each sample is a sentence of token ids drawn
from Zipf's law over a frequency-sorted vocabulary (row 0 the most
frequent word), so a step touches a small, skewed, partly shared set of
the embedding's rows, as word models' gradients do.  nn.Embedding(...,
sparse=True) makes that gradient a sparse tensor; DDP hands it to the
backend's all_reduce, which tacl serves with tacl_sparse_allreduce
(TACL_TORCH_SPARSE picks a scheme; default auto).  The label is a fixed
random function of the sentence, so the loss falls as the model learns.

Options: --steps N (60), --backend NAME (gloo, to compare), --vocab V
(200000), --dim D (64), --batch B (64), --len L (32), --find-unused
(find_unused_parameters=True, with a layer the forward skips), --check
(exit 1 unless the last loss is below the first).  Rank 0 prints each
step's mean loss over ranks and, at the end, tokens per second.
"""
import argparse
import time

import torch
import torch.distributed as dist
import torch.nn as nn

import tacl_torch  # noqa: F401  (registers the "tacl" backend)


class BagOfWords(nn.Module):
    def __init__(self, vocab, dim, classes, skipped):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim, sparse=True)
        self.head = nn.Linear(dim, classes)
        # A layer the forward never uses (--find-unused): DDP must be
        # told, or it waits for its gradient.
        self.skipped = nn.Linear(dim, dim) if skipped else None

    def forward(self, tokens):
        return self.head(self.emb(tokens).mean(dim=1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--backend", default="tacl")
    ap.add_argument("--vocab", type=int, default=200000)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--len", type=int, default=32)
    ap.add_argument("--find-unused", action="store_true")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()

    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    classes = 8
    torch.manual_seed(0)  # the same model and labelling on every rank
    model = BagOfWords(args.vocab, args.dim, classes, args.find_unused)
    word_class = torch.randint(0, classes, (args.vocab,))
    zipf = 1.0 / torch.arange(1, args.vocab + 1, dtype=torch.float64)
    ddp = nn.parallel.DistributedDataParallel(
        model, find_unused_parameters=args.find_unused)
    opt_sparse = torch.optim.SGD([model.emb.weight], lr=0.5)
    opt_dense = torch.optim.SGD(model.head.parameters(), lr=0.5)

    g = torch.Generator().manual_seed(1 + rank)  # each rank its own data
    losses, tokens_done, t0 = [], 0, None
    for step in range(args.steps):
        if step == 2:  # time from the third step: no first-call costs
            dist.barrier()
            t0, tokens_done = time.perf_counter(), 0
        tokens = torch.multinomial(zipf, args.batch * args.len,
                                   replacement=True, generator=g)
        tokens = tokens.reshape(args.batch, args.len)
        # The label: the most common class among the sentence's words.
        labels = word_class[tokens].mode(dim=1).values
        opt_sparse.zero_grad()
        opt_dense.zero_grad()
        loss = nn.functional.cross_entropy(ddp(tokens), labels)
        loss.backward()
        opt_sparse.step()
        opt_dense.step()
        tokens_done += tokens.numel() * world
        avg = loss.detach().clone()
        dist.all_reduce(avg)
        losses.append(avg.item() / world)
        if rank == 0:
            print(f"step {step} loss {losses[-1]:.4f}", flush=True)
    dist.barrier()
    elapsed = time.perf_counter() - t0
    if rank == 0:
        print(f"tokens/s {tokens_done / elapsed:.0f} backend {args.backend} "
              f"ranks {world}", flush=True)
    dist.destroy_process_group()
    if args.check and not losses[-1] < losses[0]:
        raise SystemExit(f"the loss did not fall: {losses[0]:.4f} -> "
                         f"{losses[-1]:.4f}")


if __name__ == "__main__":
    main()
