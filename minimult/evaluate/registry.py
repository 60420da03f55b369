"""The registry of evaluators, each declaring the columns it writes into `results.json`.

An `Evaluator` computes part of a run's results from a `Context` (the model, the run's data views,
the layers asked for, and its own inputs from its `inputs` hook) and declares its `Column`s: name, whether it is
per layer, how it is formatted, and where it appears (Table 1, the training figure,
the one-line summaries). `results.json`, the training log's evaluation line, the sweep's summary line, the
report's tables and the training figure's panels are all derived from these declarations.

Evaluators register on import of their module; `minimult.evaluate` imports every module of the
package, so adding one is one file (copy `retrieval.py`) plus its test.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from minimult.registry import Registry

REGISTRY = Registry("evaluator", unknown="unknown evaluator {name!r}: choose from {valid}")


STD = "_std"  # a column key + STD: that column's standard deviation (the paper's over its seeds, in a grid's `paper`)


class Skipped(dict):
    """An evaluator's results where it has nothing to score (its columns None), with why: `evaluate_model` logs
    "<name> skipped: <why>" in place of its "done" line."""

    def __init__(self, why: str, results: dict):
        super().__init__(results)
        self.why = why


@dataclass(frozen=True)
class Column:
    """One number in results.json. Per-layer columns live at results["layers"][L][name]; the others
    at results[name], or at results[group][name] when `group` is set (e.g. perplexity's splits)."""

    name: str
    label: str  # table heading ("align F1"); per-layer columns get " L<layer>" appended
    per_layer: bool = False
    group: str | None = None
    kind: str = "score"  # "score" (3 decimals) | "perplexity" (1 decimal, none from 100)
    table: bool = False  # a column of Table 1
    curve: bool = False  # a panel of the training figure (Table 1 columns only: `table` too)
    summary: bool = False  # in the sweep's one-line summary and the training log's evaluation line
    short: str = ""  # label in one-line summaries (default: label)

    def key(self, layer: str | None = None) -> str:
        """The report's key: `mu`, `align_f1_L8`, `ppl_dev`."""
        if self.per_layer:
            return f"{self.name}_L{layer}"
        return f"ppl_{self.name}" if self.group == "perplexity" else self.name

    def heading(self, layer: str | None = None) -> str:
        return f"{self.label} L{layer}" if self.per_layer else self.label

    def value(self, results: dict, layer: str | None = None):
        """This column's number in a results dict (or an evaluation row's "eval"); None if absent."""
        if self.per_layer:
            return results.get("layers", {}).get(str(layer), {}).get(self.name)
        if self.group:
            return (results.get(self.group) or {}).get(self.name)
        return results.get(self.name)

    def table_text(self, x: float | None) -> str:
        if x is None:
            return ""
        if self.kind == "perplexity":
            return f"{x:.0f}" if abs(x) >= 100 else f"{x:.1f}"
        return f"{x:.3f}"

    def short_text(self, x: float | None) -> str:
        if x is None or not math.isfinite(x):
            return "n/a"
        return f"{x:.1f}" if self.kind == "perplexity" else f"{x:.3f}"


@dataclass(frozen=True)
class Evaluator:
    name: str
    description: str
    version: int
    order: int  # position in tables and results: per-layer evaluators form one block per layer
    columns: tuple[Column, ...]
    run: Callable[[Any], dict]  # Context -> part of the results (merged into the rest)
    derived: bool = False  # computed from the other evaluators' results (runs after them)
    periodic: bool = True  # also in the evaluations during training (`train.eval_every`); False: final only
    # run on request only (its own command, or its config switch); its key at the top of results.json
    # stays there through evaluations that did not compute it (transfer's minutes of fine-tuning)
    standalone: bool = False
    # how a standalone result adds to the one before it for the same steps (before, latest) -> combined;
    # None: a recursive merge, the latest winning (`runs.merged`)
    combine: Callable[[dict, dict], dict] | None = None
    # compares English with one other language (`ctx.dev` is [English, other]): with more than two
    # languages it runs once per pair (results["pairs"]["en-es"]), the top level holding English and language 1
    pairwise: bool = False
    # what it needs besides a line-aligned pair of texts and a model (e.g. "gold alignment", "dictionary"):
    # an evaluator that needs nothing runs on any pair (`eval --hf --pair` without --shift, `text_evaluators`)
    needs: tuple[str, ...] = ()
    # top-level keys of the results it writes besides its columns' that each evaluation's block in results.json
    # keeps (µ's `mu_layers`; `results.block_keys`); other keys it writes stay at the top only (alignment's gold kind)
    keys: tuple[str, ...] = ()
    # results -> its lines in `minimult eval`'s printout (`evaluate.summary_table`), below the table of the
    # per-layer columns; None: its columns that are not per layer, as 'label value', on one line
    describe: Callable[[dict], list[str]] | None = None
    # (run, options) -> what this evaluator alone needs of the run (links' link file, transfer's task), read as
    # ctx.inputs[name], or None: it gives nothing for this run. `evaluate_run` calls it before the model loads,
    # so bad input (a Pharaoh file without its index base, a corpus without verse ids) is refused first;
    # `options` holds the evaluation's `segment` and `only` and the evaluator options given (see `options`).
    # None: the evaluator needs nothing beyond the shared context
    inputs: Callable[[Any, dict], Any] | None = None
    # the names of the evaluator options its `inputs` reads (links': `link_file`, `link_base`, `link_lang`, eval's
    # --links, --link-base and --link-lang): `evaluate_run` takes them as keyword arguments and refuses a name no
    # evaluator declares
    options: tuple[str, ...] = ()
    # (section, frozen dataclass): its own settings, cfg.<section>, an evaluation section of the run config
    # (config.EVALUATION, which cannot import the evaluators: tests/test_registries.py checks the two agree)
    settings: tuple[str, type] | None = None

    def lines(self, results: dict) -> list[str]:
        """Its lines in `minimult eval`'s printout: `describe`'s, or its scalar columns that have a value."""
        if self.describe is not None:
            return self.describe(results)
        parts = [f"{c.label} {c.short_text(c.value(results))}" for c in self.columns
                 if not c.per_layer and c.value(results) is not None]
        return [", ".join(parts)] if parts else []


register = REGISTRY.register


def evaluators() -> list[Evaluator]:
    return sorted(REGISTRY.values(), key=lambda e: e.order)


def text_evaluators() -> tuple[str, ...]:
    """The evaluators a plain pair of texts can give: those that need nothing else and run by default."""
    return tuple(e.name for e in evaluators() if not e.needs and not e.standalone)


def option_names() -> set[str]:
    """Every evaluator option some evaluator declares (`Evaluator.options`)."""
    return {o for e in evaluators() for o in e.options}


def versions() -> dict[str, int]:
    return {e.name: e.version for e in evaluators()}


def standalone_keys() -> dict[str, Callable[[dict, dict], dict] | None]:
    """Top-level results keys of the standalone evaluators (see `Evaluator.standalone`), each with its
    evaluator's `combine`."""
    return {c.group or c.name: e.combine for e in evaluators() if e.standalone for c in e.columns}


def result_keys() -> tuple[str, ...]:
    """The top-level results keys the evaluators write and an evaluation's block keeps: each scalar column's
    key (its group's, if any) and each evaluator's declared `keys`, in registry order, once each."""
    return tuple(dict.fromkeys([c.group or c.name for e in evaluators() for c in e.columns if not c.per_layer]
                               + [k for e in evaluators() for k in e.keys]))


def columns() -> list[Column]:
    return [c for e in evaluators() for c in e.columns]


def table_columns(top: str) -> list[tuple[Column, str | None]]:
    """(column, layer) in table order: the scalar columns of evaluators before the first per-layer one,
    then every per-layer column for layer 0, then for `top`, then the remaining scalar columns. With
    the built-in evaluators this is the paper's Table 1 order."""
    cols = [c for c in columns() if c.table]
    first = next((i for i, c in enumerate(cols) if c.per_layer), len(cols))
    layered = [c for c in cols if c.per_layer]
    before = [(c, None) for c in cols[:first] if not c.per_layer]
    after = [(c, None) for c in cols[first:] if not c.per_layer]
    return before + [(c, l) for l in dict.fromkeys(["0", top]) for c in layered] + after


def layer_table(results: dict) -> list[str]:
    """Rows of every per-layer column the results hold (a column whose evaluator gave nothing is left out;
    a number it could not measure, such as τ without a dictionary, is '-'), one row per layer."""
    layers = sorted(results.get("layers", {}), key=int)
    cols = [c for c in columns() if c.per_layer and any(c.name in results["layers"][l] for l in layers)]
    if not cols:
        return []
    num = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
    rows = [("layer", *(c.label for c in cols))] + [(l, *(num(c.value(results, l)) for c in cols)) for l in layers]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(x.rjust(w) for x, w in zip(r, widths)) for r in rows]


def summary_parts(results: dict) -> list[str]:
    """'µ 0.140', 'F1 L0 0.942', ..., 'ppl dev 277.1': the summary columns of a results dict."""
    parts = []
    layers = sorted(results.get("layers", {}), key=int)
    for c in columns():
        if not c.summary:
            continue
        if c.per_layer:
            parts += [f"{c.short or c.label} L{l} {c.short_text(c.value(results, l))}" for l in layers]
        elif c.value(results) is not None:  # a column only some runs have (NSP accuracy) is left out elsewhere
            parts.append(f"{c.short or c.label} {c.short_text(c.value(results))}")
    return parts
