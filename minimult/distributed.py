"""One run on several processes: data parallelism with torch.distributed (gloo on CPU, nccl on CUDA).

`train.nproc` = N (or `minimult pretrain --nproc N`, or N processes started by `torchrun`, which sets
RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT) trains one run (or one stacked group of runs)
on N processes of one thread each. Every process ("rank") holds the whole model and builds every step's
whole batch, with the same masking draws as one process would make (masking is drawn for the full batch
from the step's seed on every rank); each rank then computes the loss of its share of the batch's rows
(`share`, cut with `minimult.data.microbatches.take`; `minimult.train.step_losses`, the one loss path of
one model and of a stack), weighted by the full batch's counts (`Bert.mlm_loss(totals=...)`: the sum of its
per-token losses over the number of masked tokens in the whole batch, and for nsp the sum of its next-sentence
losses over the batch's rows). The ranks' gradients are then summed (`all_reduce`), which gives every rank
the gradient of the one-process loss of the whole batch, up to float round-off in the order of the sums;
gradient clipping (per model when stacked) and the AdamW step follow on that full gradient, identically on
every rank, so the ranks' weights stay equal.

What differs from one process: dropout. Each rank draws dropout for its own rows only; rank 0 from the
step's seed as one process does (its rows get the masks one process would give them), rank r > 0 from a
seed of its own (`minimult.train.dropout_seed`). So a run on N processes is a different draw of the same
training than on one process (as another dropout seed would be), reproducible for a given N: resumed, it
ends bit-identical to an uninterrupted run on the same N (on CPU). With dropout 0 it equals the
one-process run to float round-off. (Masking could differ by rank too if it were drawn per share; it is
not: every rank draws it for the whole batch.) A batch of fewer rows than ranks leaves some ranks no rows:
they add zero gradients. The logged loss is the ranks' summed losses: the whole batch's.

Rank 0 alone writes: checkpoints, metrics.jsonl, run.json, the log and the evaluation during training;
the other ranks wait for it at the next step's all-reduce. The run lock is held by the process that
started the ranks (`minimult pretrain`, a sweep worker), or under torchrun by rank 0.

A rank that dies ends the run: its peers' next collective fails (the socket closes), the launcher stops
them and raises one MinimultError naming the rank; the last checkpoint is kept (written atomically), and
`--resume` continues from it. Collectives time out after `TIMEOUT` (a rank stuck rather than dead), which
also bounds how long rank 0 may spend on one in-training evaluation or checkpoint while the others wait.

Starting the ranks and watching them needs no torch: it is `minimult.ranks`, which the CLI uses to check
its arguments before torch loads (seconds; tests/test_cli_prepare.py).
"""

from __future__ import annotations

import contextlib
import os
from datetime import timedelta
from typing import Callable

import torch
import torch.distributed as dist

from minimult.errors import MinimultError
from minimult.model import pick_device
from minimult.ranks import MAX_NPROC, World, cpu_count

TIMEOUT = timedelta(minutes=30)  # torch's default for gloo; a dead rank is noticed at once (closed socket)


def check_devices(name: str, nproc: int) -> None:
    """Before starting `nproc` processes: on CUDA each needs a GPU of its own (nccl), and may not be
    pinned to one GPU by name; on a CPU each needs a core of its own, unless `MAX_NPROC` allows more
    (processes beyond the cores only wait for each other, and each holds the whole model)."""
    device = pick_device(name)
    if nproc == 1:
        return
    if device.type != "cuda":
        allowed = os.environ.get(MAX_NPROC, "")
        if allowed and not (allowed.isdigit() and int(allowed) >= 1):
            raise MinimultError(f"{MAX_NPROC}={allowed!r}: not a whole number >= 1")
        if nproc > (int(allowed) if allowed else cpu_count()):
            raise MinimultError(f"{nproc} processes on CPU need a core each; this process may use {cpu_count()} "
                                f"(os.sched_getaffinity){f' and {MAX_NPROC}={allowed}' if allowed else ''}: use "
                                f"fewer, or set {MAX_NPROC}={nproc} to run more processes than cores anyway")
        return
    if device.index is not None:
        raise MinimultError(f"train.device {name} names one GPU, but {nproc} processes each need their own: "
                            f"use train.device=cuda (rank r takes cuda:LOCAL_RANK)")
    if nproc > torch.cuda.device_count():
        raise MinimultError(f"{nproc} processes on CUDA need a GPU each; this machine has "
                            f"{torch.cuda.device_count()} (use fewer processes, or train.device=cpu)")


