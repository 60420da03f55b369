"""Language views: English and its versions in the other languages, with the gold alignment between them.

Public entry: `build_sides(prepared, source, data_cfg, mods, split, seed) -> [English, language 1, ...]`.
The language source (`minimult.data.sources`) makes the views; the mods' `reorder` hooks act on every
language but English in every split, their `resample` hooks only on training data.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from minimult.data.vocab import Encoded, Ragged


@dataclass(frozen=True)
class Side(Ragged):
    """One language's version of a split: its sentences as global ids and how they align to English."""

    lang: int
    ids: np.ndarray  # (P,) int32 global ids
    offsets: np.ndarray  # (S+1,) int64
    word_starts: np.ndarray  # (P,) bool
    english_index: np.ndarray  # (S,) index of the English sentence this one translates; -1 = none
    gold: np.ndarray  # (P,) position in the English sentence (english_index) each piece aligns to; -1 = none

    @property
    def num_sentences(self) -> int:
        """S, the number of sentences."""
        return len(self.offsets) - 1

    def alignment(self, i: int) -> np.ndarray:
        """Gold links of sentence i as (K, 2) pairs (English position, this side's position)."""
        g = self.gold[self.offsets[i] : self.offsets[i + 1]]
        j = np.flatnonzero(g >= 0)
        return np.stack([g[j], j], axis=1)

    def subset(self, index: np.ndarray) -> "Side":
        """The sentences `index` (int array, in that order) as a Side of their own."""
        starts, ends = self.offsets[index], self.offsets[index + 1]
        take = _ranges(starts, ends)
        offsets = np.zeros(len(index) + 1, dtype=np.int64)
        np.cumsum(ends - starts, out=offsets[1:])
        return Side(self.lang, self.ids[take], offsets, self.word_starts[take], self.english_index[index],
                    self.gold[take])

    def reordered(self, perms: list[np.ndarray]) -> "Side":
        """Sentence i becomes its pieces in order perms[i] ((len_i,) int, source positions); the gold alignment
        follows."""
        take = np.concatenate([p + o for p, o in zip(perms, self.offsets[:-1])]) if perms else np.zeros(0, int)
        starts = np.zeros(len(self.ids), dtype=bool)
        starts[self.offsets[:-1][self.lengths > 0]] = True  # word boundaries lose meaning: sentence starts
        return dataclasses.replace(self, ids=self.ids[take], gold=self.gold[take], word_starts=starts)

    def unigram_resample(self, rng: np.random.Generator) -> "Side":
        """Each sentence replaced by as many words drawn from the side's unigram word distribution."""
        word_bounds = np.append(np.flatnonzero(self.word_starts), len(self.ids))
        words = [tuple(self.ids[a:b]) for a, b in zip(word_bounds[:-1], word_bounds[1:])]
        types, inverse = np.unique(np.array([hash(w) for w in words]), return_inverse=True)
        first = np.zeros(len(types), dtype=np.int64)
        first[inverse[::-1]] = np.arange(len(words))[::-1]  # one occurrence per type
        freq = np.bincount(inverse) / len(words)
        words_per_sentence = np.add.reduceat(self.word_starts.astype(np.int64), self.offsets[:-1]) \
            if len(self.ids) else np.zeros(self.num_sentences, np.int64)
        words_per_sentence[self.lengths == 0] = 0
        drawn = first[rng.choice(len(types), size=int(words_per_sentence.sum()), p=freq)]
        pieces = [words[w] for w in drawn]
        ids = np.fromiter((i for p in pieces for i in p), dtype=np.int32)
        starts = np.fromiter((j == 0 for p in pieces for j in range(len(p))), dtype=bool)
        sent_of_word = np.repeat(np.arange(self.num_sentences), words_per_sentence)
        lengths = np.bincount(sent_of_word, weights=[len(p) for p in pieces],
                              minlength=self.num_sentences).astype(np.int64)
        offsets = np.zeros(self.num_sentences + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        n = self.num_sentences
        return Side(self.lang, ids, offsets, starts, np.full(n, -1), np.full(len(ids), -1))


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Concatenation of arange(s, e) for each pair, without a Python loop."""
    lengths = ends - starts
    if lengths.sum() == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return np.arange(lengths.sum()) + offsets


def positions_within(offsets: np.ndarray) -> np.ndarray:
    """offsets (S+1,) -> (P,) int64: every piece's position inside its sentence."""
    lengths = np.diff(offsets)
    return np.arange(offsets[-1]) - np.repeat(offsets[:-1], lengths)


def truncate(side: Side, limit: int) -> Side:
    """Keep the first `limit` pieces of every sentence (the model's window); gold links beyond go."""
    lengths = np.minimum(side.lengths, limit)
    keep = positions_within(side.offsets) < np.repeat(lengths, side.lengths)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    gold = side.gold[keep].copy()
    gold[gold >= limit] = -1
    return Side(side.lang, side.ids[keep], offsets, side.word_starts[keep], side.english_index, gold)


def english_side(enc: Encoded) -> Side:
    """English's Side of encoded text (language 0): sentence i translates itself, piece j aligns to position j."""
    n = len(enc)
    return Side(0, enc.ids.astype(np.int32), enc.offsets, enc.word_starts, np.arange(n),
                positions_within(enc.offsets))


SPLITS = ("train", "dev", "train-parallel")


def build_sides(prepared, source, data_cfg, mods, split: str, seed: int) -> list[Side]:
    """[English, language 1, ...] for `split` from the source, with the mods' hooks applied: `resample`
    (training data only, before reordering: it needs the word boundaries that reordering drops), then
    `reorder` on every language but English (or those the mod's `reorders` names). 'train-parallel' is the
    training corpus without `resample` (every language's whole parallel text: what no-parallel's training
    perplexity is scored on in the paper)."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid: {SPLITS}")
    sides = source.views(prepared, "dev" if split == "dev" else "train", data_cfg)
    names = source.names(data_cfg)
    rng = np.random.default_rng([seed, 1 if split == "dev" else 0])
    if split == "train":
        for a in mods:
            if a.mod.resample is not None:
                sides = a.mod.resample(sides, rng, a.value)
    return [sides[0]] + reordered(sides[1:], names, mods, rng)


def reordered(sides: list[Side], names, mods, rng: np.random.Generator) -> list[Side]:
    """`sides` (not the first language's) in the word order the mods' `reorder` hooks give each language they act
    on (`reorders(name)`), mod by mod, sentence by sentence, drawing from `rng`."""
    for a in mods:
        if a.mod.reorder is not None:
            sides = [s.reordered([a.mod.reorder(int(n), rng, a.value) for n in s.lengths])
                     if a.mod.reorders is None or a.mod.reorders(names[s.lang], a.value) else s for s in sides]
    return sides
