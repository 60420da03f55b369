"""MLM perplexity (docs/metrics.md): 15% of each sequence's tokens replaced by [MASK] with a fixed seed,
exp(mean negative log-likelihood) over them, on the training and the dev sequences.

Perplexity per unit depends on the units (data.tokenizer: a character is easier to guess than a word),
so each split also gets a perplexity per word, comparable across granularities: the mean NLL per unit
times the units per word, exp(NLL per unit x units / words) = ppl ** (units / words), with units and
words counted on the split's English sentences inside the model's window (English keeps its word
boundaries under every mod). An [UNK] counts as one unit of one word.

Each split's perplexity is also given per language (`train_languages`, `dev_languages`: {name: perplexity
per unit}), from the same masked tokens, each scored with the language of its sequence; the pooled number
is the one it always was."""

from __future__ import annotations

import numpy as np
import torch

from minimult.data.batching import SequenceSet, attention_mask
from minimult.data.languages import positions_within
from minimult.data.masking import MaskConfig, mask_batch
from minimult.evaluate import metrics
from minimult.evaluate.registry import Column, Evaluator, register
from minimult.evaluate.representations import row_slices, tokens_per_batch

PPL_SEED = 12345


@torch.inference_mode()
def mlm_perplexity(model, sides, layouts, random_ids, device, limit: int | None = None, batch_size: int = 256,
                   tokens: int | None = None, attention: str = "masked",
                   probs: tuple[float, ...] = (1.0, 0.0, 0.0, 0.0)) -> dict:
    """15% of each sequence's tokens replaced by [MASK] (fixed seed); exp(mean NLL) over them.

    `probs` (mask, keep, random, kNN) of the selected tokens: all [MASK] for the lab's perplexity (and the
    paper's); another mix only for experiments (experiments/analyses/ppl_mix.py).

    `limit` sequences (a fixed random subset) instead of all when given. The masks are drawn per batch
    of `batch_size` length-sorted sequences, which fixes the selection; the model runs on row slices
    of at most `tokens` tokens, which only changes the speed. Under attend-padding (train.attention) the
    batches follow the sequences' order (every English sequence, then the next language's), as the
    published code's evaluation, and run without an attention mask.

    `sides`: [English, language 1, ...]; `random_ids` (R,) long. Returns {perplexity (per unit, natural-log
    NLL), masked_tokens, sequences, languages: each language's perplexity or None}.
    """
    seqs = SequenceSet.from_sides(list(sides), layouts, device)
    n = len(seqs)
    index_all = (np.arange(n) if not limit or limit >= n
                 else np.random.default_rng(PPL_SEED).choice(n, limit, replace=False))
    if attention == "attend-padding":
        order = np.sort(index_all)
    else:
        order = index_all[np.argsort(seqs.lengths_np[index_all], kind="stable")]
    cfg = MaskConfig(probs=tuple(probs))
    gen = torch.Generator(device=device)
    gen.manual_seed(PPL_SEED)
    random_ids = random_ids.to(device)
    nll, count = 0.0, 0
    n_langs = len(layouts)
    lang_nll, lang_count = torch.zeros(n_langs, dtype=torch.float64), torch.zeros(n_langs, dtype=torch.long)
    for i in range(0, len(order), batch_size):
        b = seqs.batch(order[i : i + batch_size])
        m = mask_batch(b.input_ids, b.maskable, seqs.mask_id[b.lang], random_ids, cfg, gen)
        mask = attention_mask(b, attention)
        hidden = torch.cat([model(m.input_ids[r], b.position_ids[r], b.token_type_ids[r],
                                  None if mask is None else mask[r])
                            for r in row_slices(*m.input_ids.shape, tokens or tokens_per_batch(device))])  # (B, T, H)
        logits = model.mlm_logits(hidden.flatten(0, 1)[m.selected]).float()
        nll += float(torch.nn.functional.cross_entropy(logits, m.targets, reduction="sum"))
        count += len(m.targets)
        # the same losses per language (each selected token's row's): the pooled sum above is left as it was
        token_lang = b.lang[m.selected // m.input_ids.shape[1]].cpu()
        losses = torch.nn.functional.cross_entropy(logits, m.targets, reduction="none").double().cpu()
        lang_nll.index_add_(0, token_lang, losses)
        lang_count += torch.bincount(token_lang, minlength=n_langs)
    return {"perplexity": metrics.perplexity(nll, count), "masked_tokens": count, "sequences": len(order),
            "languages": [metrics.perplexity(float(x), int(n)) if n else None for x, n in zip(lang_nll, lang_count)]}


def units_per_word(sides, layouts) -> float:
    """Units per word of the English side inside the model's window ([CLS] and [SEP] left out)."""
    en = sides[0]
    inside = positions_within(en.offsets) < layouts[en.lang].max_len - 2
    words = int(en.word_starts[inside].sum())
    return float(inside.sum()) / words if words else float("nan")


def _same(a, b) -> bool:
    return all(len(x.ids) == len(y.ids) and np.array_equal(x.ids, y.ids) and np.array_equal(x.offsets, y.offsets)
               for x, y in zip(a, b)) and len(a) == len(b)


def run(ctx) -> dict:
    """'train' scores what each language trained on; where a mod trained the languages on different parts
    (no-parallel), 'train_parallel' also scores the whole parallel training corpus, as the paper did."""
    out = {}

    def score(name: str, sides, per_language: bool) -> None:  # a forward pass of its own: the inputs are masked
        with ctx.phase(f"perplexity_{name}"):
            scored = mlm_perplexity(ctx.model, sides, ctx.layouts, ctx.random_ids, ctx.device, ctx.ppl_sentences,
                                    attention=ctx.attention)
        out[name] = scored["perplexity"]
        if per_language:  # the same masks, per language
            out[f"{name}_languages"] = dict(zip(ctx.languages, scored["languages"]))
        out[f"{name}_word"] = out[name] ** units_per_word(sides, ctx.layouts)

    for split in ctx.ppl_splits:
        sides = ctx.views(split)
        score(split, sides, True)
        if split == "train" and not _same(parallel := ctx.views("train-parallel"), sides):
            score("train_parallel", parallel, False)
    return {"perplexity": out}


def describe(results: dict) -> list[str]:
    """Perplexity per unit, then per word (ppl ** (units / word): the one that compares across data.tokenizer's
    granularities), and the dev perplexity of each language."""
    ppl = results.get("perplexity")
    if not ppl:
        return []
    per_word = "".join(f", {name} {ppl[key]:.1f}/word" for name, key in (("train", "train_word"), ("dev", "dev_word"))
                       if ppl.get(key) is not None)
    lines = [f"perplexity train {ppl.get('train', float('nan')):.1f}, dev {ppl.get('dev', float('nan')):.1f}"
             + (f" per unit{per_word}" if per_word else "")]
    per_language = {k: v for k, v in ppl.get("dev_languages", {}).items() if v is not None}
    if per_language:
        lines.append("dev perplexity per language (per unit): "
                     + ", ".join(f"{name} {x:.1f}" for name, x in per_language.items()))
    return lines


register(Evaluator(
    "perplexity", "MLM perplexity with 15% of tokens masked (fixed seed), training and dev data, per unit "
    "and per word, and per language", version=4,  # 4: per-language numbers (the pooled ones are unchanged)
    order=90, run=run,
    columns=(Column("train", "ppl train", group="perplexity", kind="perplexity", table=True),
             Column("train_parallel", "ppl train (whole parallel)", group="perplexity", kind="perplexity"),
             Column("dev", "ppl dev", group="perplexity", kind="perplexity", table=True, curve=True, summary=True,
                    short="ppl dev"),
             Column("train_word", "ppl/word train", group="perplexity", kind="perplexity"),
             Column("train_parallel_word", "ppl/word train (whole parallel)", group="perplexity", kind="perplexity"),
             Column("dev_word", "ppl/word dev", group="perplexity", kind="perplexity")),
    describe=describe))
