"""Shared fixtures: a private cache per test session and the tiny shipped corpus, prepared once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TINY_TRAIN = ROOT / "corpora" / "tiny" / "train.txt"
TINY_DEV = ROOT / "corpora" / "tiny" / "dev.txt"
# `resolve(preset, settings, mods)` settings for the tiny shipped corpus
TINY_SETTINGS = {"data.train": str(TINY_TRAIN), "data.dev": str(TINY_DEV), "data.vocab_size": 256}


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


@pytest.fixture(scope="module")
def one_thread():
    """Torch on one thread for a module's tests (`pytestmark = pytest.mark.usefixtures("one_thread")`):
    their tiny models train faster so, and the machine's other thread stays free."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
