"""Bring what one device call of `experiments/gpu/sweep_call.sh` sent back into a sweep root on this machine,
so that the sweep here skips the runs the GPU finished and resumes the ones it began.

    python experiments/gpu/unpack_call.py FILES_AT ROOT [--dry-run]

e.g. `python experiments/gpu/unpack_call.py /work/.device/1 /work/sweep/experiments/results/table1-paper`,
then `python experiments/bring_runs.py ROOT experiments/results/table1-paper` for the repository's copy.

What a call sends back, and what becomes of it here:
- `done-<root name>-s<seeds>.tar.gz`: its finished runs (no checkpoints) and the call's manifest. Each run is
  moved into ROOT, replacing an unfinished folder of that name (one this machine's sweep began, or an earlier
  call's); a run ROOT already has finished is left as it is. The manifest's runs are merged into ROOT's
  `<grid>.sweep.json` (each setting's runs, once each; under the lock a sweep takes to write it), so that a
  report or `bring_runs.py` on ROOT lists them.
- `weights-<root name>-<run>.pt` (a '+' of the run's name sent as '_'): a finished run's final weights, which
  become its `checkpoint.pt` (what eval, the report's figures and probes read), for the runs this call
  brought (a finished run of that name that was here before may have trained elsewhere).
- `unfinished-<root name>-<run>.tar.gz`: a run the call's limit stopped, with its last checkpoint. It
  replaces ROOT's folder of that name unless that one is finished or has a checkpoint at least as far on;
  the sweep here resumes it (its run.json then records both stretches, each on its own device).
A run folder that a process here is working on (it holds the run's `.sweep.lock`) is never touched: that
run is named and left out; unpack again once the process stops.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.bring_runs import merge_settings, swap_in  # noqa: E402
from minimult.errors import MinimultError  # noqa: E402
from minimult.runs import (CHECKPOINT, LOCK, folder_locked, load_checkpoint, read_json, try_lock,  # noqa: E402
                           write_json)
from minimult.sweep.plan import results_complete  # noqa: E402


def busy(run_dir: Path) -> bool:
    """Whether a process here holds the run's lock (a sweep's worker, pretrain, eval)."""
    if not (run_dir / LOCK).is_file():
        return False
    lock = try_lock(run_dir)
    if lock is not None:
        lock.close()
    return lock is None


def checkpoint_step(run_dir: Path) -> int:
    """The step of the run's checkpoint; -1 without a readable one."""
    try:
        return int(load_checkpoint(run_dir / CHECKPOINT).get("step", -1))
    except MinimultError:
        return -1


def place(src: Path, dst: Path) -> None:
    """`src` (a run folder unpacked beside ROOT's) as `dst`, without a stale lock, replacing what was there."""
    (src / LOCK).unlink(missing_ok=True)
    swap_in(src, dst)


def merge_manifest(src: Path, root: Path) -> int:
    """`src` (a call's `<grid>.sweep.json`) merged into ROOT's (`bring_runs.merge_settings`: each setting's
    runs ROOT's then the call's, once each; settings only one of them has kept), under the lock on ROOT a
    sweep takes to write its own. The number of runs it added."""
    target = root / src.name
    with folder_locked(root):
        theirs, ours = read_json(src), read_json(target) if target.is_file() else {}
        settings = merge_settings(ours, theirs)
        write_json(target, {**theirs, **ours, "settings": settings})
        return sum(len(s["runs"]) for s in settings) - sum(len(s.get("runs", [])) for s in ours.get("settings", []))


def _extract(archive: Path, into: Path) -> list[Path]:
    """The archive's top-level folders, unpacked under `into` (tarfile's 'data' filter: no paths outside)."""
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(into, filter="data")
    except (tarfile.TarError, OSError, EOFError) as e:
        raise MinimultError(f"{archive}: not a readable archive ({e})") from None
    return sorted(p for p in into.iterdir())


def unpack(files_at: Path, root: Path, dry_run: bool = False, log=print) -> dict[str, list[str]]:
    """Bring a call's files into `root`; {"finished": runs, "weights": runs, "unfinished": runs, "left": runs}."""
    if not files_at.is_dir():
        raise MinimultError(f"{files_at}: no such folder")
    archives = sorted(files_at.glob("done-*.tar.gz")) + sorted(files_at.glob("unfinished-*.tar.gz"))
    weights = sorted(files_at.glob("weights-*.pt"))
    if not archives and not weights:
        raise MinimultError(f"{files_at}: no done-*, unfinished-* or weights-* file of a device call here")
    if not dry_run:
        root.mkdir(parents=True, exist_ok=True)
    out: dict[str, list[str]] = {"finished": [], "weights": [], "unfinished": [], "left": []}
    verb = "would bring" if dry_run else "brought"
    for archive in archives:
        finished = archive.name.startswith("done-")
        with tempfile.TemporaryDirectory(dir=root if root.is_dir() else None, prefix=".unpacking-") as tmp:
            for item in _extract(archive, Path(tmp)):
                if item.is_file() and item.name.endswith(".sweep.json"):
                    if dry_run:
                        log(f"would merge {item.name} into {root / item.name}")
                    else:
                        added = merge_manifest(item, root)
                        log(f"merged {item.name} into {root / item.name}: {added} run(s) added to its list")
                    continue
                if not item.is_dir():
                    continue
                dst, why = root / item.name, None
                step = None if finished else checkpoint_step(item)
                if results_complete(dst):
                    why = "already finished here"
                elif busy(dst):
                    why = f"a process here is working on it (it holds {LOCK}); unpack again once it stops"
                elif step is not None and checkpoint_step(dst) >= step:
                    why = f"its checkpoint here is as far on (step {checkpoint_step(dst)}, the call's {step})"
                if why:
                    out["left"].append(item.name)
                    log(f"left {item.name} ({archive.name}): {why}")
                    continue
                out["finished" if finished else "unfinished"].append(item.name)
                log(f"{verb} {item.name} ({'finished' if finished else f'unfinished, at step {step}'})")
                if not dry_run:
                    place(item, dst)
    # weights only for the runs this call brought: a finished run of the same name that was here before may
    # have trained elsewhere, and its figures must come from its own weights. The longest name first, should
    # one run's name end with another's.
    names = sorted(out["finished"], key=lambda n: -len(n))
    for w in weights:
        name = next((n for n in names if w.name.endswith(f"-{n.replace('+', '_')}.pt")), None)
        run = root / str(name)
        if name is None:
            out["left"].append(w.name)
            log(f"left {w.name}: not the weights of a run this call brought into {root}")
        elif (run / CHECKPOINT).is_file():
            log(f"left {w.name}: {name} has its {CHECKPOINT} already")
        else:
            out["weights"].append(name)
            log(f"{'would copy' if dry_run else 'copied'} {w.name} to {name}/{CHECKPOINT}")
            if not dry_run:
                tmp = run / f".{CHECKPOINT}.tmp"
                shutil.copyfile(w, tmp)
                os.replace(tmp, run / CHECKPOINT)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files_at", type=Path, help="the folder the device tool put the call's files in")
    p.add_argument("root", type=Path, help="the sweep root on this machine (the sweep's --root)")
    p.add_argument("--dry-run", action="store_true", help="say what would be brought, change nothing")
    args = p.parse_args()
    try:
        unpack(args.files_at, args.root, args.dry_run)
    except MinimultError as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
