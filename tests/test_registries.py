"""What is derived from the registries (mods, evaluators, sources, presets): a throwaway evaluator's numbers
reach every list that names evaluators without a line elsewhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from minimult.config import resolve
from minimult.evaluate import summary_table
from minimult.evaluate.registry import REGISTRY as EVALUATORS, Column, Evaluator
from minimult.runs import Run, block_keys

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def toy_evaluator(monkeypatch):
    """A registered evaluator of one per-layer and one scalar column, for this test only."""
    toy = Evaluator("toy", "a throwaway evaluator", 1, order=50, run=lambda ctx: {},
                    columns=(Column("toy_layer", "toy per layer", per_layer=True), Column("toy_score", "toy score")),
                    keys=("toy_count",))
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


def test_evaluation_blocks_keep_what_the_evaluators_declare(toy_evaluator, tmp_path):
    run = Run(tmp_path, resolve("tiny")[0])
    for complete in (True, False):
        run.write_results({"evaluation": {"complete": complete}, "run": "runs/x", "steps": 1, "layers": {},
                           "toy_score": 0.5, "toy_count": 3, "toy_note": "top only", "eval_seconds": 1.0})
    blocks = json.loads((tmp_path / "results.json").read_text())["evaluations"]
    assert [set(b) for b in blocks] == [{"evaluation", "steps", "layers", "toy_score", "toy_count", "eval_seconds"}] * 2


def test_committed_evaluation_blocks_hold_only_derived_keys():
    """A results key dropped from the evaluators' declarations would vanish from every later evaluation block."""
    kept = set(block_keys())
    for path in sorted(ROOT.glob("experiments/results/*/*/results.json")):
        for block in json.loads(path.read_text()).get("evaluations", []):
            assert set(block) <= kept, (path, set(block) - kept)


@pytest.mark.parametrize("command, option", [("pretrain", "--source"), ("prepare", "--preset"), ("sweep", "--preset"),
                                             ("eval", "--only"), ("eval", "--pair")])
def test_help_lists_what_the_registries_hold(toy_evaluator, command, option):
    from click.testing import CliRunner

    from minimult.cli import main
    from minimult.config import PRESETS, DataConfig
    from minimult.data import sources
    from minimult.evaluate.registry import text_evaluators

    expected = {"--source": [f"{n}{' (default)' if n == DataConfig.source else ''}: {s.description}" for n, s in sources.REGISTRY.items()],
                "--preset": [" | ".join(PRESETS)], "--only": [e for e in EVALUATORS],
                "--pair": [", ".join(text_evaluators())]}[option]
    assert "toy" in text_evaluators()  # needs nothing: runs on any pair of texts
    out = CliRunner().invoke(main, [command, "--help"], terminal_width=10_000).output  # no line wrapped
    help = " ".join(out.split(f"\n  {option}", 1)[1].split("\n  -", 1)[0].split())  # the option's help text
    assert all(x in help for x in expected), (help, expected)