def device_for(name: str, world: World):
    """The rank's device: CPU, or on CUDA its own GPU (cuda:LOCAL_RANK; nccl needs one GPU per rank)."""
    device = pick_device(name)
    if world.size == 1 or device.type != "cuda":
        return device
    check_devices(name, world.local_rank + 1)
    device = torch.device("cuda", world.local_rank)
    torch.cuda.set_device(device)
    return device


@contextlib.contextmanager
def session(world: World | None, device_name: str = "cpu"):
    """The default process group for `world` (gloo; on CUDA gloo for CPU tensors and nccl for CUDA ones)
    while inside; nothing when `world` is None or one process, or when the group already exists (the
    caller that made it ends it)."""
    if world is None or world.size == 1 or dist.is_initialized():
        yield
        return
    cuda = device_for(device_name, world).type == "cuda"
    dist.init_process_group("cpu:gloo,cuda:nccl" if cuda else "gloo", rank=world.rank, world_size=world.size,
                            timeout=TIMEOUT)
    try:
        yield
    finally:
        dist.destroy_process_group()


def created_once(world: World | None, create: Callable[[], object], open_: Callable[[str], object]):
    """`create()` (an object with a `.path`) on rank 0 only; the other ranks `open_(its path)`. An error
    on rank 0 is raised on every rank (with the same message), so none waits for a path that never comes."""
    if world is None or world.size == 1:
        return create()
    made, message = None, [None]
    if world.main:
        try:
            made = create()
            message = [("path", str(made.path))]
        except MinimultError as e:
            message = [("error", str(e))]
    dist.broadcast_object_list(message, src=0)
    kind, value = message[0]
    if kind == "error":
        raise MinimultError(value)
    return made if world.main else open_(value)


# ---------------------------------------------------------------------------------------------
# A step on several ranks.


def share(rows: int, world: World) -> slice:
    """The rows of a batch of `rows` that `world.rank` computes: contiguous, as equal as can be (rank r
    gets rows r*B//N up to (r+1)*B//N; a batch of fewer rows than ranks leaves some ranks none)."""
    return slice(world.rank * rows // world.size, (world.rank + 1) * rows // world.size)


def all_reduce(params: list, losses):
    """Sum the ranks' gradients of `params` and their `losses` (one collective): afterwards every rank
    holds the full batch's gradient in `p.grad` and returns the full batch's losses. A parameter with no
    gradient on any rank keeps none (as one process would: AdamW skips it); one with a gradient on some
    rank gets the sum (zero where a rank had none, e.g. a rank with no rows in this batch)."""
    device = losses.device
    grads = [p.grad for p in params]
    parts = [g.reshape(-1).float() if g is not None else torch.zeros(p.numel(), device=device)
             for p, g in zip(params, grads)]
    has = torch.tensor([g is not None for g in grads], dtype=torch.float32, device=device)
    flat = torch.cat([*parts, losses.detach().float().reshape(-1), has])
    dist.all_reduce(flat)
    total = sum(p.numel() for p in params)
    present = flat[total + losses.numel():].tolist()
    offset = 0
    for i, p in enumerate(params):
        n = p.numel()
        if present[i] > 0:
            summed = flat[offset:offset + n].view_as(p).to(p.dtype)
            if p.grad is None:
                p.grad = summed.clone()
            else:
                p.grad.copy_(summed)
        offset += n
    return flat[total:total + losses.numel()].view_as(losses).to(losses.dtype)


def barrier() -> None:
    """Wait for every rank (a CPU all-reduce: gloo, whatever the device)."""
    dist.all_reduce(torch.zeros(1))


def broadcast_parameters(params: list) -> None:
    """Rank 0's weights on every rank (they start equal anyway: same seed, same checkpoint)."""
    if not params:
        return
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    dist.broadcast(flat, src=0)
    offset = 0
    with torch.no_grad():
        for p in params:
            p.copy_(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
