"""One group of a sweep's runs, in a worker process or a Ray task: lock, create / resume, train,
evaluate; a failing run never stops the others and never raises (its `Outcome` says why).

Two or more runs without a checkpoint in one group train together as one stacked model
(`train.train` with K > 1); runs with a checkpoint resume (or are only evaluated) one by one. Each
run's log goes to `sweep.log` in its folder.
"""

from __future__ import annotations

import os
import signal
import time
import traceback
from pathlib import Path

import torch

from minimult.config import RunConfig
from minimult.ranks import die_with_parent
from minimult.errors import MinimultError
from minimult.evaluate import evaluate_run
from minimult.evaluate.results import results_complete
from minimult.runs import LOCK, Run, try_lock
from minimult.sweep.plan import BUSY, Outcome, Task
from minimult.train import train

RUN_LOG = "sweep.log"


class Group:
    """The group's runs that this worker could lock, with their log files and outcomes so far."""

    def __init__(self, tasks: list[Task]):
        self.t0 = time.time()
        self.tasks, self.outcomes, self.locks, self.logfiles, self.runs = tasks, {}, {}, {}, {}
        for task in tasks:
            run_dir = Path(task.run_dir)
            run_dir.mkdir(parents=True, exist_ok=True)
            lock = try_lock(run_dir)  # two sweeps into one root never work on the same run at once
            if lock is None:
                self.outcomes[task.run_dir] = Outcome(task, BUSY, f"another process is working on {run_dir} "
                                                                    f"(it holds {LOCK}); run this sweep again "
                                                                    f"once it is done")
                continue
            if results_complete(run_dir, task.wants_transfer):
                lock.close()  # finished since the sweep looked (another sweep, or a run brought from a GPU)
                self.outcomes[task.run_dir] = Outcome(task, "skipped", "already complete (finished elsewhere "
                                                                       "since this sweep began)")
                continue
            self.locks[task.run_dir] = lock
            self.logfiles[task.run_dir] = open(run_dir / RUN_LOG, "a", encoding="utf-8")

    @property
    def live(self) -> list[Task]:
        return [t for t in self.tasks if t.run_dir in self.locks and t.run_dir not in self.outcomes]

    def logger(self, task: Task):
        def log(line: str) -> None:
            self.logfiles[task.run_dir].write(f"{line}\n")
            self.logfiles[task.run_dir].flush()
        return log

    def fail(self, task: Task, e: BaseException) -> None:
        if isinstance(e, MinimultError):
            self.logger(task)(f"error: {e}")
            message = f"error: {e}"
        else:  # a bug or a resource problem in one run must not stop the others
            self.logger(task)(traceback.format_exc())
            message = f"{type(e).__name__}: {e} (traceback in {Path(task.run_dir) / RUN_LOG})"
        self.outcomes[task.run_dir] = Outcome(task, "failed", message, time.time() - self.t0)

    def close(self) -> None:
        for f in self.logfiles.values():
            f.close()
        for lock in self.locks.values():
            lock.close()  # releases the lock


def open_runs(group: Group) -> None:
    """Each locked task's Run (config.json and vocabulary written if missing)."""
    for task in group.live:
        log = group.logger(task)
        try:
            log(f"--- sweep run {task.name} (setting {task.setting_id}: {task.setting_name}, seed {task.seed}) "
                f"pid {os.getpid()} {time.strftime('%Y-%m-%d %H:%M:%S')}")
            group.runs[task.run_dir] = Run.create_at(task.run_dir, RunConfig.from_dict(task.config), log=log)
        except Exception as e:
            group.fail(task, e)


def train_fresh_together(group: Group) -> dict[str, str]:
    """The group's runs without a checkpoint, trained as one stacked model when there are several."""
    fresh = [t for t in group.live if not group.runs[t.run_dir].has_checkpoint()]
    if len(fresh) < 2:
        return {}
    for t in fresh:
        group.runs[t.run_dir].metrics_path.unlink(missing_ok=True)  # an attempt that never checkpointed

    def log(line: str) -> None:  # into every stacked run's own log
        for t in fresh:
            group.logger(t)(line)

    log(f"--- training {len(fresh)} runs as one stacked model: {', '.join(t.name for t in fresh)}")
    try:
        train([group.runs[t.run_dir] for t in fresh], log=log)
    except Exception as e:  # a run that diverged fails; the others go on one by one (resumed, or trained anew)
        for t in fresh:
            if str(group.runs[t.run_dir].meta.get("status", "")).startswith("failed"):
                group.fail(t, e)
        log(f"--- stacked training stopped ({type(e).__name__}: {e}); the runs that did not fail go on one by one")
        return {}
    return {t.run_dir: f"new run, stacked x{len(fresh)}" for t in fresh}


def finish(group: Group, task: Task, how: str | None) -> None:
    """Train (or resume) `task`'s run unless done, then evaluate it; record its outcome."""
    run, log = group.runs[task.run_dir], group.logger(task)
    try:
        if how is None:
            how = "new run"
            if run.has_checkpoint():
                how = "evaluation only" if run.meta.get("status") == "complete" else "resumed"
                if how == "resumed":  # with the sweep's processes (--nproc auto), not necessarily the last ones
                    train([run], resume=True, log=log, nproc=task.config["train"].get("nproc", 1))
            else:
                run.metrics_path.unlink(missing_ok=True)  # rows of an attempt that never checkpointed
                train([run], log=log)
        results = evaluate_run(run, None, log=log)
        log(f"--- finished ({how}) in {time.time() - group.t0:.1f} s")
        group.outcomes[task.run_dir] = Outcome(task, "done", how, time.time() - group.t0, results)
    except Exception as e:
        group.fail(task, e)


def run_group(tasks: list[Task], threads: int | None = 1) -> list[Outcome]:
    """Create / resume / train / evaluate the runs `tasks`; never raises for a failing run."""
    group = Group(tasks)
    try:
        if threads:
            torch.set_num_threads(threads)
        open_runs(group)
        how = train_fresh_together(group)
        for task in group.live:
            finish(group, task, how.get(task.run_dir))
    except Exception as e:  # e.g. torch failing in this worker (its threads, its device)
        for task in tasks:
            if task.run_dir not in group.outcomes:
                group.outcomes[task.run_dir] = Outcome(task, "failed", f"{type(e).__name__}: {e}",
                                                       time.time() - group.t0)
    finally:
        group.close()
    return [group.outcomes[t.run_dir] for t in tasks]


def _stop_quietly(signum, frame) -> None:
    """A worker's SIGINT (Ctrl-C reaches the sweep's whole process group, and the sweep passes its own on):
    stop where it is, without a traceback, and take no second one (KeyboardInterrupt printed one per worker,
    another when the second interrupt came while the first was handled). The run keeps its last checkpoint;
    the sweep says, in one line, how to resume."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise SystemExit(130)


def init_local_worker(gpu_queue, sweep: int) -> None:
    """End with the sweep process (pid `sweep`: a `kill` of it, or the kernel's for memory, would otherwise leave
    its workers training on, unobserved; checkpoints are atomic, so the next sweep resumes their runs), stop
    quietly on an interrupt; pin this worker to one GPU (before anything touches CUDA). The sweep starts its
    workers with SIGINT blocked (`backends.run_local`), so an interrupt while one imports is taken here, where it
    exits quietly, not as a traceback from the middle of an import."""
    die_with_parent(sweep)
    signal.signal(signal.SIGINT, _stop_quietly)
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    except SystemExit:  # interrupted while it started (an exception here would be logged with its traceback)
        os._exit(130)
    gpu = gpu_queue.get()
    if gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)
