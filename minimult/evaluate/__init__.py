"""Evaluation of a run: every registered evaluator (alignment F1, retrieval ρ, translation τ,
multilinguality µ, perplexity, ...) on the run's dev data, into `results.json`.

Public entries: `evaluate_run(run, layers, ...) -> dict` (a run folder or `Run`), `evaluate_model(ctx)`
(the scores of one model, e.g. during training) and `summary_table(results)`. Every module of this
package registers its evaluator on import (see `registry.py`); the development data get the run's
mods exactly as in training (positions, segments, specials, word order with its gold alignment), and
representations exclude [CLS], [SEP] and [PAD].
"""

from __future__ import annotations

import copy
import time
from typing import Callable

from minimult.config import ATTENTIONS
from minimult.errors import MinimultError, did_you_mean
from minimult.evaluate.registry import REGISTRY, Skipped, evaluators, layer_table, option_names, summary_parts
from minimult.evaluate.representations import (Context, context, gold_links, phase, piece_vectors, row_slices,
                                               sentence_vectors, truncate)
from minimult.evaluate.results import check_results, evaluation_settings, record, write_results
from minimult.evaluate.segments import with_segment
from minimult.precision import check as check_precision
from minimult.registry import Registry
from minimult.runs import Run, merge

Registry.load(__name__)  # every evaluator module registers itself

from minimult.evaluate.multilinguality import mu_layers  # noqa: E402
from minimult.evaluate.perplexity import PPL_SEED, mlm_perplexity  # noqa: E402


def evaluate_model(ctx: Context, log: Callable[[str], None] | None = None, only=None) -> dict:
    """Every registered evaluator (or those named in `only`) on `ctx` (derived ones, such as µ, after the
    rest): the scores dict. With `log`, one line per evaluator as it finishes (a quick-sized model takes
    ~40 s in all).

    With more than two languages the pairwise evaluators (alignment, retrieval, translation, word order,
    µ) run once per pair of English and another language, into results["pairs"]["en-<name>"]; the top
    level holds English and language 1's numbers (the layout of a two-language run, so tables and
    sweeps compare them with two-language runs) and the evaluators of all languages at once
    (perplexity, the language-ID probe)."""
    ctx.results = {"layers": {}}
    t0 = time.time()
    chosen = [ev for ev in evaluators() if only is None or ev.name in only]

    def run(c, evs, label: str = "") -> None:
        for ev in sorted(evs, key=lambda e: e.derived):  # stable: registry order within each kind
            given = ev.run(c)
            merge(c.results, given)
            if log is None:
                continue
            if isinstance(given, Skipped):
                log(f"eval: {ev.name}{label} skipped: {given.why}")
            elif not ev.derived and given:  # one that gives nothing here (links without a file, nsp on a run
                # without the head, transfer unasked) did not run: no "done" line
                log(f"eval: {ev.name}{label} done ({time.time() - t0:.1f} s)")

    if len(ctx.layouts) <= 2:
        run(ctx, chosen)
        return ctx.results
    pairs = {}
    for k in range(1, len(ctx.layouts)):
        p = ctx.pair(k)
        run(p, [ev for ev in chosen if ev.pairwise], f" ({p.name})")
        pairs[p.name] = p.results
    merge(ctx.results, copy.deepcopy(next(iter(pairs.values()))))
    run(ctx, [ev for ev in chosen if not ev.pairwise])
    ctx.results["pairs"] = pairs
    return ctx.results


def evaluate_run(run, layers=None, dev_sentences: int | None = None, ppl_sentences: int | None = None,
                 device: str = "auto", log: Callable[[str], None] = print, write: bool = True,
                 timings: dict | None = None, precision: str = "fp32", segment: str = "original",
                 only=None, attention: str | None = None, **options) -> dict:
    """Every measure of a run (or the evaluators named in `only`) into a dict, and `results.json` when
    `write`. Perplexity runs over every training and dev sequence unless `ppl_sentences` (a fixed random
    subset per split) is given. `attention` (train.attention's values) encodes otherwise than the run
    trained (default: as trained; another choice is not a 'complete' evaluation). An `only` evaluation at the
    default settings fills its numbers into the run's latest complete results (same steps), e.g. a probe added
    to a run evaluated before it existed.
    `options` are evaluator options by name (`link_file`, `link_base`, `link_lang`: word alignment against a link file),
    handed to every evaluator's `inputs` hook (`registry.Evaluator`).
    Results record the checkpoint's `steps` of the run's `total_steps`: an unfinished run (killed, or stopped
    early) is evaluated with one line saying so and is never 'complete'; a failed (diverged) run is refused.
    Bad input (an `only` naming nothing, what an evaluator's `inputs` refuses, a damaged results.json) is
    refused before the model loads."""
    t0 = time.time()
    only = _check_request(only, options, dev_sentences, ppl_sentences)
    with phase(timings, "load"):
        run = run if isinstance(run, Run) else Run.open(run)
    depth = run.cfg.model.layers
    layers = checked_layers(layers, depth)
    trained = run.cfg.train.attention
    attention = attention or trained
    if attention not in ATTENTIONS:
        raise MinimultError(f"unknown attention {attention!r}; valid: {', '.join(ATTENTIONS)}")
    inputs = evaluator_inputs(run, {**options, "segment": segment, "only": only})
    if "links" in inputs and dev_sentences is not None:  # links reads every verse its file names
        if only and set(only) <= {"links"}:
            raise MinimultError(f"--dev-sentences {dev_sentences} limits the evaluators on the first N dev sentences, "
                                f"and only links runs here, which scores every verse its link file names from the "
                                f"whole dev split: leave --dev-sentences out (or name the evaluators it limits with "
                                f"--only)")
        log(f"note: --dev-sentences {dev_sentences:,} limits every evaluator but links, which scores every verse "
            f"its file names from the whole dev split (its block records the dev sentences it read)")
    run.check_not_failed()
    if write:
        check_results(run.path)  # a damaged results.json or a read-only folder: now, not after the evaluation
    with phase(timings, "load"):
        model = with_segment(run.load_model(device, log=log), segment)
    ctx = context(run, model, layers, dev_sentences=dev_sentences or run.cfg.data.dev_sentences,
                  ppl_sentences=ppl_sentences, timings=timings, precision=check_precision(precision),
                  inputs=inputs, log=log, attention=attention)
    ppl = "" if only and "perplexity" not in only else \
        f", perplexity on {'all' if not ppl_sentences else f'{ppl_sentences:,}'} sequences per split"
    at = "" if only and not any(c.per_layer for n in only for c in REGISTRY[n].columns) else \
        f", layers {', '.join(map(str, layers))}"  # the probe, say, reads every layer, not these
    log(f"eval: {ctx.dev[0].num_sentences:,} dev sentences{at}{ppl}")
    scores = evaluate_model(ctx, log, only=only)
    if only and not scores.get("layers") and not any(k != "layers" for k in scores):
        raise MinimultError(f"--only {','.join(sorted(only))} gives nothing for this run (e.g. nsp on a run trained "
                            f"without it); nothing was stored")
    evaluation, defaults = evaluation_settings(layers, mu_layers(depth), dev_sentences or run.cfg.data.dev_sentences,
                                               run.cfg.data.dev_sentences, ppl_sentences, precision, segment,
                                               attention, trained, only)
    results = record(run, evaluation, scores, time.time() - t0)
    if write:
        results = write_results(run.path, results, fill=scores if defaults and only else None)
    return results


