"""`minimult prepare` through the command line: the statistics table, the examples, reuse, and one
clear `error:` line with exit code 2 for every kind of bad input (docs/pipeline.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from minimult.cli import main
from minimult.mods import REGISTRY

ROOT = Path(__file__).resolve().parent.parent
TRAIN = str(ROOT / "corpora" / "tiny" / "train.txt")
DEV = str(ROOT / "corpora" / "tiny" / "dev.txt")
TINY = ["--train-file", TRAIN, "--dev-file", DEV, "--set", "data.vocab_size=256"]


def run(*args):
    return CliRunner().invoke(main, ["prepare", *args])


def test_prepare_prints_statistics_and_examples(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIMULT_CACHE", str(tmp_path / "cache"))  # built here, whatever ran before
    first = run(*TINY)
    assert first.exit_code == 0, first.output
    out = first.stdout
    header = next(line for line in out.splitlines() if "sentences" in line)
    for column in ("sentences", "words", "types", "median words", "pieces"):
        assert column in header
    train_row = next(line for line in out.splitlines() if line.startswith("train (train.txt)"))
    dev_row = next(line for line in out.splitlines() if line.startswith("dev (dev.txt)"))
    for row, file in ((train_row, TRAIN), (dev_row, DEV)):  # sentences are lines, words split at spaces
        lines = Path(file).read_text(encoding="utf-8").splitlines()
        assert row.split()[2:4] == [f"{len(lines):,}", f"{sum(len(line.split()) for line in lines):,}"]
    assert "vocabulary: 256 WordPiece entries" in out
    en = [line.split(": ", 1)[1].split() for line in out.splitlines() if line.startswith("  en: ")]
    l1 = [line.split(": ", 1)[1].split() for line in out.splitlines() if line.startswith("  fake: ")]
    assert len(en) == len(l1) == 3
    for e, f in zip(en, l1):
        assert not any(t.startswith("::") for t in e)
        assert f == ["::" + t for t in e]  # Fake-English: the same pieces, shifted
    assert "examples (original):" in out

    second = run(*TINY)
    assert second.exit_code == 0
    assert "(reused)" in second.stdout and "(reused)" not in out
    assert "reading" not in second.stderr  # nothing was rebuilt


def test_prepare_previews_mods():
    result = run(*TINY, "--mods", "inv-order", "--examples", "2")
    assert result.exit_code == 0, result.output
    en = [line.split(": ", 1)[1].split() for line in result.stdout.splitlines() if line.startswith("  en: ")]
    l1 = [line.split(": ", 1)[1].split() for line in result.stdout.splitlines() if line.startswith("  fake: ")]
    assert len(en) == len(l1) == 2 and "examples (inv-order):" in result.stdout
    for e, f in zip(en, l1):
        assert f == ["::" + t for t in reversed(e)]


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    (d / "empty.txt").write_text("")
    (d / "binary.bin").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256)) * 4)
    (d / "latin1.txt").write_bytes("Ein Satz .\nEin Satz über nichts .\n".encode("latin-1"))
    (d / "long.txt").write_text("A sentence .\n\n\n" + "word " * 30_000 + "\n")  # line 4: blank lines count
    return d


BAD = {
    "missing file": (["--train-file", "{d}/missing.txt", "--dev-file", DEV], "{d}/missing.txt"),
    "empty file": (["--train-file", "{d}/empty.txt", "--dev-file", DEV], "empty.txt"),
    "binary file": (["--train-file", "{d}/binary.bin", "--dev-file", DEV], "(a NUL byte on line 1): {d}/binary.bin"),
    "not UTF-8": (["--train-file", TRAIN, "--dev-file", "{d}/latin1.txt"], "not valid UTF-8 on line 2 "),
    "a line that is no sentence": (["--train-file", "{d}/long.txt", "--dev-file", DEV], "line 4 of {d}/long.txt"),
    "unknown corpus": (["--train-file", "bbe-xx", "--dev-file", DEV], "bbe-nt"),
    "unknown mod": (TINY + ["--mods", "nope"], ", ".join(REGISTRY)),
    "contradictory mods": (TINY + ["--mods", "inv-order,permute"], "contradictory"),
    "contradictory masking": (TINY + ["--mods", "no-random,knn-replace"], "contradictory"),
    "contradictory mods in two --mods": (TINY + ["--mods", "inv-order", "--mods", "permute"], "contradictory"),
    "bad mod value": (TINY + ["--mods", "permute=2"], "permute"),
    "vocab below specials": (["--train-file", TRAIN, "--dev-file", DEV, "--set", "data.vocab_size=3"], "special"),
    "vocab below alphabet": (["--train-file", TRAIN, "--dev-file", DEV, "--set", "data.vocab_size=20"], "too small"),
    "unknown setting": (TINY + ["--set", "train.nope=1"], "train.lr"),
    "a setting sized from others": (TINY + ["--set", "model.vocab_size=999"], "model.vocab_size is sized from "
                                                                               "data.vocab_size"),
    "misspelt setting": (TINY + ["--set", "train.lrr=1"], "unknown setting 'train.lrr' (did you mean 'train.lr'?)"),
    "misspelt section": (TINY + ["--set", "trian.lr=1"], "unknown setting 'trian.lr' (did you mean 'train.lr'?)"),
    "a name near none in its section": (TINY + ["--set", "train.learning_rate=1"],  # was: 'train.batching'
                                        "unknown setting 'train.learning_rate'; valid settings:"),
    "bad setting value": (TINY + ["--set", "train.epochs=many"], "train.epochs"),
    "setting without =": (TINY + ["--set", "train.epochs"], "section.key=value"),
    "unknown preset": (TINY + ["--preset", "huge"], "tiny"),
    "unicode + shift-special": (TINY + ["--fake", "unicode", "--mods", "shift-special"], "contradictory"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_error_line(bad_files, minimult_cache, case):
    args, expected = BAD[case]
    args = [a.format(d=bad_files) for a in args]
    before = sorted(os.listdir(minimult_cache))
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)  # not an uncaught exception
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    assert expected.format(d=bad_files) in errors[0]
    assert "Traceback" not in result.output
    assert sorted(os.listdir(minimult_cache)) == before  # a failed prepare caches nothing


def test_a_training_file_without_a_dev_file_says_what_it_is_evaluated_on():
    """--train-file alone keeps the built-in development text: said in a note (here before the error a vocabulary too
    small for the specials stops it), never silently; with --dev-file, no note."""
    alone = run("--train-file", TRAIN, "--set", "data.vocab_size=3")
    assert "note: your training text is evaluated on the built-in kjv-ot-10k" in alone.stderr
    assert "note:" not in run("--train-file", TRAIN, "--dev-file", DEV, "--set", "data.vocab_size=3").stderr


def test_corpus_files_given_relative_are_stored_absolute(tmp_path, monkeypatch):
    """--train-file/--dev-file named from the folder a run starts in: its config holds them absolute (eval and
    resume from another folder read the same files); a built-in name, or a path to nothing, stays as given."""
    from minimult.config import resolve

    (tmp_path / "mine.txt").write_text(Path(TRAIN).read_text())
    monkeypatch.chdir(tmp_path)
    data = resolve("tiny", {"data.train": "mine.txt", "data.dev": "kjv-ot-10k"})[0].data
    assert (data.train, data.dev) == (str(tmp_path / "mine.txt"), "kjv-ot-10k")
    assert resolve("tiny", {"data.train": "nowhere.txt"})[0].data.train == "nowhere.txt"


def test_real_entry_point_exit_code(bad_files):
    """The installed console script, as a user runs it: stderr ends in one error line, exit code 2."""
    exe = Path(sys.executable).parent / "minimult"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "minimult.cli"]
    proc = subprocess.run(cmd + ["prepare", "--train-file", str(bad_files / "binary.bin"), "--dev-file", DEV],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("error: corpus file is binary") and "binary.bin" in lines[-1]
    assert sum(line.startswith("error:") for line in lines) == 1 and "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_arguments_are_checked_before_torch_loads():
    """`--help`, `mods`, a pretrain with a bad mod or a contradictory mix and an eval of a folder that is not
    a run answer without importing torch (seconds at start-up): config, mods and sources keep torch out of
    their imports."""
    script = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from minimult.cli import main\n"
        "codes = [CliRunner().invoke(main, a).exit_code for a in (['--help'], ['mods'], ['pretrain', '--mods', 'nope'],\n"
        "         ['pretrain', '--mods', 'no-random', '--mask-probs', '0.8,0.1,0.1,0'], ['eval', 'minimult'])]\n"
        "print(codes, 'torch' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["[0,", "0,", "2,", "2,", "2]", "False"], proc.stdout
