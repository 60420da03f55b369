"""Fidelity to the paper's training: the presets' budget, explicit masking mixes, random batches, the
paper's no-parallel training perplexity and fp32 evaluation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import TINY_SETTINGS
from minimult import budget as b
from minimult.config import resolve
from minimult.data.batching import plan_epoch, steps_per_epoch
from minimult.errors import MinimultError
from minimult.data.batching import SequenceSet
from minimult.evaluate import evaluate_run, mlm_perplexity, piece_vectors
from minimult.report.readme import markers
from minimult.runs import Run
from minimult.train import train

ROOT = Path(__file__).resolve().parents[1]


def tiny(mods=None, **overrides):
    return resolve("tiny", {**TINY_SETTINGS, **overrides}, mods)


def pretrain(cfg, mods, path):
    train([Run.create_at(path, cfg, log=lambda s: None)], log=lambda s: None)


# --- budget ---------------------------------------------------------------------------------------

@pytest.mark.slow
def test_readme_budget_table_is_what_config_and_corpus_give():
    """The README's budget table, recomputed from each preset's config and the default corpus."""
    rows = [b.budget(*resolve(p)) for p in ("paper", "quick", "paper-b256", "quick-b256")]
    begin, end = markers(b.MARKER)
    text = (ROOT / "README.md").read_text()
    assert text[text.index(begin) + len(begin):text.index(end)].strip() == b.markdown(rows).strip()
    paper, quick = rows[0], rows[1]
    # the paper's updates and words per update within 5%; the old presets half the updates, twice the text
    assert abs(paper["updates"] / b.PAPER["updates"] - 1) < 0.05
    assert abs(paper["words_per_update"] / b.PAPER["words_per_update"] - 1) < 0.05
    assert quick["updates"] * 4 == paper["updates"]
    assert rows[2]["updates_per_epoch"] == 71 and rows[2]["words_per_update"] > 1.9 * paper["words_per_update"]


def test_budget_counts_the_updates_a_run_makes(tmp_path):
    for mods in (None, "no-parallel"):
        cfg, active = tiny(mods)
        planned = b.budget(cfg, active)
        run = tmp_path / (mods or "original")
        pretrain(cfg, active, run)
        meta = json.loads((run / "run.json").read_text())
        assert planned["updates"] == meta["total_steps"] == meta["steps"]
        assert planned["updates_per_epoch"] == meta["steps_per_epoch"]
    # no-parallel: each language half the sentences, twice the epochs
    base, half = b.budget(*tiny()), b.budget(*tiny("no-parallel"))
    assert half["sequences"] * 2 == base["sequences"] and half["epochs"] == 2 * base["epochs"]


def test_paper_budget_follows_design():
    assert b.PAPER["updates_per_epoch"] == 135 and b.PAPER["updates"] == 13_500  # ceil(2 x 17,178 / 256)


# --- masking mix ----------------------------------------------------------------------------------

def test_explicit_mask_probs_win_over_a_masking_mods_mix():
    assert tiny("no-random")[0].mask.probs == (0.8, 0.2, 0.0, 0.0)
    assert tiny("no-random", **{"mask.probs": "0.9,0.1,0,0"})[0].mask.probs == (0.9, 0.1, 0.0, 0.0)
    assert tiny("knn-replace=3", **{"mask.probs": "0.5,0.16,0.1,0.24"})[0].mask.probs == (0.5, 0.16, 0.1, 0.24)
    assert tiny(None, **{"mask.probs": "0.9,0.1,0,0"})[0].mask.probs == (0.9, 0.1, 0.0, 0.0)
    # a key no mod declared overridable keeps the mod's value: no-parallel still doubles --set epochs
    assert tiny("no-parallel", **{"train.epochs": 3})[0].train.epochs == 6


def test_published_preset_trains_as_the_published_code():
    """`published` is the paper's budget with every published-code choice the lab has as a setting, and the
    masking mods take the code's mixes there (an explicit mix still wins); the lab's default keeps the text's."""
    cfg, _ = resolve("published")
    paper, _ = resolve("paper")
    assert (cfg.train.batching, cfg.train.attention, cfg.mask.selection) == ("random", "attend-padding", "bernoulli")
    assert cfg.train.batch_size == paper.train.batch_size and cfg.train.epochs == paper.train.epochs
    assert (cfg.train.precision, paper.train.precision) == ("fp32", "auto")  # the code never passes --fp16
    assert cfg.model.padding_idx == 0 and cfg.mask.probs == (0.8, 0.1, 0.1, 0.0)
    assert resolve("published", mods="no-random")[0].mask.probs == (0.9, 0.1, 0.0, 0.0)
    assert resolve("published", mods="knn-replace")[0].mask.probs == (0.5, 0.16, 0.1, 0.24)
    assert resolve("published", {"mask.probs": "0.8,0.2,0,0"}, "no-random")[0].mask.probs == (0.8, 0.2, 0.0, 0.0)
    assert tiny("no-random", **{"mask.mixes": "code"})[0].mask.probs == (0.9, 0.1, 0.0, 0.0)
    assert tiny("knn-replace")[0].mask.probs == (0.5, 0.1, 0.1, 0.3)
    with pytest.raises(MinimultError, match="unknown mask.mixes 'paper'; valid: text, code"):
        tiny(None, **{"mask.mixes": "paper"})


