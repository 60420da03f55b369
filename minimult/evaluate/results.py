"""A run's results.json, in one place: its layout (`SCHEMA`), how an evaluation is recorded and written into
it, how it is read and checked, and which of its evaluations is the run's result.

    results = record(run, evaluation, scores, seconds)   # one evaluation's results (evaluate_run)
    results = standalone_record(run, kind, part, t0)     # a standalone evaluator's own command (transfer)
    write_results(run_dir, results, fill=None)           # into results.json, by the headline policy below
    read_results(path) / results_problem(results)        # read and checked; what makes one unreadable
    incomplete_evaluation(results)                       # why the headline is not a complete evaluation, or None
    results_complete(run_dir, wants_transfer)            # the run is done (what a sweep skips)

Layout (schema 1; a results.json written before `schema` was recorded has the same layout and reads as 1):

- at the top, the run's *headline* results, which report and sweep read: the latest complete evaluation
  (µ's layers, every dev sentence, perplexity on every sequence, fp32, original segments, the trained
  attention), or the first evaluation while none is complete (`replaces_headline`); `record`'s keys:
  `evaluation` (its settings and whether it is `complete`), the run (`RUN_KEYS`), the evaluators' numbers
  (`layers`, top-level columns, `pairs` with more than two languages) and `eval_seconds`;
- `evaluations`: one block per evaluation in the order they ran, each keeping `block_keys()` of it (its
  settings, steps and every key an evaluator writes), never mixed with another's;
- a standalone evaluator's key (transfer) at the top is always its latest result for the run (merged with an
  earlier one of the same steps: `Evaluator.combine`);
- `schema`: this layout's number (`SCHEMA`); a file of a later schema is refused in one line.

This module sits inside `minimult.evaluate` because what it keeps and checks is what the registered evaluators
declare (`registry`): a module outside the package that read the registry would be imported by the package
it imports (an import cycle through `minimult/evaluate/__init__.py`).
"""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path

from minimult.errors import MinimultError
from minimult.evaluate.registry import columns, result_keys, standalone_keys, versions
from minimult.runs import check_writable_file, environment, merge, merged, read_json, write_json

SCHEMA = 1  # the layout above; bump it (and read the older numbers) whenever the layout changes
RESULTS = "results.json"
# what `record` writes about the run evaluated: the headline keeps it, an evaluation's block does not
RUN_KEYS = ("run", "mods", "seed", "preset", "mod_versions", "vocab_sha256", "config", "environment", "train")
# what `record` writes about the evaluation itself, which its block keeps
EVALUATION_KEYS = ("evaluation", "steps", "total_steps", "evaluator_versions", "eval_seconds")
# what `evaluate_model` writes besides the evaluators' own keys: per-layer numbers, and with more than two
# languages English with each other language
MODEL_KEYS = ("layers", "pairs")
# what one evaluation's block in results.json keeps of the evaluation itself, besides what the evaluators
# write (`block_keys`); tests/test_evaluate.py checks `record` against these
BLOCK_KEYS = EVALUATION_KEYS + MODEL_KEYS


def block_keys() -> tuple[str, ...]:
    """BLOCK_KEYS and every key the evaluators write (`registry.result_keys`: their scalar columns' and
    declared `keys`)."""
    return BLOCK_KEYS + tuple(k for k in result_keys() if k not in BLOCK_KEYS)


# ---------------------------------------------------------------------------------------------
# Writing


def evaluation_settings(layers, mu_layers, dev_sentences: int, dev_default: int, ppl_sentences: int | None,
                        precision: str, segment: str, attention: str, trained: str, only) -> tuple[dict, bool]:
    """(an evaluation's `evaluation` entry, whether it ran at the default settings): `complete` when it did and
    ran every evaluator (`record` also asks that the run finished training). `mu_layers`: µ's pair of layers."""
    defaults = (set(mu_layers) <= set(layers) and dev_sentences == dev_default and not ppl_sentences
                and precision == "fp32" and segment == "original" and attention == trained)
    evaluation = {"layers": list(layers), "dev_sentences": dev_sentences, "ppl_sentences": ppl_sentences,
                  "precision": precision, "segment": segment, "attention": attention,
                  **({"only": sorted(only)} if only else {}), "complete": defaults and not only}
    return evaluation, defaults


