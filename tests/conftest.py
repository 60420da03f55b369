"""Shared fixtures: a private cache per test session and the tiny shipped corpus, prepared once."""

from __future__ import annotations

import os
import subprocess
from contextlib import chdir, nullcontext
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TINY_TRAIN = ROOT / "corpora" / "tiny" / "train.txt"
TINY_DEV = ROOT / "corpora" / "tiny" / "dev.txt"
# `resolve(preset, settings, mods)` settings for the tiny shipped corpus
TINY_SETTINGS = {"data.train": str(TINY_TRAIN), "data.dev": str(TINY_DEV), "data.vocab_size": 256}


def cli(*args, cwd=None) -> subprocess.CompletedProcess:
    """`minimult ARGS` run in this process by click's CliRunner (a subprocess spends ~3 s importing torch), its
    exit code, stdout and stderr returned apart as a subprocess gives them. The CLI's own handling is all there
    (a MinimultError is one `error:` line and exit code 2); any other exception fails the test with its
    traceback, where a subprocess would print it on stderr. The torch threads a command sets (--threads) are
    put back. The real console script's exit code: tests/test_cli_prepare.py."""
    import torch
    from click.testing import CliRunner

    from minimult.cli import main

    threads = torch.get_num_threads()
    with chdir(cwd) if cwd else nullcontext():
        result = CliRunner().invoke(main, [str(a) for a in args])
    torch.set_num_threads(threads)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(["minimult", *map(str, args)], result.exit_code, result.stdout, result.stderr)


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: reads a whole built-in corpus (~20 s); deselect with -m 'not slow'")


@pytest.fixture(scope="session", autouse=True)
def minimult_cache(tmp_path_factory) -> Path:
    """Every test (and every CLI subprocess it starts) uses a fresh cache directory, never the user's."""
    path = tmp_path_factory.mktemp("minimult-cache")
    previous = os.environ.get("MINIMULT_CACHE")
    os.environ["MINIMULT_CACHE"] = str(path)
    yield path
    if previous is None:
        os.environ.pop("MINIMULT_CACHE", None)
    else:
        os.environ["MINIMULT_CACHE"] = previous


@pytest.fixture(scope="session")
def tiny_data_cfg():
    from minimult.config import DataConfig

    return DataConfig(train=str(TINY_TRAIN), dev=str(TINY_DEV), vocab_size=256, dev_sentences=200)


@pytest.fixture(scope="session")
def tiny_prepared(minimult_cache, tiny_data_cfg):
    from minimult.data.prepare import prepare

    return prepare(tiny_data_cfg)


@pytest.fixture
def sword_fixture(monkeypatch):
    """en-es's Bibles read from `fixtures/sword-verses.jsonl` (raw markup of a few verses of each module) in
    place of the installed SWORD modules: fast, and the same on a machine without them."""
    import json

    from minimult.data import sword

    path = ROOT / "tests" / "fixtures" / "sword-verses.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]

    def verses(language, testament, limit=None):
        out = {r["verse"]: r["markup"] for r in rows if r["lang"] == language and r["testament"] == testament}
        return dict(list(sorted(out.items()))[:limit])

    monkeypatch.setattr(sword, "module_verses", verses)
    monkeypatch.setattr(sword, "module_fingerprint", lambda language: f"fixture:{path.stat().st_size}")


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """A tiny run of the tiny corpus (default settings) trained to its end, not evaluated, shared by the tests
    that only read it; a test that changes it changes a copy (`shutil.copytree`)."""
    from minimult.config import resolve
    from minimult.runs import Run
    from minimult.train import train

    cfg, _ = resolve("tiny", TINY_SETTINGS)
    run = Run.create_at(tmp_path_factory.mktemp("tiny-run") / "run", cfg, log=lambda s: None)
    train([run], log=lambda s: None)
    return run


@pytest.fixture(scope="session", autouse=True)
def one_thread():
    """Torch on one thread for every test: the tiny models train faster so (with a second process busy on this
    2-core machine, a tiny run's training and evaluation took 2-3 s on one thread, 40-60 s on two), and the
    machine's other thread stays free. The sweep's workers run on one thread each too."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def one_thread_again():
    """Torch back on one thread after every test: a test that trains with train.threads leaves torch on that
    count, and a later test or module fixture in the same worker would compute on it (fp32 sums then differ
    in the last bit from one thread's). A session fixture is set up before any module's, this one after."""
    yield
    import torch

    torch.set_num_threads(1)


def random_replacement_ids(vocab_size_per_lang: int, n_langs: int, n_special: int = 5):
    """The ids a random replacement draws from when every language has a full vocabulary block of its own, (R,)
    long: k*V + n_special .. k*V + V-1 for every language k (as the sources' `random_ids` give them)."""
    import torch

    ids = torch.arange(vocab_size_per_lang * n_langs)
    return ids[ids % vocab_size_per_lang >= n_special]
