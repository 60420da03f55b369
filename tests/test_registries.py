"""What is derived from the registries (mods, evaluators, sources, presets): a throwaway evaluator's numbers
reach every list that names evaluators without a line elsewhere."""

from __future__ import annotations

import pytest

from minimult.evaluate import summary_table
from minimult.evaluate.registry import REGISTRY as EVALUATORS, Column, Evaluator


@pytest.fixture
def toy_evaluator(monkeypatch):
    """A registered evaluator of one per-layer and one scalar column, for this test only."""
    toy = Evaluator("toy", "a throwaway evaluator", 1, order=50, run=lambda ctx: {},
                    columns=(Column("toy_layer", "toy per layer", per_layer=True), Column("toy_score", "toy score")))
    monkeypatch.setitem(EVALUATORS, "toy", toy)
    return toy


def test_eval_printout_shows_a_new_evaluators_columns(toy_evaluator):
    results = {"run": "runs/x", "mods": "original", "seed": 0, "dev_sentences": 2,
               "layers": {"0": {"toy_layer": 0.5, "retrieval": None}, "2": {"toy_layer": 0.25, "retrieval": 0.75}},
               "toy_score": 0.125}
    lines = summary_table(results).splitlines()
    assert lines[1].split() == ["layer", "ρ", "toy", "per", "layer"]  # registry order; absent columns left out
    assert lines[2].split() == ["0", "-", "0.500"] and lines[3].split() == ["2", "0.750", "0.250"]
    assert lines[4:] == ["toy score 0.125"]  # evaluators whose part is missing print nothing