def record(run, evaluation: dict, scores: dict, seconds: float) -> dict:
    """One evaluation's results (what `write_results` stores): its settings (never 'complete' for an unfinished
    run: killed, or stopped early), what was evaluated (run, config, versions, steps) and the scores."""
    meta, trained_steps = run.meta, run.trained or {}
    finished = trained_steps.get("complete", True)
    evaluation = {**evaluation, "complete": evaluation["complete"] and finished,
                  "time": time.strftime("%Y-%m-%dT%H:%M:%S")}
    return {"evaluation": evaluation,
        "run": str(run.path), "mods": run.cfg.mods, "seed": run.cfg.train.seed, "preset": run.cfg.preset,
        "mod_versions": meta.get("mod_versions", {}), "evaluator_versions": versions(),
        "vocab_sha256": run.data.prepared.vocab_hash, "steps": run.checkpoint_steps(),
        "total_steps": trained_steps.get("total_steps", meta.get("total_steps")), "config": run.cfg.to_dict(),
        "environment": environment(),
        "train": {k: meta.get(k) for k in ("train_seconds", "tokens_per_s", "device", "parameters")},
        **scores, "eval_seconds": seconds,
    }


def standalone_record(run, kind: str, part: dict, t0: float) -> dict:
    """The results of a standalone evaluator's own command (`minimult transfer`: `kind`), begun at `t0` (epoch
    seconds): a block of its own, never 'complete' (it has no per-layer numbers), at the steps of the checkpoint
    the run loaded (run.json lacks a killed run's); `write_results` keeps its key at the top."""
    return {"evaluation": {"kind": kind, "complete": False, "time": time.strftime("%Y-%m-%dT%H:%M:%S")},
            "run": str(run.path), "mods": run.cfg.mods, "seed": run.cfg.train.seed, "steps": run.trained["steps"],
            "total_steps": run.trained["total_steps"], "evaluator_versions": versions(), "config": run.cfg.to_dict(),
            "environment": environment(), **part, "eval_seconds": time.time() - t0}


def replaces_headline(old: dict, results: dict) -> bool:
    """Whether an evaluation's `results` become the run's headline results (the top of results.json, which
    report and sweep read) over `old`, the results.json before it ({} if none): a complete evaluation always
    does, any other only when nothing was evaluated before (`write_results`)."""
    return "layers" not in old or bool(results["evaluation"]["complete"])


def check_results(run_dir: str | Path) -> None:
    """Before an evaluation: results.json, if there is one, is readable and can be replaced (so the
    work is never lost to a damaged file or a read-only folder at the end)."""
    path = Path(run_dir) / RESULTS
    check_writable_file(path, "results file")
    if path.exists():
        read_results(path)


