"""A run's processes: which rank this one is, and starting `train.nproc` ranks and watching them.

No torch here (the ranks load it themselves): `minimult pretrain` checks its arguments with `from_env` and
`check_nproc`, and a sweep counts its cores, before torch loads. What the ranks do together (the process group,
summed gradients) is `minimult.distributed`.
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
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import Callable

from minimult.errors import MinimultError

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
    """One line for a run whose ranks did not all finish: a rank's own error (a MinimultError: bad input, a
    diverged loss, a full disk) as it said it; else a rank that died without a word (killed: for memory, by a
    signal); else the first crash (peers' failures only echo it); else the first rank stopped here (signalled)."""
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
    r = next(r for r, c in enumerate(codes) if c != 0)
    return f"training process {r} of {n} ended ({_how_it_ended(codes[r])}); the others were stopped: {kept()}"


def kept_checkpoints(paths: list[Path]) -> str:
    have = [str(p) for p in paths if Path(p).is_file()]
    if not have:
        return "no checkpoint had been written yet"
    return f"the last checkpoint is kept ({', '.join(have)}); --resume continues from it"
