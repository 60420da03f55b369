"""Content-addressed cache: built once, reused, atomic (a failed build leaves nothing) (docs/pipeline.md)."""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np
import pytest

from minimult.data import cache
from minimult.errors import MinimultError
from minimult.data.prepare import load_prepared, prepare


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIMULT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def entries(root):
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def test_builds_once_then_reuses(root):
    calls = []

    def build(tmp):
        calls.append(tmp)
        assert tmp.parent == root and tmp.name.startswith(".")  # a hidden sibling, not the entry
        (tmp / "data.txt").write_text("built")

    key = {"a": 1, "b": [1, 2]}
    path, reused = cache.cached("thing", key, build)
    assert not reused and len(calls) == 1
    assert path == root / f"thing-{cache.key_hash(key)}" and path.is_dir()
    assert (path / "data.txt").read_text() == "built"
    assert json.loads((path / "key.json").read_text()) == key
    again, reused = cache.cached("thing", {"b": [1, 2], "a": 1}, build)  # same key, other order
    assert again == path and reused and len(calls) == 1
    assert entries(root) == [path.name]  # no temporary directory left


def test_different_keys_different_entries(root):
    a, _ = cache.cached("thing", {"n": 1}, lambda tmp: None)
    b, _ = cache.cached("thing", {"n": 2}, lambda tmp: None)
    c, _ = cache.cached("other", {"n": 1}, lambda tmp: None)
    assert len({a, b, c}) == 3 and len(entries(root)) == 3


@pytest.mark.parametrize("exc", [RuntimeError("boom"), MinimultError("bad input"), KeyboardInterrupt()])
def test_failed_build_leaves_nothing(root, exc):
    def build(tmp):
        (tmp / "half.txt").write_text("half written")
        raise exc

    with pytest.raises(type(exc)) as raised:
        cache.cached("thing", {"n": 1}, build)
    assert raised.value is exc  # the build's own error, passed on
    assert entries(root) == []  # neither the entry nor its temporary directory
    path, reused = cache.cached("thing", {"n": 1}, lambda tmp: (tmp / "ok").write_text("ok"))
    assert not reused and (path / "ok").is_file() and not (path / "half.txt").exists()


def test_entry_without_key_file_is_not_reused(root):
    """key.json is written last, inside the temporary directory: a directory without it is not an entry."""
    key = {"n": 1}
    calls = []
    partial = root / f"thing-{cache.key_hash(key)}"
    partial.mkdir(parents=True)
    cache.atomic_write_text(root / "unrelated.txt", "x")
    path, reused = cache.cached("thing", key, lambda tmp: calls.append(tmp))
    assert path == partial and not reused and calls and (path / "key.json").is_file()


def test_losing_a_race_keeps_the_winner(root):
    """Another process finished the same entry while we built: theirs stays, our temp dir goes."""
    key = {"n": 1}
    final = root / f"thing-{cache.key_hash(key)}"

    def build(tmp):
        final.mkdir(parents=True)
        (final / "who").write_text("winner")
        (final / "key.json").write_text(json.dumps(key))
        (tmp / "who").write_text("loser")

    path, reused = cache.cached("thing", key, build)
    assert path == final and (path / "who").read_text() == "winner"
    assert entries(root) == [final.name]


def test_atomic_write_text(tmp_path):
    target = tmp_path / "f.json"
    cache.atomic_write_text(target, "one")
    cache.atomic_write_text(target, "two")
    assert target.read_text() == "two" and os.listdir(tmp_path) == ["f.json"]
    assert target.stat().st_mode & 0o777 == 0o644  # readable by others, as a plain write would be


# ---------------------------------------------------------------------------------------------
# prepare() on the tiny corpus


