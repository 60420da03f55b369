"""experiments/analyses/lang_pos_floor.py: on run folders whose curves, ends and configs are known, which runs it
reads, how many runs the best cut on the curve misplaces at each update, and which same-seed runs end on the
same side of the floor and started from the same weights."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from minimult.config import resolve

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "experiments" / "analyses" / "lang_pos_floor.py"
spec = importlib.util.spec_from_file_location("lang_pos_floor", SCRIPT)
lang_pos_floor = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lang_pos_floor)


def folder(root: Path, name: str, mods: str, steps: int, curve: dict[int, float], final: float | None,
           config: dict | None = None) -> None:
    run = root / name
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"mods": mods, "total_steps": steps}))
    rows = [{"step": s, "loss": 3.0} for s in curve] + [{"step": s, "eval": {"mu": m}} for s, m in curve.items()]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if final is not None:
        (run / "results.json").write_text(json.dumps({"mu": final}))
    if config is not None:
        (run / "config.json").write_text(json.dumps(config))


def test_the_cut_that_misplaces_fewest_runs(tmp_path):
    folder(tmp_path, "a", "lang-pos", 20, {10: 0.06, 20: 0.02}, 0.01)  # high early, ends on the floor
    folder(tmp_path, "b", "lang-pos,no-random", 20, {10: 0.03, 20: 0.30}, 0.40)  # low early, ends off it
    folder(tmp_path, "c", "lang-pos", 20, {10: 0.01, 20: 0.01}, 0.00)
    folder(tmp_path, "d", "original", 20, {10: 0.5, 20: 0.6}, 0.6)  # not lang-pos
    folder(tmp_path, "e", "lang-pos,untrained", 0, {0: 0.0}, 0.0)  # never trained
    folder(tmp_path, "f", "lang-pos", 20, {10: 0.2}, None)  # not evaluated yet
    runs = lang_pos_floor.lang_pos_runs([tmp_path])
    assert [r["name"] for r in runs] == ["a", "b", "c"]
    early, late = (lang_pos_floor.separation(runs, u) for u in (10, 20))
    assert (early["floor"], early["off"], early["floor_max"], early["off_min"]) == (2, 1, 0.06, 0.03)
    assert early["misplaced"] == 1  # a cut at .03 puts a with b, one at .06 or above puts b with a and c
    assert (late["floor_max"], late["off_min"], late["misplaced"]) == (0.02, 0.30, 0)


def test_same_seed_runs_in_two_folders(tmp_path):
    """One seed under two recipes starts from equal weights (the recipe acts after initialisation); another
    seed does not. Each pair is judged by the side of the floor its two runs end on."""
    lab, published = tmp_path / "lab", tmp_path / "published"
    config = {(preset, seed): resolve("tiny" if preset == "lab" else "published", {"train.seed": seed,
              "model.hidden": 16, "model.intermediate": 32, "model.layers": 1, "model.heads": 1}, "lang-pos")[0]
              .to_dict() for preset in ("lab", "published") for seed in (0, 1)}
    folder(lab, "1-s0", "lang-pos", 20, {10: 0.01}, 0.01, config["lab", 0])
    folder(published, "1-s0", "lang-pos", 20, {10: 0.2}, 0.40, config["published", 0])
    folder(lab, "1-s1", "lang-pos", 20, {10: 0.2}, 0.30, config["lab", 1])
    folder(published, "1-s1", "lang-pos", 20, {10: 0.2}, 0.20, config["published", 0])  # seed 0's weights
    folder(lab, "only-here", "lang-pos", 20, {10: 0.2}, 0.30)
    pairs = lang_pos_floor.same_seed(lang_pos_floor.lang_pos_runs([lab, published]), weights=True)
    assert [(p["name"], p["final"], p["agree"], p["same_weights"]) for p in pairs] == [
        ("1-s0", {"lab": 0.01, "published": 0.40}, False, True),
        ("1-s1", {"lab": 0.30, "published": 0.20}, True, False)]
