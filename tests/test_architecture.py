"""K et al.'s architecture settings (issue 17): sizes solved for a parameter count, µ's layers at any
depth, the permutation amount, the k-et-al grid, and the cost model behind the sweep's time estimate."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import TINY_SETTINGS
from minimult.cli import main
from minimult.config import RunConfig, resolve
from minimult.errors import MinimultError
from minimult.evaluate import evaluate_run
from minimult.evaluate import multilinguality
from minimult.evaluate.multilinguality import mu_layers
from minimult.model import Bert
from minimult.model_config import TARGET_TOLERANCE, ModelConfig, parameter_count
from minimult.mods import REGISTRY
from minimult.sweep.grid import load_grid

ROOT = Path(__file__).resolve().parents[1]
GRID = ROOT / "experiments" / "k-et-al.toml"


# ---------------------------------------------------------------------------------------------
# Sizes for a parameter count


@pytest.mark.parametrize("cfg", [
    ModelConfig(vocab_size=60, hidden=12, intermediate=48, heads=3, layers=2, max_positions=16),
    ModelConfig(vocab_size=60, hidden=8, intermediate=20, heads=2, layers=3, max_positions=32, type_vocab_size=0),
    ModelConfig(vocab_size=90, hidden=16, intermediate=64, heads=1, layers=1, max_positions=24, type_vocab_size=3,
                nsp=True),
], ids=["heads", "no-segments", "nsp"])
def test_parameter_count_is_the_built_models(cfg):
    assert parameter_count(cfg) == Bert(cfg).num_parameters() == sum(p.numel() for p in Bert(cfg).parameters())


def grid_configs():
    grid = load_grid(GRID)
    return {s.id: resolve(grid.preset, grid.overrides_for(s, grid.preset), s.mods)[0] for s in grid.settings}


def test_every_grid_point_lands_within_3_percent_with_heads_dividing_hidden():
    sized = {sid: cfg for sid, cfg in grid_configs().items() if cfg.model.target_params}
    assert len(sized) == 14  # depth 1, 2, 4, 6, 18; heads 2, 4, 8; four parameter counts; 1.75M and 3.5M at lr 1e-3
    for sid, cfg in sized.items():
        m = cfg.model
        built = Bert(m).num_parameters()  # the real model, embeddings, tied decoder and heads included
        assert abs(built / m.target_params - 1) <= TARGET_TOLERANCE == 0.03, (sid, built, m.target_params)
        assert m.hidden % m.heads == 0 and m.intermediate == 4 * m.hidden, sid


def test_the_grid_holds_the_papers_series():
    grid = load_grid(GRID)
    cfgs = grid_configs()
    # setting 0 is BERT-small, and the point where the series meet: ~880k at 12 layers and 1 head solves to it
    assert dataclasses.replace(cfgs["h8"].model, heads=1, target_params=0) == cfgs["0"].model
    assert (cfgs["0"].model.hidden, cfgs["0"].model.layers, cfgs["0"].model.heads) == (64, 12, 1)
    table1 = load_grid(ROOT / "experiments" / "table1.toml")
    for preset in ("quick", "paper", "tiny"):  # the same run folder as table1's 0 (transfer says how it is evaluated)
        theirs = resolve(preset, table1.overrides_for(table1.select(["0"]).settings[0], preset), "")[0].to_dict()
        ours = resolve(preset, grid.overrides_for(grid.select(["0"]).settings[0], preset), "")[0].to_dict()
        assert {**ours, "transfer": None} == {**theirs, "transfer": None}, preset
    assert sorted(c.model.layers for i, c in cfgs.items() if i.startswith("d")) == [1, 2, 4, 6, 18]
    assert sorted(c.model.heads for i, c in cfgs.items() if i.startswith("h")) == [2, 4, 8]
    assert {c.model.hidden for i, c in cfgs.items() if i.startswith("h")} == {64}  # only the heads change
    assert len({c.model.target_params for i, c in cfgs.items() if i.startswith("p")}) >= 3
    assert [cfgs[i].mods for i in ("w0.25", "w0.5", "w1", "u")] == ["permute=0.25", "permute=0.5", "permute=1.0",
                                                                    "unigram"]
    # Table 10: the units; only the data's tokenizer and the tables sized from it change (the position table
    # follows max_len), so the report's series code files them under tokenization
    tok = {i: cfgs[i] for i in ("t-char", "t-word")}
    assert {i: (c.data.tokenizer, c.data.vocab_size, c.data.max_len) for i, c in tok.items()} == {
        "t-char": ("char", 114, 349), "t-word": ("word", 3012, 128)}
    assert tok["t-char"].model.max_positions == 349 and tok["t-word"].model.max_positions == 128
    for i, c in tok.items():
        assert dataclasses.replace(c.model, vocab_size=cfgs["0"].model.vocab_size,
                                   max_positions=cfgs["0"].model.max_positions) == cfgs["0"].model, i
    from minimult.report.collect import Group, Run as StoredRun
    from minimult.report.series import classify

    group = lambda i: Group(i, i, "original", [StoredRun(Path(i), {}, cfgs[i].to_dict())])  # noqa: E731
    assert {i: classify(group(i), group("0")) for i in tok} == {"t-char": ("tokenization", "char"),
                                                                 "t-word": ("tokenization", "word")}
    assert all(classify(group(i), group("0")) is None or classify(group(i), group("0"))[0] != "tokenization"
               for i in cfgs if i not in tok and i != "0")
    for s in grid.settings:  # each setting names its table in K et al.
        assert s.id == "0" or s.name.split()[0] in {"T2", "T3", "T4", "T5", "T6", "T10"}, s.name
    assert all(c.transfer.enabled for c in cfgs.values())  # ∆, K et al.'s measure
    # each lr 1e-3 setting is its partner with half the learning rate and nothing else changed
    for lower, partner in (("0-lr", "0"), ("p1.75m-lr", "p1.75m"), ("p3.5m-lr", "p3.5m")):
        a, b = cfgs[lower].to_dict(), cfgs[partner].to_dict()
        assert (a["train"].pop("lr"), b["train"].pop("lr")) == (1e-3, 2e-3) and a == b, lower


def test_solved_sizes_are_stored_and_read_back_as_they_are():
    cfg, _ = resolve("paper", {"model.layers": 4, "model.target_params": 880_000})
    stored = cfg.to_dict()["model"]
    assert (stored["hidden"], stored["intermediate"], stored["target_params"]) == (97, 388, 880_000)
    assert RunConfig.from_dict(cfg.to_dict()).model == cfg.model  # config.json reproduces the model
    # a preset's sizes give way to the target; --set order does not matter (heads before the target)
    tiny, _ = resolve("tiny", {"model.heads": 3, "model.target_params": 104_000})
    assert (tiny.model.hidden, tiny.model.intermediate, tiny.model.layers) == (21, 84, 2)
    assert resolve("paper", {"model.heads": 3, "model.hidden": 48})[0].model.hidden == 48


@pytest.mark.parametrize("settings, mods, fragment", [
    ({"model.target_params": 880_000, "model.hidden": 32}, None, "drop model.hidden or the target"),
    ({"model.target_params": 880_000, "model.intermediate": 99}, None, "drop model.intermediate"),
    ({"model.target_params": 880_000}, "overparam", "--mods overparam sets the model's sizes"),
    ({"model.target_params": 5_000}, None, "too small"),  # the embedding tables alone are bigger
    ({"model.target_params": 600_000, "model.heads": 64}, None, "too small"),
    # 64 heads: hidden 64 (878,784) or 128 (~2.9M); nothing near 1.5M
    ({"model.target_params": 1_500_000, "model.heads": 64}, None, "no hidden size that 64 heads divide"),
    ({"model.target_params": -1}, None, "model.target_params must be >= 0"),
])
def test_impossible_sizes_are_one_clear_error(settings, mods, fragment):
    with pytest.raises(MinimultError, match=fragment):
        resolve("paper", settings, mods)
    args = [a for k, v in settings.items() for a in ("--set", f"{k}={v}")] + (["--mods", mods] if mods else [])
    result = CliRunner().invoke(main, ["pretrain", *args, "--out", "/nonexistent/never"])
    lines = [l for l in result.output.splitlines() if l.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error:") and fragment in lines[0]


def test_the_heads_error_names_the_nearest_sizes():
    with pytest.raises(MinimultError) as e:
        resolve("paper", {"model.target_params": 1_500_000, "model.heads": 64})
    assert "hidden 64 gives 878,784" in str(e.value) and "hidden 128 gives" in str(e.value)


# ---------------------------------------------------------------------------------------------
# µ's layers


def test_mu_layer_rule():
    assert mu_layers(12) == (0, 8)  # Table 1's definition, unchanged
    assert {d: mu_layers(d)[1] for d in (1, 2, 4, 6, 8, 18, 24)} == {1: 1, 2: 1, 4: 3, 6: 4, 8: 5, 18: 12, 24: 16}
    for d in range(1, 61):  # round(2/3 x depth), never a tie, always a layer of the model
        assert mu_layers(d)[1] == round(2 * d / 3) and 1 <= mu_layers(d)[1] <= d


def fake_ctx(depth, layers):
    scores = {str(l): {"translation": 0.1 * (l + 1), "retrieval": 0.2} for l in layers}
    return SimpleNamespace(model=SimpleNamespace(cfg=SimpleNamespace(layers=depth)), results={"layers": scores})


def test_mu_uses_and_records_the_depths_pair():
    got = multilinguality.run(fake_ctx(18, (0, 8, 12)))
    assert got["mu_layers"] == [0, 12] and got["mu"] == pytest.approx((0.1 + 1.3 + 0.2 + 0.2) / 4)
    assert multilinguality.run(fake_ctx(18, (0, 8))) == {"mu": None, "mu_layers": [0, 12]}  # layer 12 missing
    assert multilinguality.run(fake_ctx(12, (0, 8)))["mu"] == pytest.approx((0.1 + 0.9 + 0.4) / 4)


def test_mu_averages_both_scores_at_both_layers_and_needs_translation():
    """µ = (τ0 + τT + ρ0 + ρT) / 4 with every score its own layer's; no τ (no dictionary): no µ, not an error."""
    layers = {"0": {"translation": 0.1, "retrieval": 0.3}, "3": {"translation": 0.5, "retrieval": 0.9}}
    ctx = SimpleNamespace(model=SimpleNamespace(cfg=SimpleNamespace(layers=4)), results={"layers": layers})
    assert multilinguality.run(ctx)["mu"] == pytest.approx((0.1 + 0.5 + 0.3 + 0.9) / 4)
    for l in ("0", "3"):
        layers[l]["translation"] = None
    assert multilinguality.run(ctx) == {"mu": None, "mu_layers": [0, 3]}


