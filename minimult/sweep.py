"""Sweeps: every (setting, seed) of a grid trained and evaluated in its own run folder, locally or on Ray.

Public entry: `run_sweep(grid, seeds, preset, jobs, backend, address, root, overrides, log) -> Summary`.

A run folder is named `<root>/<id>-<mods>-s<seed>`, so invoking the same sweep again finds its runs:
a run whose `results.json` matches its finished training is skipped, one with an unfinished
checkpoint is resumed (`train.pretrain(..., resume=True)`), a finished one without results is only
evaluated, and a missing one is created and trained. A folder that holds a different configuration
(another preset, other overrides) is never reused: that run fails with a message saying so.

Backends:
- `local`: a `ProcessPoolExecutor` (spawn). On CPU one worker per core, one thread each (two
  single-thread runs beat one two-thread run by ~1.28x on a 2-core machine); with CUDA one worker
  per GPU, each pinned to its GPU with `CUDA_VISIBLE_DEVICES`.
- `ray`: one Ray task per run (`num_cpus=1`, `num_gpus=1` when the cluster has GPUs); Ray schedules
  them. `address=None` starts a private local Ray; otherwise it connects to that cluster, whose nodes
  must see the same run folders and cache (`MINIMULT_CACHE`) paths, e.g. on a shared filesystem.

The data are prepared (cached) once in this process before any worker starts, so workers only read
the cache. A failing run is reported with its error line and the others go on; each run's own log
is `sweep.log` in its folder; every `progress_every` seconds the sweep prints where each running run
is and roughly how long the sweep has left (`minimult.sweep_progress`). The sweep writes
`<root>/<grid>.sweep.json` (settings -> run folders) for `minimult report`.

Settings a grid marks `needs_gpu = true` (overparam: BERT-base sizes, about a day per quick-preset
run on one CPU core) are left out on a machine without CUDA, with a line saying so, unless `only`
names them; with a Ray `address` they are kept (the cluster may have GPUs).
"""

from __future__ import annotations

import fcntl
import json
import multiprocessing
import os
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from . import precision
from .errors import MinimultError
from .grid import Grid
from .runs import read_json, write_json
from .sweep_progress import EVERY as PROGRESS_EVERY, SweepProgress

RUN_LOG = "sweep.log"
LEFT_OUT = "left out"
NEEDS_GPU = "needs a GPU"  # why a run is left out: the outcome's message and the manifest's "left_out"
LOCK = ".sweep.lock"


@dataclass(frozen=True)
class Task:
    setting_id: str
    setting_name: str
    mods: str  # canonical (as in config.json)
    seed: int
    run_dir: str  # absolute
    config: dict  # the resolved RunConfig as a dict
    needs_gpu: bool = False  # the grid marks the setting as too slow for a CPU

    @property
    def name(self) -> str:
        return Path(self.run_dir).name


@dataclass
class Outcome:
    task: Task
    status: str  # done | skipped | failed | left out (needs a GPU, none here)
    message: str = ""
    seconds: float = 0.0
    results: dict = field(default_factory=dict)  # a few headline numbers


@dataclass
class Summary:
    outcomes: list[Outcome]
    root: Path
    manifest: Path

    def count(self, status: str) -> int:
        return sum(o.status == status for o in self.outcomes)

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    @property
    def ok(self) -> bool:
        return not self.failed

    def line(self) -> str:
        left_out = self.count(LEFT_OUT)
        return (f"sweep: {len(self.outcomes)} runs: {self.count('done')} done, {self.count('skipped')} skipped "
                f"(already complete), {self.count('failed')} failed"
                + (f", {left_out} left out (need a GPU)" if left_out else "") + f"; run folders under {self.root}/")


def run_dir_name(setting_id: str, mods: str, seed: int) -> str:
    return f"{setting_id}-{mods.replace(',', '+').replace('=', '')}-s{seed}"


# ---------------------------------------------------------------------------------------------
# Planning (in the parent).


