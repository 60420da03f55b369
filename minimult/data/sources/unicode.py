"""K et al.'s Fake-English: every character's code point shifted by a large constant. The vocabulary
is learned over both scripts (one shared id block), so tokenizations may differ from English's; the
gold alignment links piece m of a word to piece m of the same English word."""

from __future__ import annotations

import numpy as np

from minimult.data.languages import Side, english_side, positions_within
from minimult.data.sources import UNICODE_SHIFT, Source, register, shift_text  # noqa: F401 (re-exported)
from minimult.data.sources.shift import one_piece_sides
from minimult.data.vocab import N_SPECIAL, Encoded


def shift_piece(piece: str) -> str:
    return "##" + shift_text(piece[2:]) if piece.startswith("##") else shift_text(piece)


def unicode_side(english: Encoded, second: Encoded, lang: int) -> Side:
    """Fake-English from shifted text: its own tokenization, aligned piece by piece within words.

    Piece m of word w is aligned to piece m of the same word in English when it exists.
    """
    def word_piece_keys(enc: Encoded):
        word = np.cumsum(enc.word_starts) - 1
        sent = np.repeat(np.arange(len(enc)), enc.lengths)
        first_word = np.zeros(len(enc), dtype=np.int64)
        has = enc.lengths > 0
        first_word[has] = word[enc.offsets[:-1][has]]
        word_in_sent = word - first_word[sent]
        word_first_piece = np.flatnonzero(enc.word_starts)
        piece_in_word = np.arange(len(enc.ids)) - word_first_piece[word]
        return sent, word_in_sent, piece_in_word

    es, ew, ep = word_piece_keys(english)
    ss, sw, sp = word_piece_keys(second)
    english_pos = positions_within(english.offsets)
    lookup = {(int(a), int(b), int(c)): int(p) for a, b, c, p in zip(es, ew, ep, english_pos)}
    gold = np.array([lookup.get((int(a), int(b), int(c)), -1) for a, b, c in zip(ss, sw, sp)], dtype=np.int64)
    return Side(lang, second.ids.astype(np.int32), second.offsets, second.word_starts,
                np.arange(len(second)), gold)


class Unicode(Source):
    name = "unicode"
    description = "Fake-English by code-point shift (K et al.): its own tokenization, one shared vocabulary"
    shared_vocabulary = True
    extra = ("train_fake", "dev_fake")

    def text_inputs(self, data_cfg) -> dict[str, dict]:
        return {lang: {"tokenizer": "", "unicode_shift": k > 0} for k, lang in enumerate(self.names(data_cfg))}

    def training_text(self, train, data_cfg):
        return train.sentences + [[shift_text(w) for w in s] for s in train.sentences]

    def write_extra(self, vocab, train, dev, tmp, data_cfg=None) -> None:
        for name, corpus in (("train_fake", train), ("dev_fake", dev)):
            vocab.encode([[shift_text(w) for w in s] for s in corpus.sentences],
                         corpus.verse_ids).save(tmp / f"{name}.npz")

    def views(self, prepared, split, data_cfg):
        enc = prepared.encoded(split)
        return [english_side(enc), unicode_side(enc, prepared.extra[f"{split}_fake"], 1)]

    def dictionary(self, prepared, data_cfg):
        """Pairs of a piece and its code-point-shifted spelling, where both are in the vocabulary."""
        vocab = prepared.vocab
        pairs = [(i, vocab.index.get(shift_piece(p))) for i, p in enumerate(vocab.pieces[N_SPECIAL:], N_SPECIAL)]
        pairs = [(a, b) for a, b in pairs if b is not None and a != b]
        en, l1 = (np.array(x, dtype=np.int32) for x in zip(*pairs)) if pairs else (np.zeros(0, np.int32),) * 2
        return one_piece_sides([en, l1])


register(Unicode())