def test_a_shallow_run_is_evaluated_at_its_mu_layers(tmp_path):
    from minimult.runs import Run
    from minimult.train import train

    cfg, active = resolve("tiny", {**TINY_SETTINGS, "model.layers": 3, "data.dev_sentences": 60}, "untrained")
    run = Run.create_at(tmp_path / "r", cfg, log=lambda s: None)
    train([run], log=lambda s: None)
    r = evaluate_run(run, log=lambda s: None)
    assert set(r["layers"]) == {"0", "2"} and r["mu_layers"] == [0, 2] and r["mu"] is not None
    assert r["evaluation"]["complete"]


def test_report_shows_the_runs_mu_layer():
    from minimult.report.tables import layers_note, top_layer

    def run(layers, pair=None):
        return SimpleNamespace(results={"layers": dict.fromkeys(layers, {}), **({"mu_layers": pair} if pair else {})})

    assert top_layer([run(("0", "5"), [0, 5])] * 2) == "5"  # 8-layer models
    assert "round(2/3 × depth)" in layers_note([run(("0", "5"), [0, 5])], "5")
    assert top_layer([run(("0", "8"))]) == "8"  # results from before mu_layers: µ was at 8
    assert top_layer([run(("0", "8"), [0, 8]), run(("0", "3"), [0, 3])]) == "8"  # mixed depths: the paper's
    # a 2-layer run beside 8-layer ones (the quickstart's and the tiny grid's): the most runs' layer, not common 0
    assert top_layer([run(("0", "1"), [0, 1]), *[run(("0", "5"), [0, 5])] * 2]) == "5"
    assert top_layer([run(("0", "1"), [0, 1]), run(("0", "5"), [0, 5])]) == "5"  # a tie: the deeper
    three = SimpleNamespace(results={"layers": {"0": {}, "5": {}}, "mu_layers": [0, 5],
                                     "pairs": {"en-xx": {}, "en-yy": {}}})
    assert "shows its first pair (en-xx)" in layers_note([three, run(("0", "5"), [0, 5])], "5")
    assert "pair" not in layers_note([run(("0", "5"), [0, 5])], "5")
    assert "each model's own" in layers_note([run(("0", "8"), [0, 8]), run(("0", "3"), [0, 3])], "8")


