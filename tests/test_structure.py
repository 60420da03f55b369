"""Sequence-structure mods: no-sep, lang-sep, no-segment change exactly the batches and the model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import TINY_SETTINGS, cli
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


# --- segment alternations at inference (van der Goot et al. 2022) ---------------------------------

def trained_like(mods=None):
    cfg, _ = resolve("tiny", TINY_SETTINGS, mods)
    torch.manual_seed(0)
    return Bert(cfg.model)


def test_each_alternation_builds_the_vector_it_claims():
    from minimult.evaluate.segments import segment_vector, with_segment

    model = trained_like()
    rows = model.embeddings.lookups["segment"].weight.detach().clone()
    assert segment_vector(model, "original") is None and with_segment(model, "original") is model
    assert torch.equal(segment_vector(model, "0s"), rows[0]) and torch.equal(segment_vector(model, "1s"), rows[1])
    assert torch.allclose(segment_vector(model, "avg"), (rows[0] + rows[1]) / 2)
    assert torch.equal(segment_vector(model, "null"), torch.zeros(rows.shape[1]))
    r1, r1b, r2 = (segment_vector(model, v) for v in ("rand:1", "rand:1", "rand:2"))
    std = model.cfg.init_std
    assert torch.equal(r1, r1b) and not torch.equal(r1, r2)
    assert all(r.abs().max() <= 2 * std and 0.5 * std < r.std() < 1.2 * std for r in (r1, r2))
    altered = with_segment(model, "avg")
    table = altered.embeddings.lookups["segment"].weight
    assert torch.allclose(table, ((rows[0] + rows[1]) / 2).expand_as(table))
    assert torch.equal(model.embeddings.lookups["segment"].weight, rows)  # the original is untouched


def test_alternations_on_a_model_without_segments_and_bad_values_are_refused():
    from minimult.evaluate.segments import parse_segments, segment_vector

    assert parse_segments("original, avg,rand:3") == ["original", "avg", "rand:3"]
    with pytest.raises(MinimultError, match="no segment table"):
        segment_vector(trained_like("no-segment"), "avg")
    for bad, fragment in (("2s", "unknown segment alternation '2s'"), ("rand:x", "rand:SEED"),
                          ("avg,avg", "names a value twice"), ("", "at least one value")):
        with pytest.raises(MinimultError, match=fragment):
            parse_segments(bad)


def test_cli_eval_writes_one_block_per_alternation(tmp_path):
    import json

    from minimult.runs import Run
    from minimult.train import train

    cfg, active = resolve("tiny", TINY_SETTINGS, "lang-pos")
    run = Run.create_at(tmp_path / "r", cfg, log=lambda s: None)
    train([run], log=lambda s: None)
    proc = cli("eval", run.path, "--segment", "original,0s,null", "--dev-sentences", "50", "--ppl-sentences", "50")
    assert proc.returncode == 0, proc.stderr
    results = json.loads((run.path / "results.json").read_text())
    blocks = results["evaluations"][-3:]
    assert [b["evaluation"]["segment"] for b in blocks] == ["original", "0s", "null"]
    # a zero segment vector changes what the layers compute
    assert blocks[0]["layers"]["1"] != blocks[2]["layers"]["1"]  # µ's upper layer at 2 layers
    assert "segment null:" in proc.stdout


# --- next-sentence prediction ---------------------------------------------------------------------

def pair_set(mods="nsp", epoch=0, **overrides):
    from minimult.data.pairs import PairSet

    cfg, active = resolve("tiny", {**TINY_SETTINGS, **overrides}, mods)
    data = RunData(cfg, active)
    pairs = PairSet.from_sides(data.views("train"), data.layouts, "cpu", seed=cfg.train.seed)
    pairs.start_epoch(epoch)
    return cfg, data, pairs


@pytest.mark.parametrize("epoch", [0, 1])
def test_nsp_labels_are_balanced_and_true_exactly_when_b_follows_a(epoch):
    cfg, data, pairs = pair_set(epoch=epoch)
    n = len(pairs)
    assert abs(pairs.labels.mean() - 0.5) <= 0.02
    follows = pairs.partner == np.arange(n) + 1
    same_side = pairs.side_start[pairs.partner] == pairs.side_start  # B from A's own language
    assert np.array_equal(follows & (pairs.next_of >= 0), pairs.labels == 1)
    assert same_side.all() and not (pairs.partner == np.arange(n)).any()
    other = pair_set(epoch=epoch + 1)[2]
    assert not np.array_equal(other.partner, pairs.partner)  # redrawn every epoch


def test_nsp_training_redraws_the_pairs_at_every_epoch(tmp_path, monkeypatch):
    """The training loop tells the pairs each epoch it begins (after the draw of epoch 0 on building them), so
    every epoch trains on pairs of its own."""
    from minimult.data.pairs import PairSet
    from minimult.runs import Run
    from minimult.train import train

    drawn, draw = [], PairSet.start_epoch
    monkeypatch.setattr(PairSet, "start_epoch", lambda self, epoch: (drawn.append(epoch), draw(self, epoch))[1])
    cfg, active = resolve("tiny", {**TINY_SETTINGS, "train.epochs": 2}, "nsp")
    train([Run.create_at(tmp_path / "r", cfg, log=lambda s: None)], log=lambda s: None)
    assert drawn == [0, 0, 1]


def test_nsp_batches_are_cls_a_sep_b_sep_with_segments_0_1():
    cfg, data, pairs = pair_set()
    index = np.array([0, 5, len(pairs) - 3])
    b = pairs.batch(index)
    ids = pairs.seqs.ids.numpy()
    for row, i in enumerate(index):
        la, lb = pairs.lengths_np[i], pairs.lengths_np[pairs.partner[i]]
        start_a, start_b = pairs.seqs.starts[i].item(), pairs.seqs.starts[pairs.partner[i]].item()
        lang = pairs.langs_np[i]
        layout = data.layouts[lang]
        want = [layout.cls, *ids[start_a:start_a + la], layout.sep, *ids[start_b:start_b + lb], layout.sep]
        assert b.input_ids[row, :len(want)].tolist() == want
        assert b.token_type_ids[row, :len(want)].tolist() == [0] * (la + 2) + [1] * (lb + 1)
        assert int(b.maskable[row].sum()) == la + lb and int(b.attention_mask[row].sum()) == len(want)
        assert b.nsp_labels[row].item() == pairs.labels[i]


def test_nsp_pairs_are_cut_to_fit_and_lang_pos_gets_its_own_pair_segments():
    cfg, data, pairs = pair_set("lang-pos,nsp", **{"data.max_len": 16})
    assert [(l.segment, l.pair_segment) for l in data.layouts] == [(0, 1), (2, 3)]
    assert cfg.model.type_vocab_size == 4
    b = pairs.batch(np.arange(len(pairs)))
    assert b.input_ids.shape[1] <= 16  # every row fits (a batch whose rows all fill it has no padding, no mask)
    real = torch.ones_like(b.input_ids, dtype=torch.bool) if b.attention_mask is None else b.attention_mask
    n = len(pairs) // 2
    assert set(b.token_type_ids[n:][real[n:]].tolist()) == {2, 3}


def test_nsp_trains_single_sentences_evaluate_and_stacks(tmp_path):
    from minimult.evaluate import evaluate_run
    from minimult.runs import Run
    from minimult.train import check_stackable, train

    cfg, active = resolve("tiny", TINY_SETTINGS, "nsp")
    run = Run.create_at(tmp_path / "nsp", cfg, log=lambda s: None)
    train([run], log=lambda s: None)
    model = run.load_model("cpu")
    assert model.nsp_head is not None
    results = evaluate_run(run, log=lambda s: None, ppl_sentences=100)
    assert 0.0 <= results["nsp_accuracy"] <= 1.0 and results["mu"] is not None
    assert "nsp_accuracy" not in evaluate_run(*_plain_run(tmp_path), log=lambda s: None, ppl_sentences=100)
    check_stackable([cfg, cfg])  # nsp runs stack like any other (tests/test_stacked.py: equal to separate runs)


def _plain_run(tmp_path):
    from minimult.runs import Run
    from minimult.train import train

    cfg, _ = resolve("tiny", TINY_SETTINGS)
    run = Run.create_at(tmp_path / "plain", cfg, log=lambda s: None)
    train([run], log=lambda s: None)
    return (run,)


def test_nsp_loss_is_added_to_mlm_and_can_fit_the_labels():
    """mlm_loss with labels = MLM + the head's cross-entropy; on one fixed batch of pairs, training on it
    drives the NSP accuracy to ~1 (the head and its gradient work)."""
    from minimult.data.masking import mask_batch

    cfg, data, pairs = pair_set()
    torch.manual_seed(0)
    model = Bert(cfg.model)
    b = pairs.batch(np.arange(0, len(pairs), len(pairs) // 64)[:64])
    m = mask_batch(b.input_ids, b.maskable, pairs.mask_id[b.lang], data.random_ids(), cfg.mask,
                   torch.Generator().manual_seed(0))
    args = (m.input_ids, b.position_ids, b.token_type_ids, b.attention_mask, m.selected, m.targets)
    model.eval()
    with torch.no_grad():
        h = model(*args[:4])
        nsp = torch.nn.functional.cross_entropy(model.nsp_head(h[:, 0]), b.nsp_labels)
        assert torch.allclose(model.mlm_loss(*args, b.nsp_labels), model.mlm_loss(*args) + nsp)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(150):
        opt.zero_grad()
        model.mlm_loss(*args, b.nsp_labels).backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        acc = (model.nsp_head(model(*args[:4])[:, 0]).argmax(-1) == b.nsp_labels).float().mean().item()
    assert acc > 0.95


def test_nsp_accuracy_of_a_head_that_ignores_its_input_is_the_share_of_its_class():
    """The NSP evaluator on a known case: a head that always answers one class scores the share of dev pairs
    with that label, for each class (about half are true successors)."""
    from minimult.data.pairs import PairSet
    from minimult.evaluate.nsp import NSP_SEED, nsp_accuracy

    cfg, data, _ = pair_set()
    model = Bert(cfg.model).eval()
    sides = data.views("dev")
    labels = PairSet.from_sides(sides, data.layouts, "cpu", NSP_SEED).labels
    assert 0.4 < labels.mean() < 0.6
    with torch.no_grad():
        model.nsp_head.out.weight.zero_()
        for answer in (0, 1):
            model.nsp_head.out.bias.copy_(torch.tensor([1.0 - answer, float(answer)]))
            assert nsp_accuracy(model, sides, data.layouts, "cpu") == pytest.approx((labels == answer).mean())


def test_report_has_a_segment_alternation_table_and_figure(tmp_path):
    from minimult.evaluate import evaluate_run
    from minimult.report import build_report
    from minimult.runs import Run
    from minimult.train import train

    cfg, _ = resolve("tiny", TINY_SETTINGS)
    run = Run.create_at(tmp_path / "runs" / "r", cfg, log=lambda s: None)
    train([run], log=lambda s: None)
    evaluate_run(run, log=lambda s: None)
    null = evaluate_run(run, log=lambda s: None, segment="null")
    report = build_report([tmp_path / "runs"], tmp_path / "rep", log=lambda s: None)
    rows = report["segment_alternations"]
    assert [r["segment"] for r in rows] == ["original", "null"]
    assert rows[1]["metrics"]["mu"]["mean"] == pytest.approx(null["mu"])
    assert "## Segment alternations at inference" in report["markdown"]
    assert (tmp_path / "rep" / "segment_alternations.png").is_file()
