"""Linguistic mods on the training data: non-parallel parts, unigram-sampled sentences. Evaluation
data stay parallel."""

from __future__ import annotations

import numpy as np

from minimult.mods import Mod, register, set_section


def _split_parts(sides, rng, value):
    """Language k trains on the k-th of len(sides) consecutive parts of the sentences (two languages:
    English the first half, the other the second)."""
    n, N = sides[0].num_sentences, len(sides)
    return [s.subset(np.arange(k * n // N, (k + 1) * n // N)) for k, s in enumerate(sides)]


def _unigram(sides, rng, value):
    """Every language but English sampled word by word from its unigram distribution, same lengths."""
    return [sides[0]] + [s.unigram_resample(rng) for s in sides[1:]]


register(Mod("no-parallel", "English trains on the first half of the sentences, the second language on "
             "the other half; epochs doubled", 1, order=80, group="training data", resample=_split_parts,
             configure=lambda cfg, v: set_section(cfg, "train", epochs=cfg.train.epochs * 2)))
register(Mod("unigram", "second-language training sentences sampled word by word from its unigram "
             "distribution (K et al.)", 2, order=90, group="training data", resample=_unigram,
             series=("permutation", lambda v: "unigram")))  # the series' far end: no order at all