# ---------------------------------------------------------------------------------------------
# Permutation amount


class CountingRng:
    """A numpy Generator that records the pairs `choice` draws."""

    def __init__(self, seed):
        self.rng, self.pairs = np.random.default_rng(seed), []

    def choice(self, n, size, replace):
        pair = self.rng.choice(n, size=size, replace=replace)
        self.pairs.append((int(pair[0]), int(pair[1]), size, replace))
        return pair


@pytest.mark.parametrize("p", [0.25, 0.5, 1.0])
def test_permute_swaps_exactly_round_p_L_over_2_pairs(p):
    reorder = REGISTRY["permute"].reorder
    for length in range(0, 41):
        rng = CountingRng(length)
        perm = reorder(length, rng, p)
        n = round(p * length / 2) if length >= 2 else 0
        assert len(rng.pairs) == n, (length, p)
        expected = np.arange(length)
        for i, j, size, replace in rng.pairs:  # two different positions each, applied in order
            assert size == 2 and replace is False and i != j
            expected[i], expected[j] = expected[j], expected[i]
        assert np.array_equal(perm, expected)
    # Python's round halves to even: 25% of L/2 is 0.5 pair for 4 pieces -> 0, 1.5 for 12 -> 2, 2.5 for 20 -> 2
    counts = {}
    for length in (4, 12, 20):
        rng = CountingRng(0)
        reorder(length, rng, 0.25)
        counts[length] = len(rng.pairs)
    assert counts == {4: 0, 12: 2, 20: 2}


