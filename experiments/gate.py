"""The refactoring gate: tiny-preset numbers of every setting, recorded before a change and compared after.

    python experiments/gate.py record OUT        # trains + evaluates every setting, single and stacked
    python experiments/gate.py compare A/gate.json B/gate.json
    python experiments/gate.py record OUT --skip 15,16,17 --how stacked   # a part of the grid

A record resumes: the sweep keeps the complete runs under OUT, so an interrupted `record` run again
finishes the rest (with the same code). `compare` compares the runs both records hold and names the
runs only one of them holds; those count as differences unless `--common` is given.

`record` sweeps, through the CLI a user types, every setting of Table 1 (overparam included) plus
every registered mod alone, the unicode Fake-English source and en-es, with the tiny preset on the built-in
corpus, seed 0: once run by run (`--stack 1`) and once stacked (`--stack 8`, runs of one shape
trained as one batched model). For each run it keeps what a refactor must not change: every metric in
`results.json`, every training-log row (loss, lr, in-training evaluations; timings dropped) and a
sha256 of every tensor of the final checkpoint. `compare` prints each difference and exits 1 if there
is any. On one machine the two must be equal bit for bit; the cache (vocabulary, neighbour tables)
is shared through `MINIMULT_CACHE` (default `OUT/../gate-cache`), so both sides read one vocabulary and one
neighbour table (docs/fidelity.md, "Known differences").

The overparam settings (BERT-base sizes) train on 100 sentences; on a 2-core CPU beside other work
each still took 35-64 min (evaluation at BERT-base size), the other 30 settings ~1 min each, so a
quick gate leaves them out (`--skip 15,16,17`) and says so.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (id, mods, overrides) beyond Table 1 and every registered mod alone (`extra_settings`): values other
# than a mod's default, and the other sources with a few mods
EXTRA = [("m-permute25", "permute=0.25", {}), ("m-knn2", "knn-replace=2", {})]
SOURCE_MODS = ("", "inv-order", "lang-pos")
SMALL = {"data.train_sentences": 100}  # for settings with a mod that wants a GPU (BERT-base sizes)
TIMING_KEYS = {"tokens_per_s", "elapsed_s"}


def small(mods: str) -> dict:
    """SMALL for settings with a mod that wants a GPU (`Mod.needs_gpu`: overparam's BERT-base sizes), else {}."""
    from minimult.mods import parse_mods

    return SMALL if any(a.mod.needs_gpu for a in parse_mods(mods)) else {}


def extra_settings(table1: list[tuple]) -> list[tuple]:
    """Every registered mod that no Table 1 setting has alone, at its default value; EXTRA; and every
    registered source besides the default (and those that read the user's files), alone and with
    SOURCE_MODS (the registries, not a hand list, so a new mod or source is covered without touching this
    file)."""
    from minimult.config import DataConfig
    from minimult.data import sources
    from minimult.mods import registered

    alone = {mods for _, mods, _ in table1}
    out = [(f"m-{m.name}", m.name, small(m.name)) for m in registered() if m.name not in alone]
    out += EXTRA
    for name, source in sources.REGISTRY.items():
        # Table 1 runs the default source; parallel reads the user's files (tests/test_parallel.py)
        if name != DataConfig.source and not source.reads_files:
            out += [(f"{name}-{mods or 'original'}", mods, {"data.fake": name}) for mods in SOURCE_MODS]
    return out


def grid_text() -> str:
    import tomllib

    table1 = tomllib.loads((ROOT / "experiments" / "table1.toml").read_text())
    lines = ['title = "gate"', 'preset = "tiny"', "seeds = [0]", "[preset_overrides.tiny]",
             '"model.layers" = 8', '"train.eval_every" = 13']
    settings = [(s["id"], s["mods"], small(s["mods"])) for s in table1["settings"]]
    for sid, mods, overrides in settings + extra_settings(settings):
        lines += ["[[settings]]", f'id = "{sid}"', f'name = "{sid}"', f'mods = "{mods}"']
        if overrides:
            lines.append("overrides = { " + ", ".join(f'"{k}" = {json.dumps(v)}' for k, v in overrides.items()) + " }")
    return "\n".join(lines) + "\n"


def tensor_hashes(path: Path) -> dict[str, str]:
    import torch

    state = torch.load(path, map_location="cpu", weights_only=False)["model"]
    return {k: hashlib.sha256(v.detach().contiguous().numpy().tobytes()).hexdigest()[:16]
            for k, v in sorted(state.items())}


def run_record(run_dir: Path) -> dict:
    results = json.loads((run_dir / "results.json").read_text())
    keep = ("layers", "mu", "perplexity", "dev_sentences", "dictionary_entries", "steps", "mods",
            "mod_versions", "vocab_sha256")
    log = run_dir / "metrics.jsonl"  # an untrained run logs nothing
    rows = [{k: v for k, v in json.loads(line).items() if k not in TIMING_KEYS}
            for line in (log.read_text().splitlines() if log.is_file() else []) if line.strip()]
    return {"results": {k: results.get(k) for k in keep}, "log": rows,
            "weights": tensor_hashes(run_dir / "checkpoint.pt")}


def record(out: Path, skip: set[str] = frozenset(), hows: tuple[str, ...] = ("single", "stacked")) -> None:
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT),  # this checkout's package, whatever is installed
           "MINIMULT_CACHE": os.environ.get("MINIMULT_CACHE", str(out.resolve().parent / "gate-cache"))}
    grid = out / "gate.toml"
    grid.write_text(grid_text())
    ids = [line.split('"')[1] for line in grid.read_text().splitlines() if line.startswith("id = ")]
    ids = [i for i in ids if i not in skip]
    record = {}
    for how, stack in (("single", 1), ("stacked", 8)):
        if how not in hows:
            continue
        root = out / how
        cmd = [sys.executable, "-m", "minimult.cli", "sweep", str(grid), "--root", str(root), "--stack", str(stack),
               "--jobs", "2", "--only", ",".join(ids), "--status-every", "600"]
        print("$", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, env=env, cwd=ROOT)
        for run_dir in sorted(p.parent for p in root.glob("*/results.json")):
            record[f"{how}/{run_dir.name}"] = run_record(run_dir)
    (out / "gate.json").write_text(json.dumps(record, indent=1, sort_keys=True))
    print(f"gate: {len(record)} runs recorded in {out / 'gate.json'}")


