"""Evaluation of a run: alignment F1, retrieval ρ, translation τ, multilinguality µ, perplexity.

Public entry: `evaluate_run(run_dir, layers, ...) -> dict` (also written to `results.json`).
The development data get the run's mods exactly as in training (positions, segments, specials,
word order with its gold alignment). Representations exclude [CLS], [SEP] and [PAD].
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from . import metrics, precision
from .batching import SequenceSet
from .config import RunConfig
from .errors import MinimultError
from .languages import Side, build_sides, positions_within, shift_text
from .masking import MaskConfig, mask_batch, random_replacement_ids
from .model import Bert
from .mods import parse_mods
from .prepare import prepare
from .runs import environment, read_json, write_json
from .train import CHECKPOINT, load_checkpoint, pick_device
from .vocab import N_SPECIAL

DEFAULT_LAYERS = (0, 8)
PPL_SEED = 12345


@dataclass
class Loaded:
    cfg: RunConfig
    mods: tuple
    model: Bert
    prepared: object
    device: torch.device
    meta: dict


def load_run(run_dir: Path, device: str = "auto", log: Callable[[str], None] = print) -> Loaded:
    run_dir = Path(run_dir)
    if not (run_dir / "config.json").is_file():
        raise MinimultError(f"not a run folder (no config.json): {run_dir}")
    cfg = RunConfig.from_dict(read_json(run_dir / "config.json"))
    if not (run_dir / CHECKPOINT).is_file():
        raise MinimultError(f"run {run_dir} has no checkpoint yet: train it first (minimult pretrain)")
    dev = pick_device(device)
    ckpt = load_checkpoint(run_dir / CHECKPOINT, map_location=dev)
    model = Bert(cfg.model).to(dev)
    model.load_state_dict(ckpt["model"])
    model.eval()
    meta = read_json(run_dir / "run.json") if (run_dir / "run.json").is_file() else {}
    prepared = prepare(cfg.data, progress=log)
    if meta.get("vocab_sha256") and meta["vocab_sha256"] != prepared.vocab_hash:
        raise MinimultError(f"the prepared vocabulary ({prepared.vocab_hash[:12]}) differs from the one the run "
                            f"was trained with ({meta['vocab_sha256'][:12]}); restore that cache entry")
    if not ckpt.get("complete"):
        log(f"note: run {run_dir} is not complete (step {ckpt['step']}); evaluating its last checkpoint")
    return Loaded(cfg, parse_mods(None if cfg.mods == "original" else cfg.mods), model, prepared, dev, meta)


# ---------------------------------------------------------------------------------------------
# Representations.


def truncate(side: Side, limit: int) -> Side:
    """Keep the first `limit` pieces of every sentence (the model's window); gold links beyond go."""
    lengths = np.minimum(side.lengths, limit)
    keep = positions_within(side.offsets) < np.repeat(lengths, side.lengths)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    gold = side.gold[keep].copy()
    gold[gold >= limit] = -1
    return Side(side.lang, side.ids[keep], offsets, side.word_starts[keep], side.source, gold)


def tokens_per_batch(device: torch.device) -> int:
    """Padded tokens per forward pass. On CPU ~2k tokens keep a block's activations (2k x 256 floats in
    the feed-forward layer) inside a core's L2 cache: ~1.5x the throughput of whole 512-sentence
    batches (experiments/bench_eval.py)."""
    return 2048 if device.type == "cpu" else 65536


def row_slices(rows: int, T: int, tokens: int) -> list[slice]:
    """Consecutive row slices of a (rows, T) batch of at most `tokens` tokens each (at least one row).

    The model computes every row on its own, so running a batch slice by slice (with its padding and
    attention mask) gives the numbers of running it whole, bit for bit on CPU.
    """
    step = max(1, tokens // T)
    return [slice(r, min(r + step, rows)) for r in range(0, rows, step)]


@torch.inference_mode()
def piece_vectors(model: Bert, side: Side, data_cfg, layers, device, batch_size: int = 512,
                  tokens: int | None = None) -> dict[int, torch.Tensor]:
    """{layer: (P, H)} vectors of every piece of `side`, in the side's order (float32, on device).

    Batches of `batch_size` length-sorted sentences fix the padding; each runs through the blocks up
    to max(layers) in row slices of at most `tokens` tokens.
    """
    seqs = SequenceSet.from_sides([side], data_cfg, device)
    order = np.argsort(side.lengths, kind="stable")
    out = {l: torch.zeros(len(side.ids), model.cfg.hidden, device=device) for l in layers}
    offsets = torch.as_tensor(side.offsets, device=device)
    autocast = precision.autocast("auto", device)  # bf16 on CUDA, fp32 on CPU
    for i in range(0, len(order), batch_size):
        index = order[i : i + batch_size]
        b = seqs.batch(index)
        starts = offsets[torch.as_tensor(index, device=device)]
        for r in row_slices(len(index), b.input_ids.shape[1], tokens or tokens_per_batch(device)):
            mask = None if b.attention_mask is None else b.attention_mask[r]
            with autocast:
                hs = model.hidden_states(b.input_ids[r], b.position_ids[r], b.token_type_ids[r], mask, layers=layers)
            rows, cols = b.maskable[r].nonzero(as_tuple=True)  # word pieces only, row-major
            flat = starts[r][rows] + cols - 1
            for l in layers:
                out[l][flat] = hs[l][rows, cols].float()
    return out


def sentence_vectors(vectors: torch.Tensor, side: Side) -> torch.Tensor:
    """Mean of each sentence's piece vectors: (S, H)."""
    sent = torch.as_tensor(np.repeat(np.arange(side.num_sentences), side.lengths), device=vectors.device)
    sums = torch.zeros(side.num_sentences, vectors.shape[1], device=vectors.device).index_add_(0, sent, vectors)
    return sums / torch.as_tensor(np.maximum(side.lengths, 1), device=vectors.device, dtype=sums.dtype)[:, None]


def gold_links(second: Side) -> np.ndarray:
    """(K, 3) gold links (sentence, English position, second-language position) of every sentence at
    once: row by row what `second.alignment(i)` gives for sentence i, with i in front."""
    keep = second.gold >= 0
    sentence = np.repeat(np.arange(second.num_sentences), second.lengths)
    return np.stack([sentence[keep], second.gold[keep], positions_within(second.offsets)[keep]], 1).astype(np.int64)


def dictionary_sides(prepared, data_cfg) -> tuple[Side, Side]:
    """Every non-special vocabulary entry alone as a sentence, in English and in language 1."""
    vocab = prepared.vocab
    if data_cfg.fake == "unicode":  # pairs: a piece and its code-point-shifted spelling, when both exist
        pairs = [(i, vocab.index.get(_shift_piece(p))) for i, p in enumerate(vocab.pieces[N_SPECIAL:], N_SPECIAL)]
        pairs = [(a, b) for a, b in pairs if b is not None and a != b]
        en, l1 = (np.array(x, dtype=np.int32) for x in zip(*pairs)) if pairs else (np.zeros(0, np.int32),) * 2
    else:
        en = np.arange(N_SPECIAL, vocab.size, dtype=np.int32)
        l1 = en + vocab.size
    n = len(en)
    offsets = np.arange(n + 1, dtype=np.int64)
    one = lambda ids, lang: Side(lang, ids, offsets, np.ones(n, bool), np.arange(n), np.zeros(n, np.int64))
    return one(en, 0), one(l1, 1)


def _shift_piece(piece: str) -> str:
    return "##" + shift_text(piece[2:]) if piece.startswith("##") else shift_text(piece)


# ---------------------------------------------------------------------------------------------
# Perplexity.


@torch.inference_mode()
def mlm_perplexity(model: Bert, sides, data_cfg, device, limit: int | None = None, batch_size: int = 256,
                   tokens: int | None = None) -> dict:
    """15% of each sequence's tokens replaced by [MASK] (fixed seed); exp(mean NLL) over them.

    `limit` sequences (a fixed random subset) instead of all when given. The masks are drawn per batch
    of `batch_size` length-sorted sequences, which fixes the selection; the model runs on row slices
    of at most `tokens` tokens, which only changes the speed.
    """
    seqs = SequenceSet.from_sides(list(sides), data_cfg, device)
    n = len(seqs)
    index_all = np.arange(n) if not limit or limit >= n else np.random.default_rng(PPL_SEED).choice(n, limit, replace=False)
    order = index_all[np.argsort(seqs.lengths_np[index_all], kind="stable")]
    cfg = MaskConfig(probs=(1.0, 0.0, 0.0, 0.0))
    gen = torch.Generator(device=device)
    gen.manual_seed(PPL_SEED)
    random_ids = random_replacement_ids(data_cfg.vocab_size, data_cfg.n_langs).to(device)
    nll, count = 0.0, 0
    for i in range(0, len(order), batch_size):
        b = seqs.batch(order[i : i + batch_size])
        m = mask_batch(b.input_ids, b.maskable, seqs.mask_id[b.lang], random_ids, cfg, gen)
        hidden = torch.cat([model(m.input_ids[r], b.position_ids[r], b.token_type_ids[r],
                                  None if b.attention_mask is None else b.attention_mask[r])
                            for r in row_slices(*m.input_ids.shape, tokens or tokens_per_batch(device))])  # (B, T, H)
        logits = model.mlm_logits(hidden.flatten(0, 1)[m.selected]).float()
        nll += float(torch.nn.functional.cross_entropy(logits, m.targets, reduction="sum"))
        count += len(m.targets)
    return {"perplexity": metrics.perplexity(nll, count), "masked_tokens": count, "sequences": len(order)}


# ---------------------------------------------------------------------------------------------
# The evaluation.


@contextmanager
def _phase(timings: dict | None, name: str):
    """Add the block's wall and process CPU seconds to timings[name] = [wall, cpu] (nothing without a
    dict); on a shared machine CPU seconds are the steadier of the two."""
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        yield
    finally:
        if timings is not None:
            spent = timings.setdefault(name, [0.0, 0.0])
            spent[0] += time.perf_counter() - wall
            spent[1] += time.process_time() - cpu


def multilinguality_scores(model, prepared, cfg, mods, layers, device, dev_sentences: int | None = None,
                           timings: dict | None = None) -> dict:
    """Alignment, retrieval and translation per layer on the dev set (+ µ when layers 0 and 8 are there).

    With a `timings` dict, each phase's [wall, CPU] seconds are added to it (experiments/bench_eval.py).
    """
    with _phase(timings, "data"):
        limit = cfg.data.max_len - 2
        english, second = build_sides(prepared, cfg.data, mods, "dev", cfg.train.seed)
        if dev_sentences:
            index = np.arange(min(dev_sentences, english.num_sentences))
            english, second = english.subset(index), second.subset(index)
        if english.num_sentences < 2:
            raise MinimultError(f"the dev set has {english.num_sentences} sentence(s): retrieval needs at least 2")
        english, second = truncate(english, limit), truncate(second, limit)
        dict_en, dict_l1 = dictionary_sides(prepared, cfg.data)
        links = gold_links(second)
    with _phase(timings, "forward_dev"):  # once per side and layer set, shared by alignment and retrieval
        vec = {side: piece_vectors(model, s, cfg.data, layers, device) for side, s in (("en", english), ("l1", second))}
    with _phase(timings, "forward_dictionary"):
        vec.update({side: piece_vectors(model, s, cfg.data, layers, device)
                    for side, s in (("dict_en", dict_en), ("dict_l1", dict_l1))})
    out: dict = {"layers": {}}
    for l in layers:
        with _phase(timings, "alignment"):
            prf = metrics.alignment_prf(vec["en"][l], english.offsets, vec["l1"][l], second.offsets, links)
        with _phase(timings, "retrieval"):
            rho = metrics.retrieval_p1(sentence_vectors(vec["en"][l], english), sentence_vectors(vec["l1"][l], second))
        with _phase(timings, "translation"):
            tau = metrics.retrieval_p1(vec["dict_en"][l], vec["dict_l1"][l]) if dict_en.num_sentences > 1 else None
        out["layers"][str(l)] = {
            "align_precision": prf["precision"], "align_recall": prf["recall"], "align_f1": prf["f1"],
            "retrieval": rho["mean"], "retrieval_forward": rho["forward"], "retrieval_backward": rho["backward"],
            "translation": tau["mean"] if tau else None,
            "translation_forward": tau["forward"] if tau else None,
            "translation_backward": tau["backward"] if tau else None,
        }
    L = out["layers"]
    if "0" in L and "8" in L and L["0"]["translation"] is not None:
        out["mu"] = metrics.multilinguality(L["0"]["translation"], L["8"]["translation"], L["0"]["retrieval"],
                                            L["8"]["retrieval"])
    else:
        out["mu"] = None
    out["dev_sentences"] = english.num_sentences
    out["dictionary_entries"] = dict_en.num_sentences
    return out


def evaluate_run(run_dir, layers=DEFAULT_LAYERS, dev_sentences: int | None = None, ppl_sentences: int | None = None,
                 device: str = "auto", log: Callable[[str], None] = print, write: bool = True,
                 timings: dict | None = None) -> dict:
    """Every measure of a run into a dict (and `results.json` when `write`). Perplexity runs over every
    training and dev sequence unless `ppl_sentences` (a fixed random subset per split) is given."""
    t0 = time.time()
    with _phase(timings, "load"):
        run = load_run(run_dir, device, log)
    depth = run.cfg.model.layers
    layers = tuple(sorted(set(int(l) for l in (layers or (0, min(8, depth))))))
    bad = [l for l in layers if not 0 <= l <= depth]
    if bad:
        raise MinimultError(f"layer {bad[0]} does not exist: the model has layers 0..{depth}")
    scores = multilinguality_scores(run.model, run.prepared, run.cfg, run.mods, layers, run.device,
                                    dev_sentences or run.cfg.data.dev_sentences, timings)
    scores["perplexity"] = {}
    for split in ("train", "dev"):  # a forward pass of its own: the inputs are masked
        with _phase(timings, f"perplexity_{split}"):
            sides = build_sides(run.prepared, run.cfg.data, run.mods, split, run.cfg.train.seed)
            scores["perplexity"][split] = mlm_perplexity(run.model, sides, run.cfg.data, run.device,
                                                         ppl_sentences)["perplexity"]
    results = {
        "run": str(Path(run_dir)), "mods": run.cfg.mods, "seed": run.cfg.train.seed, "preset": run.cfg.preset,
        "mod_versions": run.meta.get("mod_versions", {}), "vocab_sha256": run.prepared.vocab_hash,
        "steps": run.meta.get("steps"), "config": run.cfg.to_dict(), "environment": environment(),
        "train": {k: run.meta.get(k) for k in ("train_seconds", "tokens_per_s", "device", "parameters")},
        **scores, "eval_seconds": time.time() - t0,
    }
    if write:
        path = Path(run_dir) / "results.json"
        old = read_json(path) if path.is_file() else {}
        if "layers" in old:  # keep layers evaluated earlier that were not asked for now
            results["layers"] = {**old["layers"], **results["layers"]}
            if results["mu"] is None:
                results["mu"] = old.get("mu")
        write_json(path, results)
    return results


def summary_table(results: dict) -> str:
    rows = [("layer", "align P", "align R", "align F1", "retrieval ρ", "translation τ")]
    for l, r in sorted(results["layers"].items(), key=lambda kv: int(kv[0])):
        tau = "-" if r["translation"] is None else f"{r['translation']:.3f}"
        rows.append((l, f"{r['align_precision']:.3f}", f"{r['align_recall']:.3f}", f"{r['align_f1']:.3f}",
                     f"{r['retrieval']:.3f}", tau))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [f"{results['run']}  (mods: {results['mods']}, seed {results['seed']}, {results['dev_sentences']:,} dev sentences)"]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows]
    mu = results.get("mu")
    ppl = results.get("perplexity", {})
    lines.append(f"multilinguality µ = {'n/a (needs layers 0 and 8)' if mu is None else f'{mu:.3f}'}   "
                 f"perplexity train {ppl.get('train', float('nan')):.1f}, dev {ppl.get('dev', float('nan')):.1f}")
    return "\n".join(lines)
