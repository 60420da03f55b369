"""Zero-shot cross-lingual transfer (Wu & Dredze 2019; K et al. 2020): fine-tune on the first language
(English in the built-in sources) for a labelled task, test on it and, zero-shot, on every other language;
∆ = first-language accuracy - zero-shot accuracy, per language (K et al. 2020's measure of cross-lingual
ability: smaller is better).

The default task is the New Testament part task (`minimult.data.tasks`): its sentences are the run's
training corpus in every language, as `views("train-parallel")` gives them: the run's ids, layouts and
word order (shift-special, lang-pos, inv-order, ... act exactly as in training), every sentence in every
language (no-parallel and unigram change only what is trained on). A sentence's label and split come from
its English source sentence. A task directory (`transfer.task`, `minimult transfer --task DIR`) gives its
own sentences instead: train.tsv and dev.tsv in the first language, test.<lang>.tsv per language, each
language's written as the run wrote it (`RunData.task_sides`). Sequences are cut to the model's window.

Modes (`TransferConfig.mode_list`): `full` fine-tunes every encoder weight, `freeze:N` keeps layers
0..N fixed (layer 0 = the embeddings, as in Wu & Dredze 2019), both with a linear classifier on the mean-pooled last
layer: the pooling of retrieval ρ, and a [CLS] vector means nothing in a model trained on MLM alone.
The MLM (and NSP) heads take no part. `frozen` fits logistic regression (`linear.py`) on the
mean-pooled vectors of one layer. Accuracies are on the test split, mean ± std over fine-tuning seeds;
baselines: the training split's majority class, and logistic regression on the first language's word
counts. Results keep language 1's numbers at the top (`zero_shot`, `delta`: the columns) and every
language's under `languages`.

A standalone evaluator: it runs for `minimult transfer RUN`, and in `minimult eval` and sweeps only for
runs whose config sets `transfer.enabled` (minutes of fine-tuning per run on a CPU); its block
`results["transfer"]` stays at the top of results.json through later evaluations. Its inputs
(`TransferTask`: the settings, the task, the checkpoint's steps its block records) come from `inputs`,
called before the model loads, so a layer the model lacks, a corpus without verse ids or a bad task
directory is refused first.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from minimult.config import TransferConfig
from minimult.data.batching import SequenceSet, plan_epoch, steps_per_epoch
from minimult.data.languages import Side
from minimult.data.tasks import SPLITS, FileTask, LabelledTask, task_data
from minimult.errors import MinimultError
from minimult.evaluate.linear import fit_logistic
from minimult.evaluate.multilinguality import mu_layers
from minimult.evaluate.registry import Column, Evaluator, register
from minimult.evaluate.representations import context, piece_vectors, sentence_vectors, truncate
from minimult.evaluate.results import check_results, standalone_record, write_results
from minimult.runs import Run

ADAM_EPS, CLIP = 1e-6, 1.0  # as pretraining


def frozen_layer(cfg, depth: int) -> int:
    """The frozen mode's layer (default µ's upper layer, 8 of 12); every layer a mode names
    must exist: one error line otherwise."""
    layer = mu_layers(depth)[1] if cfg.layer < 0 else cfg.layer  # µ's upper layer: 8 of 12
    for name, n in [("transfer.layer", layer)] + [(f"mode {m}", n) for m, n in cfg.mode_list() if n is not None]:
        if n > depth:
            raise MinimultError(f"{name}: layer {n} does not exist: the model has layers 0..{depth}")
    return layer


def cut(data: list[dict], limit: int) -> list[dict]:
    """`data` (`task_data`'s form) with every sentence cut to `limit` pieces (the model's window)."""
    return [{split: (truncate(side, limit), labels) for split, (side, labels) in parts.items()} for parts in data]


def concat(sides: list[Side]) -> Side:
    """The sentences of `sides` (one language's) one after another as one Side."""
    lengths = np.concatenate([s.lengths for s in sides])
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return Side(sides[0].lang, np.concatenate([s.ids for s in sides]), offsets,
                np.concatenate([s.word_starts for s in sides]), np.concatenate([s.english_index for s in sides]),
                np.concatenate([s.gold for s in sides]))


def accuracy(pred: torch.Tensor, y: np.ndarray) -> float:
    return float((pred.cpu().numpy() == y).mean())


def word_types(side: Side) -> tuple[np.ndarray, np.ndarray]:
    """(sentence, word type) of every word of `side`; a word is a piece starting one plus the pieces after
    it, and two words are one type when they are spelled with the same pieces."""
    starts = side.word_starts.copy()
    starts[side.offsets[:-1][side.lengths > 0]] = True
    word = np.cumsum(starts) - 1  # piece -> its word
    first = np.flatnonzero(starts)
    spelled = np.full((len(first), int(np.bincount(word).max())), -1, dtype=np.int64)
    spelled[word, np.arange(len(word)) - first[word]] = side.ids
    _, types = np.unique(spelled, axis=0, return_inverse=True)
    return np.repeat(np.arange(side.num_sentences), side.lengths)[first], types.reshape(-1)


def bag_of_words(first: dict[str, tuple[Side, np.ndarray]], classes: int) -> float:
    """Test accuracy of logistic regression on the word counts of the first language's sentences ({split:
    (Side, labels)}, whole sentences; the types of the training split; the L2 strength chosen on dev)."""
    sides = [first[name][0] for name in SPLITS]
    english = concat(sides)
    sentence_split = np.repeat(np.arange(len(SPLITS)), [s.num_sentences for s in sides])
    labels = np.concatenate([first[name][1] for name in SPLITS])
    sentence, types = word_types(english)
    split = sentence_split[sentence]
    vocab = np.unique(types[split == 0])
    column = np.full(types.max() + 1, -1)
    column[vocab] = np.arange(len(vocab))
    data = {}
    for k, name in enumerate(SPLITS):
        rows = np.flatnonzero(sentence_split == k)
        row = np.full(english.num_sentences, -1)
        row[rows] = np.arange(len(rows))
        keep = (split == k) & (column[types] >= 0)
        index = torch.as_tensor(np.stack([row[sentence[keep]], column[types[keep]]]))
        x = torch.sparse_coo_tensor(index, torch.ones(index.shape[1]), (len(rows), len(vocab)),
                                    check_invariants=True).coalesce()
        data[name] = (x, torch.as_tensor(labels[rows]))
    clf = fit_logistic(*data["train"], *data["dev"], classes)
    return clf.accuracy(*data["test"])


def frozen_names(model, freeze: int | None) -> set[str]:
    """Parameters `freeze:N` keeps fixed: the embeddings (layer 0) and blocks 1..N."""
    if freeze is None:
        return set()
    return {n for n, _ in model.named_parameters()
            if n.startswith("embeddings.") or any(n.startswith(f"blocks.{i}.") for i in range(freeze))}


def pooled(hidden: torch.Tensor, maskable: torch.Tensor) -> torch.Tensor:
    """(B, T, H) -> (B, H): the mean over each sequence's word pieces ([CLS], [SEP], [PAD] left out)."""
    m = maskable.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1)


