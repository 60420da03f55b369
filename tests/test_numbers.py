"""The numbers guard: tiny runs of a few settings reproduce stored results, so a refactor that changes
a number fails here (the full bit-for-bit check is `experiments/gate.py`, run before and after).

Runs use the shipped tiny corpus and its shipped WordPiece vocabulary (`corpora/vocabularies`): HF's
trainer breaks ties in hash order, so a fresh build would change the token ids and every number
(README, known differences). The tolerances leave room for another CPU's float round-off, not for a
changed computation: a changed mask, order or schedule moves the loss by far more than 1e-3.

Regenerate the stored values (after a change that is meant to change numbers) with
`MINIMULT_REGENERATE_NUMBERS=1 ./test.sh tests/test_numbers.py`, and say why in the commit.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import TINY_SETTINGS

DATA = Path(__file__).resolve().parent / "data"
STORED = DATA / "numbers.json"
SETTINGS = ["original", "lang-pos", "shift-special,inv-order", "no-random,no-parallel"]
LAYERS = (0, 2)


@pytest.fixture(scope="module")
def numbers(tmp_path_factory):
    from minimult.config import resolve
    from minimult.evaluate import evaluate_run
    from minimult.runs import Run
    from minimult.train import train

    tmp = tmp_path_factory.mktemp("numbers")
    mp = pytest.MonkeyPatch()
    mp.setenv("MINIMULT_CACHE", str(tmp / "cache"))  # a cache of its own, built here
    out = {}
    try:
        for spec in SETTINGS:
            cfg, active = resolve("tiny", TINY_SETTINGS, None if spec == "original" else spec)
            run = Run.create(cfg, active, tmp / spec.replace(",", "+"), log=lambda s: None)
            train([run], log=lambda s: None)
            r = evaluate_run(run, LAYERS, log=lambda s: None, write=False)
            losses = [json.loads(line)["loss"] for line in run.metrics_path.read_text().splitlines()]
            out[spec] = {"final_loss": losses[-1], "perplexity": r["perplexity"],
                         "layers": {l: {k: r["layers"][l][k] for k in ("align_f1", "retrieval", "translation")}
                                    for l in map(str, LAYERS)}}
    finally:
        mp.undo()
    if os.environ.get("MINIMULT_REGENERATE_NUMBERS"):
        STORED.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
        pytest.skip(f"regenerated {STORED}: compared with nothing this time")
    return out


@pytest.mark.parametrize("spec", SETTINGS)
def test_tiny_runs_reproduce_the_stored_numbers(numbers, spec):
    stored, got = json.loads(STORED.read_text())[spec], numbers[spec]
    assert got["final_loss"] == pytest.approx(stored["final_loss"], rel=1e-3)
    for split in ("train", "dev"):
        assert got["perplexity"][split] == pytest.approx(stored["perplexity"][split], rel=1e-3)
    for layer, scores in stored["layers"].items():
        for name, value in scores.items():  # 1e-3: under one retrieval hit (1/200) or dictionary entry
            assert got["layers"][layer][name] == pytest.approx(value, abs=1e-3), (layer, name)


def test_the_settings_differ_from_each_other(numbers):
    """The guard guards something: the stored settings give different numbers."""
    losses = [numbers[s]["final_loss"] for s in SETTINGS]
    assert len({round(x, 4) for x in losses}) == len(SETTINGS)