def test_a_config_from_before_mask_mixes_keeps_its_fingerprint():
    """Runs made before `mask.mixes` existed are one setting with runs made after, at the default."""
    from minimult.config import comparable

    cfg = tiny("no-random")[0].to_dict()
    old = json.loads(json.dumps(cfg))
    del old["mask"]["mixes"]
    assert comparable(cfg) == comparable(old) == old | {"data": comparable(old)["data"]}
    assert "mixes" in comparable(tiny("no-random", **{"mask.mixes": "code"})[0].to_dict())["mask"]


@pytest.mark.parametrize("mods, probs, fragment", [
    ("no-random", "0.8,0.1,0.1,0", "its random and knn shares must be 0"),
    ("knn-replace", "0.8,0.1,0.1,0", "never replaces a token by a neighbour"),
])
def test_mask_probs_that_contradict_the_mod_are_refused(mods, probs, fragment):
    with pytest.raises(MinimultError, match=fragment):
        tiny(mods, **{"mask.probs": probs})


def test_grid_setting_with_its_own_mix_resolves_it():
    from minimult.sweep.grid import load_grid

    grid = load_grid(ROOT / "experiments" / "fidelity.toml")
    setting = next(s for s in grid.settings if s.id == "4p")
    cfg, _ = resolve("quick-b256", grid.overrides_for(setting, "quick-b256"), setting.mods)
    assert cfg.mask.probs == (0.9, 0.1, 0.0, 0.0) and cfg.mods == "no-random"


# --- batching -------------------------------------------------------------------------------------

def test_random_batches_cover_every_sequence_once_and_mix_lengths():
    lengths = np.random.default_rng(0).integers(1, 60, size=1000)
    plan = plan_epoch(lengths, 32, seed=1, epoch=0, batching="random")
    assert sorted(np.concatenate(plan).tolist()) == list(range(1000))
    assert len(plan) == steps_per_epoch(1000, 32, "random") == 32
    assert np.mean([lengths[x].max() - lengths[x].min() for x in plan]) > 40  # bucketed: < 10


def test_random_batches_rarely_hold_both_halves_of_a_pair():
    """Sequence i and i + n are one sentence in two languages: bucketing (same length) puts many pairs
    in one batch, random batches about batch/2n of them."""
    n = 2000
    lengths = np.tile(np.random.default_rng(0).integers(1, 60, size=n), 2)

    def together(batching):
        plan = plan_epoch(lengths, 64, seed=0, epoch=0, batching=batching)
        batch_of = np.empty(2 * n, dtype=int)
        for i, x in enumerate(plan):
            batch_of[x] = i
        return np.mean(batch_of[:n] == batch_of[n:])

    assert together("spread") == 0 and together("random") < 0.05 < 0.2 < together("bucket") < 1 == together("paired")


@pytest.mark.parametrize("n", [1000, 1001])
@pytest.mark.parametrize("batching, bucketed", [("spread", True), ("paired", False)])
def test_spread_and_paired_batches_cover_every_sequence_once(n, batching, bucketed):
    """spread: as tightly length-bucketed as bucket; paired: lengths mixed as in random batches."""
    lengths = np.random.default_rng(0).integers(1, 60, size=n)
    plan = plan_epoch(lengths, 32, seed=1, epoch=3, batching=batching)
    assert sorted(np.concatenate(plan).tolist()) == list(range(n))
    assert len(plan) == steps_per_epoch(n, 32, batching)
    length_range = np.mean([lengths[x].max() - lengths[x].min() for x in plan])
    assert length_range < 10 if bucketed else length_range > 40


