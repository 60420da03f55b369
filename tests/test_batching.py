"""Every kind of batch follows the layouts: the ids, positions and segments each row gets, written out here
from the layouts and the sentences alone, for what training feeds the model (single sentences, nsp pairs)
and what evaluation reads (single sentences, NSP pairs), under the mods that change a layout and with
three languages."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import TINY_SETTINGS
from minimult.config import resolve
from minimult.data.batching import SequenceSet
from minimult.data.languages import Side
from minimult.data.layout import Layout
from minimult.data.pairs import PairSet
from minimult.evaluate.nsp import NSP_SEED
from minimult.runs import Run
from minimult.train import setup

SETTINGS = [  # (mods, settings beyond the tiny ones)
    (None, {}),
    ("lang-pos", {}),
    ("no-segment", {}),
    ("no-sep", {}),
    ("lang-sep", {}),
    ("shift-special", {}),
    ("nsp", {}),
    ("lang-pos,nsp", {"data.max_len": 16}),  # pairs cut to fit, and offsets of 16
    ("no-segment,nsp", {}),
    ("lang-pos", {"data.n_langs": 3}),
    ("lang-pos,nsp", {"data.n_langs": 3}),
]


def expected_layouts(cfg, mods: str) -> list[tuple[int, int, int]]:
    """(position offset, segment, pair segment) of each language, as the mods define them
    (lang-pos: positions k * max_len + i and segment k; nsp: a pair's segments 2s and 2s + 1)."""
    out = []
    for k in range(cfg.data.n_langs):
        offset, segment = (k * cfg.data.max_len, k) if "lang-pos" in mods else (0, 0)
        pair_segment = -1
        if "no-segment" in mods:
            segment = -1
        elif "nsp" in mods:
            segment, pair_segment = 2 * segment, 2 * segment + 1
        out.append((offset, segment, pair_segment))
    return out


def expected_row(layout, a: np.ndarray, b: np.ndarray | None, T: int):
    """(ids, positions, segments, real, maskable) of one row `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`
    (no [SEP] under no-sep), padded to T: a single sentence's padding keeps its segment, a pair's takes
    the second sentence's."""
    sep = [layout.sep] if layout.sep >= 0 else []
    first, second = [layout.cls, *a.tolist(), *sep], ([] if b is None else [*b.tolist(), *sep])
    pieces = [False] + [True] * len(a) + [False] * len(sep) + ([] if b is None else [True] * len(b) + [False] * len(sep))
    segment = max(layout.segment, 0)
    later = segment if b is None else max(layout.pair_segment, 0)
    pad = T - len(first) - len(second)
    return (first + second + [layout.pad] * pad, [layout.position_offset + t for t in range(T)],
            [segment] * len(first) + [later] * (T - len(first)), [True] * (T - pad) + [False] * pad,
            pieces + [False] * pad)


def check(batch, rows, layouts):
    """`rows`: (language, a, b or None) of every row of `batch`, the sentences as the batch should hold them."""
    T = batch.input_ids.shape[1]
    for r, (lang, a, b) in enumerate(rows):
        ids, positions, segments, real, maskable = expected_row(layouts[lang], a, b, T)
        assert batch.input_ids[r].tolist() == ids, r
        assert batch.position_ids[r].tolist() == positions, r
        assert batch.token_type_ids[r].tolist() == segments, r
        assert batch.maskable[r].tolist() == maskable, r
        if batch.attention_mask is None:
            assert all(real), r
        else:
            assert batch.attention_mask[r].tolist() == real, r


def sentence(side, i: int, limit: int) -> np.ndarray:
    return side.sentence(i)[:limit]


def pair_rows(pairs: PairSet, sides, index: np.ndarray, limit: int) -> list:
    """The rows of `pairs.batch(index)`: each sentence and its partner, cut so that both fit (each keeps at
    least half of the room)."""
    where = [(s, i) for s in sides for i in range(s.num_sentences)]
    rows = []
    for i in index:
        (side, ia), (_, ib) = where[i], where[pairs.partner[i]]
        a, b = sentence(side, ia, limit), sentence(side, ib, limit)
        room = pairs.room[side.lang]
        la = min(len(a), max(room - len(b), room // 2))
        rows.append((side.lang, a[:la], b[: min(len(b), room - la)]))
    return rows


@pytest.mark.parametrize("mods,settings", SETTINGS, ids=[f"{m}-{s}" for m, s in SETTINGS])
def test_every_batch_kind_follows_the_layouts(tmp_path, mods, settings):
    cfg, _ = resolve("tiny", {**TINY_SETTINGS, **settings}, mods)
    run = Run.create_at(tmp_path / "run", cfg, log=lambda s: None)
    member = setup(run, torch.device("cpu"), log=lambda s: None)
    layouts = run.data.layouts
    assert [(l.position_offset, l.segment, l.pair_segment) for l in layouts] == expected_layouts(cfg, mods or "")
    assert cfg.model.max_positions == max(l.position_offset + l.max_len for l in layouts)
    limit = cfg.data.max_len - 2

    # training: what the model is fed (masked: compare the layout, not the corrupted ids)
    train_sides = run.data.train_views
    n = train_sides[0].num_sentences
    longest = int(np.argmax(train_sides[0].lengths))  # cut to max_len - 2
    picks = np.array([0, 1, longest, n - 1])
    index = np.concatenate([k * n + picks for k in range(cfg.data.n_langs)])
    fed = member.masked_batch(index)
    batch = member.train_set.batch(index)
    assert torch.equal(fed["position_ids"], batch.position_ids) and torch.equal(fed["token_type_ids"], batch.token_type_ids)
    if cfg.model.nsp:
        assert isinstance(member.train_set, PairSet)
        check(batch, pair_rows(member.train_set, train_sides, index, limit), layouts)
    else:
        check(batch, [(s.lang, sentence(s, i, limit), None) for s in train_sides for i in picks], layouts)
    assert int(batch.position_ids.max()) < cfg.model.max_positions

    # evaluation: single sentences (representations, perplexity, transfer), NSP pairs
    dev = run.data.views("dev")
    m = dev[0].num_sentences
    index = np.concatenate([k * m + np.array([0, 2, m - 1]) for k in range(cfg.data.n_langs)])
    check(SequenceSet.from_sides(dev, layouts, "cpu").batch(index),
          [(s.lang, sentence(s, i, limit), None) for s in dev for i in (0, 2, m - 1)], layouts)
    if cfg.model.nsp:
        pairs = PairSet.from_sides(dev, layouts, "cpu", NSP_SEED)
        check(pairs.batch(index), pair_rows(pairs, dev, index, limit), layouts)


def test_tokens_count_the_real_tokens_of_the_batch():
    """`SequenceSet.tokens` is the number of real (unpadded) tokens of those sequences' batch: each sentence's
    pieces, cut to the window, plus its [CLS] and [SEP]."""
    side = Side(0, np.arange(5, 17, dtype=np.int32), np.array([0, 2, 3, 12]), np.ones(12, bool), np.arange(3),
                np.full(12, -1))
    seqs = SequenceSet.from_sides([side], [Layout(0, 0, max_len=6)], "cpu")
    assert seqs.tokens(np.array([2])) == 6  # 9 pieces cut to 4, with [CLS] and [SEP]
    for index in (np.array([0]), np.array([1, 0]), np.array([0, 1, 2])):
        b = seqs.batch(index)
        real = b.input_ids.numel() if b.attention_mask is None else int(b.attention_mask.sum())
        assert seqs.tokens(index) == real
