"""Fake-English by id shift (the paper's construction): language k is English with every id moved by
k * vocab_size, so its tokenization is English's and the gold alignment is the identity."""

from __future__ import annotations

import dataclasses

import numpy as np

from minimult.data.languages import Side, english_side
from minimult.data.sources import Source, register
from minimult.data.vocab import N_SPECIAL


def shifted_side(base: Side, lang: int, vocab_size: int) -> Side:
    """English's side with ids moved into language `lang`'s block: identical tokenization, identity gold."""
    return dataclasses.replace(base, lang=lang, ids=base.ids + lang * vocab_size)


def one_piece_sides(ids_per_lang: list[np.ndarray]) -> list[Side]:
    """Each language's dictionary entries as one-piece sentences (entry i translates entry i)."""
    n = len(ids_per_lang[0])
    offsets = np.arange(n + 1, dtype=np.int64)
    return [Side(lang, ids, offsets, np.ones(n, bool), np.arange(n), np.zeros(n, np.int64))
            for lang, ids in enumerate(ids_per_lang)]


class Shift(Source):
    name = "shift"
    description = "Fake-English: English ids shifted by k * vocab_size (identical tokenization)"
    max_langs = None  # language k is English in id block k: any number of languages (data.n_langs)

    def views(self, prepared, split, data_cfg):
        english = english_side(prepared.encoded(split))
        return [english] + [shifted_side(english, k, data_cfg.vocab_size) for k in range(1, data_cfg.n_langs)]

    def dictionary(self, prepared, data_cfg):
        """Every non-special entry of the vocabulary and its shifted twin: pieces, characters (each
        form: `a` and `##a`) or words, as data.tokenizer made them. Ids past the vocabulary's entries
        (a character set leaves most of its block unused) are never inputs and are left out."""
        en = np.arange(N_SPECIAL, len(prepared.vocab), dtype=np.int32)
        return one_piece_sides([en + k * prepared.vocab.stride for k in range(data_cfg.n_langs)])


register(Shift())