def _absolute_files(values: dict) -> dict:
    """Corpus files given by a relative path become absolute, so runs and workers do not depend on
    the current directory (built-in corpus names are left alone)."""
    out = dict(values)
    for key in ("data.train", "data.dev"):
        if key in out and isinstance(out[key], str) and Path(out[key]).is_file():
            out[key] = str(Path(out[key]).resolve())
    return out


def plan(grid: Grid, seeds, preset: str, root: Path, overrides: dict) -> list[Task]:
    from .config import resolve

    tasks = []
    for setting in grid.settings:
        for seed in seeds:
            values = _absolute_files({**grid.overrides_for(setting, preset), **overrides, "train.seed": seed})
            try:
                cfg, _ = resolve(preset, values, setting.mods)
            except MinimultError as e:
                raise MinimultError(f"setting {setting.id} ({setting.name}): {e}") from None
            run_dir = root / run_dir_name(setting.id, cfg.mods, seed)
            tasks.append(Task(setting.id, setting.name, cfg.mods, seed, str(run_dir), _plain(cfg.to_dict()),
                              setting.needs_gpu))
    return tasks


def _plain(d: dict) -> dict:
    return json.loads(json.dumps(d))  # tuples -> lists, as config.json holds them


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def results_complete(run_dir: Path) -> bool:
    """results.json evaluates the run's finished training (same number of steps)."""
    try:
        meta = json.loads((run_dir / "run.json").read_text())
        results = json.loads((run_dir / "results.json").read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return (meta.get("status") == "complete" and results.get("steps") == meta.get("steps")
            and "perplexity" in results and bool(results.get("layers")))


def state(task: Task) -> str:
    """'complete' (skip), 'partial' (resume/evaluate) or 'new'; an error if the folder holds another run."""
    run_dir = Path(task.run_dir)
    if not (run_dir / "config.json").is_file():
        return "new"
    from .config import RunConfig

    try:  # through RunConfig: keys added to the config since the run was made read as their defaults
        stored = _flat(_plain(RunConfig.from_dict(read_json(run_dir / "config.json")).to_dict()))
    except (TypeError, ValueError, MinimultError) as e:
        raise MinimultError(f"{run_dir}/config.json is not a run configuration ({e})") from None
    wanted = _flat(task.config)
    differ = sorted(k for k in set(stored) | set(wanted) if stored.get(k) != wanted.get(k))
    if differ:
        shown = ", ".join(f"{k}={stored.get(k)!r} (sweep wants {wanted.get(k)!r})" for k in differ[:3])
        raise MinimultError(f"{run_dir} holds a run with another configuration: {shown}"
                            f"{' ...' if len(differ) > 3 else ''}; sweep into another --root or move that folder")
    return "complete" if results_complete(run_dir) else "partial"


def triage(tasks: list[Task], named: set[str], gpu_somewhere: bool) -> tuple[list[Outcome], list[Task]]:
    """(outcomes already decided, tasks to run): complete runs are skipped, a folder holding another
    run fails, and a `needs_gpu` setting is left out where no GPU can be had unless `named` (--only)."""
    outcomes, todo = [], []
    for t in tasks:
        try:
            s = state(t)
        except MinimultError as e:
            outcomes.append(Outcome(t, "failed", f"error: {e}"))
            continue
        if s == "complete":
            outcomes.append(Outcome(t, "skipped", "already complete"))
        elif t.needs_gpu and t.setting_id not in named and not gpu_somewhere:
            outcomes.append(Outcome(t, LEFT_OUT, NEEDS_GPU))
        else:
            todo.append(t)
    return outcomes, todo


def write_manifest(root: Path, grid: Grid, preset: str, tasks: list[Task], left_out: list[Task] = ()) -> Path:
    """`<root>/<grid>.sweep.json`: the grid's settings and their run folders (merged over invocations).
    A setting with no run folder whose runs were `left_out` (needs a GPU) is listed with
    `"left_out": "needs a GPU"` and no runs, so the report can say which rows are missing and why."""
    path = root / f"{grid.name}.sweep.json"
    old = {}
    if path.is_file():
        try:
            old = {s["id"]: s for s in json.loads(path.read_text()).get("settings", [])}
        except (OSError, json.JSONDecodeError, KeyError, TypeError):
            old = {}
    settings = []
    for setting in grid.settings:  # the whole grid's order, whichever settings --only picked now
        runs = [Path(t.run_dir).name for t in tasks if t.setting_id == setting.id]
        mods = next((t.mods for t in [*tasks, *left_out] if t.setting_id == setting.id), None)
        prev = old.pop(setting.id, {})
        skipped = any(t.setting_id == setting.id for t in left_out)
        if not runs and not prev and not skipped:
            continue
        runs = list(dict.fromkeys([*prev.get("runs", []), *runs]))
        entry = {"id": setting.id, "name": setting.name, "mods": mods or prev.get("mods"), "runs": runs}
        if not runs and (skipped or prev.get("left_out")):
            entry["left_out"] = NEEDS_GPU
        settings.append(entry)
    settings += list(old.values())  # settings swept earlier that the grid file no longer has
    write_json(path, {"grid": str(grid.path), "title": grid.title, "preset": preset, "settings": settings})
    return path


# ---------------------------------------------------------------------------------------------
# One run (in a worker process or a Ray task).


def run_task(task: Task, threads: int | None = 1) -> Outcome:
    """Create / resume / evaluate one run; never raises for a failing run (the outcome says why)."""
    return run_group([task], threads)[0]


def run_group(tasks: list[Task], threads: int | None = 1) -> list[Outcome]:
    """Create / resume / evaluate the runs `tasks`; never raises for a failing run (the outcomes say
    why). Two or more runs without a checkpoint train together as one stacked model
    (`train_stacked`); runs with a checkpoint resume (or are only evaluated) one by one."""
    t0 = time.time()
    outcomes: dict[str, Outcome] = {}
    locks, logfiles = {}, {}
    for task in tasks:
        run_dir = Path(task.run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        lock = open(run_dir / LOCK, "w")
        try:  # two sweeps into one root never work on the same run at once
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            outcomes[task.run_dir] = Outcome(task, "failed", f"error: another process is working on {run_dir} "
                                                              f"(it holds {LOCK})")
            continue
        locks[task.run_dir] = lock
        logfiles[task.run_dir] = open(run_dir / RUN_LOG, "a", encoding="utf-8")
    live = [t for t in tasks if t.run_dir in locks]

    def logger(task):
        def log(line: str) -> None:
            logfiles[task.run_dir].write(f"{line}\n")
            logfiles[task.run_dir].flush()
        return log

    def log_all(line: str) -> None:
        for t in live:
            logger(t)(line)

    def fail(task, e: BaseException) -> None:
        if isinstance(e, MinimultError):
            logger(task)(f"error: {e}")
            outcomes[task.run_dir] = Outcome(task, "failed", f"error: {e}", time.time() - t0)
        else:  # a bug or a resource problem in one run must not stop the others
            logger(task)(traceback.format_exc())
            outcomes[task.run_dir] = Outcome(task, "failed", f"{type(e).__name__}: {e} (traceback in "
                                                             f"{Path(task.run_dir) / RUN_LOG})", time.time() - t0)

    try:
        import torch

        from .config import RunConfig
        from .evaluate import evaluate_run
        from .mods import parse_mods
        from .prepare import prepare
        from .runs import copy_vocab
        from .train import CHECKPOINT, pretrain

        if threads:
            torch.set_num_threads(threads)
        prepared = {}
        for task in live:
            log = logger(task)
            try:
                log(f"--- sweep run {task.name} (setting {task.setting_id}: {task.setting_name}, seed {task.seed}) "
                    f"pid {os.getpid()} {time.strftime('%Y-%m-%d %H:%M:%S')}")
                cfg = RunConfig.from_dict(task.config)
                mods = parse_mods(None if cfg.mods == "original" else cfg.mods)
                run_dir = Path(task.run_dir)
                if not (run_dir / "config.json").is_file():
                    write_json(run_dir / "config.json", task.config)
                if not all((run_dir / f).is_file() for f in ("tokenizer.json", "vocab.txt")):
                    copy_vocab(prepare(cfg.data, progress=log).path, run_dir)
                prepared[task.run_dir] = (cfg, mods)
            except Exception as e:
                fail(task, e)
        fresh = [t for t in live if t.run_dir in prepared and not (Path(t.run_dir) / CHECKPOINT).is_file()]
        how = {}
        if len(fresh) > 1:
            from .train_stacked import pretrain_stacked

            for t in fresh:
                (Path(t.run_dir) / "metrics.jsonl").unlink(missing_ok=True)  # an attempt that never checkpointed
            log_all(f"--- training {len(fresh)} runs as one stacked model: {', '.join(t.name for t in fresh)}")
            try:
                pretrain_stacked([prepared[t.run_dir][0] for t in fresh], [prepared[t.run_dir][1] for t in fresh],
                                 [t.run_dir for t in fresh], log=log_all)
                how.update({t.run_dir: f"new run, stacked x{len(fresh)}" for t in fresh})
            except Exception as e:
                for t in fresh:
                    fail(t, e)
        for task in live:
            if task.run_dir not in prepared or task.run_dir in outcomes:
                continue
            log, run_dir = logger(task), Path(task.run_dir)
            cfg, mods = prepared[task.run_dir]
            try:
                if task.run_dir not in how:
                    meta = read_json(run_dir / "run.json") if (run_dir / "run.json").is_file() else {}
                    how[task.run_dir] = "new run"
                    if (run_dir / CHECKPOINT).is_file():
                        if meta.get("status") != "complete":
                            how[task.run_dir] = "resumed"
                            pretrain(cfg, mods, run_dir, resume=True, log=log)
                        else:
                            how[task.run_dir] = "evaluation only"
                    else:
                        (run_dir / "metrics.jsonl").unlink(missing_ok=True)  # rows of an attempt that never checkpointed
                        pretrain(cfg, mods, run_dir, log=log)
                results = evaluate_run(run_dir, None, log=log)
                layers = results.get("layers", {})
                top = max(layers, key=int) if layers else None
                headline = {"mu": results.get("mu"), "top_layer": top,
                            "align_f1": {l: layers[l]["align_f1"] for l in layers},
                            "ppl_dev": results.get("perplexity", {}).get("dev")}
                log(f"--- finished ({how[task.run_dir]}) in {time.time() - t0:.1f} s")
                outcomes[task.run_dir] = Outcome(task, "done", how[task.run_dir], time.time() - t0, headline)
            except Exception as e:
                fail(task, e)
    except Exception as e:  # e.g. torch itself failing to import in this worker
        for task in tasks:
            if task.run_dir not in outcomes:
                outcomes[task.run_dir] = Outcome(task, "failed", f"{type(e).__name__}: {e}", time.time() - t0)
    finally:
        for f in logfiles.values():
            f.close()
        for lock in locks.values():
            lock.close()  # releases the lock
    return [outcomes[t.run_dir] for t in tasks]


def group_tasks(tasks: list[Task], stack: int) -> list[list[Task]]:
    """Runs of one model shape and training schedule without a checkpoint, in groups of up to `stack`
    (to be trained as one stacked model); every other run alone. Order otherwise kept."""
    from .train_stacked import SHARED_TRAIN

    if stack <= 1:
        return [[t] for t in tasks]
    groups: dict[str, list[list[Task]]] = {}
    out: list[list[Task]] = []
    for t in tasks:
        if (Path(t.run_dir) / "checkpoint.pt").is_file() or t.config["train"]["epochs"] == 0:
            out.append([t])
            continue
        key = json.dumps([t.config["model"], {k: t.config["train"][k] for k in SHARED_TRAIN}], sort_keys=True)
        if key not in groups or len(groups[key][-1]) >= stack:
            groups.setdefault(key, []).append([])
            out.append(groups[key][-1])
        groups[key][-1].append(t)
    return out


def _die_with_parent() -> None:
    """Have the kernel end this worker when the sweep process dies (Linux `prctl(PR_SET_PDEATHSIG)`).

    Ctrl-C reaches the workers too, but a sweep ended with `kill` or killed for memory would otherwise
    leave its workers training on, unobserved; checkpoints are written atomically, so the next sweep
    resumes their runs."""
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):  # not Linux
        return
    if os.getppid() == 1:  # the parent was already gone before prctl took effect
        os._exit(1)


def _init_local_worker(gpu_queue) -> None:
    """End with the sweep process; pin this worker to one GPU (before anything touches CUDA)."""
    _die_with_parent()
    gpu = gpu_queue.get()
    if gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)


