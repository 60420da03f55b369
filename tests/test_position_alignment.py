"""experiments/analyses/position_alignment.py: the cosine between the two languages' embeddings of one position,
on matrices whose answer is known and on a tiny lang-pos run's checkpoint."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "experiments" / "analyses" / "position_alignment.py"
spec = importlib.util.spec_from_file_location("position_alignment", SCRIPT)
position_alignment = importlib.util.module_from_spec(spec)
spec.loader.exec_module(position_alignment)


def test_same_position_cosine_of_copied_negated_and_shuffled_blocks():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(8, 16))
    same, other = position_alignment.cosines(np.vstack([A, 3 * A]), 8, 0, 8)  # a copy, scaled
    assert same == pytest.approx(1.0)
    assert other == pytest.approx(np.mean([np.dot(A[i], A[j]) / np.linalg.norm(A[i]) / np.linalg.norm(A[j])
                                           for i in range(8) for j in range(8) if i != j]))
    assert position_alignment.cosines(np.vstack([A, -A]), 8, 0, 8)[0] == pytest.approx(-1.0)
    B = np.vstack([A, np.roll(A, 1, axis=0)])  # position p of block 2 holds block 1's p-1
    same, _ = position_alignment.cosines(B, 8, 2, 6)
    assert same < 0.9 and position_alignment.cosines(np.vstack([A, A]), 8, 2, 6)[0] == pytest.approx(1.0)


def test_ranges_are_inclusive():
    assert position_alignment.parse_ranges("1-32,33-64,5") == [(1, 33), (33, 65), (5, 6)]


def test_a_tiny_lang_pos_run_measured_and_a_shared_positions_run_left_out(tmp_path):
    from conftest import TINY_SETTINGS
    from minimult.config import resolve
    from minimult.runs import Run, read_weights
    from minimult.train import train

    runs = {}
    for mods in ("lang-pos", ""):
        cfg, _ = resolve("tiny", {**TINY_SETTINGS, "train.epochs": 1}, mods=mods)
        runs[mods] = Run.create_at(tmp_path / (mods or "original"), cfg, log=lambda s: None)
        train([runs[mods]], log=lambda s: None)
    proc = subprocess.run([sys.executable, str(SCRIPT), str(runs["lang-pos"].path), str(runs[""].path),
                           "--ranges", "1-8", "--json"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)
    W = read_weights(runs["lang-pos"].path, [position_alignment.POSITIONS])[position_alignment.POSITIONS]
    per_lang = runs["lang-pos"].cfg.data.max_len
    assert W.shape[0] == 2 * per_lang
    assert (row["same 1-8"], row["other 1-8"]) == pytest.approx(position_alignment.cosines(W, per_lang, 1, 9))
    assert "one block of positions (no lang-pos), left out" in proc.stderr
