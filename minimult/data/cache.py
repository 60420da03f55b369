"""Content-addressed cache: a directory per hash of what determines it, built atomically.

`cached(kind, key, build)` returns the directory for `key`; if it does not exist yet, `build(tmp)`
fills a temporary sibling which is then renamed into place, so a half-written entry is never read
and a failed build leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from minimult.errors import MinimultError


def cache_root() -> Path:
    return Path(os.environ.get("MINIMULT_CACHE", ".cache/minimult")).resolve()


def key_hash(key: dict) -> str:
    blob = json.dumps(key, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def cached(kind: str, key: dict, build: Callable[[Path], None]) -> tuple[Path, bool]:
    """(path, reused): the entry for `key`, built with `build(tmp_dir)` if missing."""
    root = cache_root()
    path = root / f"{kind}-{key_hash(key)}"
    if (path / "key.json").is_file():
        return path, True
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=root))
    except OSError as e:
        raise MinimultError(f"cannot write the prepared-data cache {root} ({(e.strerror or str(e)).lower()}): point "
                            f"MINIMULT_CACHE at a folder you can write") from None
    try:
        build(tmp)
        atomic_write_text(tmp / "key.json", json.dumps(key, sort_keys=True, indent=1, default=str))
        try:
            os.replace(tmp, path)
        except OSError:  # another process finished the same entry first: theirs is as good
            if not (path / "key.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path, False


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temporary file in the same directory and rename, so readers see old or new. A failure is one
    error line naming `path` (never the temporary file, which is removed)."""
    path = Path(path)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        os.fchmod(fd, 0o644)  # mkstemp's 0600 would make results unreadable to the rest of a group
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            why = "a folder is in its place" if path.is_dir() else (e.strerror or type(e).__name__).lower()
            raise MinimultError(f"cannot write {path}: {why}") from None
        raise