@pytest.mark.parametrize("n", [64, 66, 96])
@pytest.mark.parametrize("batching", ["bucket", "random", "spread", "paired"])
def test_steps_per_epoch_counts_the_planned_batches(n, batching):
    """Also where the sequences fill whole batches (n a multiple of the batch size) and where spread's two
    groups each leave a part batch (66 = 2 x 33: 2 + 2 batches, not 3)."""
    lengths = np.random.default_rng(0).integers(1, 60, size=n)
    assert len(plan_epoch(lengths, 32, seed=1, epoch=0, batching=batching)) == steps_per_epoch(n, 32, batching)
    halves = -(-n // 2 // 32) * 2  # spread: each language's half (n/2) batched on its own
    assert steps_per_epoch(n, 32, batching) == (halves if batching == "spread" else -(-n // 32))


def test_spread_of_three_languages_keeps_its_groups_within_one_of_each_other():
    """14 sequences of 3 languages (4 sentences each, 2 left over): groups of 5, 5 and 4, each batched on its
    own (3 batches of 5 at most), no sentence's copies sharing a batch."""
    lengths = np.random.default_rng(0).integers(1, 60, size=14)
    plan = plan_epoch(lengths, 5, seed=1, epoch=0, batching="spread", languages=3)
    assert sorted(np.concatenate(plan).tolist()) == list(range(14))
    assert sorted(len(b) for b in plan) == [4, 5, 5] and len(plan) == steps_per_epoch(14, 5, "spread", languages=3)
    for b in plan:
        assert len(set((b[b < 12] % 4).tolist())) == len(b[b < 12])  # sentence i's copies are i, i + 4, i + 8


@pytest.mark.parametrize("batching", ["bucket", "spread"])
def test_bucketed_batches_come_in_shuffled_order(batching):
    """Bucketing sorts by length within a pool, but the batches are trained in random order, not shortest
    first: a batch is longer than the one before about half the time (in length order: nearly always)."""
    lengths = np.random.default_rng(0).integers(1, 60, size=1000)
    for epoch in range(3):
        means = np.array([lengths[b].mean() for b in plan_epoch(lengths, 32, seed=1, epoch=epoch, batching=batching)])
        assert 0.2 < np.mean(means[1:] > means[:-1]) < 0.8


def test_unknown_batching_is_refused():
    with pytest.raises(MinimultError, match="unknown train.batching 'sorted'; valid: bucket, random, spread, paired"):
        tiny(None, **{"train.batching": "sorted"})


# --- evaluation -----------------------------------------------------------------------------------

def test_no_parallel_scores_the_whole_parallel_corpus_too(tmp_path):
    cfg, active = tiny("no-parallel")
    pretrain(cfg, active, tmp_path / "np")
    run = Run.open(tmp_path / "np")
    results = evaluate_run(run, log=lambda s: None)
    seen, parallel = run.data.views("train"), run.data.views("train-parallel")
    assert [s.num_sentences for s in parallel] == [2 * s.num_sentences for s in seen]
    model = run.load_model("cpu")
    want = mlm_perplexity(model, parallel, run.data.layouts, results_ids(run), torch.device("cpu"))["perplexity"]
    assert results["perplexity"]["train_parallel"] == pytest.approx(want, rel=1e-6)
    assert results["perplexity"]["train"] != pytest.approx(want, rel=1e-3)

    cfg, active = tiny()
    pretrain(cfg, active, tmp_path / "orig")
    assert "train_parallel" not in evaluate_run(tmp_path / "orig", log=lambda s: None)["perplexity"]


def results_ids(run):
    from conftest import random_replacement_ids

    return random_replacement_ids(run.cfg.data.vocab_size, run.cfg.data.n_langs)


def test_evaluation_is_fp32_unless_bf16_is_asked(tmp_path):
    cfg, active = tiny(None, **{"model.layers": 8})
    pretrain(cfg, active, tmp_path / "r")
    fp32 = evaluate_run(tmp_path / "r", ppl_sentences=50, log=lambda s: None, write=False)
    bf16 = evaluate_run(tmp_path / "r", ppl_sentences=50, log=lambda s: None, write=False, precision="bf16")
    assert fp32["evaluation"]["precision"] == "fp32" and bf16["evaluation"]["precision"] == "bf16"
    assert not bf16["evaluation"]["complete"]
    # bf16 rounding moves the scores by a few items at most (here µ .028: one sentence of 200 is .0013 of µ)
    assert bf16["mu"] == pytest.approx(fp32["mu"], abs=0.01)
    for layer, scores in fp32["layers"].items():
        assert bf16["layers"][layer]["align_f1"] == pytest.approx(scores["align_f1"], abs=0.01), layer
    # the default representations are fp32 ones; bf16 autocast changes them by rounding only
    run = Run.open(tmp_path / "r")
    model, side = run.load_model("cpu"), run.data.views("dev")[0].subset(np.arange(50))
    default = piece_vectors(model, side, run.data.layouts, (8,), torch.device("cpu"))[8]
    with torch.autocast("cpu", enabled=False):
        plain = torch.cat([model.hidden_states(*batch_inputs(run, side, i), layers=(8,))[8][0, 1:-1]
                           for i in range(3)])
    assert torch.equal(default[: len(plain)], plain)
    rounded = piece_vectors(model, side, run.data.layouts, (8,), torch.device("cpu"), precision_="bf16")[8]
    assert not torch.equal(rounded, default) and torch.allclose(rounded, default, atol=0.1)


def batch_inputs(run, side, i):
    """Sentence i of `side` alone as model inputs (no padding)."""
    b = SequenceSet.from_sides([side], run.data.layouts, "cpu").batch(np.array([i]))
    return b.input_ids, b.position_ids, b.token_type_ids, None