def fine_tune(model, side: Side, labels: np.ndarray, classes: int, layouts, freeze: int | None, cfg, seed: int,
              log: Callable[[str], None] = lambda s: None, tag: str = "") -> tuple[nn.Module, nn.Linear]:
    """A copy of `model`'s encoder fine-tuned with a linear classifier on `side` (model itself untouched):
    AdamW, warmup then linear decay, dropout as in pretraining, gradient clipping 1.0; `freeze` None or N."""
    device = next(model.parameters()).device
    torch.manual_seed(seed)
    encoder = copy.deepcopy(model).train()
    fixed = frozen_names(encoder, freeze)
    for name, p in encoder.named_parameters():
        p.requires_grad_(name.startswith(("embeddings.", "blocks.")) and name not in fixed)
    head = nn.Linear(model.cfg.hidden, classes).to(device)
    std = model.cfg.init_std
    nn.init.trunc_normal_(head.weight, std=std, a=-2 * std, b=2 * std)
    nn.init.zeros_(head.bias)
    groups = encoder.param_groups(cfg.weight_decay) + [{"params": [head.weight], "weight_decay": cfg.weight_decay},
                                                       {"params": [head.bias], "weight_decay": 0.0}]
    opt = torch.optim.AdamW([g for g in groups if g["params"]], lr=cfg.lr, eps=ADAM_EPS)
    trainable = [p for g in groups for p in g["params"]]
    seqs = SequenceSet.from_sides([side], layouts, device)
    y = torch.as_tensor(labels, device=device)
    per_epoch = steps_per_epoch(len(seqs), cfg.batch_size)
    total, warmup = per_epoch * cfg.epochs, max(1, round(cfg.warmup * per_epoch * cfg.epochs))
    every, step, t0, losses = max(1, total // 10), 0, time.time(), []
    for epoch in range(cfg.epochs):
        for index in plan_epoch(seqs.lengths_np, cfg.batch_size, seed, epoch):
            for g in opt.param_groups:
                g["lr"] = cfg.lr * min((step + 1) / warmup, max(0.0, (total - step) / max(1, total - warmup)))
            b = seqs.batch(index)
            h = pooled(encoder(b.input_ids, b.position_ids, b.token_type_ids, b.attention_mask), b.maskable)
            target = y[torch.as_tensor(index, device=device)]
            loss = F.cross_entropy(head(F.dropout(h, model.cfg.dropout, training=True)), target)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(trainable, CLIP)
            opt.step()
            step += 1
            losses.append(loss.detach())
            if step % every == 0 or step == total:
                log(f"transfer {tag}: step {step}/{total} (epoch {epoch + 1}/{cfg.epochs}), "
                    f"loss {float(torch.stack(losses).mean()):.3f}, {time.time() - t0:.1f} s")
                losses = []
    return encoder.eval(), head.eval()


def sentence_means(model, side: Side, layouts, layer: int) -> torch.Tensor:
    """(S, H): the mean-pooled layer-`layer` vectors of `side`'s S sentences (the pooling of retrieval ρ)."""
    return sentence_vectors(piece_vectors(model, side, layouts, [layer], next(model.parameters()).device)[layer], side)


@torch.no_grad()
def predict(encoder, head: nn.Linear, side: Side, layouts) -> torch.Tensor:
    """Predicted class of every sentence of `side` (the encoder in eval mode: no dropout)."""
    return head(sentence_means(encoder, side, layouts, encoder.cfg.layers)).argmax(-1)


def _row(seed, classify: Callable[[Side], torch.Tensor], data: list[dict], names, dev: float, **extra) -> dict:
    """One fine-tuning seed's (or the frozen fit's) numbers from `classify` (a side -> its sentences' predicted
    classes): the first language's test accuracy (`en`), each other language's zero-shot accuracy and ∆
    (`languages`), language 1's also at the top (`zero_shot`, `delta`)."""
    first = accuracy(classify(data[0]["test"][0]), data[0]["test"][1])
    zero_shot = {name: accuracy(classify(d["test"][0]), d["test"][1]) for name, d in zip(names[1:], data[1:])}
    z = next(iter(zero_shot.values()))
    return {"seed": seed, "en": first, "zero_shot": z, "delta": first - z, "en_dev": dev, **extra,
            "languages": {name: {"zero_shot": x, "delta": first - x} for name, x in zero_shot.items()}}


def frozen_row(model, data, layouts, layer: int, classes: int, names) -> dict:
    """The frozen mode: logistic regression on the mean-pooled layer-`layer` vectors (one deterministic fit,
    its L2 strength chosen on the first language's dev split)."""
    device = next(model.parameters()).device
    x = {s: sentence_means(model, data[0][s][0], layouts, layer) for s in ("train", "dev")}
    y = {s: torch.as_tensor(data[0][s][1], device=device) for s in ("train", "dev")}
    clf = fit_logistic(x["train"], y["train"], x["dev"], y["dev"], classes)
    return _row(None, lambda side: clf.predict(sentence_means(model, side, layouts, layer)), data, names,
                clf.dev_accuracy, l2=clf.l2)


def fine_tuned_row(model, data, layouts, freeze: int | None, cfg, seed: int, classes: int, log, tag: str,
                   names) -> dict:
    """One fine-tuning seed of `full` (freeze None) or `freeze:N`: test accuracies and the first language's dev."""
    encoder, head = fine_tune(model, *data[0]["train"], classes, layouts, freeze, cfg, seed, log, tag)
    dev = accuracy(predict(encoder, head, data[0]["dev"][0], layouts), data[0]["dev"][1])
    return _row(seed, lambda side: predict(encoder, head, side, layouts), data, names, dev)


def _mean_std(xs: list[float]) -> tuple[float, float | None]:
    return float(np.mean(xs)), float(np.std(xs, ddof=1)) if len(xs) > 1 else None


def _summary(rows: list[dict]) -> dict:
    """Mean and sample std over seeds (None for one) of each number; ∆ of the means is exactly
    mean EN - mean zero-shot, for language 1 at the top and for every language under `languages`."""
    out = {}
    for key in ("en", "zero_shot", "en_dev", "delta"):
        out[key], out[f"{key}_std"] = _mean_std([r[key] for r in rows])
    out["delta"] = out["en"] - out["zero_shot"]
    out["languages"] = {}
    for name in rows[0]["languages"]:
        z, z_std = _mean_std([r["languages"][name]["zero_shot"] for r in rows])
        _, d_std = _mean_std([r["languages"][name]["delta"] for r in rows])
        out["languages"][name] = {"zero_shot": z, "zero_shot_std": z_std, "delta": out["en"] - z, "delta_std": d_std}
    return out


def transfer(model, task, sides: list[Side], layouts, max_len: int, cfg,
             log: Callable[[str], None] = lambda s: None, names=None) -> dict:
    """Every mode of `cfg` on the New Testament part `task` over `sides` ([first language, others ...])."""
    return transfer_data(model, task, task_data(task, sides, None), layouts, max_len, cfg, log, names)


def transfer_data(model, task, data: list[dict], layouts, max_len: int, cfg,
                  log: Callable[[str], None] = lambda s: None, names=None) -> dict:
    """Every mode of `cfg` on `task` given as `data` (per language {split: (Side, labels)}, whole sentences;
    the first language's train, dev and test, the others' test): what results["transfer"] holds."""
    layer = frozen_layer(cfg, model.cfg.layers)
    if len(data) < 2:
        raise MinimultError(f"transfer compares the first language with the others; the run has {len(data)} language")
    names = tuple(names or ("en", "fake") + tuple(f"fake{k}" for k in range(2, len(data))))[:len(data)]
    classes, t0 = len(task.classes), time.time()
    bag = bag_of_words(data[0], classes)  # whole sentences, as the model's window does not bind it
    data = cut(data, max_len - 2)
    majority = int(np.bincount(data[0]["train"][1], minlength=classes).argmax())
    baselines = {"majority": float((data[0]["test"][1] == majority).mean()), "majority_class": task.classes[majority],
                 "bag_of_words": bag}
    label = task.name if task.name.startswith("task ") else f"{task.name} task"  # a file task's: "task DIR"
    sizes = ", ".join(f"{n:,} {part}" for part, n in task.sizes().items())
    log(f"transfer: {label}, sentences {sizes}; baselines: majority "
        f"{baselines['majority']:.3f}, {names[0]} bag of words {baselines['bag_of_words']:.3f} "
        f"({time.time() - t0:.1f} s)")
    modes = {}
    for mode, freeze in cfg.mode_list():
        t0 = time.time()
        if mode == "frozen":
            rows = [frozen_row(model, data, layouts, layer, classes, names)]
        else:
            rows = [fine_tuned_row(model, data, layouts, freeze, cfg, seed, classes, log, f"{mode} seed {seed}", names)
                    for seed in range(cfg.seeds)]
        m = modes[mode] = {**_summary(rows), **({"layer": layer} if mode == "frozen" else {}), "runs": rows,
                           "seconds": time.time() - t0}
        log(f"transfer {mode}: {names[0]} {m['en']:.3f}, zero-shot "
            + ", ".join(f"{n} {x['zero_shot']:.3f} (∆ {x['delta']:.3f})" for n, x in m["languages"].items())
            + f" ({m['seconds']:.1f} s)")
    return with_headline({"task": task.describe(), "languages": list(names),
                          "settings": {k: getattr(cfg, k) for k in ("modes", "seeds", "epochs", "batch_size", "lr",
                                                                   "weight_decay", "warmup")},
                          "baselines": baselines, "modes": modes})


def with_headline(t: dict) -> dict:
    """`t` with its headline numbers (the columns `en_acc`, `zero_shot_acc`, `delta`) taken from full
    fine-tuning where it ran, else from its first mode: one rule for every run, however its modes came
    together."""
    head = "full" if "full" in t["modes"] else next(iter(t["modes"]))
    m = t["modes"][head]
    return {**t, "headline": head, "en_acc": m["en"], "zero_shot_acc": m["zero_shot"], "delta": m["delta"]}


def _task_identity(t: dict) -> tuple:
    task = t.get("task") or {}
    return task.get("name"), task.get("version"), task.get("sha256"), tuple(task.get("classes") or ())


def combine(before: dict, latest: dict) -> dict:
    """A later transfer of the same steps on the same task adds its modes to the earlier ones (a mode run
    again is replaced); on another task it replaces them. The headline follows `with_headline`,
    settings.modes lists every mode held."""
    if _task_identity(before) != _task_identity(latest):
        return with_headline(latest)
    modes = {**before.get("modes", {}), **latest.get("modes", {})}
    both = {**before, **latest, "modes": modes}
    both["settings"] = {**latest.get("settings", {}), "modes": ",".join(modes)}
    return with_headline(both)


@dataclass(frozen=True)
class TransferTask:
    """What the evaluator fine-tunes on (its `ctx.inputs["transfer"]`): the settings, the labelled task (the New
    Testament part task, or `transfer.task`'s directory), its sentences per language, and the training steps of
    the checkpoint measured, which its block records (results of the same steps add up: `combine`)."""

    cfg: TransferConfig
    task: LabelledTask | FileTask
    # task -> per language {split: (Side, labels)}, each language written as the run wrote it (RunData.task_sides)
    sides: Callable[[LabelledTask | FileTask], list[dict]]
    steps: Callable[[], int | None]  # read once the model has loaded


def inputs(run, options: dict) -> TransferTask | None:
    """The evaluator's inputs in `minimult eval` and sweeps: the run's own transfer settings, only when its config
    enables them (minutes of fine-tuning) and for the model as trained (`segment` original); None otherwise, an
    error if `--only transfer` asked for it anyway."""
    segment = options.get("segment", "original")
    if run.cfg.transfer.enabled and segment == "original":
        return task_inputs(run, run.cfg.transfer)
    if "transfer" in (options.get("only") or ()):
        why = ("this run's config does not enable transfer (transfer.enabled); `minimult transfer RUN` fine-tunes it"
               if segment == "original" else f"transfer fine-tunes the model as trained, not --segment {segment}")
        raise MinimultError(f"--only transfer: {why}")
    return None


def task_inputs(run, cfg) -> TransferTask:
    """`cfg`'s task on `run`'s data, read before the model loads: a mode's layer the model lacks, a corpus
    without verse ids or a bad task directory fails here, not after loading."""
    frozen_layer(cfg, run.cfg.model.layers)
    return TransferTask(cfg, run.data.task(cfg.task), run.data.task_sides, run.checkpoint_steps)


def evaluate(ctx) -> dict:
    """The evaluator: {"transfer": ...} when the context holds its inputs (`TransferTask`), else {}."""
    asked = ctx.inputs.get("transfer")
    if asked is None:
        return {}
    with ctx.phase("transfer"):
        result = transfer_data(ctx.model, asked.task, asked.sides(asked.task), ctx.layouts, ctx.max_len, asked.cfg,
                               ctx.log or (lambda s: None), ctx.languages)
    return {"transfer": {**result, "steps": asked.steps()}}


def table(t: dict) -> str:
    """The modes as rows: the first language's and each other language's zero-shot accuracy and ∆ (mean ±
    std over seeds), with the baselines."""
    def pm(m, k):
        return f"{m[k]:.3f}" + (f" ± {m[k + '_std']:.3f}" if m.get(k + "_std") is not None else "")

    names = t.get("languages") or ["en", "other"]
    rows = [("mode", f"{names[0]} acc") + tuple(x for n in names[1:] for x in (f"zero-shot {n} acc", f"∆ {n}"))
            + ("seeds",)]
    for mode, m in t["modes"].items():
        per = m.get("languages") or {names[1]: m}
        rows.append((mode, pm(m, "en"))
                    + tuple(x for n in names[1:] for x in (pm(per[n], "zero_shot"), pm(per[n], "delta")))
                    + (str(len(m["runs"])),))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    b, sizes = t["baselines"], t["task"]["sentences"]
    tests = sizes["test"] if "test" in sizes else sizes.get(f"test.{names[0]}", 0)
    lines.append(f"baselines (test): majority class ({b['majority_class']}) {b['majority']:.3f}, "
                 f"{names[0]} bag of words {b['bag_of_words']:.3f}; {tests:,} {names[0]} test sentences")
    return "\n".join(lines)


def transfer_run(run, cfg=None, device: str = "auto", log: Callable[[str], None] = print, write: bool = True) -> dict:
    """`minimult transfer`: the run's model through every mode of `cfg` (default: the run's own transfer
    settings), into results.json as an evaluation block of its own."""
    t0 = time.time()
    run = run if isinstance(run, Run) else Run.open(run)
    asked = task_inputs(run, cfg or run.cfg.transfer)  # before loading anything
    if write:
        check_results(run.path)  # a damaged results.json fails now, not after minutes of fine-tuning
    model = run.load_model(device, log=log)
    part = evaluate(context(run, model, (), log=log, inputs={"transfer": asked}))
    results = standalone_record(run, "transfer", part, t0)
    return write_results(run.path, results) if write else results


def describe(results: dict) -> list[str]:
    if "transfer" not in results:
        return []
    task = results["transfer"].get("task", {}).get("name", "nt-part")
    return [f"zero-shot transfer ({'New Testament part' if task == 'nt-part' else task}, test split):",
            table(results["transfer"])]


register(Evaluator(
    "transfer", "zero-shot transfer on the New Testament part task (or a task directory): first-language accuracy, "
    "zero-shot accuracy and ∆",
    version=2,  # 2: any number of languages (∆ per language), task directories; the NT numbers are unchanged
    order=97, run=evaluate, standalone=True, combine=combine, inputs=inputs, settings=("transfer", TransferConfig),
    columns=(Column("en_acc", "transfer EN acc", group="transfer", summary=True, short="transfer EN"),
             Column("zero_shot_acc", "transfer zero-shot acc", group="transfer", summary=True, short="0-shot"),
             Column("delta", "transfer ∆", group="transfer", summary=True, short="∆")),
    describe=describe))
