"""`minimult export` never harms what it does not own and never passes off half-trained weights: it takes
the run's lock, says when a run is unfinished or failed and records how far it trained (issue 36, item 3),
`--force` deletes nothing it did not write (item 6) and refuses a folder that holds run folders (item 8),
and a temp folder left by an export killed with kill -9 is removed by the next export (item 11)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, TINY_SETTINGS, cli
from minimult.config import resolve
from minimult.errors import MinimultError
from minimult.export import save_hf
from minimult.model import Bert, ModelConfig
from minimult.runs import Run
from minimult.train import train


def error_line(proc) -> str:
    """The one `error: ...` line of a refused command (and nothing else on stderr)."""
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert proc.returncode != 0 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


@pytest.fixture(scope="module")
def finished(tiny_run):
    """A finished tiny run (2 epochs); exporting it only reads it."""
    return tiny_run


@pytest.fixture(scope="module")
def unfinished(tmp_path_factory):
    """A tiny run stopped after 5 of its steps, as a killed one is (run.json still says `training`)."""
    cfg, _ = resolve("tiny", dict(TINY_SETTINGS))
    run = Run.create_at(tmp_path_factory.mktemp("unfinished") / "run", cfg, log=lambda s: None)
    train([run], log=lambda s: None, stop_after=5)
    meta = run.meta
    meta.update(status="training")
    meta.pop("steps", None)
    run.write_meta(meta)
    return run


def hf_config(folder: Path) -> dict:
    return json.loads((folder / "config.json").read_text())


# --- item 3: the run's lock, unfinished and failed runs, how far it trained --------------------------


def test_export_takes_the_runs_lock(finished, tmp_path):
    from click.testing import CliRunner

    from minimult.cli import main

    with Run.open(finished.path).locked():  # another process training or evaluating the run
        result = CliRunner().invoke(main, ["export", str(finished.path), "--hf", str(tmp_path / "hf")])
    assert result.exit_code != 0 and "another process is working on" in result.output, result.output
    assert not (tmp_path / "hf").exists()
    proc = cli("export", str(finished.path), "--hf", str(tmp_path / "hf"))  # free again: exported
    assert proc.returncode == 0, proc.stderr


def test_a_damaged_vocabulary_or_tokenizer_in_the_run_is_refused_not_exported(finished, tmp_path):
    """The run's own vocab.txt cut short (other ids than it trained with) or tokenizer.json half written: one line
    naming the file, no export; the evaluation names the run's copy, not the cache."""
    run = Path(shutil.copytree(finished.path, tmp_path / "run"))
    vocab, tokenizer = (run / "vocab.txt").read_bytes(), (run / "tokenizer.json").read_bytes()
    (run / "tokenizer.json").write_bytes(tokenizer[:1000])
    assert "tokenizer.json is damaged" in error_line(cli("export", run, "--hf", tmp_path / "a"))
    (run / "tokenizer.json").write_bytes(tokenizer)
    (run / "vocab.txt").write_bytes(b"\n".join(vocab.splitlines()[:100]) + b"\n")
    assert f"{run / 'vocab.txt'} is not the vocabulary run.json records" in error_line(
        cli("export", run, "--hf", tmp_path / "b"))
    said = error_line(cli("eval", run))
    assert "vocab.txt is not the vocabulary run.json records" in said and "the run's own copy" in said, said
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_export_records_how_far_the_run_trained(finished, tmp_path):
    proc = cli("export", str(finished.path), "--hf", str(tmp_path / "hf"))
    assert proc.returncode == 0 and "note:" not in proc.stderr, proc.stderr
    training = hf_config(tmp_path / "hf")["minimult_training"]
    total = finished.meta["total_steps"]
    assert total > 0 and training["steps"] == training["total_steps"] == total
    assert training["complete"] is True and training["status"] == "complete"
    assert training["mods"] == "original" and training["attention"] == "masked"


def test_export_of_an_unfinished_run_says_so_in_one_line_and_records_it(unfinished, tmp_path):
    proc = cli("export", str(unfinished.path), "--hf", str(tmp_path / "hf"))
    assert proc.returncode == 0, proc.stderr
    notes = [l for l in proc.stderr.splitlines() if l.startswith("note:")]
    total = unfinished.meta["total_steps"]
    assert len(notes) == 1 and "unfinished" in notes[0] and f"step 5 of {total}" in notes[0], proc.stderr
    training = hf_config(tmp_path / "hf")["minimult_training"]
    assert (training["steps"], training["total_steps"], training["complete"]) == (5, total, False)


def test_export_of_a_failed_run_says_so_in_one_line_and_records_it(unfinished, tmp_path):
    failed = tmp_path / "failed"
    shutil.copytree(unfinished.path, failed)
    run = Run.open(failed)
    run.write_meta({**run.meta, "status": "failed: loss nan at step 7"})  # as training marks a diverged run
    proc = cli("export", str(failed), "--hf", str(tmp_path / "hf"))
    assert proc.returncode == 0, proc.stderr
    notes = [l for l in proc.stderr.splitlines() if l.startswith("note:")]
    assert len(notes) == 1 and "failed (loss nan at step 7)" in notes[0] and "step 5 of" in notes[0], proc.stderr
    assert hf_config(tmp_path / "hf")["minimult_training"]["status"] == "failed: loss nan at step 7"


