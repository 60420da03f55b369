"""Can the start of a lang-pos run tell whether it will end on the floor (µ < FLOOR on the full evaluation)?

For every trained run with lang-pos among its mods in the given results folders, its µ on the curve
(`metrics.jsonl`, the evaluations every `train.eval_every` updates on 1,000 dev sentences) is set against
its final µ (`results.json`). At each evaluated update: how many runs end on the floor and how many off it,
the highest curve µ among the first and the lowest among the second, and the fewest runs any one cut on the
curve puts on the wrong side (0: the curve already tells them apart).

    python experiments/analyses/early_floor.py experiments/results/table1-paper experiments/results/table1-published
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from minimult.report.recipes import FLOOR


def lang_pos_runs(folders: list[Path]) -> list[dict]:
    """{run, final, curve: {update: µ}} for each trained lang-pos run with results and a curve."""
    runs = []
    for folder in folders:
        for meta_file in sorted(folder.glob("*/run.json")):
            meta, results = json.loads(meta_file.read_text()), meta_file.parent / "results.json"
            if "lang-pos" not in meta.get("mods", "").split(",") or not meta.get("total_steps") or not results.exists():
                continue
            rows = [json.loads(line) for line in (meta_file.parent / "metrics.jsonl").read_text().splitlines()]
            curve = {row["step"]: row["eval"]["mu"] for row in rows if "eval" in row}
            if curve:
                runs.append({"run": f"{folder.name}/{meta_file.parent.name}",
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--json", type=Path, help="Also write the rows here.")
    args = parser.parse_args()
    runs = lang_pos_runs(args.folders)
    updates = sorted({u for r in runs for u in r["curve"]})
    rows = [separation(runs, u) for u in updates]
    print(f"{len(runs)} lang-pos runs: {sum(r['final'] < FLOOR for r in runs)} end on the floor (µ < {FLOOR})")
    print("| update | end on / off the floor | curve µ: highest ending on it | lowest ending off it | misplaced |")
    print("|--:|--:|--:|--:|--:|")
    for row in rows:
        print(f"| {row['update']:,} | {row['floor']} / {row['off']} | {row['floor_max']:.3f} | {row['off_min']:.3f} "
              f"| {row['misplaced']} |")
    if args.json:
        args.json.write_text(json.dumps({"floor": FLOOR, "runs": runs, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