# ---------------------------------------------------------------------------------------------
# Backends.


def _run_local(groups, jobs, gpus, threads, report, tick, every) -> None:
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    for i in range(jobs):
        queue.put(gpus[i % len(gpus)] if gpus else None)
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_init_local_worker,
                             initargs=(queue,)) as pool:
        futures = {pool.submit(run_group, g, threads): g for g in groups}
        pending = set(futures)
        try:
            while pending:
                ready, pending = wait(pending, timeout=every, return_when=FIRST_COMPLETED)
                tick()
                for future in ready:
                    _report_local(future, futures[future], report)
        except KeyboardInterrupt:
            pool.shutdown(wait=False, cancel_futures=True)
            raise


def _report_local(future, group, report) -> None:
    try:
        outcomes = future.result()
    except Exception as e:  # the worker process itself died (killed, out of memory)
        outcomes = [Outcome(t, "failed", f"worker process died: {type(e).__name__}: {e}") for t in group]
    for outcome in outcomes:
        report(outcome)


def _run_ray(groups, jobs, address, report, log, tick, every) -> None:
    try:
        import ray
    except ImportError:
        raise MinimultError("the ray backend needs Ray: pip install 'ray[default]>=2.9'") from None
    started = not ray.is_initialized()
    if started:
        kwargs = {"include_dashboard": False, "logging_level": "warning", "log_to_driver": False}
        try:
            if address is None:  # a private local Ray, never an unrelated running cluster
                ray.init(address="local", num_cpus=jobs, **kwargs)
            else:
                ray.init(address=address, **kwargs)
        except Exception as e:
            raise MinimultError(f"cannot start/connect to Ray{f' at {address}' if address else ''}: "
                                f"{type(e).__name__}: {e}") from None
    try:
        resources = ray.cluster_resources()
        gpus = 1 if resources.get("GPU", 0) >= 1 else 0
        log(f"ray: {resources.get('CPU', 0):g} CPUs, {resources.get('GPU', 0):g} GPUs; one task per run "
            f"(num_cpus=1, num_gpus={gpus})")
        remote = ray.remote(run_group).options(num_cpus=1, num_gpus=gpus)
        refs = {remote.remote(g, 1): g for g in groups}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=every)
            tick()
            for ref in ready:
                try:
                    outcomes = ray.get(ref)
                except ray.exceptions.RayError as e:  # the task's worker died
                    why = str(e).strip().splitlines()[-1] if str(e).strip() else ""
                    outcomes = [Outcome(t, "failed", f"ray task failed: {type(e).__name__}: {why}") for t in refs[ref]]
                for outcome in outcomes:
                    report(outcome)
    finally:
        if started:
            ray.shutdown()


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _describe(o: Outcome) -> str:
    r = o.results
    if o.status != "done" or not r:
        return ""
    parts = [f"µ {r['mu']:.3f}" if r.get("mu") is not None else "µ n/a"]
    parts += [f"F1 L{l} {v:.3f}" for l, v in r.get("align_f1", {}).items()]
    if r.get("ppl_dev") is not None:
        parts.append(f"ppl dev {r['ppl_dev']:.1f}")
    return ": " + ", ".join(parts)