# --- item 6: --force deletes nothing it did not write --------------------------------------------------


def small_model():
    cfg = ModelConfig(vocab_size=512, hidden=16, intermediate=32, heads=1, layers=1, max_positions=32)
    return Bert(cfg), cfg


def vocab_folder(finished, tmp_path) -> Path:
    """A run-like folder whose vocabulary has a language with a tokenizer of its own (`es/`, as en-es)."""
    src = tmp_path / "vocab"
    (src / "es").mkdir(parents=True)
    for sub in ("", "es"):
        for name in ("vocab.txt", "tokenizer.json"):
            shutil.copyfile(finished.path / name, src / sub / name)
    return src


LANGUAGES = {"en": {"tokenizer": "", "unicode_shift": False}, "es": {"tokenizer": "es", "unicode_shift": False}}


def test_force_keeps_a_users_files_in_a_language_folder(finished, tmp_path):
    model, cfg = small_model()
    src = vocab_folder(finished, tmp_path)
    out = tmp_path / "hfx"
    save_hf(model, cfg, out, vocab_file=src / "vocab.txt", languages=LANGUAGES)
    (out / "es" / "mydata.txt").write_text("my own notes")
    (out / "mine").mkdir()
    (out / "mine" / "keep.txt").write_text("kept")
    save_hf(model, cfg, out, vocab_file=src / "vocab.txt", languages=LANGUAGES, force=True)
    assert (out / "es" / "mydata.txt").read_text() == "my own notes"
    assert (out / "mine" / "keep.txt").read_text() == "kept"
    assert (out / "es" / "tokenizer.json").read_bytes() == (src / "es" / "tokenizer.json").read_bytes()
    # a user's folder where the export writes a file: refused in one line before anything moves
    (out / "tokenizer_config.json").unlink()
    (out / "tokenizer_config.json").mkdir()
    (out / "tokenizer_config.json" / "x.txt").write_text("x")
    before = (out / "config.json").read_bytes()
    with pytest.raises(MinimultError, match="is a folder where the export writes the file") as e:
        save_hf(model, cfg, out, vocab_file=src / "vocab.txt", languages=LANGUAGES, force=True)
    assert "\n" not in str(e.value) and (out / "tokenizer_config.json" / "x.txt").read_text() == "x"
    assert (out / "config.json").read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".hfx.tmp-")]


# --- item 8: never into a folder that holds run folders ----------------------------------------------


def test_force_into_a_folder_holding_run_folders_is_refused(finished, tmp_path):
    root = tmp_path / "sweep-root"  # a sweep's root: run folders one level down
    shutil.copytree(finished.path, root / "0-original-s0")
    proc = cli("export", str(finished.path), "--hf", str(root), "--force")
    assert "holds run folders" in error_line(proc)
    assert not (root / "config.json").exists()
    work = tmp_path / "work"  # `.` of a checkout: run folders under runs/
    shutil.copytree(finished.path, work / "runs" / "r1")
    proc = cli("export", str(finished.path), "--hf", ".", "--force", cwd=work)
    assert "holds run folders" in error_line(proc)
    assert sorted(p.name for p in work.iterdir()) == ["runs"]
    (work / "runs" / "r1" / "run.json").unlink()  # a sweep's folder before its first step is a run folder too
    (work / "runs" / "r1" / "checkpoint.pt").unlink()
    (work / "runs" / "r1" / "metrics.jsonl").unlink()
    assert "holds run folders" in error_line(cli("export", str(finished.path), "--hf", str(work), "--force"))
    other = tmp_path / "exports"  # a folder of HF exports is no sweep root
    assert cli("export", str(finished.path), "--hf", str(other / "a")).returncode == 0
    assert cli("export", str(finished.path), "--hf", str(other), "--force").returncode == 0


# --- item 11: kill -9 during an export -----------------------------------------------------------------

KILLED_EXPORT = """
import os, signal, sys
import minimult.export as export
from minimult.model import Bert, ModelConfig

def killed(*args, **kwargs):  # the export is killed while it writes its temp folder
    os.kill(os.getpid(), signal.SIGKILL)

export.to_hf = killed
cfg = ModelConfig(vocab_size=64, hidden=16, intermediate=32, heads=1, layers=1, max_positions=16)
export.save_hf(Bert(cfg), cfg, sys.argv[1])
"""


def test_temp_folders_of_a_killed_export_are_removed_by_the_next(tmp_path):
    out = tmp_path / "hf"
    proc = subprocess.run([sys.executable, "-c", KILLED_EXPORT, str(out)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == -9, proc.stderr
    left = [p.name for p in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].startswith(".hf.tmp-") and not out.exists()
    model, cfg = small_model()
    save_hf(model, cfg, out)  # the next export to the same name cleans up
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]
    # an export in progress (its process alive) keeps its temp folder
    busy = tmp_path / f".hf.tmp-{os.getpid()}-busy"
    busy.mkdir()
    save_hf(model, cfg, out, force=True)
    assert busy.is_dir()