def _check_request(only, options: dict, dev_sentences: int | None, ppl_sentences: int | None) -> tuple | None:
    """`only`'s evaluator names (None: every one; text as `--only` takes it, "alignment,retrieval", or names),
    refusing an `only` that names nothing or an unknown evaluator, an option no evaluator reads, and sentence
    counts no evaluation can use."""
    names = ", ".join(e.name for e in evaluators())
    if only is not None:
        only = tuple(n.strip() for n in (only.split(",") if isinstance(only, str) else only) if n.strip())
        if not only:
            raise MinimultError(f"--only names no evaluator: give one or more of {names}, comma-separated")
    unknown = sorted(set(only or ()) - set(REGISTRY))
    if unknown:
        hint = did_you_mean(unknown[0], REGISTRY)
        raise MinimultError(f"unknown evaluator {unknown[0]!r}{hint}: choose from {names}")
    strange = sorted(set(options) - option_names())
    if strange:  # a misspelt option would otherwise be ignored silently
        raise TypeError(f"evaluate_run() got an unexpected keyword argument {strange[0]!r}")
    if dev_sentences is not None and dev_sentences < 2:
        raise MinimultError(f"--dev-sentences {dev_sentences}: retrieval needs at least 2 sentences")
    if ppl_sentences is not None and ppl_sentences < 1:
        raise MinimultError(f"--ppl-sentences {ppl_sentences}: give at least 1 sequence per split, or leave it out "
                            f"for every sequence")
    return only


def checked_layers(layers, depth: int) -> tuple[int, ...]:
    """The layers to measure, sorted and checked against the model's depth: None (µ's two), numbers, or text as
    `--layer` takes it ("0,8")."""
    if isinstance(layers, str):
        text, layers = layers, [x for x in layers.split(",") if x.strip()]
        if not all(x.strip().isdigit() for x in layers):
            raise MinimultError(f"bad --layer {text!r}: use comma-separated layer numbers, e.g. 0,8")
        if not layers:
            raise MinimultError("--layer needs at least one layer number")
    layers = tuple(sorted(set(int(l) for l in (layers or mu_layers(depth)))))
    bad = [l for l in layers if not 0 <= l <= depth]
    if bad:
        raise MinimultError(f"layer {bad[0]} does not exist: the model has layers 0..{depth}")
    return layers



def evaluator_inputs(run, options: dict) -> dict:
    """{name: inputs} of the evaluators `options["only"]` chooses (all without it) whose `inputs` hook gives
    something for `run`; each hook refuses its own bad input, before the model loads."""
    only = options["only"]
    chosen = [e for e in evaluators() if e.inputs is not None and (only is None or e.name in only)]
    given = {e.name: e.inputs(run, options) for e in chosen}
    return {name: x for name, x in given.items() if x is not None}


def summary_table(results: dict, only=None) -> str:
    """`minimult eval`'s printout: the run, a table of every per-layer column the results hold
    (`registry.layer_table`), then each evaluator's lines in registry order (`Evaluator.lines`: its own
    `describe`, or its other columns as 'label value'; with `only`, the lines of the evaluators it names), so
    a new evaluator's numbers show without a change here."""
    dev = f", {results['dev_sentences']:,} dev sentences" if "dev_sentences" in results else ""  # alignment counts
    lines = [f"{results['run']}  (mods: {results['mods']}, seed {results['seed']}{dev})"]
    first, *others = results.get("pairs") or [None]
    if others and (only is None or "multilinguality" in only):  # 3+ languages: the top level is the first pair's
        mu = lambda pair: "n/a" if pair.get("mu") is None else f"{pair['mu']:.3f}"  # noqa: E731
        lines.append(f"pair {first} below; " + ", ".join(f"{name} µ {mu(results['pairs'][name])}" for name in others)
                     + " (every pair's numbers: results.json's \"pairs\")")
    lines += layer_table(results)
    lines += [line for e in evaluators() if only is None or e.name in only for line in e.lines(results)]
    return "\n".join(lines)
