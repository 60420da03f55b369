"""Sweeps: every (setting, seed) of a grid trained and evaluated in its own run folder, locally or on Ray.

Public entry: `run_sweep(grid, seeds, preset, jobs, backend, address, root, overrides, log) -> Summary`.

A run folder is named `<root>/<id>-<mods>-s<seed>`, so invoking the same sweep again finds its runs:
a run whose `results.json` matches its finished training is skipped, one with an unfinished
checkpoint is resumed (`train.train([run], resume=True)`), a finished one without results is only
evaluated, and a missing one is created and trained. A folder that holds a different configuration
(another preset, other overrides) is never reused: that run fails with a message saying so.

Backends:
- `local`: a `ProcessPoolExecutor` (spawn). On CPU one worker per core, one thread each (two
  single-thread runs beat one two-thread run by ~1.28x on a 2-core machine); with CUDA one worker
  per GPU, each pinned to its GPU with `CUDA_VISIBLE_DEVICES`. On CPU a run starts only while its peak
  memory fits beside the running ones' (`memory`: character units at batch 256 need ~13 GiB, measured).
- `ray`: one Ray task per group (a run, or `--stack` runs; `num_cpus=1`, `num_gpus=1` when the cluster has GPUs);
  Ray schedules them. `address=None` starts a private local Ray; otherwise it connects to that cluster, whose nodes
  must see the same run folders and cache (`MINIMULT_CACHE`) paths, e.g. on a shared filesystem.

The modules, by job: `grid` (grid files), `plan` (tasks, run-folder states, the manifest), `worker`
(one group of runs in a worker: lock, create or resume, train, evaluate), `backends` (local pool, Ray)
and `progress` (status lines). The data are prepared (cached) once in this process before any worker starts,
so workers only read the cache. A failing run is reported with its error line and the others go on; each run's
own log is `sweep.log` in its folder; every `progress_every` seconds the sweep prints where each running run
is and roughly how long the sweep has left (`minimult.sweep.progress`). The sweep writes
`<root>/<grid>.sweep.json` (settings -> run folders) for `minimult report`. Settings a grid marks `needs_gpu`
are left out on a machine without CUDA unless `only` names them (`plan.triage`; with a Ray `address` they
are kept: the cluster may have GPUs).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from minimult import precision
from minimult.config import RunConfig
from minimult.ranks import cpu_count
from minimult.data.prepare import prepare
from minimult.errors import MinimultError
from minimult.evaluate import summary_parts
from minimult.runs import check_own_folder
from minimult.sweep import memory
from minimult.sweep.backends import run_local, run_ray
from minimult.sweep.grid import Grid
from minimult.sweep.plan import (BUSY, LEFT_OUT, Outcome, Summary, Task, group_tasks, pending, plan, triage,
                                 write_manifest)
from minimult.sweep.progress import EVERY as PROGRESS_EVERY, SweepProgress
from minimult.sweep.worker import LOCK, RUN_LOG, run_group  # noqa: F401


def _check(backend, jobs, stack, progress_every, address, nproc=None) -> None:
    if nproc is not None and nproc != "auto":
        raise MinimultError(f"nproc {nproc!r}: the sweep chooses processes per run only as 'auto'; a fixed number "
                            f"is --set train.nproc=N")
    if nproc == "auto" and (backend != "local" or jobs is not None or stack > 1):
        raise MinimultError("--nproc auto fills this machine's idle cores itself: it goes with the local backend, "
                            "without --jobs and without --stack")
    if backend not in ("local", "ray"):
        raise MinimultError(f"unknown backend {backend!r}: use local or ray")
    if jobs is not None and jobs < 1:
        raise MinimultError(f"--jobs must be at least 1 (got {jobs})")
    if stack < 1:
        raise MinimultError(f"--stack must be at least 1 (got {stack})")
    if not progress_every > 0:
        raise MinimultError(f"--status-every must be a positive number of seconds (got {progress_every})")
    if address is not None and backend != "ray":
        raise MinimultError("--address is for --backend ray")


def _on_gpu(todo: list[Task]) -> bool:
    """Whether the sweep places these runs on GPUs (one is here and not every run asks for the CPU)."""
    return torch.cuda.is_available() and not all(t.config["train"]["device"] == "cpu" for t in todo)


def auto_ranks(runs: int, cpus: int) -> int:
    """Processes per run for `--nproc auto`: the cores shared out when there are fewer runs to do than cores
    (one run left on 2 cores: 2; 3 runs on 16: 5), else 1 (a run per core trains faster than one run on
    several, docs/speed.md)."""
    return max(1, cpus // max(1, runs))


def _fill_cores(todo: list[Task], groups: list, overrides: dict, log) -> None:
    """`--nproc auto` on a CPU: every run to do gets `auto_ranks` processes (train.nproc, recorded in its
    config.json; a resumed run takes it too, the processes being how a run executes, not what it is)."""
    if "train.nproc" in overrides or any(t.config["train"].get("nproc", 1) != 1 for t in todo):
        raise MinimultError("--nproc auto chooses train.nproc itself; leave train.nproc out of --set and the grid")
    if _on_gpu(todo):
        log("  --nproc auto: runs on a GPU take one process each")
        return
    cpus = cpu_count()
    ranks = auto_ranks(len(groups), cpus)
    for t in todo:
        t.config["train"]["nproc"] = ranks
    if ranks > 1:
        log(f"  --nproc auto: {len(groups)} run(s) to do on {cpus} cores, so {ranks} processes per run")


@dataclass
class Placement:
    """Where the runs go: GPUs (one worker each) or CPU workers with `threads` threads each; a run with
    train.nproc > 1 trains on that many processes of its own (one thread each), so by default a CPU
    sweep runs a core's worth of them at a time."""

    gpus: list[int]
    jobs: int
    workers: int
    threads: int
    nproc: int = 1  # the most processes one run of the sweep trains on

    @classmethod
    def choose(cls, todo: list[Task], groups: list, jobs: int | None) -> "Placement":
        gpus = list(range(torch.cuda.device_count())) if _on_gpu(todo) else []
        nproc = max([t.config["train"].get("nproc", 1) for t in todo] or [1])
        jobs = jobs or (len(gpus) if gpus else max(1, cpu_count() // nproc))
        workers = max(1, min(jobs, len(groups)))
        asked = {t.config["train"].get("threads", 0) for t in todo}  # a run's train.threads wins in train.py
        threads = asked.pop() if len(asked) == 1 and 0 not in asked else max(1, cpu_count() // workers)
        return cls(gpus, jobs, workers, 1 if gpus else threads, nproc)

    def describe(self) -> str:
        if self.gpus:
            return f"{len(self.gpus)} GPU(s)"
        if self.nproc > 1:
            return f"CPU, up to {self.nproc} processes of one thread per run (train.nproc)"
        return f"CPU, {self.threads} thread(s) per run"


def _announce(grid, seeds, preset, root, tasks, todo, outcomes, groups, where: Placement, backend, stack, log) -> None:
    """The sweep's opening lines: what it will do, what failed or is left out already, a bf16 tip."""
    left_out = list(dict.fromkeys(o.task.setting_id for o in outcomes if o.status == LEFT_OUT))
    n_left = sum(o.status == LEFT_OUT for o in outcomes)
    n, k = len(grid.settings), len(seeds)
    log(f"sweep {grid.title}: {n} setting{'s' * (n != 1)} x {k} seed{'s' * (k != 1)} ({','.join(map(str, seeds))}), "
        f"preset {preset} = {len(tasks)} runs under {root}/: {len(todo)} to run, "
        f"{sum(o.status == 'skipped' for o in outcomes)} already complete"
        + (f", {n_left} left out (need a GPU)" if n_left else "")
        + (f"; backend {backend}, {where.workers if backend == 'local' else where.jobs} parallel on "
           f"{where.describe()}" if todo else "")
        + (f"; stacked in {sum(len(g) > 1 for g in groups)} group(s) of up to {stack}" if stack > 1 and todo else ""))
    for o in outcomes:
        if o.status == "failed":
            log(f"  FAILED {o.task.name}: {o.message}")
    if left_out:
        log(f"  left out on this machine (no GPU): setting(s) {', '.join(left_out)}, marked needs_gpu in "
            f"{grid.path.name}; name them in --only to run them on the CPU anyway")
    cpu = torch.device("cpu")
    if (todo and not where.gpus and precision.native_bf16(cpu)
            and all(precision.resolve(t.config["train"]["precision"], cpu) == "fp32" for t in todo)):
        log("  tip: this CPU computes bf16 natively; --set train.precision=bf16 (run_all.sh --precision bf16) "
            "trains ~1.6x faster, into another --root (docs/speed.md)")


def _execute(todo, groups, where: Placement, backend, address, progress_every, log) -> list[Outcome]:
    """Prepare each data configuration once (so workers only read the cache), then run every group."""
    longest = {}  # data config -> its longest training sequence, for the memory estimate
    for key, cfg in {memory.data_key(t.config): t.config for t in todo}.items():
        longest[key] = memory.longest_sequence(prepare(RunConfig.from_dict(cfg).data, progress=log))
    limit = None
    if backend == "local" and not where.gpus:  # Ray schedules by its own resources
        limit, notes = memory.budget(groups, where.workers, longest=longest)
        for line in notes:
            log(line)
    outcomes: list[Outcome] = []
    progress = SweepProgress(todo, where.workers if backend == "local" else where.jobs, RUN_LOG, log, progress_every)

    def report(o: Outcome) -> None:
        outcomes.append(o)
        progress.finished(o)
        n = f"[{len(outcomes)}/{len(todo)}]"
        if o.status == "done":
            log(f"{n} done {o.task.name} ({o.message}, {o.seconds:.0f} s): " + ", ".join(summary_parts(o.results)))
        elif o.status in (BUSY, "skipped"):
            log(f"{n} {o.status} {o.task.name}: {o.message}")
        else:
            log(f"{n} FAILED {o.task.name}: {o.message}")

    if backend == "local":
        run_local(groups, where.workers, where.gpus, where.threads, report, progress.tick, progress_every,
                  limit, longest)
    else:
        run_ray(groups, where.jobs, address, report, log, progress.tick, progress_every)
    return outcomes


def run_sweep(grid: Grid, seeds=None, preset: str | None = None, jobs: int | None = None, backend: str = "local",
              address: str | None = None, root: str | Path = "runs", overrides: dict | None = None,
              log: Callable[[str], None] = print, only=None, stack: int = 1,
              progress_every: float = PROGRESS_EVERY, nproc: str | None = None, dry_run: bool = False) -> Summary:
    """Train and evaluate every (setting, seed) of `grid` under `root`; see the module docstring. `nproc`
    "auto": runs get the cores that fewer runs than cores would leave idle (`auto_ranks`). `dry_run`: say what
    would be done with each run that is not complete, and change nothing."""
    _check(backend, jobs, stack, progress_every, address, nproc)
    whole, grid = grid, grid.select(only)
    seeds = tuple(seeds) if seeds else grid.seeds
    preset = preset or grid.preset
    root = Path(root).resolve()
    check_own_folder(root, f"--root {root}")  # its runs' folders inside another run's would read as that run's
    tasks = plan(grid, seeds, preset, root, overrides or {})
    gpu_somewhere = torch.cuda.is_available() or (backend == "ray" and address is not None)  # a cluster may have them
    outcomes, todo = triage(tasks, {str(i).strip() for i in only or ()}, gpu_somewhere)
    groups = group_tasks(todo, stack)
    if dry_run:
        _announce(grid, seeds, preset, root, tasks, todo, outcomes, groups, Placement.choose(todo, groups, jobs),
                  backend, stack, log)
        for t in todo:
            log(f"  {pending(t)}: {t.name}")
        return Summary(outcomes, root, None)
    root.mkdir(parents=True, exist_ok=True)
    not_here = {o.task.run_dir for o in outcomes if o.status == LEFT_OUT}
    manifest = write_manifest(root, whole, preset, [t for t in tasks if t.run_dir not in not_here],
                              [t for t in tasks if t.run_dir in not_here])
    if nproc == "auto" and todo:
        _fill_cores(todo, groups, overrides or {}, log)
    where = Placement.choose(todo, groups, jobs)
    _announce(grid, seeds, preset, root, tasks, todo, outcomes, groups, where, backend, stack, log)
    if todo:
        outcomes += _execute(todo, groups, where, backend, address, progress_every, log)
    order = {t.run_dir: i for i, t in enumerate(tasks)}
    outcomes.sort(key=lambda o: order[o.task.run_dir])
    summary = Summary(outcomes, root, manifest)
    log(summary.line())
    for status in ("failed", BUSY):
        for o in summary.outcomes:
            if o.status == status:
                log(f"  {status}: {o.task.name}: {o.message}")
    return summary
