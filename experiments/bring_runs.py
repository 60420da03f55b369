"""Bring the finished runs of a sweep root (a background sweep's own folder, a GPU machine's unpacked
archive) into a results folder of the repository, with a manifest that lists exactly what is there.

    python experiments/bring_runs.py SRC_ROOT DST_ROOT [--dry-run]

e.g. `python experiments/bring_runs.py /work/sweep/experiments/results/table1-paper
experiments/results/table1-paper`, then `git add experiments/results/table1-paper`.

A run folder of SRC_ROOT is brought when its training is done and evaluated in full
(`minimult.sweep.plan.results_complete`, what a sweep checks before it skips a run) and DST_ROOT has no
finished run of that name. Its files are copied without checkpoints and weights (`*.pt`) and without the
sweep's lock, into a hidden folder that is renamed into place once whole (an interrupted copy leaves no
half run; an unfinished folder of the same name in DST_ROOT is replaced). Then every `<grid>.sweep.json`
of SRC_ROOT is written into DST_ROOT (atomically) with each setting's runs cut to those DST_ROOT holds
finished, merged with what DST_ROOT's manifest listed: a sweep's manifest lists every planned run at its
start, and committed as it is it would list runs the repository does not have, which `minimult report`
would show as settings with fewer seeds than planned, without saying why. Settings that DST_ROOT's manifest
has and SRC_ROOT's lacks are kept.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from minimult.errors import MinimultError  # noqa: E402
from minimult.runs import read_json, write_json  # noqa: E402
from minimult.sweep.plan import results_complete  # noqa: E402

LEFT_OUT = {".sweep.lock"}  # besides every *.pt (checkpoints, GPU weights)


def wanted(path: Path) -> bool:
    return path.suffix != ".pt" and path.name not in LEFT_OUT


def bring_run(src: Path, dst: Path) -> None:
    """`src`'s files (not its checkpoints) as the folder `dst`, replacing an unfinished one there."""
    tmp = dst.with_name(f".{dst.name}.bringing")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp, ignore=lambda folder, names: [n for n in names if not wanted(Path(folder) / n)])
    swap_in(tmp, dst)


def swap_in(whole: Path, dst: Path) -> None:
    """The folder `whole` (complete, beside `dst` on one filesystem) renamed to `dst`, what was there moved
    aside first and removed after: at no moment a half-made `dst`."""
    old = dst.with_name(f".{dst.name}.replaced")
    shutil.rmtree(old, ignore_errors=True)
    if dst.exists():
        dst.rename(old)
    whole.rename(dst)
    shutil.rmtree(old, ignore_errors=True)


def merge_settings(ours: dict, theirs: dict, keep=lambda run: True) -> list[dict]:
    """The settings of two manifests of one grid's sweep: in `ours`' order (the order of the report's rows),
    those only `theirs` lists after them (a sweep of a few settings, `--only`, lists only those); each with its
    fields as `theirs` has them (its `paper` numbers merged into `ours`', so keys only `ours` has stay), its runs `ours`' then `theirs`', once each (a sweep's own merge order), those
    `keep` accepts; a setting with runs is not `left_out`."""
    merged = {str(s.get("id")): dict(s) for s in ours.get("settings", [])}
    for s in theirs.get("settings", []):
        mine = merged.get(str(s.get("id")), {})
        paper = {**mine.get("paper", {}), **s.get("paper", {})}  # numbers only ours has (the paper's stds) stay
        merged[str(s.get("id"))] = {**mine, **s, "runs": [*mine.get("runs", []), *s.get("runs", [])],
                                    **({"paper": paper} if paper else {})}
    out = []
    for s in merged.values():
        runs = [r for r in dict.fromkeys(s.get("runs", [])) if keep(r)]
        out.append({k: v for k, v in s.items() if not (runs and k == "left_out")} | {"runs": runs})
    return out


def merged_manifest(src_manifest: dict, dst_manifest: dict, dst: Path, coming=()) -> dict:
    """`src_manifest` with `dst_manifest`'s settings merged in (`merge_settings`), each setting's runs cut to
    the ones finished under `dst` or `coming` there (a dry run's, not brought yet)."""
    return {**src_manifest, "settings": merge_settings(dst_manifest, src_manifest,
                                                       keep=lambda r: r in coming or results_complete(dst / r))}


def bring(src: Path, dst: Path, dry_run: bool = False, log=print) -> list[str]:
    """Bring `src`'s finished runs into `dst` and write its manifests; the names of the runs brought."""
    if not src.is_dir():
        raise MinimultError(f"{src}: no such folder")
    manifests = sorted(src.glob("*.sweep.json"))
    if not manifests:
        raise MinimultError(f"{src}: no <grid>.sweep.json here: not a sweep's root")
    if not dry_run:
        dst.mkdir(parents=True, exist_ok=True)
    brought = []
    for run in sorted(p for p in src.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if not results_complete(run) or results_complete(dst / run.name):
            continue
        brought.append(run.name)
        log(f"{'would bring' if dry_run else 'brought'} {run.name}")
        if not dry_run:
            bring_run(run, dst / run.name)
    for m in manifests:
        target = dst / m.name
        data = merged_manifest(read_json(m), read_json(target) if target.is_file() else {}, dst, brought)
        n = sum(len(s["runs"]) for s in data["settings"])
        log(f"{'would write' if dry_run else 'wrote'} {target}: {n} runs listed, every one finished there")
        if not dry_run:
            write_json(target, data)
    if not brought:
        log(f"no finished run of {src} is missing from {dst}")
    return brought


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("src", type=Path, help="the sweep's root (run folders and <grid>.sweep.json)")
    p.add_argument("dst", type=Path, help="the results folder to bring them into")
    p.add_argument("--dry-run", action="store_true", help="say what would be brought and written, change nothing")
    args = p.parse_args()
    try:
        bring(args.src, args.dst, args.dry_run)
    except MinimultError as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
