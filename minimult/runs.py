"""Run folders and the `Run` that owns one: its resolved config, active mods, prepared data,
checkpoint, metrics log and metadata (results.json is `minimult.evaluate.results`'s).

    run = Run.create(cfg, mods, out=None)   # a new folder (never two runs in one folder)
    run = Run.open(path)                    # an existing run (config.json)
    run.save_checkpoint(...) / run.checkpoint() / run.load_model(device)
    run.data                                # the run's languages, views and layouts (cached prepare)

This module is the only code that reads or writes checkpoints. A run folder holds `config.json`
(resolved), `run.json` (mods with versions, seed, vocabulary hash, versions, git commit, status), the
vocabulary, `checkpoint.pt`, `metrics.jsonl` and, after evaluation, `results.json` (written and read by
`minimult.evaluate.results`, never here).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import platform
import shlex
import shutil
import subprocess
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Callable

from minimult import ranks
from minimult.config import EVALUATION_SECTIONS, RunConfig, flat, without_execution
from minimult.data import sources
from minimult.data.cache import atomic_write_text
from minimult.data.run_data import RunData
from minimult.data.vocab import files_digest, vocab_files
from minimult.errors import MinimultError
from minimult.mods import check_masking, from_canonical, versions

RUNS_DIR = Path("runs")
CHECKPOINT = "checkpoint.pt"
CHECKPOINT_FORMAT = 1
LOCK = ".sweep.lock"  # held by whoever writes to the run (pretrain, resume, eval, a sweep's worker)


def try_lock(run_dir: Path):
    """The run's lock file (`LOCK`), open and held (exclusive), or None where another process holds it; the
    lock lasts until the file is closed. OSError where the folder cannot be written. The one probe that
    pretrain, eval, a sweep's worker and the GPU unpacker share."""
    lock = open(Path(run_dir) / LOCK, "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        return None
    return lock


def lock_held(run_dir: Path) -> bool:
    """Whether some process holds the run's lock, read from Linux's /proc/locks (the lock file's device and
    inode) so that asking takes no lock: a probe that did could make a worker starting that moment skip the
    run. False where the lock file or /proc/locks is missing."""
    try:
        st, table = (Path(run_dir) / LOCK).stat(), Path("/proc/locks").read_text()
    except OSError:
        return False
    return f" {os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino} " in table


@contextlib.contextmanager
def folder_locked(folder: Path):
    """Hold an exclusive lock on a folder (blocking) for a short read-and-write of a file in it, such as a
    sweep root's manifest: two writers merge one after the other, neither drops the other's part."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def merge(into: dict, part: dict) -> None:
    """Nested dicts of `part` into `into`, key by key (a results part into results)."""
    for k, v in part.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            merge(into[k], v)
        else:
            into[k] = v


def merged(before: dict, latest: dict) -> dict:
    """A copy of `before` with `latest` merged in (`merge`): a standalone result's default `combine`."""
    both = json.loads(json.dumps(before))
    merge(both, latest)
    return both


def mods_for_folder(mods: str) -> str:
    """Canonical mods as run folder names write them: lang-pos,permute=0.25 -> lang-pos+permute0.25."""
    return mods.replace(",", "+").replace("=", "")


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
    base = RUNS_DIR / f"{mods_for_folder(mods)}-s{seed}-{time.strftime('%Y%m%d-%H%M%S')}"
    for i in range(1000):
        path = base if i == 0 else base.with_name(f"{base.name}-{i}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise MinimultError(f"could not create a fresh run folder near {base}")


def latest_run(root: Path = RUNS_DIR) -> Path:
    """The most recently started run under `root` (by its config.json time) that has a checkpoint, so
    a run that failed before its first one is never picked."""
    runs = [p.parent for p in Path(root).glob("*/config.json") if (p.parent / CHECKPOINT).is_file()]
    if not runs:
        raise MinimultError(f"no trained runs under {root}/: train one with `minimult pretrain` or name a run folder")
    return max(runs, key=lambda p: (p / "config.json").stat().st_mtime)


def check_run_dir(path: str | Path) -> Path:
    path = Path(path)
    if not (path / "config.json").is_file():
        raise MinimultError(f"not a run folder (no config.json): {path}")
    return path


RUN_SECTIONS = ("model", "data", "train")  # what every run's config.json holds (a HuggingFace config does not)


def check_run_config(path: Path, data: dict) -> None:
    """`data` (a folder's config.json) must be a run's resolved config, not e.g. a HuggingFace export's,
    which would otherwise read as a default config (unknown keys are ignored for older runs' sake)."""
    if all(isinstance(data.get(k), dict) for k in RUN_SECTIONS):
        return
    if "model_type" in data or "architectures" in data:
        raise MinimultError(f"{path} is a HuggingFace export (its config.json names model_type "
                            f"{data.get('model_type')!r}), not a run folder: evaluate it with "
                            f"`minimult eval --hf {shlex.quote(str(path))} --pair A B`; it cannot be resumed")
    missing = next(k for k in RUN_SECTIONS if not isinstance(data.get(k), dict))
    raise MinimultError(f"not a run folder: {path}/config.json is not a minimult run configuration (no {missing!r} "
                        f"section)")


def lab_folder(path: str | Path) -> tuple[Path, str] | None:
    """(the folder, "a run folder" or "a HuggingFace export") when `path` is one or lies inside one (a config.json
    that is a run's configuration, or names a model_type), else None: what no command writes other files into."""
    path = Path(path).absolute()
    for p in (path, *path.parents):
        config = p / "config.json"
        if not config.is_file():
            continue
        try:
            data = json.loads(config.read_text())
        except (OSError, ValueError):
            data = None
        if isinstance(data, dict) and all(isinstance(data.get(k), dict) for k in RUN_SECTIONS):
            return p, "a run folder"
        if isinstance(data, dict) and ("model_type" in data or "architectures" in data):
            return p, "a HuggingFace export"
    return None


def check_own_folder(path: str | Path, what: str, run_ok: bool = False) -> None:
    """Refuse `path` where it is a run folder (unless `run_ok`) or an export, or lies inside one (`lab_folder`): its
    files would read as theirs. `what` opens the error line (`--out PATH`)."""
    inside = lab_folder(path)
    if inside is None or (run_ok and inside == (Path(path).absolute(), "a run folder")):
        return
    folder, kind = inside
    where = "is" if folder == Path(path).absolute() else f"lies inside {folder}, which is"
    raise MinimultError(f"{what} {where} {kind}; give a folder of its own")


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def cpu_name() -> str | None:
    """The CPU's model name and its native bf16 instructions, e.g. `Intel(R) Xeon(R) Processor (amx_bf16,
    avx512_bf16)`: what a run's seconds were measured on (Linux: /proc/cpuinfo's first CPU; else `platform`)."""
    try:
        first = Path("/proc/cpuinfo").read_text().split("\n\n")[0]
    except OSError:
        first = ""
    fields = {key.strip(): value.strip() for key, sep, value in (line.partition(":") for line in first.splitlines())
              if sep}
    model = fields.get("model name") or platform.processor() or None
    native = [flag for flag in ("amx_bf16", "avx512_bf16") if flag in fields.get("flags", "").split()]
    return f"{model} ({', '.join(native)})" if model and native else model


def environment() -> dict:
    def v(name):
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    return {"python": platform.python_version(), "platform": platform.platform(), "cpu": cpu_name(),
            "minimult": v("minimult"), "torch": v("torch"), "tokenizers": v("tokenizers"),
            "numpy": v("numpy"), "nltk": v("nltk"), "fasttext": v("fasttext-numpy2"),
            "git_commit": git_commit()}


def write_json(path: Path, data: dict) -> None:
    """Atomically; a failure is one line naming `path` (never the temporary file beside it: atomic_write_text)."""
    atomic_write_text(path, json.dumps(data, indent=2, default=str) + "\n")


def check_writable_file(path: str | Path, what: str) -> Path:
    """Before hours of work: `path` can be written atomically (its folder exists and is writable, and it
    is not a folder itself)."""
    path = Path(path)
    folder = path.parent
    if path.is_dir():
        raise MinimultError(f"{what} {path} is a folder, not a file")
    if not folder.is_dir():
        raise MinimultError(f"cannot write {what} {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise MinimultError(f"cannot write {what} {path}: the folder {folder} is not writable")
    return path


def read_json(path: Path) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:  # ValueError: bad JSON, or bytes that are not UTF-8
        raise MinimultError(f"cannot read {path}: {e}") from None
    if not isinstance(data, dict):
        raise MinimultError(f"cannot read {path}: it holds a JSON {type(data).__name__}, not an object")
    return data


def copy_vocab(prepared_path: Path, run_dir: Path) -> None:
    """Every vocabulary list the run uses (en-es: Spanish's under es/) with its tokenizer, so that the run
    folder alone says which ids it trained with (`Run.check_vocabulary`) and exports them (`export --hf`)."""
    for f in vocab_files(prepared_path):  # vocab.txt first: the run's own tokenizer.json beside it
        target = run_dir / f.relative_to(prepared_path)
        target.parent.mkdir(exist_ok=True)
        for source, copy in ((f, target), (f.with_name("tokenizer.json"), target.with_name("tokenizer.json"))):
            shutil.copyfile(source, copy.with_name(f".{copy.name}.tmp"))  # a kill meanwhile leaves no half copy
            os.replace(copy.with_name(f".{copy.name}.tmp"), copy)


# ---------------------------------------------------------------------------------------------
# Checkpoints: the one place that reads and writes them.


def save_checkpoint(path: Path, state: dict, optimizer_state: dict | None, step: int, cfg, complete: bool,
                    seconds: float | None = None) -> None:
    """Atomic: written to a temporary file, then renamed over the old checkpoint. `seconds`: the training
    seconds its steps took, over every stretch (a resumed run's train_seconds go on from it)."""
    import torch  # lazy: torch takes seconds to import, and this module is read without it

    tmp = path.with_name(f".{path.name}.tmp")
    try:
        torch.save({"format": CHECKPOINT_FORMAT, "step": step, "complete": complete, "config": cfg.to_dict(),
                    "model": state, "optimizer": optimizer_state, "train_seconds": seconds}, tmp)
        os.replace(tmp, path)
    except (OSError, RuntimeError) as e:  # torch reports a full disk as a RuntimeError from its writer
        tmp.unlink(missing_ok=True)
        kept = "the previous checkpoint is kept" if path.is_file() else "no checkpoint was written"
        raise MinimultError(f"could not write the checkpoint {path} ({e}); {kept}") from None


def load_checkpoint(path: Path, map_location="cpu") -> dict:
    import torch  # lazy: torch takes seconds to import, and this module is read without it

    path = Path(path)
    if not path.is_file():
        raise MinimultError(f"no checkpoint at {path}")
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=False)
        if not isinstance(ckpt, dict) or ckpt.get("format") != CHECKPOINT_FORMAT or "model" not in ckpt:
            raise ValueError("not a minimult checkpoint")
        return ckpt
    except Exception as e:  # torch raises many kinds for a damaged file
        raise MinimultError(f"checkpoint {path} is corrupt or unreadable ({type(e).__name__}: {e}); move it away "
                            f"and `minimult pretrain --resume` trains the run again from step 0") from None


def read_weights(run_dir: Path, names) -> dict | None:
    """Some of a run's final weights as float numpy arrays ({name: array}, names it lacks left out),
    memory-mapped where the file allows; None when there is no readable checkpoint (for figures)."""
    import torch  # lazy: torch takes seconds to import, and this module is read without it

    path = Path(run_dir) / CHECKPOINT
    if not path.is_file():
        return None
    try:
        try:
            ckpt = torch.load(path, map_location="cpu", weights_only=False, mmap=True)
        except RuntimeError:  # an old-style (non-zip) file cannot be memory-mapped
            ckpt = torch.load(path, map_location="cpu", weights_only=False)
        state = ckpt["model"]
        return {k: state[k].float().numpy() for k in names if k in state}
    except Exception:
        return None


def log_lines(path: Path):
    """(line, row) of every line of a metrics log that holds a JSON object; damaged lines are skipped."""
    for line in path.read_text().splitlines() if path.is_file() else []:
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict):
            yield line, row


def logged_seconds(path: Path, up_to_step: int | None = None) -> float | None:
    """Training seconds by a metrics log's `elapsed_s` (None without one), over every stretch: where the
    clock restarted (a run resumed by a version whose checkpoints did not carry the seconds), the stretch
    before adds its last value. `up_to_step`: only the rows at or before it."""
    before = last = None
    for _, row in log_lines(path):
        x = row.get("elapsed_s")
        if not isinstance(x, (int, float)) or (up_to_step is not None and row.get("step", 0) > up_to_step):
            continue
        if last is not None and x < last:
            before = (before or 0.0) + last
        last = float(x)
    return None if last is None else (before or 0.0) + last


def truncate_log(path: Path, step: int) -> None:
    """Drop metric lines logged after the checkpoint we resume from (they will be logged again)."""
    if path.is_file():
        atomic_write_text(path, "".join(line + "\n" for line, row in log_lines(path) if row.get("step", 0) <= step))


class Run:
    """One run folder. Create it with `Run.create` (or `Run.create_at` for a named folder that may
    already hold this same run), open it with `Run.open`."""

    def __init__(self, path: Path, cfg, mods: tuple | None = None, data=None):
        """`mods` default to those `cfg.mods` names; `data` (a RunData) is made on first use."""
        self.path, self.cfg = Path(path), cfg
        self.mods = from_canonical(cfg.mods) if mods is None else mods
        self._data = data
        self.trained: dict | None = None  # how far the loaded checkpoint trained (`load_model`)

    @classmethod
    def create(cls, cfg, mods, out: str | Path | None = None, log: Callable[[str], None] = print) -> "Run":
        """A new folder (`out`, or runs/<mods>-s<seed>-<time>) with config.json and the vocabulary."""
        from minimult.model import pick_device  # lazy: torch takes seconds, and this module is read without it

        check_masking(cfg, mods)  # before the folder: bad input leaves no empty run behind
        pick_device(cfg.train.device)  # a device that is not here would leave a folder no command can train
        data = RunData(cfg, mods)
        data.prepare(log)
        return cls.create_at(create_run_dir(out, cfg.mods, cfg.train.seed), cfg, log, mods, data)

    @classmethod
    def create_at(cls, path: str | Path, cfg, log: Callable[[str], None] = print, mods: tuple | None = None,
                  data=None) -> "Run":
        """The run in folder `path` (a sweep's): config.json and vocabulary written if missing."""
        run = cls(Path(path), cfg, mods, data)
        run.path.mkdir(parents=True, exist_ok=True)
        if not (run.path / "config.json").is_file():
            write_json(run.path / "config.json", cfg.to_dict())
        if not all((run.path / f).is_file() for f in ("tokenizer.json", "vocab.txt")):
            copy_vocab(run.data.prepare(log).path, run.path)
        return run

    @classmethod
    def open(cls, path: str | Path) -> "Run":
        path = check_run_dir(path)
        data = read_json(path / "config.json")
        check_run_config(path, data)
        try:
            cfg = RunConfig.from_dict(data)
        except (TypeError, ValueError, AttributeError, KeyError) as e:
            kind = lambda v: {int: float, list: tuple}.get(type(v), type(v))  # noqa: E731  (JSON's 1 is a float's)
            kinds = {k: kind(v) for k, v in flat(RunConfig().to_dict()).items() if v is not None}
            odd = next((k for k, v in flat(data).items() if k in kinds and kind(v) is not kinds[k]), None)
            raise MinimultError(f"{path}/config.json is not a run configuration ({e})"
                                + (f": {odd} is {flat(data)[odd]!r}" if odd else "")) from None
        return cls(path, cfg)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def data(self):
        """The run's languages: prepared corpus (cached), views, layouts, dictionary."""
        if self._data is None:
            self._data = RunData(self.cfg, self.mods)
        return self._data

    @property
    def checkpoint_path(self) -> Path:
        return self.path / CHECKPOINT

    @property
    def metrics_path(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def meta(self) -> dict:
        return read_json(self.path / "run.json") if (self.path / "run.json").is_file() else {}

    def write_meta(self, meta: dict) -> None:
        write_json(self.path / "run.json", meta)

    @contextlib.contextmanager
    def locked(self):
        """Hold the run's lock while writing to it; another holder means one clear error, not two
        writers (two resumes would both write the checkpoint and the log). Of torchrun's ranks only the
        first, the one that writes, holds it; the others train the same run beside it."""
        launched = ranks.from_env()
        if launched is not None and not launched.main:
            yield self
            return
        try:
            lock = try_lock(self.path)
        except OSError as e:
            raise MinimultError(f"cannot write to the run folder {self.path}: {e.strerror}") from None
        if lock is None:
            raise MinimultError(f"another process is working on {self.path} (it holds {LOCK}); "
                                f"wait for it to finish")
        with lock:
            yield self

    @contextlib.contextmanager
    def removed_if_untrained(self):
        """For a folder just made: when what runs inside fails before training began (no run.json, no checkpoint),
        the folder, which holds only its config and vocabulary, is removed, so a second try may take the same
        --out; the error says so. An interrupt keeps it (a resume starts it), as does another process at work in it."""
        try:
            yield self
        except MinimultError as e:
            if (self.path / "run.json").exists() or self.checkpoint_path.exists() or lock_held(self.path):
                raise
            shutil.rmtree(self.path, ignore_errors=True)
            raise MinimultError(f"{e} ({self.path} removed: nothing was trained in it)") from None

    def check_vocabulary(self, prepared) -> None:
        """The prepared vocabulary must be the one this run trained with (its own vocab.txt and the hash
        run.json recorded): a rebuilt cache would silently give every piece another id."""
        # the run folder's copies of the lists the cache holds (not whatever else lies in it, e.g. an export)
        own = [self.path / f.relative_to(prepared.path) for f in vocab_files(prepared.path)]
        if self.meta.get("vocab_sha256") == prepared.vocab_hash:
            return self.check_own_vocabulary(own, prepared.path)  # then the copies are the cache's too
        for what, sha in (("run.json records", self.meta.get("vocab_sha256")),
                          (f"{own[0]} has", files_digest(own) if all(f.is_file() for f in own) else None)):
            if sha and sha != prepared.vocab_hash:
                raise MinimultError(f"the prepared vocabulary at {prepared.path} ({prepared.vocab_hash[:12]}) is not "
                                    f"the one this run trained with ({what} {sha[:12]}): the cache was rebuilt or "
                                    f"MINIMULT_CACHE points elsewhere; use the cache the run was trained with")

    def check_own_vocabulary(self, own: list[Path], origin) -> None:
        """The run folder's copies of its vocabulary lists (`own`, as `vocab_files` orders them) are the ones
        run.json records, else one line naming them and where to copy them back from (`origin`)."""
        recorded = self.meta.get("vocab_sha256")
        if recorded and all(f.is_file() for f in own) and files_digest(own) != recorded:
            raise MinimultError(f"{own[0]} is not the vocabulary run.json records ({recorded[:12]}): the run's own "
                                f"copy was changed, so its ids are not the run's; copy it back from {origin}")

    def check_data(self, prepared, doing: str = "resume") -> None:
        """Before a resume or an evaluation: the prepared text is the one this run has trained on (run.json's
        `data_sha256`, recorded since), so the rest of a run never trains on another text (a corpus file edited in
        between, another corpus package), nor is it scored on one as if it were its own, without a word, even
        where the vocabulary stayed the same."""
        recorded = self.meta.get("data_sha256")
        if recorded and recorded != prepared.data_hash:
            data = self.cfg.data
            named = sources.get(data.source).corpus_name(data)  # parallel: its files; en-es: its corpus
            files = f"{data.train} or {data.dev}" if named == data.train else named
            then = "since it started" if doing == "resume" else "since it trained"
            raise MinimultError(f"the prepared corpus at {prepared.path} ({prepared.data_hash[:12]}) is not the text "
                                f"this run trained on ({recorded[:12]}, run.json): {files} changed {then}; refusing to "
                                f"{doing} it on other text (restore the corpus, or train a new run)")

    def check_mod_versions(self) -> None:
        """Before a resume: every mod is at the version this run started with (run.json's `mod_versions`), so the
        rest of the run never trains under a mod whose behaviour changed since, while run.json names one version."""
        recorded, now = self.meta.get("mod_versions") or {}, versions(self.mods)
        changed = [name for name in now if name in recorded and recorded[name] != now[name]]
        if changed:
            name = changed[0]
            raise MinimultError(f"{self.path} started with mod {name} version {recorded[name]}, and this minimult has "
                                f"version {now[name]} (its behaviour changed since); refusing to resume it under "
                                f"another version (finish it with the code it started with, or train a new run)")

    def check_checkpoint_config(self, ckpt: dict) -> None:
        """A checkpoint resumes only the run it was written for (same resolved config, evaluation and
        execution settings aside: a run may resume on another number of processes)."""
        saved = without_execution(RunConfig.from_dict(ckpt.get("config") or {}).to_dict())
        mine = {k: v for k, v in without_execution(self.cfg.to_dict()).items() if k not in EVALUATION_SECTIONS}
        differ = [f"{s}.{k}" for s in mine if isinstance(mine[s], dict)
                  for k in mine[s] if saved.get(s, {}).get(k) != mine[s][k]]
        differ += [k for k in mine if not isinstance(mine[k], dict) and saved.get(k) != mine[k]]
        if differ:
            k = differ[0]
            raise MinimultError(f"{self.checkpoint_path} was written for another configuration than {self.path}/"
                                f"config.json ({len(differ)} setting(s) differ, e.g. {k}); refusing to resume it")

    def has_checkpoint(self) -> bool:
        return self.checkpoint_path.is_file()

    def checkpoint(self, map_location="cpu") -> dict:
        return load_checkpoint(self.checkpoint_path, map_location)

    def save_checkpoint(self, state: dict, optimizer_state: dict | None, step: int, complete: bool,
                        seconds: float | None = None) -> None:
        save_checkpoint(self.checkpoint_path, state, optimizer_state, step, self.cfg, complete, seconds)

    def load_model(self, device: str = "auto", log: Callable[[str], None] = print):
        """The run's model with its last checkpoint's weights, in eval mode, after checking that the
        prepared vocabulary and text are the ones it trained with. A run whose training failed (diverged) is refused;
        one that has not finished says so in one line. `self.trained` then says how far the checkpoint
        trained: {"steps", "total_steps", "complete"}."""
        from minimult.model import Bert, pick_device  # lazy: torch takes seconds to import (as above)

        self.check_not_failed()
        if not self.has_checkpoint():
            raise MinimultError(f"run {self.path} has no checkpoint yet: train it first (minimult pretrain --resume "
                                f"{shlex.quote(str(self.path))})")
        dev = pick_device(device)
        ckpt = self.checkpoint(map_location=dev)
        model = Bert(self.cfg.model).to(dev)
        model.load_state_dict(ckpt["model"])
        model.eval()
        prepared = self.data.prepare(log)
        self.check_data(prepared, "evaluate")  # first: an edited corpus file changes the vocabulary too
        self.check_vocabulary(prepared)
        total = self.meta.get("total_steps")
        self.trained = {"steps": ckpt["step"], "total_steps": total, "complete": bool(ckpt.get("complete"))}
        if not ckpt.get("complete"):
            of = f" of {total:,}" if isinstance(total, int) else ""
            log(f"note: run {self.path} is unfinished (step {ckpt['step']:,}{of}, run.json says "
                f"{self.meta.get('status', 'nothing')!r}): its last checkpoint is evaluated and stored as not "
                f"complete; `minimult pretrain --resume {shlex.quote(str(self.path))}` finishes it")
        return model

    def checkpoint_steps(self) -> int | None:
        """The training steps of the checkpoint `load_model` loaded (run.json's, where none was loaded)."""
        return (self.trained or {}).get("steps", self.meta.get("steps"))

    def check_not_failed(self) -> None:
        """A run whose training diverged (run.json's status `failed: ...`) has no model worth a result: its
        checkpoint is the last one before the loss broke."""
        status = str(self.meta.get("status", ""))
        if status.startswith("failed"):
            raise MinimultError(f"run {self.path} {status}: what it kept is from before the loss diverged, not a "
                                f"trained model, so it is not evaluated; train a new run (another --out) with e.g. a "
                                f"lower --set train.lr")