def diff(a, b, where: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in diff(a.get(k), b.get(k), f"{where}/{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in diff(x, y, f"{where}[{i}]")]
    return [] if a == b else [f"{where}: {a!r} -> {b!r}"]


def compare(a: Path, b: Path, common: bool = False) -> int:
    before, after = json.loads(a.read_text()), json.loads(b.read_text())
    for name, only in (("before", sorted(set(before) - set(after))), ("after", sorted(set(after) - set(before)))):
        if only:
            print(f"only {name} ({len(only)}): {', '.join(only)}")
    if common:
        before = {k: v for k, v in before.items() if k in after}
        after = {k: v for k, v in after.items() if k in before}
    diffs = diff(before, after)
    for d in diffs[:200]:
        print(d)
    both = len(set(before) & set(after))
    print(f"gate: {len(before)} runs before, {len(after)} after, {both} in both; {len(diffs)} difference(s)")
    return 1 if diffs else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("out", type=Path)
    r.add_argument("--skip", default="", help="setting ids to leave out, comma-separated (e.g. 15,16,17: overparam)")
    r.add_argument("--how", default="single,stacked", help="single, stacked or both (default)")
    c = sub.add_parser("compare")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    c.add_argument("--common", action="store_true", help="compare only the runs both records hold")
    args = p.parse_args()
    if args.cmd == "record":
        hows = tuple(h for h in args.how.split(",") if h)
        if not hows or set(hows) - {"single", "stacked"}:
            p.error(f"--how takes single, stacked or both, not {args.how!r}")
        record(args.out, set(filter(None, args.skip.split(","))), hows)
        return 0
    return compare(args.before, args.after, args.common)


if __name__ == "__main__":
    sys.exit(main())