# ---------------------------------------------------------------------------------------------
# Time per run: the cost model behind the sweep's estimate


def test_the_cost_model_counts_the_units_of_each_granularity():
    from minimult.sweep.progress import TYPICAL_LENGTH, run_cost, token_cost

    cfgs = grid_configs()
    base, char, word = (cfgs[i].to_dict() for i in ("0", "t-char", "t-word"))
    # wordpiece runs cost what they did before the units counted (epochs x work per token)
    assert run_cost(base) == base["train"]["epochs"] * token_cost(base["model"]) == \
        run_cost({**base, "data": {k: v for k, v in base["data"].items() if k != "tokenizer"}})
    # characters: 786,521 units for 238,980 word-pieces on BBE NT, each in ~3.3x longer sequences, so more
    # than 3.29x the work with the same transformer (the smaller vocabulary saves only the MLM head's share)
    same_vocab = {**char, "model": {**char["model"], "vocab_size": base["model"]["vocab_size"]}}
    assert run_cost(same_vocab) > 786_521 / 238_980 * run_cost(base)
    assert run_cost(char) > 3 * run_cost(base)
    assert token_cost(char["model"], 2 + (TYPICAL_LENGTH - 2) * 786_521 / 238_980) * 786_521 / 238_980 * \
        char["train"]["epochs"] == pytest.approx(run_cost(char))
    # words: slightly fewer units than word-pieces, a larger vocabulary
    assert 0.9 < run_cost(word) / run_cost(base) < 1.2
    # the typical length is at most max_len: a short window bounds a char run's sequences
    capped = {**char, "data": {**char["data"], "max_len": 40}}
    assert run_cost(capped) < run_cost(char)


def test_cost_grows_with_size_and_weights_the_sweeps_estimate(tmp_path):
    from minimult.sweep.progress import SweepProgress, run_cost, token_cost
    from minimult.train import fmt_time

    cfgs = grid_configs()
    cost = {i: token_cost(c.model) for i, c in cfgs.items()}
    assert cost["p250k"] < cost["p500k"] < cost["0"] < cost["p1.75m"] < cost["p3.5m"]
    assert cost["0"] < cost["h2"] < cost["h4"] < cost["h8"]  # same matmuls, more attention heads
    assert cost["d1"] < cost["d2"] < cost["d4"] < cost["d6"] < cost["0"] < cost["d18"]
    small, big = (cfgs[i].to_dict() for i in ("0", "p3.5m"))
    assert run_cost({**small, "train": {**small["train"], "epochs": 50}}) == 2 * run_cost(small)
    # one finished BERT-small run of 1,000 s: a queued run of the 3.5M model is expected to take longer
    tasks = [SimpleNamespace(run_dir=str(tmp_path / n), config=c) for n, c in (("a", small), ("b", big))]
    lines = []
    progress = SweepProgress(tasks, workers=1, run_log="sweep.log", log=lines.append, every=0)
    progress.finished(SimpleNamespace(task=tasks[0], status="done", message="new run", seconds=1000.0))
    progress.tick()
    assert lines[0].endswith(f"~{fmt_time(1000 * run_cost(big) / run_cost(small))} left")
    assert run_cost(big) > 3 * run_cost(small)
