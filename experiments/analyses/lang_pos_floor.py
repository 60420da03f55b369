"""What tells early whether a lang-pos run ends on the floor (µ < FLOOR on the full evaluation): the start of
its curve, or the weights its seed starts it from?

For every trained run with lang-pos among its mods in the given results folders:

- **The curve.** Its µ on the curve (`metrics.jsonl`, the evaluations every `train.eval_every` updates on
  1,000 dev sentences) against its final µ (`results.json`). At each evaluated update: how many runs end on
  the floor and how many off it, the highest curve µ among the first and the lowest among the second, and the
  fewest runs any one cut on the curve puts on the wrong side (0: the curve already tells them apart).
- **The initial weights.** Runs of one folder name (one setting and seed) in several folders, e.g. the same row under two
  recipes: whether they end on the same side of the floor. With `--weights`, whether they started from the
  same weights (`train.initial_model` of each run's config): then only what the seed draws during training
  (batches, masking, dropout) and the recipe differ.

    python experiments/analyses/lang_pos_floor.py experiments/results/table1-paper experiments/results/table1-published
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from minimult.report.tables import FLOOR


def lang_pos_runs(folders: list[Path]) -> list[dict]:
    """{folder, name, dir, final, curve: {update: µ}} for each trained lang-pos run with results and a curve."""
    runs = []
    for folder in folders:
        for meta_file in sorted(folder.glob("*/run.json")):
            meta, results = json.loads(meta_file.read_text()), meta_file.parent / "results.json"
            if "lang-pos" not in meta.get("mods", "").split(",") or not meta.get("total_steps") or not results.exists():
                continue
            rows = [json.loads(line) for line in (meta_file.parent / "metrics.jsonl").read_text().splitlines()]
            curve = {row["step"]: row["eval"]["mu"] for row in rows if "eval" in row}
            if curve:
                runs.append({"folder": folder.name, "name": meta_file.parent.name, "dir": str(meta_file.parent),
                             "final": json.loads(results.read_text())["mu"], "curve": curve})
    return runs


def separation(runs: list[dict], update: int) -> dict:
    """At `update`: the runs that end on the floor and off it, their curve µ's extremes, the fewest misplaced."""
    floor = [r["curve"][update] for r in runs if r["final"] < FLOOR and update in r["curve"]]
    off = [r["curve"][update] for r in runs if r["final"] >= FLOOR and update in r["curve"]]
    cuts = sorted(set(floor + off)) + [float("inf")]
    wrong = min(sum(x >= cut for x in floor) + sum(x < cut for x in off) for cut in cuts)
    return {"update": update, "floor": len(floor), "off": len(off), "floor_max": max(floor, default=None),
            "off_min": min(off, default=None), "misplaced": wrong}


def same_seed(runs: list[dict], weights: bool = False) -> list[dict]:
    """Each folder name found in more than one folder: its final µ in each, whether all end on the same side
    of the floor and, with `weights`, whether all started from the same initial weights."""
    by_name: dict[str, list[dict]] = {}
    for r in runs:
        by_name.setdefault(r["name"], []).append(r)
    out = []
    for name, group in by_name.items():
        if len(group) < 2:
            continue
        row = {"name": name, "final": {r["folder"]: r["final"] for r in group},
               "agree": len({r["final"] < FLOOR for r in group}) == 1}
        if weights:
            row["same_weights"] = _same_initial_weights([Path(r["dir"]) for r in group])
        out.append(row)
    return out


def _same_initial_weights(run_dirs: list[Path]) -> bool:
    import torch

    from minimult.config import RunConfig
    from minimult.train import initial_model

    states = [initial_model(RunConfig.from_dict(json.loads((d / "config.json").read_text()))).state_dict()
              for d in run_dirs]
    return all(s.keys() == states[0].keys() and all(torch.equal(s[k], states[0][k]) for k in s) for s in states[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--weights", action="store_true", help="Also compare the initial weights of same-seed runs.")
    parser.add_argument("--json", type=Path, help="Also write the rows here.")
    args = parser.parse_args()
    runs = lang_pos_runs(args.folders)
    rows = [separation(runs, u) for u in sorted({u for r in runs for u in r["curve"]})]
    print(f"{len(runs)} lang-pos runs: {sum(r['final'] < FLOOR for r in runs)} end on the floor (µ < {FLOOR})\n")
    print("| update | end on / off the floor | curve µ: highest ending on it | lowest ending off it | misplaced |")
    print("|--:|--:|--:|--:|--:|")
    for row in rows:
        print(f"| {row['update']:,} | {row['floor']} / {row['off']} | {row['floor_max']:.3f} | {row['off_min']:.3f} "
              f"| {row['misplaced']} |")
    pairs = same_seed(runs, args.weights)
    if pairs:
        folders = list(dict.fromkeys(r["folder"] for r in runs))
        print(f"\n{sum(p['agree'] for p in pairs)} of {len(pairs)} runs of one setting and seed end on the same side "
              f"of the floor in {', '.join(folders)}:\n")
        print(f"| run | {' | '.join(folders)} | same side |" + (" same initial weights |" if args.weights else ""))
        print("|---|" + "--:|" * len(folders) + "---|" + ("---|" if args.weights else ""))
        for p in pairs:
            cells = " | ".join(f"{p['final'][f]:.3f}" if f in p["final"] else "" for f in folders)
            same = f" {'yes' if p['same_weights'] else 'no'} |" if args.weights else ""
            print(f"| {p['name']} | {cells} | {'yes' if p['agree'] else 'no'} |{same}")
    if args.json:
        args.json.write_text(json.dumps({"floor": FLOOR, "runs": runs, "rows": rows, "same_seed": pairs}, indent=1)
                             + "\n")


if __name__ == "__main__":
    main()