def write_results(run_dir: str | Path, results: dict, fill: dict | None = None) -> dict:
    """results.json: one block per evaluation under "evaluations" (its settings and numbers, never mixed with
    another's), and at the top the latest complete evaluation (default layers, every dev sentence, perplexity on
    every sequence), which report and sweep read. An evaluation that is not complete only adds its block (it is the
    top only while there is no other); one of some evaluators at the default settings (`fill`: their scores) also
    fills them in at the top when the top evaluated the same steps, and a standalone evaluator's key (transfer) at
    the top is always its latest result. Returns `results` (this evaluation)."""
    path = Path(run_dir) / RESULTS
    old = read_results(path) if path.is_file() else {}
    keys = block_keys()
    blocks = old.get("evaluations") or ([{k: v for k, v in old.items() if k in keys}] if "layers" in old else [])
    blocks = [*blocks, {k: v for k, v in results.items() if k in keys}]  # in the order the evaluation wrote them
    keep_old = not replaces_headline(old, results)
    top = {k: v for k, v in (old if keep_old else results).items() if k not in ("evaluations", "schema")}
    if keep_old and fill is not None and old.get("steps") == results.get("steps"):
        merge(top, fill)
        top["evaluator_versions"] = {**top.get("evaluator_versions", {}),
                                     **{k: v for k, v in versions().items() if k in results["evaluation"]["only"]}}
    for k, combine in standalone_keys().items():  # a standalone evaluator's latest result, whichever
        if k in results or k in old:  # evaluation gave it; one of the same steps adds to it (transfer's modes)
            latest, before = results.get(k), old.get(k)
            if isinstance(latest, dict) and isinstance(before, dict) and latest.get("steps") == before.get("steps"):
                latest = (combine or merged)(before, latest)
            top[k] = latest if latest is not None else before
    write_json(path, {"schema": SCHEMA, **top, "evaluations": blocks})
    return results


# ---------------------------------------------------------------------------------------------
# Reading


def _number(x) -> bool:
    return x is None or (isinstance(x, (int, float)) and not isinstance(x, bool))


def schema(results: dict) -> int:
    """The layout a results.json's object was written in (1 for files from before `schema` was recorded)."""
    return results.get("schema", 1)


def results_problem(results) -> str | None:
    """What makes `results` (a results.json's object) unreadable as results, or None: a later schema, the
    layout (`layers` a dict of per-layer dicts, `evaluations` a list of objects, a column's group an object) and
    every registered column's value a number or null, e.g. "'mu' is 'x', not a number"."""
    if not isinstance(results, dict):
        return f"it holds a JSON {type(results).__name__}, not an object"
    version = schema(results)
    if not isinstance(version, int) or isinstance(version, bool) or version > SCHEMA:
        return (f"its schema {str(version)[:40]!r} is not one this minimult reads (1 to {SCHEMA}): a later minimult "
                f"wrote it")
    layers = results.get("layers", {})
    if not isinstance(layers, dict) or not all(isinstance(v, dict) for v in layers.values()):
        return f"'layers' is {str(layers)[:40]!r}, not an object of per-layer results"
    blocks = results.get("evaluations", [])
    if not isinstance(blocks, list) or not all(isinstance(b, dict) for b in blocks):
        return f"'evaluations' is {str(blocks)[:40]!r}, not a list of evaluation blocks"
    for key in ("steps", "total_steps"):
        if not _number(results.get(key)):
            return f"{key!r} is {str(results[key])[:40]!r}, not a number"
    for c in columns():
        if c.per_layer:
            where = [(f"layers.{l}.{c.name}", r.get(c.name)) for l, r in layers.items()]
        elif c.group:
            group = results.get(c.group, {})
            if not isinstance(group, dict):
                return f"{c.group!r} is {str(group)[:40]!r}, not an object"
            where = [(f"{c.group}.{c.name}", group.get(c.name))]
        else:
            where = [(c.name, results.get(c.name))]
        for name, value in where:
            if not _number(value):
                return f"{name!r} is {str(value)[:40]!r}, not a number"
    return None


def read_results(path: str | Path) -> dict:
    """A run's results.json, checked (`results_problem`): a damaged file is one line naming it and what is
    wrong, so nothing reads half of it or writes over it."""
    path = Path(path)
    try:
        data = read_json(path)
    except MinimultError as e:  # not JSON: as damaged as a bad number in it
        if not path.is_file():
            raise
        raise MinimultError(f"{e}; fix it or move it away (nothing was changed)") from None
    problem = results_problem(data)
    if problem:
        raise MinimultError(f"{path} is damaged: {problem}; fix it or move it away (nothing was changed)")
    return data


