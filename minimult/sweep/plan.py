"""Planning a sweep (in the parent process): the grid's (setting, seed) pairs as `Task`s with their
resolved configs, what state each run folder is in, what to run, and the manifest for the report."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from minimult.config import EVALUATION_SECTIONS, EXECUTION_SETTINGS, RunConfig, flat, resolve
from minimult.errors import MinimultError
from minimult.evaluate.results import results_complete  # noqa: F401  (the sweep's "done": worker, progress)
from minimult.runs import folder_locked, lock_held, log_lines, mods_for_folder, read_json, write_json
from minimult.sweep.grid import Grid
from minimult.train import SHARED_TRAIN

LEFT_OUT = "left out"
BUSY = "busy"  # another process (a second sweep into the same root) holds the run's lock
NEEDS_GPU = "needs a GPU"  # why a run is left out: the outcome's message and the manifest's "left_out"


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

    @property
    def wants_transfer(self) -> bool:
        """The sweep evaluates zero-shot transfer too: a finished run needs its transfer numbers."""
        return self.config.get("transfer", {}).get("enabled", False)


@dataclass
class Outcome:
    task: Task
    status: str  # done | skipped | failed | busy (another process holds its lock) | left out (needs a GPU, none here)
    message: str = ""
    seconds: float = 0.0
    results: dict = field(default_factory=dict)  # a few headline numbers


@dataclass
class Summary:
    outcomes: list[Outcome]
    root: Path
    manifest: Path | None  # None: a dry run

    def count(self, status: str) -> int:
        return sum(o.status == status for o in self.outcomes)

    @property
    def ok(self) -> bool:
        return not self.count("failed")

    def line(self) -> str:
        left_out = self.count(LEFT_OUT)
        return (f"sweep: {len(self.outcomes)} runs: {self.count('done')} done, {self.count('skipped')} skipped "
                f"(already complete), {self.count('failed')} failed"
                + (f", {self.count(BUSY)} busy (another process is training them)" if self.count(BUSY) else "")
                + (f", {left_out} left out (need a GPU)" if left_out else "") + f"; run folders under {self.root}/")


def _absolute_files(values: dict) -> dict:
    """Corpus files given by a relative path become absolute, so runs and workers do not depend on
    the current directory (built-in corpus names are left alone)."""
    out = dict(values)
    for key in ("data.train", "data.dev"):
        if key in out and isinstance(out[key], str) and Path(out[key]).is_file():
            out[key] = str(Path(out[key]).resolve())
    return out


def plan(grid: Grid, seeds, preset: str, root: Path, overrides: dict) -> list[Task]:
    tasks = []  # seed-major: every setting at the first seed, then at the next, so what finishes is whole tables
    for seed in seeds:
        for setting in grid.settings:
            values = _absolute_files({**grid.overrides_for(setting, preset), **overrides, "train.seed": seed})
            try:
                cfg, _ = resolve(preset, values, setting.mods)
            except MinimultError as e:
                raise MinimultError(f"setting {setting.id} ({setting.name}): {e}") from None
            run_dir = root / f"{setting.id}-{mods_for_folder(cfg.mods)}-s{seed}"
            tasks.append(Task(setting.id, setting.name, cfg.mods, seed, str(run_dir), _plain(cfg.to_dict()),
                              setting.needs_gpu))
    return tasks


def _plain(d: dict) -> dict:
    return json.loads(json.dumps(d))  # tuples -> lists, as config.json holds them


def state(task: Task) -> str:
    """'complete' (skip), 'partial' (resume/evaluate) or 'new'; an error if the folder holds another run."""
    run_dir = Path(task.run_dir)
    if not (run_dir / "config.json").is_file():
        return "new"

    try:  # through RunConfig: keys added to the config since the run was made read as their defaults
        stored = flat(_plain(RunConfig.from_dict(read_json(run_dir / "config.json")).to_dict()))
    except (TypeError, ValueError, MinimultError) as e:
        raise MinimultError(f"{run_dir}/config.json is not a run configuration ({e})") from None
    wanted = flat(task.config)
    # the preset is a name for settings, not one: a run made under a preset since renamed still matches;
    # evaluation settings (transfer) are the sweep's to choose for a finished run, execution settings
    # (train.nproc) for any run
    differ = sorted(k for k in set(stored) | set(wanted) if stored.get(k) != wanted.get(k) and k != "preset"
                    and k.split(".")[0] not in EVALUATION_SECTIONS and k not in EXECUTION_SETTINGS)
    if differ:
        shown = ", ".join(f"{k}={stored.get(k)!r} (sweep wants {wanted.get(k)!r})" for k in differ[:3])
        raise MinimultError(f"{run_dir} holds a run with another configuration: {shown}"
                            f"{' ...' if len(differ) > 3 else ''}; sweep into another --root or move that folder")
    return "complete" if results_complete(run_dir, task.wants_transfer) else "partial"


def pending(task: Task) -> str:
    """What a sweep does with a run it has to run: 'new', 'resume from step S of T (its checkpoint; L logged)' for
    a run whose run.json says where it was interrupted, 'resume (step L of T logged, run.json: STATUS)' or
    'evaluate (trained)'; the run resumes from its last checkpoint, at or before the logged step. 'busy: ...'
    where another process holds the run's lock now (a sweep, pretrain or eval at work on it: left alone)."""
    run_dir = Path(task.run_dir)
    busy = "busy: " if lock_held(run_dir) else ""
    if not (run_dir / "run.json").is_file():
        return f"{busy}new"
    meta = read_json(run_dir / "run.json")
    if meta.get("status") == "complete":
        return f"{busy}evaluate (trained)"
    step = max((row.get("step", 0) for _, row in log_lines(run_dir / "metrics.jsonl")), default=0)
    total, kept = meta.get("total_steps", 0), meta.get("steps") if meta.get("status") == "interrupted" else None
    if isinstance(kept, int):
        logged = f"; {step:,} logged" if step != kept else ""
        return f"{busy}resume from step {kept:,} of {total:,} ({'its' if kept else 'no'} checkpoint{logged})"
    return f"{busy}resume (step {step:,} of {total:,} logged, run.json: {meta.get('status')})"


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
    `"left_out": "needs a GPU"` and no runs, so the report can say which rows are missing and why.
    A setting's `paper` numbers and the grid's `paper_source` are recorded (from the grid as it is now),
    so a results folder shows the published numbers beside its own without the grid file. Two sweeps
    into one root merge in turn (a lock on the root folder), so neither drops the other's settings."""
    path = root / f"{grid.name}.sweep.json"
    with folder_locked(root):  # two sweeps into one root merge one at a time; held for milliseconds
        _merge_manifest(path, grid, preset, tasks, left_out)
    return path


