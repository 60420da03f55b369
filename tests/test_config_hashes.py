"""Old run configs keep their hashes: for every committed run (experiments/results/*/*/config.json), the report's
setting fingerprint, the hash of the stored form that hashes read (`config.comparable`: also what a sweep and a
resume compare) and the prepared cache's key are the ones the code before components brought their own settings
(cf4c2f0: `data.files`, the `knn` and `transfer` sections hand-listed in config.py) computed, kept in
tests/fixtures/config_hashes.json as [fingerprint, comparable, cache key] (null: a parallel run whose manifest lives
on the machine that trained it). The same settings written by this version (`data.parallel.files`) hash the same."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from minimult.config import RunConfig, comparable, resolve, without_execution
from minimult.data.cache import key_hash
from minimult.data.prepare import cache_key
from minimult.errors import MinimultError
from minimult.report.collect import _fingerprint, current_config
from minimult.runs import Run

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "experiments" / "results"
FIXTURE = Path(__file__).parent / "fixtures" / "config_hashes.json"


def hashes(config: dict) -> list:
    """[fingerprint, comparable, cache key] of a stored config, as the fixture's script computed them."""
    stored = comparable(without_execution(current_config(config)))
    try:
        cache = key_hash(cache_key(RunConfig.from_dict(config).data))
    except (MinimultError, OSError, TypeError, ValueError):
        cache = None
    return [_fingerprint(config), hashlib.sha256(json.dumps(stored, sort_keys=True).encode()).hexdigest()[:16], cache]


def written_now(config: dict) -> dict:
    """`config` as this version writes the same settings: through RunConfig where it loads; a parallel run whose
    files are elsewhere, moved by hand (its files under data.parallel, the source under data.source)."""
    try:
        return RunConfig.from_dict(config).to_dict()
    except MinimultError:
        data = {k: v for k, v in config["data"].items() if k not in ("fake", "files")}
        data.update(source=config["data"].get("fake", data.get("source")),
                    parallel={"files": config["data"].get("files", "")})
        return {**config, "data": data}


def test_every_committed_run_keeps_its_hashes():
    expected = json.loads(FIXTURE.read_text())
    assert len(expected) > 200
    for name, want in expected.items():
        config = json.loads((RESULTS / name / "config.json").read_text())
        assert hashes(config) == want, name
        now = written_now(config)
        assert "files" not in now["data"] and "fake" not in now["data"], name
        assert hashes(now) == want, name
        if want[2] is not None:  # a resume compares the checkpoint's config, read by this version, with the run's
            assert RunConfig.from_dict(now) == RunConfig.from_dict(config), name


def test_old_keys_read_through_the_legacy_hook_and_hash_as_the_old_form(tmp_path):
    (tmp_path / "en.txt").write_text("a b\nc d\n")
    (tmp_path / "xx.txt").write_text("b a\nd c\n")
    files = f"en={tmp_path / 'en.txt'},xx={tmp_path / 'xx.txt'}"
    old, _ = resolve("tiny", {"data.fake": "parallel", "data.files": files})
    new, _ = resolve("tiny", {"data.source": "parallel", "data.parallel.files": files})
    assert old == new and new.data.parallel.files == files and new.data.n_langs == 2
    stored = new.to_dict()
    assert stored["data"]["parallel"] == {"files": files} and "files" not in stored["data"]
    legacy = json.loads(json.dumps(stored))
    legacy["data"]["fake"] = legacy["data"].pop("source")
    legacy["data"]["files"] = legacy["data"].pop("parallel")["files"]
    assert comparable(stored) == comparable(legacy) and comparable(stored)["data"] == legacy["data"]  # old keys
    assert RunConfig.from_dict(legacy) == new and _fingerprint(legacy) == _fingerprint(stored)
    Run(tmp_path, new).check_checkpoint_config({"config": legacy})  # a checkpoint written before resumes
    assert "parallel" not in comparable(resolve("tiny")[0].to_dict())["data"]  # no files: nothing added
