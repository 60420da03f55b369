"""The Python API (minimult/api.py) on the CLI's code paths: docs/api.md's code blocks run as written, and a
run made through the API equals one made through `minimult pretrain` (same weights, same results)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
import torch

from conftest import ROOT, TINY_SETTINGS, cli
from minimult import api
from minimult.errors import MinimultError


def test_the_docs_examples_run_as_written(tmp_path, monkeypatch):
    """Every ```python block of docs/api.md, in order, in one namespace, from a fresh folder (the committed results
    folder linked in), and what they print is what the new run and the committed runs hold."""
    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "results").symlink_to(ROOT / "experiments" / "results")
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "api.md").read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 3
    printed: list[str] = []
    namespace = {"print": lambda *a: printed.append(" ".join(map(str, a)))}
    for block in blocks:
        exec(compile(block, "docs/api.md", "exec"), namespace)
    assert re.fullmatch(r"µ \d\.\d{3} at layers \[0, 1\], dev perplexity \d+", printed[0]), printed
    assert printed[1] == str([("lang-pos", 0, round(namespace["results"]["mu"], 3))])
    assert (tmp_path / "exports" / "lp" / "config.json").is_file()
    assert (tmp_path / "runs" / "lp" / "results.json").is_file()
    table1 = ROOT / "experiments" / "results" / "table1-paper"  # each row's seeds in order, seed 0 first
    mu = {i: round(json.loads((table1 / f"{i}-{m}-s0" / "results.json").read_text())["mu"], 3)
          for i, m in (("0", "original"), ("1", "lang-pos"))}
    assert printed[2].startswith(f"{{'0': [{mu['0']}, ") and f"'1': [{mu['1']}, " in printed[2]


def weights(run: Path) -> str:
    state = torch.load(run / "checkpoint.pt", map_location="cpu", weights_only=False)["model"]
    return hashlib.sha256(b"".join(v.contiguous().numpy().tobytes() for _, v in sorted(state.items()))).hexdigest()


def test_a_run_made_through_the_api_is_the_run_the_cli_makes(tmp_path):
    sets = [a for k, v in TINY_SETTINGS.items() for a in ("--set", f"{k}={v}")]
    result = cli("pretrain", "--preset", "tiny", "--mods", "shift-special", "--seed", "3", *sets, "--out", tmp_path / "cli")
    assert result.returncode == 0, result.stdout + result.stderr
    run = api.pretrain(mods="shift-special", preset="tiny", seed=3, settings=TINY_SETTINGS, out=tmp_path / "api",
                       log=lambda s: None)
    assert weights(run) == weights(tmp_path / "cli")
    got = api.evaluate(run, log=lambda s: None)
    assert cli("eval", tmp_path / "cli").returncode == 0
    want = json.loads((tmp_path / "cli" / "results.json").read_text())
    assert got["mu"] == want["mu"] and got["perplexity"] == want["perplexity"]
    again = api.evaluate(run, layers="0,1", only="alignment", log=lambda s: None)  # as --layer 0,1
    assert again["layers"]["1"]["align_f1"] == got["layers"]["1"]["align_f1"]
    with pytest.raises(MinimultError, match="bad --layer '0;1'"):
        api.evaluate(run, layers="0;1", log=lambda s: None)
    with pytest.raises(MinimultError, match="unknown mod"):
        api.pretrain(mods="lang-position", preset="tiny", out=tmp_path / "bad", log=lambda s: None)
    assert not (tmp_path / "bad").exists()
    for bad, said in (({"stop_after": 0}, "stop_after"), ({"stop_after": -5}, "stop_after"),
                      ({"settings": ["train.lr=1"]}, "settings must be a dict"),
                      ({"settings": {**TINY_SETTINGS, "train.epochs": True}}, "bad value for train.epochs")):
        with pytest.raises(MinimultError, match=said):  # as the CLI refuses them, nothing trained or kept
            api.pretrain(**{"preset": "tiny", "settings": TINY_SETTINGS, "out": tmp_path / "bad", "log": lambda s: None,
                            **bad})
        assert not (tmp_path / "bad").exists()
    with pytest.raises(MinimultError, match="removed: nothing was trained in it"):  # made, then failed before training
        api.pretrain(mods="knn-replace", preset="tiny", settings={**TINY_SETTINGS, "knn.dim": 400}, out=tmp_path / "bad",
                     log=lambda s: None)
    assert not (tmp_path / "bad").exists()
    said = []  # the two runs are one seed of one setting: one row, and the other named, as the report names it
    rows = api.results(tmp_path, log=said.append)
    assert [r["run"] for r in rows] == [str(tmp_path / "api")]
    assert said == [f"Left out of shift-special: cli, a second run of seed 3 beside {tmp_path / 'api'}."]