def incomplete_evaluation(results: dict) -> str | None:
    """What makes the headline of `results` (the top of a results.json) an evaluation at other than the default
    settings, e.g. "500 dev sentences of 10,000", or None when it is a complete one (`evaluate_run`'s
    `evaluation.complete`; results from before evaluations recorded it count as complete). Such a headline
    stands until a complete evaluation replaces it (`replaces_headline`), but is no result of the run."""
    evaluation = results.get("evaluation")
    if not isinstance(evaluation, dict) or evaluation.get("complete", True):
        return None
    config = results.get("config") if isinstance(results.get("config"), dict) else {}
    dev = (config.get("data") or {}).get("dev_sentences")
    trained = (config.get("train") or {}).get("attention", "masked")
    asked = evaluation.get("dev_sentences")
    parts = [f"{asked:,} dev sentences of {dev:,}" if isinstance(asked, int) and isinstance(dev, int) and asked != dev
             else "",
             f"perplexity on {evaluation['ppl_sentences']:,} sequences" if evaluation.get("ppl_sentences") else "",
             f"precision {evaluation['precision']}" if evaluation.get("precision", "fp32") != "fp32" else "",
             f"segment {evaluation['segment']}" if evaluation.get("segment", "original") != "original" else "",
             f"attention {evaluation['attention']}" if evaluation.get("attention", trained) != trained else "",
             f"only {', '.join(evaluation['only'])}" if evaluation.get("only") else ""]
    steps, total = results.get("steps"), results.get("total_steps")
    unfinished = f"step {steps:,} of {total:,} (training unfinished)" if isinstance(steps, int) and isinstance(
        total, int) and steps < total else ""
    parts = [p for p in parts if p] or [unfinished or f"layers {', '.join(map(str, evaluation.get('layers', [])))}"]
    return "; ".join(parts)


def headline_problem(results: dict, meta: dict, run_dir: str | Path) -> str | None:
    """Why the headline of `results` is no result of the run in `run_dir` (a report row), or None: no per-layer
    results, unreadable numbers (`results_problem`), a failed run (run.json's `meta` status), a run that had not
    finished training (steps of total steps, from results.json or, for results written before they recorded
    it, run.json), or an evaluation at other than the default settings (`incomplete_evaluation`)."""
    layers = results.get("layers")
    if not isinstance(layers, dict) or not all(isinstance(v, dict) for v in layers.values()):
        return (f"results.json has no per-layer results (transfer and probe alone write none: `minimult eval "
                f"{shlex.quote(str(run_dir))}` does)")
    problem = results_problem(results)
    if problem:
        return f"results.json: {problem}"
    status = str(meta.get("status", ""))
    if status.startswith("failed"):
        return f"the run {status}"
    steps, total = results.get("steps"), results.get("total_steps", meta.get("total_steps"))
    command = f"`minimult eval {shlex.quote(str(run_dir))}`"
    if isinstance(steps, int) and isinstance(total, int) and steps < total:
        since = f": it has trained on since, {command} scores it" if status == "complete" else ""
        return f"evaluated unfinished (step {steps:,} of {total:,}){since}"
    other = incomplete_evaluation(results)
    if other:
        return (f"its results are not a complete evaluation ({other}): {command} at the default "
                f"settings makes one")
    return None


def results_complete(run_dir: Path, wants_transfer: bool = False) -> bool:
    """results.json evaluates the run's finished training (same number of steps) in a complete evaluation (not
    e.g. `eval --dev-sentences 500`'s, which stands at its top until a complete one replaces it), with
    transfer's numbers for those steps too when the sweep asks for them."""
    try:
        meta = json.loads((Path(run_dir) / "run.json").read_text())
        results = json.loads((Path(run_dir) / RESULTS).read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return (meta.get("status") == "complete" and results.get("steps") == meta.get("steps")
            and "perplexity" in results and bool(results.get("layers")) and not incomplete_evaluation(results)
            and (not wants_transfer or (results.get("transfer") or {}).get("steps") == meta.get("steps")))
