"""Run folders: naming, creation (never two runs in one folder), finding the latest, provenance.

A run folder holds `config.json` (resolved), `run.json` (mods with versions, seed, vocabulary hash,
versions, git commit, status), the vocabulary, `checkpoint.pt`, `metrics.jsonl` and, after
evaluation, `results.json`.
"""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from .cache import atomic_write_text
from .errors import MinimultError

RUNS_DIR = Path("runs")


def run_name(mods: str, seed: int) -> str:
    return f"{mods.replace(',', '+').replace('=', '')}-s{seed}-{time.strftime('%Y%m%d-%H%M%S')}"


def create_run_dir(out: str | Path | None, mods: str, seed: int) -> Path:
    """A new, empty run folder; an existing one is never reused (a suffix is added to generated names)."""
    if out is not None:
        path = Path(out)
        if path.exists() and any(path.iterdir()):
            raise MinimultError(f"run folder {path} already exists; use --resume to continue it or choose "
                                f"another --out")
        path.mkdir(parents=True, exist_ok=True)
        return path
    RUNS_DIR.mkdir(parents=True, exist_ok=True)
    base = RUNS_DIR / run_name(mods, seed)
    for i in range(1000):
        path = base if i == 0 else base.with_name(f"{base.name}-{i}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise MinimultError(f"could not create a fresh run folder near {base}")


def latest_run(root: Path = RUNS_DIR) -> Path:
    """The most recently started run under `root` (by its config.json time)."""
    runs = [p.parent for p in Path(root).glob("*/config.json")]
    if not runs:
        raise MinimultError(f"no runs under {root}/: train one with `minimult pretrain` or name a run folder")
    return max(runs, key=lambda p: (p / "config.json").stat().st_mtime)


def check_run_dir(path: str | Path) -> Path:
    path = Path(path)
    if not (path / "config.json").is_file():
        raise MinimultError(f"not a run folder (no config.json): {path}")
    return path


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def environment() -> dict:
    def v(name):
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    return {"python": platform.python_version(), "platform": platform.platform(),
            "minimult": v("minimult"), "torch": v("torch"), "tokenizers": v("tokenizers"),
            "numpy": v("numpy"), "nltk": v("nltk"), "fasttext": v("fasttext-numpy2"),
            "git_commit": git_commit()}


def write_json(path: Path, data: dict) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, default=str) + "\n")


def read_json(path: Path) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise MinimultError(f"cannot read {path}: {e}") from None


def copy_vocab(prepared_path: Path, run_dir: Path) -> None:
    for name in ("tokenizer.json", "vocab.txt"):
        shutil.copyfile(Path(prepared_path) / name, run_dir / name)
