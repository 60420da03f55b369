"""The lab from Python (a notebook, a script of your own): the CLI's main commands as functions.

    from minimult import api

    run = api.pretrain(mods="lang-pos", preset="tiny", seed=0, out="runs/lp")   # -> Path of the run folder
    results = api.evaluate(run)                                                # -> this evaluation's numbers
    api.export(run, "exports/bert/")                                           # BertForMaskedLM folder
    rows = api.results("experiments/results/table1-paper")                     # one dict per run

Each function runs the code the CLI command of the same name runs (`minimult pretrain`, `eval`, `export`,
`report`'s runs.csv), so a run made here is a run made there: same folder, same files, same numbers. Bad
input raises `MinimultError` with the CLI's one-line message. `log` receives the progress lines the CLI
prints (default: print; `lambda s: None` for silence). docs/api.md has a worked example, which a test runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from minimult.config import resolve
from minimult.errors import MinimultError
from minimult.evaluate import evaluate_run
from minimult.export import export_run
from minimult.report import load
from minimult.report.tables import aggregate_sections, left_out_text, run_rows, top_layer
from minimult.runs import Run
from minimult.train import train

Log = Callable[[str], None]


def pretrain(mods: str = "", preset: str = "paper", seed: int = 0, out: str | Path | None = None,
             settings: dict | None = None, stop_after: int | None = None, log: Log = print) -> Path:
    """Train a new run (as `minimult pretrain --preset P --mods M --seed S --set K=V ... --out OUT`) and return
    its folder. `settings` are `--set` overrides by dotted key ({"train.epochs": 3}); `stop_after` stops after
    that many updates on the whole schedule (continue with `resume`)."""
    if not isinstance(settings or {}, dict):
        raise MinimultError(f"settings must be a dict of dotted keys, e.g. {{'train.epochs': 3}} (got "
                            f"{type(settings).__name__})")
    cfg, active = resolve(preset, {**(settings or {}), "train.seed": seed}, mods or None)
    run = Run.create(cfg, active, out, log=log)
    with run.removed_if_untrained(), run.locked():
        train([run], log=log, stop_after=stop_after)
    return run.path


def resume(run: str | Path, stop_after: int | None = None, log: Log = print) -> Path:
    """Continue an interrupted (or stopped) run to its end, or to `stop_after` updates (`pretrain --resume`)."""
    opened = Run.open(run)
    with opened.locked():
        train([opened], resume=True, log=log, stop_after=stop_after)
    return opened.path


def evaluate(run: str | Path, layers=None, only=None, log: Log = print, **options) -> dict:
    """Every measure of a run (`minimult eval RUN`), written to its results.json and returned; `layers` (e.g.
    [0, 8] or "0,8"), `only` (evaluator names) and evaluator options (`link_file=`, `link_base=`, `link_lang=`) as
    the CLI takes them."""
    return evaluate_run(run, layers=layers, only=only, log=log, **options)


def export(run: str | Path, out: str | Path, force: bool = False, log: Log = print) -> Path:
    """The run's model as a HuggingFace BertForMaskedLM folder (`minimult export RUN --hf OUT`); returns it."""
    return export_run(run, out, force=force, log=log)


def results(folder: str | Path, log: Log = print) -> list[dict]:
    """One dict per evaluated run under `folder` (a results folder or a run folder), as `report`'s runs.csv
    has them: section, id, setting, mods, preset, seed, run, device, precision, init_seed, train_seconds and
    every Table 1 column (mu, align_f1_L0, ..., ppl_dev) as a float or None. An evaluated run that is no row
    (a second run of one seed, one that never trained, ...) is named to `log` with why, as the report names it."""
    loaded = load([folder], log)
    for lost in (m for section in loaded.sections for m in section.lost):
        log(left_out_text(lost))
    top = top_layer(loaded.runs)
    return run_rows(aggregate_sections(loaded.sections, top), top)


__all__ = ["MinimultError", "evaluate", "export", "pretrain", "results", "resume"]