def test_prepare_reuses(tiny_prepared, tiny_data_cfg):
    again = prepare(tiny_data_cfg)
    assert again.reused and again.path == tiny_prepared.path
    assert again.vocab.pieces == tiny_prepared.vocab.pieces and again.vocab_hash == tiny_prepared.vocab_hash
    assert np.array_equal(again.train.ids, tiny_prepared.train.ids)
    s = again.stats
    assert s["train"]["sentences"] == 400 and s["dev"]["sentences"] == 200
    assert s["train"]["name"] == "train.txt" and s["vocab_entries"] == 256
    assert s["train"]["pieces"] == len(again.train.ids) and s["dev"]["pieces"] == len(again.dev.ids)
    assert len(again.train) == 400 and len(again.dev) == 200
    words = (again.path / "train.words.txt").read_text(encoding="utf-8").splitlines()
    assert words == open(tiny_data_cfg.train, encoding="utf-8").read().splitlines()


def test_prepare_key_covers_its_inputs(tiny_prepared, tiny_data_cfg, tmp_path):
    smaller = prepare(dataclasses.replace(tiny_data_cfg, vocab_size=200))
    assert smaller.path != tiny_prepared.path and not smaller.reused and len(smaller.vocab) == 200
    fewer = prepare(dataclasses.replace(tiny_data_cfg, dev_sentences=50))
    assert fewer.path not in (tiny_prepared.path, smaller.path) and len(fewer.dev) == 50
    edited = tmp_path / "train.txt"  # same name, one line changed: the content decides
    lines = open(tiny_data_cfg.train, encoding="utf-8").read().splitlines()
    edited.write_text("\n".join(["And this line is new ."] + lines[1:]) + "\n", encoding="utf-8")
    other = prepare(dataclasses.replace(tiny_data_cfg, train=str(edited)))
    assert other.path != tiny_prepared.path and not other.reused


def test_prepare_failure_leaves_no_entry(root, tiny_data_cfg, tmp_path):
    (tmp_path / "empty.txt").write_text("")
    for bad, message in ((dataclasses.replace(tiny_data_cfg, train=str(tmp_path / "missing.txt")), "corpus file not found"),
                         (dataclasses.replace(tiny_data_cfg, dev=str(tmp_path / "empty.txt")), "corpus file is empty")):
        with pytest.raises(MinimultError, match=message):
            prepare(bad)
    assert entries(root) == []


def test_a_cache_folder_that_cannot_be_made_names_the_variable(monkeypatch):
    """MINIMULT_CACHE where no folder can be made (here under /proc; read-only or another user's folders alike):
    one line naming the folder and the variable that chose it, not the system's words alone."""
    monkeypatch.setenv("MINIMULT_CACHE", "/proc/no-such-process/cache")
    with pytest.raises(MinimultError, match="cannot write the prepared-data cache /proc/no-such-process/cache .*"
                                            "point MINIMULT_CACHE at a folder you can write"):
        cache.cached("x", {"k": 1}, lambda tmp: None)


def test_unreadable_entry_is_a_clear_error(root, tiny_data_cfg):
    p = prepare(tiny_data_cfg)
    assert not p.reused  # a fresh root
    (p.path / "dev.npz").unlink()
    with pytest.raises(MinimultError, match="unreadable.*delete it to rebuild"):
        load_prepared(p.path, tiny_data_cfg)


def test_a_write_that_fails_names_the_file_not_its_temporary_copy(tmp_path):
    """An atomic write onto a folder (or into a folder that cannot take it) is one error line naming the file it
    meant to write; its temporary file (`.NAME.xxxx`) is neither named nor left behind (issue 63, minor)."""
    from minimult.data.cache import atomic_write_text
    from minimult.errors import MinimultError

    (tmp_path / "table1.md").mkdir()
    with pytest.raises(MinimultError) as e:
        atomic_write_text(tmp_path / "table1.md", "| a |\n")
    assert str(e.value) == f"cannot write {tmp_path / 'table1.md'}: a folder is in its place"
    with pytest.raises(MinimultError, match=r"cannot write .*nowhere/x.md: no such file or directory"):
        atomic_write_text(tmp_path / "nowhere" / "x.md", "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table1.md"]