def _merge_manifest(path: Path, grid: Grid, preset: str, tasks: list[Task], left_out) -> None:
    old = {}
    if path.exists():  # an unreadable manifest is refused: rewriting it would drop the earlier sweeps' runs
        try:
            old = {s["id"]: s for s in json.loads(path.read_bytes().decode("utf-8")).get("settings", [])}
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
            why = ("a folder, not a file" if path.is_dir() else e.strerror or type(e).__name__ if isinstance(e, OSError)
                   else f"not a sweep manifest: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            raise MinimultError(f"{path} cannot be read ({why}): it lists the runs earlier sweeps made in this "
                                f"folder, which rewriting it would drop; repair it or move it away, then sweep "
                                f"again") from None
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
        if setting.paper:
            entry["paper"] = dict(setting.paper)
        if not runs and (skipped or prev.get("left_out")):
            entry["left_out"] = NEEDS_GPU
        settings.append(entry)
    settings += list(old.values())  # settings swept earlier that the grid file no longer has
    source = {"paper_source": grid.paper_source} if grid.paper_source else {}
    write_json(path, {"grid": str(grid.path), "title": grid.title, "preset": preset, **source, "settings": settings})


def group_tasks(tasks: list[Task], stack: int) -> list[list[Task]]:
    """Runs of one model shape and training schedule without a checkpoint, in groups of up to `stack`
    (to be trained as one stacked model); every other run alone. Order otherwise kept."""
    if stack <= 1:
        return [[t] for t in tasks]
    groups: dict[str, list[list[Task]]] = {}
    out: list[list[Task]] = []
    for t in tasks:
        if (Path(t.run_dir) / "checkpoint.pt").is_file() or t.config["train"]["epochs"] == 0:
            out.append([t])
            continue
        key = json.dumps([t.config["model"], {k: t.config["train"].get(k) for k in SHARED_TRAIN}], sort_keys=True)
        if key not in groups or len(groups[key][-1]) >= stack:
            groups.setdefault(key, []).append([])
            out.append(groups[key][-1])
        groups[key][-1].append(t)
    return out

