"""Sequence-structure mods: no-sep, lang-sep, no-segment change exactly the batches and the model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import TINY_SETTINGS
from minimult.config import resolve
from minimult.data.batching import SequenceSet
from minimult.data.run_data import RunData
from minimult.data.vocab import CLS, MASK, PAD, SEP
from minimult.errors import MinimultError
from minimult.model import Bert


def batch(mods, n=40):
    cfg, active = resolve("tiny", TINY_SETTINGS, mods)
    data = RunData(cfg, active)
    sides = data.views("train")
    seqs = SequenceSet.from_sides(sides, data.layouts, "cpu")
    m = sides[0].num_sentences
    index = np.concatenate([np.arange(n), m + np.arange(n)])  # n sentences in both languages
    return cfg, data, seqs, seqs.batch(index)


def test_no_sep_batches_hold_no_sep_and_nothing_else_changes():
    cfg, data, seqs, b = batch("no-sep")
    _, _, _, base = batch(None)
    V = cfg.data.vocab_size
    assert not torch.isin(b.input_ids, torch.tensor([SEP, V + SEP])).any()
    assert b.input_ids.shape[1] == base.input_ids.shape[1] - 1 and (b.input_ids[:, 0] == CLS).all()
    # the same sentence pieces at the same places; where [SEP] stood there is padding (masked out)
    T = b.input_ids.shape[1]
    inside = base.maskable[:, :T]
    assert torch.equal(b.maskable, inside) and torch.equal(b.input_ids[inside], base.input_ids[:, :T][inside])
    ends = base.lengths + 1
    assert (base.input_ids[torch.arange(len(ends)), ends] == SEP).all()
    assert torch.equal(b.attention_mask.sum(1), base.attention_mask.sum(1) - 1)


def test_lang_sep_gives_each_language_its_own_sep_and_shares_the_rest():
    cfg, data, seqs, b = batch("lang-sep")
    V = cfg.data.vocab_size
    en, l1 = data.layouts
    assert (en.sep, l1.sep) == (SEP, V + SEP)
    assert (en.cls, en.pad, en.mask) == (l1.cls, l1.pad, l1.mask) == (CLS, PAD, MASK)
    rows = torch.arange(len(b.lengths))
    seps = b.input_ids[rows, b.lengths + 1]
    assert torch.equal(seps, torch.where(b.lang == 0, SEP, V + SEP))
    assert (b.input_ids[:, 0] == CLS).all()


def test_no_segment_model_has_no_segment_parameters_and_exports_a_zero_row(tmp_path):
    cfg, active = resolve("tiny", TINY_SETTINGS, "no-segment")
    assert cfg.model.type_vocab_size == 0
    model = Bert(cfg.model)
    assert not [n for n, _ in model.named_parameters() if "segment" in n]
    with_table = Bert(resolve("tiny", TINY_SETTINGS)[0].model)
    assert [n for n, _ in with_table.named_parameters() if "segment" in n]
    # lang-pos without a segment table: language-specific positions only
    cfg2, _ = resolve("tiny", TINY_SETTINGS, "lang-pos,no-segment")
    assert cfg2.model.type_vocab_size == 0 and cfg2.model.max_positions == 2 * cfg2.data.max_len
    from minimult.export import _hf_state_dict

    assert torch.equal(_hf_state_dict(model, cfg.model)["bert.embeddings.token_type_embeddings.weight"],
                       torch.zeros(1, cfg.model.hidden))


@pytest.mark.parametrize("mods, fragment", [
    ("no-sep,lang-sep", "contradictory mods: no-sep and lang-sep both set the separator"),
    ("lang-sep,shift-special", "contradictory mods: lang-sep and shift-special cannot be combined"),
])
def test_structure_conflicts_are_declared(mods, fragment):
    with pytest.raises(MinimultError, match=fragment):
        resolve("tiny", TINY_SETTINGS, mods)


def test_lang_sep_needs_separate_id_blocks():
    with pytest.raises(MinimultError, match="lang-sep needs languages with their own ids"):
        resolve("tiny", {**TINY_SETTINGS, "data.fake": "unicode"}, "lang-sep")
