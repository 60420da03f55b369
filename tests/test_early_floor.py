"""experiments/analyses/early_floor.py: on run folders whose curves and ends are known, which runs it reads
and how many runs the best cut on the curve misplaces at each update."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "experiments" / "analyses" / "early_floor.py"
spec = importlib.util.spec_from_file_location("early_floor", SCRIPT)
early_floor = importlib.util.module_from_spec(spec)
spec.loader.exec_module(early_floor)


def folder(root: Path, name: str, mods: str, steps: int, curve: dict[int, float], final: float | None) -> None:
    run = root / name
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"mods": mods, "total_steps": steps}))
    rows = [{"step": s, "loss": 3.0} for s in curve] + [{"step": s, "eval": {"mu": m}} for s, m in curve.items()]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if final is not None:
        (run / "results.json").write_text(json.dumps({"mu": final}))


def test_the_cut_that_misplaces_fewest_runs(tmp_path):
    folder(tmp_path, "a", "lang-pos", 20, {10: 0.06, 20: 0.02}, 0.01)  # high early, ends on the floor
    folder(tmp_path, "b", "lang-pos,no-random", 20, {10: 0.03, 20: 0.30}, 0.40)  # low early, ends off it
    folder(tmp_path, "c", "lang-pos", 20, {10: 0.01, 20: 0.01}, 0.00)
    folder(tmp_path, "d", "original", 20, {10: 0.5, 20: 0.6}, 0.6)  # not lang-pos
    folder(tmp_path, "e", "lang-pos,untrained", 0, {0: 0.0}, 0.0)  # never trained
    folder(tmp_path, "f", "lang-pos", 20, {10: 0.2}, None)  # not evaluated yet
    runs = early_floor.lang_pos_runs([tmp_path])
    assert [r["run"].split("/")[-1] for r in runs] == ["a", "b", "c"]
    early, late = (early_floor.separation(runs, u) for u in (10, 20))
    assert (early["floor"], early["off"], early["floor_max"], early["off_min"]) == (2, 1, 0.06, 0.03)
    assert early["misplaced"] == 1  # a cut at .03 puts a with b, one at .06 or above puts b with a and c
    assert (late["floor_max"], late["off_min"], late["misplaced"]) == (0.02, 0.30, 0)
