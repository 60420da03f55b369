"""experiments/bring_runs.py: finished runs of a sweep root into a results folder, without checkpoints, and a
manifest that lists only the runs that are there."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "experiments" / "bring_runs.py"


def _run(folder: Path, finished: bool) -> Path:
    """A run folder as a sweep leaves it: finished (trained and evaluated in full) or still training."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}\n")
    (folder / "metrics.jsonl").write_text('{"step": 10, "loss": 2.5}\n')
    (folder / "checkpoint.pt").write_bytes(b"\0" * 64)
    (folder / ".sweep.lock").write_text("")
    meta = {"status": "complete" if finished else "training", "steps": 10 if finished else 4}
    (folder / "run.json").write_text(json.dumps(meta))
    if finished:
        results = {"steps": 10, "perplexity": {"dev": 300.0}, "layers": {"0": {"align_f1": 1.0}},
                   "evaluation": {"complete": True}, "mu": 0.6}
        (folder / "results.json").write_text(json.dumps(results))
    return folder


def _manifest(root: Path, settings: list[tuple[str, list[str]]]) -> None:
    data = {"title": "Table 1", "preset": "paper", "settings": [
        {"id": sid, "name": sid, "mods": "original", "runs": runs, "paper": {"mu": 0.7}} for sid, runs in settings]}
    (root / "table1.sweep.json").write_text(json.dumps(data))


def _bring(src: Path, dst: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(src), str(dst), *extra], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_brings_finished_runs_without_checkpoints_and_lists_only_what_is_there(tmp_path):
    src, dst = tmp_path / "sweep", tmp_path / "repo"
    _run(src / "0-original-s0", True)
    _run(src / "0-original-s42", True)
    _run(src / "1-lang-pos-s42", False)  # still training: stays behind, and out of the manifest
    _run(dst / "1-lang-pos-s0", True)  # committed earlier; the sweep root's manifest does not know it
    _run(dst / "0-original-s42", False)  # an unfinished copy: replaced by the finished run
    _manifest(src, [("0", ["0-original-s0", "0-original-s42"]), ("1", ["1-lang-pos-s42"])])
    _manifest(dst, [("1", ["1-lang-pos-s0"]), ("9", ["9-gone-s0"])])

    dry = _bring(src, dst, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would bring 0-original-s0" in dry.stdout and not (dst / "0-original-s0").exists()
    assert f"would write {dst / 'table1.sweep.json'}: 3 runs listed" in dry.stdout  # as the real one below

    done = _bring(src, dst)
    assert done.returncode == 0, done.stderr
    assert "brought 0-original-s0" in done.stdout and "brought 0-original-s42" in done.stdout
    for name in ("0-original-s0", "0-original-s42"):
        files = sorted(p.name for p in (dst / name).iterdir())
        assert files == ["config.json", "metrics.jsonl", "results.json", "run.json"], files
    assert json.loads((dst / "0-original-s42" / "run.json").read_text())["status"] == "complete"
    assert not (dst / "1-lang-pos-s42").exists()
    assert not [p for p in dst.iterdir() if p.name.startswith(".")]  # no temporary folders left
    manifest = json.loads((dst / "table1.sweep.json").read_text())
    runs = {s["id"]: s["runs"] for s in manifest["settings"]}
    assert runs == {"0": ["0-original-s0", "0-original-s42"], "1": ["1-lang-pos-s0"], "9": []}
    assert list(runs) == ["1", "9", "0"]  # the committed order kept (the report's rows), the new setting after
    assert manifest["settings"][-1]["paper"] == {"mu": 0.7}  # the rest of the manifest as the sweep wrote it

    again = _bring(src, dst)
    assert again.returncode == 0 and "brought" not in again.stdout and "is missing from" in again.stdout


def test_a_folder_that_is_no_sweep_root_is_one_error_line(tmp_path):
    (tmp_path / "empty").mkdir()
    for src in (tmp_path / "empty", tmp_path / "absent"):
        proc = _bring(src, tmp_path / "dst")
        assert proc.returncode != 0 and proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: ")
    assert not (tmp_path / "dst").exists()


def test_the_paper_numbers_only_the_committed_manifest_has_survive_a_bring():
    """A sweep begun with an older grid lists the paper's means; the committed manifest also has their standard
    deviations: merging keeps both (the sweep's numbers win where both have one)."""
    sys.path.insert(0, str(SCRIPT.parent))
    from bring_runs import merge_settings

    ours = {"settings": [{"id": "1", "runs": ["1-lang-pos-s0"], "paper": {"mu": 0.3, "align_f1_L0_std": 0.05}}]}
    theirs = {"settings": [{"id": "1", "runs": ["1-lang-pos-s42"], "paper": {"mu": 0.30, "align_f1_L0": 0.87}}]}
    (merged,) = merge_settings(ours, theirs)
    assert merged["paper"] == {"mu": 0.30, "align_f1_L0": 0.87, "align_f1_L0_std": 0.05}
    assert merged["runs"] == ["1-lang-pos-s0", "1-lang-pos-s42"]
    (plain,) = merge_settings({"settings": [{"id": "0", "runs": []}]}, {"settings": [{"id": "0", "runs": ["r"]}]})
    assert "paper" not in plain
