"""Language identification per layer (Wu & Dredze 2019, Fig. 2): how much of "which language is this" each layer
still carries. A logistic-regression probe per layer learns the language of mean-pooled sentence
vectors (and, separately, of single word-piece vectors) on three quarters of the first dev pairs and
is scored on the rest; both versions of a pair are always on the same side of that split, so a probe
cannot pass by recognising a sentence it saw in the other language. Chance is 1/N for N languages (0.5 for two).

A representation that encodes the language linearly scores ~1.0; one that is the same for both
languages scores 0.5. The curve (layers 0..L) is in results["probe"]; the column is its lowest
sentence-level point. Not part of the training-time evaluations (`periodic=False`).
"""

from __future__ import annotations

import numpy as np
import torch

from minimult.evaluate.linear import fit_logistic
from minimult.evaluate.registry import Column, Evaluator, register
from minimult.evaluate.representations import piece_vectors, sentence_vectors

PROBE_PAIRS = 2000  # dev pairs probed (or fewer, if the evaluation has fewer)
PROBE_TOKENS = 5000  # word pieces per language for the token probe (a fixed random subset; more cost seconds
                    # per layer and change the third decimal)
PROBE_SEED = 7
PROBE_L2 = 1e-3  # the penalty beside the mean cross-entropy, on standardised vectors
VECTOR_BYTES = 512 * 2**20  # piece vectors held at once: as many layers per forward pass as fit


def held_out(n: int) -> np.ndarray:
    """Pair i is test data when i % 4 == 3: a fixed, interleaved quarter (dev order is verse order)."""
    return np.arange(n) % 4 == 3


def language_id(sides, vectors_of, layers, hidden: int, tokens: int = PROBE_TOKENS, seed: int = PROBE_SEED) -> dict:
    """Held-out accuracy of a sentence- and a token-level language-ID probe at each of `layers`.
    sides: parallel Sides (same sentence count); vectors_of(side, layers) -> {layer: (P, hidden)}."""
    n = sides[0].num_sentences
    test = held_out(n)
    rng = np.random.default_rng(seed)
    piece_pick = [np.sort(rng.permutation(len(s.ids))[:tokens]) for s in sides]
    piece_test = [np.repeat(test, s.lengths)[p] for s, p in zip(sides, piece_pick)]  # as its sentence
    out = {"layers": list(layers), "sentence": [], "token": []}
    per_layer = 4 * hidden * sum(len(s.ids) for s in sides)  # float32 piece vectors of one layer
    at_once = max(1, VECTOR_BYTES // max(1, per_layer))
    for start in range(0, len(layers), at_once):
        chunk = layers[start:start + at_once]
        vecs = [vectors_of(s, chunk) for s in sides]
        for l in chunk:
            sent = [sentence_vectors(v[l], s) for v, s in zip(vecs, sides)]
            tok = [v[l][torch.as_tensor(p, device=v[l].device)] for v, p in zip(vecs, piece_pick)]
            out["sentence"].append(_probe(sent, [test] * len(sides)))
            out["token"].append(_probe(tok, piece_test))
    out["lowest_sentence"] = min(out["sentence"])
    out["pairs"] = n
    return out


def _probe(features: list[torch.Tensor], is_test: list[np.ndarray]) -> float:
    x = torch.cat(features)
    y = torch.cat([torch.full((len(f),), k, dtype=torch.long, device=x.device) for k, f in enumerate(features)])
    t = torch.as_tensor(np.concatenate(is_test), device=x.device)
    train = ~t  # one L2 strength: nothing to choose, so the training rows stand in for dev rows
    return fit_logistic(x[train], y[train], x[train], y[train], len(features), grid=(PROBE_L2,)).accuracy(x[t], y[t])


def run(ctx) -> dict:
    n = min(PROBE_PAIRS, ctx.dev[0].num_sentences)
    sides = [s.subset(np.arange(n)) for s in ctx.dev]
    with ctx.phase("probe"):
        return {"probe": language_id(sides, lambda s, ls: piece_vectors(ctx.model, s, ctx.layouts, ls, ctx.device,
                                                                         precision_=ctx.precision),
                                     list(range(ctx.model.cfg.layers + 1)), ctx.model.cfg.hidden)}


register(Evaluator(
    "probe", "language-ID probe (logistic regression) per layer on sentence and token vectors, held-out accuracy",
    version=1, order=85, run=run, periodic=False,
    columns=(Column("lowest_sentence", "lang-ID probe, lowest sentence accuracy of any layer", group="probe"),)))
