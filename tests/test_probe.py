"""The language-ID probe (Wu & Dredze 2019): a logistic regression that separates what is separable and no
more, per layer, on held-out pairs; `minimult probe RUN` and `eval --only` fill it into results.json."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from conftest import cli
from minimult.data.languages import Side
from minimult.evaluate import evaluate_run
from minimult.evaluate.linear import fit_logistic
from minimult.evaluate.probe import held_out, language_id
from test_evaluate import make_run


def fit(x, y, classes=2):
    return fit_logistic(x, y, x, y, classes, grid=(1e-3,))


def test_logistic_regression_separates_what_is_separable_only():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(600, 8, generator=g)
    y = (x[:, 2] > 0).long()
    x[:, 2] += y - 0.5  # a margin of one unit between the classes
    assert fit(x[:400], y[:400]).accuracy(x[400:], y[400:]) == 1.0
    same = torch.cat([x, x])  # identical inputs with different labels: every pair gets one right
    labels = torch.cat([torch.zeros(600), torch.ones(600)]).long()
    assert fit(same, labels).accuracy(same, labels) == 0.5
    three = torch.randint(0, 3, (300,), generator=g)
    hot = torch.nn.functional.one_hot(three).float()
    assert fit(hot, three, 3).accuracy(hot, three) == 1.0


def sides(n=200, vocab=50, seed=0):
    """Two parallel Sides: English ids in 0..vocab-1 and their copies shifted by vocab."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 12, n)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    ids = rng.integers(0, vocab, offsets[-1]).astype(np.int32)
    make = lambda lang, x: Side(lang, x, offsets, np.ones(len(x), bool), np.arange(n), np.arange(len(x)) * 0)
    return [make(0, ids), make(1, ids + vocab)]


def test_probe_is_perfect_on_disjoint_ids_and_chance_on_identical_vectors():
    en, l1 = sides()
    one_hot = lambda s, layers: {l: torch.nn.functional.one_hot(torch.as_tensor(s.ids, dtype=torch.long), 100).float()
                                 for l in layers}
    folded = lambda s, layers: {l: torch.nn.functional.one_hot(torch.as_tensor(s.ids % 50, dtype=torch.long), 100)
                                .float() for l in layers}  # both languages the same vectors
    apart = language_id([en, l1], one_hot, [0, 1], hidden=100)
    assert apart["sentence"] == [1.0, 1.0] and apart["token"] == [1.0, 1.0] and apart["layers"] == [0, 1]
    same = language_id([en, l1], folded, [0, 1], hidden=100)
    assert same["sentence"] == [0.5, 0.5] and same["token"] == [0.5, 0.5] and same["lowest_sentence"] == 0.5


def test_held_out_pairs_are_a_fixed_quarter_on_both_sides():
    test = held_out(10)
    assert test.tolist() == [False, False, False, True] * 2 + [False, False]
    assert (held_out(10) == test).all()


@pytest.fixture(scope="module")
def untrained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("probe")
    return {m: make_run(tmp, m.replace(",", "+"), m) for m in ("untrained", "untrained,lang-pos")}


def test_lang_pos_makes_the_language_linearly_visible_from_layer_0(untrained):
    # under lang-pos each language has its own segment row: a constant offset a probe sees at once
    r = evaluate_run(untrained["untrained,lang-pos"], ppl_sentences=20, log=lambda s: None, only=("probe",))
    assert r["probe"]["layers"] == list(range(r["config"]["model"]["layers"] + 1))
    assert r["probe"]["sentence"][0] > 0.95 and r["probe"]["token"][0] > 0.95


def test_probe_command_fills_the_runs_results_and_bad_names_are_one_line(untrained, tmp_path):
    run = untrained["untrained"]
    evaluate_run(run, ppl_sentences=None, log=lambda s: None)  # a complete evaluation first
    before = json.loads((run / "results.json").read_text())
    proc = cli("probe", run, "--json", tmp_path / "p.json", "--png", tmp_path / "p.png")
    assert proc.returncode == 0, proc.stderr
    assert "| sentence |" in proc.stdout and (tmp_path / "p.png").stat().st_size > 0
    assert "dev sentences" in proc.stderr and "layers" not in proc.stderr  # it reads every layer, not µ's two
    after = json.loads((run / "results.json").read_text())
    assert after["probe"] == json.loads((tmp_path / "p.json").read_text())  # filled in at the top
    assert after["layers"] == before["layers"] and after["mu"] == before["mu"]  # the rest untouched
    assert after["evaluator_versions"]["probe"] == 1 and after["evaluations"][-1]["evaluation"]["only"] == ["probe"]
    proc = cli("eval", run, "--only", "probe,nope")
    assert proc.returncode != 0 and proc.stderr.strip().count("\n") == 0 and "unknown evaluator 'nope'" in proc.stderr
