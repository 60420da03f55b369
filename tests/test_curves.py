"""experiments/curves.py: the --eval-every curves of several runs side by side, one column per run and
metric, a run's cells empty where it has no evaluation at that update."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def write_curve(path: Path, mus: dict[int, float]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"step": 1, "loss": 3.0}, *({"step": s, "eval": {"mu": mu}} for s, mu in mus.items())]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def curves(*args) -> list[list[str]]:
    proc = subprocess.run([sys.executable, str(ROOT / "experiments" / "curves.py"), *map(str, args)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return [[c.strip() for c in line.strip("|").split("|")] for line in proc.stdout.splitlines()]


def test_runs_of_one_name_in_two_folders_keep_a_column_each(tmp_path):
    """The same setting in two results folders (e.g. a bucketed run in bf16 and one in fp32): both curves
    are shown, each labelled with its folder, not one hidden behind the other."""
    write_curve(tmp_path / "a" / "1-lang-pos-s0" / "metrics.jsonl", {10: 0.002, 20: 0.003})
    write_curve(tmp_path / "b" / "1-lang-pos-s0" / "metrics.jsonl", {10: 0.005, 20: 0.007, 30: 0.009})
    write_curve(tmp_path / "c" / "0r-original-s0.metrics.jsonl", {20: 0.25})
    head, _, *rows = curves(tmp_path / "a" / "1-lang-pos-s0", tmp_path / "b" / "1-lang-pos-s0",
                            tmp_path / "c" / "0r-original-s0.metrics.jsonl", "--metrics", "mu")
    assert head == ["update", "a/1-lang-pos-s0 mu", "b/1-lang-pos-s0 mu", "0r-original-s0 mu"]
    assert rows == [["10", "0.002", "0.005", ""], ["20", "0.003", "0.007", "0.250"], ["30", "", "0.009", ""]]


def test_a_missing_run_is_one_line_and_a_non_zero_exit(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "experiments" / "curves.py"), str(tmp_path / "nothing")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "nothing: neither a run folder with a metrics.jsonl nor a copy of one" in proc.stderr
