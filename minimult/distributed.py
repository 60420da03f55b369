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

torch (and `minimult.model`, which imports it) is imported inside the functions that use it: `minimult pretrain`
checks its arguments with `from_env` and `check_nproc` before torch loads (seconds; tests/test_cli_prepare.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import pickle
import queue as queue_mod
import signal
import socket
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import Callable

from minimult.errors import MinimultError

TIMEOUT = timedelta(minutes=30)  # torch's default for gloo; a dead rank is noticed at once (closed socket)
GRACE_S = 10.0  # after one rank fails, how long the others get to stop on their own before they are ended
MAX_NPROC = "MINIMULT_MAX_NPROC"  # the most processes one run may start on a CPU (default: its cores)


@dataclass(frozen=True)
class World:
    """This process's place among the ranks training one run."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        """Rank 0: the one that writes (checkpoints, logs, run.json) and evaluates."""
        return self.rank == 0


SINGLE = World()


def from_env() -> World | None:
    """The world torchrun (or another launcher) describes in RANK / WORLD_SIZE / LOCAL_RANK; None when
    this process was not started as one of several ranks."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return None
    try:
        rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        local = int(os.environ.get("LOCAL_RANK", rank))
    except ValueError:
        raise MinimultError(f"RANK={os.environ['RANK']!r}, WORLD_SIZE={os.environ['WORLD_SIZE']!r}, LOCAL_RANK="
                            f"{os.environ.get('LOCAL_RANK')!r}: not whole numbers (torchrun sets them)") from None
    if size <= 1:
        return None
    if not 0 <= rank < size:
        raise MinimultError(f"RANK {rank} is not in 0..{size - 1} (WORLD_SIZE {size})")
    for name in ("MASTER_ADDR", "MASTER_PORT"):
        if name not in os.environ:
            raise MinimultError(f"RANK and WORLD_SIZE are set but {name} is not: start the ranks with torchrun")
    return World(rank, size, local)


def check_nproc(nproc: int, launched: World | None) -> None:
    if nproc < 1:
        raise MinimultError(f"train.nproc must be >= 1, got {nproc}")
    if launched is not None and nproc not in (1, launched.size):
        raise MinimultError(f"--nproc {nproc} asks for {nproc} processes, but this is one of the {launched.size} "
                            f"that torchrun started (WORLD_SIZE): give one or the other")


def cpu_count() -> int:
    """The CPU cores this process may run on (its affinity: what taskset or a container grants it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def check_devices(name: str, nproc: int) -> None:
    """Before starting `nproc` processes: on CUDA each needs a GPU of its own (nccl), and may not be
    pinned to one GPU by name; on a CPU each needs a core of its own, unless `MAX_NPROC` allows more
    (processes beyond the cores only wait for each other, and each holds the whole model)."""
    import torch

    from minimult.model import pick_device

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
    import torch

    from minimult.model import pick_device

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
    import torch.distributed as dist

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
    import torch.distributed as dist

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
    import torch
    import torch.distributed as dist

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
    import torch
    import torch.distributed as dist

    dist.all_reduce(torch.zeros(1))


def broadcast_parameters(params: list) -> None:
    """Rank 0's weights on every rank (they start equal anyway: same seed, same checkpoint)."""
    import torch
    import torch.distributed as dist

    if not params:
        return
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    dist.broadcast(flat, src=0)
    offset = 0
    with torch.no_grad():
        for p in params:
            p.copy_(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()


# ---------------------------------------------------------------------------------------------
# Starting the ranks (`minimult pretrain --nproc N`): one process each, this one waits and reports.


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _prctl(option: int, value) -> bool:
    """Linux `prctl(option, value)`; False where there is none (not Linux)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        return False
    return True


def die_with_parent(parent: int) -> None:
    """Have the kernel end this process when its parent dies (Linux `prctl(PR_SET_PDEATHSIG)`); a process whose
    parent `parent` is gone already (it was adopted: by init, or by a subreaper) ends now. Not Linux: nothing."""
    if _prctl(1, signal.SIGTERM) and os.getppid() != parent:
        os._exit(1)


def _rank_main(rank: int, size: int, port: int, threads: int, launcher: int, messages, job: bytes) -> None:
    """A spawned rank: one process group member that runs `target(world, log, *args)` (`job`, pickled);
    what it has to say goes to the launcher through `messages` (rank 0's log lines, any rank's error)."""
    # PR_SET_PDEATHSIG first, before `job` loads torch (seconds): the kernel ends this rank when its launcher
    # dies, so no rank trains on unobserved after a `kill` of the launcher; a launcher already gone has left
    # this rank to another parent (init, or a subreaper), so it ends here
    die_with_parent(launcher)
    _prctl(15, f"minimult-rank{rank}".encode()[:15])  # PR_SET_NAME: `top` and `ps -o comm` show the rank
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import torch

    torch.set_num_threads(threads)
    world = World(rank, size, rank)
    log = (lambda line: messages.put(("log", rank, str(line)))) if rank == 0 else (lambda line: None)
    try:
        target, args = pickle.loads(job)
        target(world, log, *args)
    except MinimultError as e:
        messages.put(("error", rank, str(e)))
        sys.exit(2)
    except OSError as e:
        where = f" ({e.filename})" if getattr(e, "filename", None) else ""
        messages.put(("error", rank, f"{e.strerror or e}{where}"))
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
    except BaseException as e:  # noqa: BLE001 - reported in one line by the launcher
        messages.put(("crash", rank, f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"))
        sys.exit(1)
    # Its work done and its process group ended, the rank leaves without the interpreter's teardown: there, once
    # in a while, a thread of the ended group was destroyed still joinable ("terminate called without an active
    # exception": SIGABRT after the run's last checkpoint, issue 63 item 14). Its messages are flushed first.
    messages.close()
    messages.join_thread()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _how_it_ended(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def launch(nproc: int, threads: int, target, args: tuple, log: Callable[[str], None],
           kept: Callable[[], str]) -> None:
    """Run `target(world, log, *args)` on `nproc` new processes (spawned, one process group over TCP on
    127.0.0.1) and wait: rank 0's log lines go to `log`. If a rank fails or dies, the others get `GRACE_S`
    to stop on their own (they do: their next collective fails), are then ended, and one MinimultError says
    which rank and why, and `kept()` (what is left: the last checkpoint). A SIGTERM or SIGINT to this
    process, while the ranks start or train, ends every rank first and then this process as the signal would."""
    ctx = multiprocessing.get_context("spawn")
    messages = ctx.Queue()
    port = free_port()
    job = bytes(ForkingPickler.dumps((target, args)))  # loaded by the rank after its PR_SET_PDEATHSIG
    procs = [ctx.Process(target=_rank_main, args=(r, nproc, port, threads, os.getpid(), messages, job),
                         name=f"minimult-rank{r}", daemon=False) for r in range(nproc)]
    reports: dict[int, tuple[str, str]] = {}

    def drain(wait: float) -> None:
        try:
            kind, rank, text = messages.get(timeout=wait) if wait else messages.get_nowait()
            while True:
                if kind == "log":
                    log(text)
                else:
                    reports.setdefault(rank, (kind, text))
                kind, rank, text = messages.get_nowait()
        except queue_mod.Empty:
            pass
        except (EOFError, OSError, ValueError, pickle.UnpicklingError):  # a rank killed mid-message: a broken one
            pass

    failed_at, stopped = None, set()
    with _signals_noted((signal.SIGTERM, signal.SIGINT)) as signalled:
        try:
            for p in procs:
                if signalled:
                    break
                p.start()
            while not signalled and any(p.exitcode is None for p in procs):
                drain(0.2)
                if failed_at is None and any(p.exitcode not in (None, 0) for p in procs):
                    failed_at = time.monotonic()
                if failed_at is not None and time.monotonic() - failed_at > GRACE_S:
                    break
            drain(0)
        finally:
            for r, p in enumerate(procs):
                if p.pid is not None and p.exitcode is None:
                    stopped.add(r)
                    p.terminate()
            for p in procs:
                if p.pid is None:
                    continue
                p.join(5)
                if p.exitcode is None:
                    p.kill()
                    p.join()
            drain(0)
            messages.close()
    codes = [p.exitcode for p in procs]
    if all(c == 0 for c in codes):
        return
    raise MinimultError(_failure(codes, reports, stopped, kept))


@contextlib.contextmanager
def _signals_noted(signums: tuple):
    """Inside, each of `signums` (unless ignored) only appends itself to the list yielded, so that a loop
    that checks it ends what it started; on leaving, the handlers are restored and the first signal noted
    is raised again (SIGTERM's default ends this process, SIGINT's raises KeyboardInterrupt). Outside the
    main thread (where Python delivers signals) nothing changes."""
    noted: list[int] = []
    previous = {}
    try:
        for signum in signums:
            if signal.getsignal(signum) not in (signal.SIG_IGN, None):  # None: a handler set outside Python
                previous[signum] = signal.signal(signum, lambda s, frame: noted.append(s))
    except ValueError:  # not the main thread
        pass
    try:
        yield noted
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if noted:
            signal.raise_signal(noted[0])


def _failure(codes: list[int], reports: dict, stopped: set, kept: Callable[[], str]) -> str:
    """One line for a run whose ranks did not all finish: a rank's own error (a MinimultError: bad input,
    a diverged loss, a full disk) as it said it; else the rank that died without a word (killed: by the
    kernel for memory, by a signal); else the first rank's crash (its peers' failures only echo it)."""
    n = len(codes)
    errors = sorted((r, text) for r, (kind, text) in reports.items() if kind == "error")
    if errors:
        return errors[0][1]
    silent = [r for r, c in enumerate(codes) if c != 0 and r not in reports and r not in stopped]
    if silent:
        r = silent[0]
        return f"training process {r} of {n} died ({_how_it_ended(codes[r])}); the others were stopped: {kept()}"
    crashes = sorted((r, text) for r, (kind, text) in reports.items() if kind == "crash")
    if crashes:
        r, text = crashes[0]
        return f"training process {r} of {n} failed ({text}); the others were stopped: {kept()}"
    r = next((r for r, c in enumerate(codes) if c != 0 and r not in stopped), 0)
    return f"training process {r} of {n} ended ({_how_it_ended(codes[r])}); the others were stopped: {kept()}"


def kept_checkpoints(paths: list[Path]) -> str:
    have = [str(p) for p in paths if Path(p).is_file()]
    if not have:
        return "no checkpoint had been written yet"
    return f"the last checkpoint is kept ({', '.join(have)}); --resume continues from it"