def run_sweep(grid: Grid, seeds=None, preset: str | None = None, jobs: int | None = None, backend: str = "local",
              address: str | None = None, root: str | Path = "runs", overrides: dict | None = None,
              log: Callable[[str], None] = print, only=None, stack: int = 1,
              progress_every: float = PROGRESS_EVERY) -> Summary:
    """Train and evaluate every (setting, seed) of `grid` under `root`; see the module docstring."""
    from .prepare import prepare
    from .config import RunConfig

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
    whole, grid = grid, grid.select(only)
    seeds = tuple(seeds) if seeds else grid.seeds
    preset = preset or grid.preset
    root = Path(root).resolve()
    tasks = plan(grid, seeds, preset, root, overrides or {})
    root.mkdir(parents=True, exist_ok=True)

    import torch

    # a Ray cluster elsewhere may have the GPUs this machine lacks
    gpu_somewhere = torch.cuda.is_available() or (backend == "ray" and address is not None)
    outcomes, todo = triage(tasks, {str(i).strip() for i in only or ()}, gpu_somewhere)
    not_here = {o.task.run_dir for o in outcomes if o.status == LEFT_OUT}
    manifest = write_manifest(root, whole, preset, [t for t in tasks if t.run_dir not in not_here],
                              [t for t in tasks if t.run_dir in not_here])

    on_gpu = torch.cuda.is_available() and not all(t.config["train"]["device"] == "cpu" for t in todo)
    gpus = list(range(torch.cuda.device_count())) if on_gpu else []
    if jobs is None:
        jobs = len(gpus) if gpus else _cpu_count()
    groups = group_tasks(todo, stack)
    workers = max(1, min(jobs, len(groups)))
    threads = 1 if gpus else max(1, _cpu_count() // workers)
    where = (f"{len(gpus)} GPU(s)" if gpus else f"CPU, {threads} thread(s) per run")
    log(f"sweep {grid.title}: {len(grid.settings)} settings x {len(seeds)} seeds ({','.join(map(str, seeds))}), "
        f"preset {preset} = {len(tasks)} runs under {root}/: {len(todo)} to run, "
        f"{sum(o.status == 'skipped' for o in outcomes)} already complete"
        + (f", {len(not_here)} left out (need a GPU)" if not_here else "")
        + (f"; backend {backend}, {workers if backend == 'local' else jobs} parallel on {where}" if todo else "")
        + (f"; stacked in {sum(len(g) > 1 for g in groups)} group(s) of up to {stack}" if stack > 1 and todo else ""))
    for o in outcomes:
        if o.status == "failed":
            log(f"  FAILED {o.task.name}: {o.message}")
    left_out = list(dict.fromkeys(o.task.setting_id for o in outcomes if o.status == LEFT_OUT))
    if left_out:
        log(f"  left out on this machine (no GPU): setting(s) {', '.join(left_out)}, marked needs_gpu in "
            f"{grid.path.name}; name them in --only to run them on the CPU anyway")
    cpu = torch.device("cpu")
    if (todo and not gpus and precision.native_bf16(cpu)
            and all(precision.resolve(t.config["train"]["precision"], cpu) == "fp32" for t in todo)):
        log("  tip: this CPU computes bf16 natively; --set train.precision=bf16 (run_all.sh --precision bf16) "
            "trains ~1.6x faster, into another --root (README, Speed)")

    if todo:
        for data in {json.dumps(t.config["data"], sort_keys=True): t.config for t in todo}.values():
            prepare(RunConfig.from_dict(data).data, progress=log)  # each data configuration once, before the workers

        finished = [0]
        parallel = workers if backend == "local" else jobs
        progress = SweepProgress(todo, parallel, RUN_LOG, log, progress_every)

        def report(o: Outcome) -> None:
            finished[0] += 1
            outcomes.append(o)
            progress.finished(o)
            if o.status == "done":
                log(f"[{finished[0]}/{len(todo)}] done {o.task.name} ({o.message}, {o.seconds:.0f} s){_describe(o)}")
            else:
                log(f"[{finished[0]}/{len(todo)}] FAILED {o.task.name}: {o.message}")

        if backend == "local":
            _run_local(groups, workers, gpus, threads, report, progress.tick, progress_every)
        else:
            _run_ray(groups, jobs, address, report, log, progress.tick, progress_every)

    order = {t.run_dir: i for i, t in enumerate(tasks)}
    outcomes.sort(key=lambda o: order[o.task.run_dir])
    summary = Summary(outcomes, root, manifest)
    log(summary.line())
    for o in summary.failed:
        log(f"  failed: {o.task.name}: {o.message}")
    return summary
