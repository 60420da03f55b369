"""train.attention: padding masked (the default) or attended to as the paper's published code ran its model
(no attention mask, in training and in evaluation, batches padded to their longest row)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from conftest import TINY_SETTINGS
from minimult.cli import main
from minimult.config import resolve
from minimult.data.batching import SequenceSet, attention_mask
from minimult.errors import MinimultError
from minimult.evaluate import evaluate_run
from minimult.evaluate.representations import encode_sides, unmasked_piece_vectors
from minimult.model import Bert
from minimult.runs import Run
from minimult.train import train


def tiny(mods=None, **overrides):
    return resolve("tiny", {**TINY_SETTINGS, **overrides}, mods)


@pytest.fixture(scope="module")
def lang_pos_run(tmp_path_factory):
    """A tiny lang-pos run (positions and segments differ by language) and its dev sides."""
    cfg, mods = tiny("lang-pos", **{"train.epochs": 1})
    run = Run.create_at(tmp_path_factory.mktemp("attn") / "run", cfg, log=lambda s: None)
    run.data.prepare(lambda s: None)
    torch.manual_seed(0)
    model = Bert(run.cfg.model).eval()
    return run, model


def _encode_alone_and_padded(model, seqs, short, long, mask_of):
    """Layer-2 vectors of sequence `short` on its own and in a batch with the longer sequence `long`."""
    alone, both = seqs.batch(np.array([short])), seqs.batch(np.array([short, long]))
    n = int(alone.lengths[0]) + 2
    h_alone = model.hidden_states(alone.input_ids, alone.position_ids, alone.token_type_ids, mask_of(alone))[2][0]
    h_both = model.hidden_states(both.input_ids, both.position_ids, both.token_type_ids, mask_of(both))[2][0, :n]
    assert both.input_ids.shape[1] > n  # the short row is padded in the batch
    return h_alone, h_both


def test_masked_ignores_padding_and_attend_padding_does_not(lang_pos_run):
    run, model = lang_pos_run
    side = run.data.views("dev")[1]  # the second language: positions 128+i, segment 1 under lang-pos
    seqs = SequenceSet.from_sides([side], run.data.layouts, "cpu")
    short, long = int(np.argmin(side.lengths)), int(np.argmax(side.lengths))
    with torch.no_grad():
        a, b = _encode_alone_and_padded(model, seqs, short, long, lambda bt: attention_mask(bt, "masked"))
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
        a, b = _encode_alone_and_padded(model, seqs, short, long, lambda bt: attention_mask(bt, "attend-padding"))
        assert (a - b).abs().max() > 1e-3  # the [PAD] keys changed the vectors


def _published_reference(model, sides, layouts, layers, batch_size):
    """What the published evaluation computes, written out independently of `SequenceSet.batch`: every
    sentence of every side in order, `[CLS] s [SEP]` with the side's specials, positions and segment, cut
    into consecutive batches, each padded to its longest row with the side's [PAD] (positions continue
    into the padding) and run without a mask; the vectors of the sentences' pieces."""
    rows = []
    for side in sides:
        lay = layouts[side.lang]
        for i in range(side.num_sentences):
            pieces = side.ids[side.offsets[i]:side.offsets[i + 1]].tolist()
            rows.append((lay, [lay.cls, *pieces, lay.sep], len(pieces)))
    out = {l: [] for l in layers}
    for start in range(0, len(rows), batch_size):
        chunk = rows[start:start + batch_size]
        T = max(len(ids) for _, ids, _ in chunk)
        ids = torch.tensor([ids + [lay.pad] * (T - len(ids)) for lay, ids, _ in chunk])
        pos = torch.tensor([[lay.position_offset + t for t in range(T)] for lay, _, _ in chunk])
        seg = torch.tensor([[lay.segment] * T for lay, _, _ in chunk])
        with torch.no_grad():
            hs = model.hidden_states(ids, pos, seg, None)
        for r, (_, _, n) in enumerate(chunk):
            for l in layers:
                out[l].append(hs[l][r, 1:n + 1])
    sizes = [len(s.ids) for s in sides]
    return [{l: torch.cat(out[l]).split(sizes)[k] for l in layers} for k in range(len(sides))]


def test_unmasked_evaluation_reproduces_the_published_batches(lang_pos_run):
    run, model = lang_pos_run
    sides = [s.subset(np.arange(7)) for s in run.data.views("dev")]  # 14 sequences in batches of 4: one mixes both
    got = unmasked_piece_vectors(model, sides, run.data.layouts, (0, 2), torch.device("cpu"), batch_size=4)
    want = _published_reference(model, sides, run.data.layouts, (0, 2), batch_size=4)
    for g, w in zip(got, want):
        for l in (0, 2):
            torch.testing.assert_close(g[l], w[l], rtol=1e-5, atol=1e-5)
    # and it is not what the masked, length-sorted encoding gives: the padding changed the upper layer
    masked = encode_sides(model, sides, run.data.layouts, (0, 2), torch.device("cpu"), "masked")
    torch.testing.assert_close(masked[0][0], got[0][0])  # layer 0 sees no other token
    assert (masked[1][2] - got[1][2]).abs().max() > 1e-3


def test_attend_padding_trains_otherwise_and_is_recorded(tmp_path):
    losses = {}
    for attention in ("masked", "attend-padding"):  # on half the tiny corpus: each run is evaluated completely
        cfg, mods = tiny(None, **{"train.epochs": 1, "train.batching": "random", "train.attention": attention,
                                  "data.train_sentences": 200, "data.dev_sentences": 100})
        path = tmp_path / attention
        train([Run.create_at(path, cfg, log=lambda s: None)], log=lambda s: None)
        rows = [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]
        losses[attention] = [r["loss"] for r in rows if "loss" in r]
        assert json.loads((path / "config.json").read_text())["train"]["attention"] == attention
        results = evaluate_run(path, log=lambda s: None)
        assert results["evaluation"]["attention"] == attention and results["evaluation"]["complete"]
        assert results["config"]["train"]["attention"] == attention
    assert losses["masked"] and losses["masked"] != losses["attend-padding"]
    # as in the published model, [PAD]'s lookups pass no gradient (HF's padding_idx; test_model checks the gradients)
    assert Run.open(tmp_path / "attend-padding").cfg.model.padding_idx == 0
    # the same run evaluated the other way is told apart, and is not its complete evaluation
    other = evaluate_run(tmp_path / "attend-padding", log=lambda s: None, attention="masked", write=False)
    assert other["evaluation"]["attention"] == "masked" and not other["evaluation"]["complete"]


def test_unknown_attention_is_one_error_line(tmp_path):
    with pytest.raises(MinimultError, match="unknown train.attention 'none'"):
        tiny(None, **{"train.attention": "none"})
    result = CliRunner().invoke(main, ["pretrain", "--preset", "tiny", "--set", "train.attention=none",
                                       "--out", str(tmp_path / "r")])
    assert result.exit_code != 0
    assert "unknown train.attention 'none'" in result.output
