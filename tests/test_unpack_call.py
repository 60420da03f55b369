"""experiments/gpu/unpack_call.py: a device call's returned files (finished runs, their weights, unfinished runs
with checkpoints) into a sweep root here, without touching what this machine has further on or is working on."""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import torch

from minimult.runs import CHECKPOINT_FORMAT

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "experiments" / "gpu" / "unpack_call.py"


def _run(folder: Path, finished: bool, step: int | None = None) -> Path:
    """A run folder as a sweep leaves it: finished (trained and evaluated in full, no checkpoint, as a call
    sends it) or stopped at `step` with its checkpoint."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}\n")
    (folder / ".sweep.lock").write_text("")
    meta = {"status": "complete" if finished else "training", "steps": 10 if finished else step}
    (folder / "run.json").write_text(json.dumps(meta))
    if finished:
        results = {"steps": 10, "perplexity": {"dev": 300.0}, "layers": {"0": {"align_f1": 1.0}},
                   "evaluation": {"complete": True}, "mu": 0.6}
        (folder / "results.json").write_text(json.dumps(results))
    else:
        checkpoint = {"format": CHECKPOINT_FORMAT, "step": step, "complete": False, "model": {}}
        torch.save(checkpoint, folder / "checkpoint.pt")
    return folder


def _manifest(root: Path, settings: list[tuple[str, list[str]]]) -> None:
    data = {"title": "Table 1", "preset": "paper", "settings": [
        {"id": sid, "name": sid, "mods": "original", "runs": runs} for sid, runs in settings]}
    (root / "table1.sweep.json").write_text(json.dumps(data))


def _archive(path: Path, folder: Path, names: list[str]) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for n in names:
            tar.add(folder / n, arcname=n)


def _call(tmp_path: Path) -> Path:
    """What a call of sweep_call.sh sends back: runs 0 and 1+x finished (with weights), 2 unfinished at step 6."""
    made, out = tmp_path / "device-root", tmp_path / "files"
    out.mkdir()
    _run(made / "0-original-s43", True)
    _run(made / "1-lang-pos+x-s43", True)
    _run(made / "2-shift-special-s43", False, step=6)
    _manifest(made, [("0", ["0-original-s43"]), ("1", ["1-lang-pos+x-s43"]), ("2", ["2-shift-special-s43"])])
    _archive(out / "done-t1-s43.tar.gz", made, ["0-original-s43", "1-lang-pos+x-s43", "table1.sweep.json"])
    _archive(out / "unfinished-t1-2-shift-special-s43.tar.gz", made, ["2-shift-special-s43"])
    for name in ("0-original-s43", "1-lang-pos+x-s43"):
        torch.save({"format": CHECKPOINT_FORMAT, "step": 10, "complete": True, "model": {"w": torch.ones(1)}},
                   out / f"weights-t1-{name.replace('+', '_')}.pt")
    return out


def _unpack(files: Path, root: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(files), str(root), *extra], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)


def test_a_calls_runs_land_in_the_root_finished_with_weights_and_unfinished_to_resume(tmp_path):
    files, root = _call(tmp_path), tmp_path / "root"
    root.mkdir()
    _run(root / "0-original-s43", False, step=3)  # begun here, finished on the GPU: replaced
    _manifest(root, [("0", ["0-original-s0", "0-original-s43"]), ("5", ["5-x-s43"])])
    result = _unpack(files, root)
    assert result.returncode == 0, result.stderr
    for name in ("0-original-s43", "1-lang-pos+x-s43"):
        assert (root / name / "results.json").is_file() and not (root / name / ".sweep.lock").exists()
        assert torch.load(root / name / "checkpoint.pt", weights_only=False)["step"] == 10  # the call's weights
    assert torch.load(root / "2-shift-special-s43" / "checkpoint.pt", weights_only=False)["step"] == 6
    assert not (root / "2-shift-special-s43" / ".sweep.lock").exists()
    settings = {s["id"]: s["runs"] for s in json.loads((root / "table1.sweep.json").read_text())["settings"]}
    assert settings == {"0": ["0-original-s0", "0-original-s43"], "5": ["5-x-s43"], "1": ["1-lang-pos+x-s43"],
                        "2": ["2-shift-special-s43"]}
    assert not [p for p in root.iterdir() if p.name.startswith(".")]  # no temporary folders left
    again = _unpack(files, root)  # nothing more to do: every run is left, each with its reason
    assert again.returncode == 0 and "already finished here" in again.stdout
    assert "as far on (step 6" in again.stdout and "not the weights of a run this call brought" in again.stdout


def test_what_this_machine_has_further_on_or_is_working_on_is_left_alone(tmp_path):
    files, root = _call(tmp_path), tmp_path / "root"
    root.mkdir()
    _run(root / "2-shift-special-s43", False, step=8)  # the CPU went further than the call
    busy = _run(root / "0-original-s43", False, step=2)
    with open(busy / ".sweep.lock", "w") as lock:  # a process here trains it
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        result = _unpack(files, root)
    assert result.returncode == 0, result.stderr
    assert "left 0-original-s43" in result.stdout and "working on it" in result.stdout
    assert not (busy / "results.json").exists()
    assert torch.load(busy / "checkpoint.pt", weights_only=False)["step"] == 2  # its weights not put over it
    assert torch.load(root / "2-shift-special-s43" / "checkpoint.pt", weights_only=False)["step"] == 8
    assert (root / "1-lang-pos+x-s43" / "checkpoint.pt").is_file()


def test_a_dry_run_changes_nothing_and_bad_input_is_one_error_line(tmp_path):
    files, root = _call(tmp_path), tmp_path / "root"
    root.mkdir()
    result = _unpack(files, root, "--dry-run")
    assert result.returncode == 0 and "would bring 0-original-s43" in result.stdout
    assert "would copy weights-t1-1-lang-pos_x-s43.pt to 1-lang-pos+x-s43/checkpoint.pt" in result.stdout
    assert list(root.iterdir()) == []
    empty = tmp_path / "empty"
    empty.mkdir()
    for args in ((tmp_path / "nowhere", root), (empty, root)):
        bad = _unpack(*args)
        assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1 and "error:" in bad.stderr
    (files / "done-t1-s43.tar.gz").write_bytes(b"not gzip")
    bad = _unpack(files, root)
    assert bad.returncode != 0 and "not a readable archive" in bad.stderr
