"""The `--eval-every` curves of several runs side by side, as a markdown table (1,000 dev sentences).

    python experiments/curves.py RUN [RUN ...] [--metrics mu,retrieval@0,translation@0] [--every N]

RUN: a run folder, or a copy of its metrics.jsonl (named <run>.metrics.jsonl, as the snapshots of runs
still in progress in experiments/results/fidelity-paper-curves/).

A row per evaluated update, a column per run and metric: `mu`, `ppl` (dev perplexity) or
`<measure>@<layer>` with measure one of align_f1, retrieval, translation (as in results.json). A run
without that update leaves its cells empty.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def curve(run: Path) -> dict[int, dict]:
    path = run if run.is_file() else run / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if '"eval"' in line]
    return {r["step"]: r["eval"] for r in rows}


def labels(runs: list[Path]) -> list[str]:
    """Each run's column name: its folder name (or snapshot's run name), with the folder above it where two
    runs share a name (the same setting in two results folders), so no column hides another."""
    names = [run.name.removesuffix(".metrics.jsonl") for run in runs]
    return [f"{run.resolve().parent.name}/{name}" if names.count(name) > 1 else name
            for name, run in zip(names, runs)]


def value(ev: dict, metric: str) -> float | None:
    if metric == "mu":
        return ev.get("mu")
    if metric == "ppl":
        return ev.get("perplexity", {}).get("dev")
    measure, layer = metric.split("@")
    return ev["layers"].get(layer, {}).get(measure)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--metrics", default="mu,retrieval@0,translation@0")
    ap.add_argument("--every", type=int, default=1, help="every N-th evaluated update (the last always)")
    args = ap.parse_args()
    metrics = args.metrics.split(",")
    for run in args.runs:
        if not (run.is_file() or (run / "metrics.jsonl").is_file()):
            ap.error(f"{run}: neither a run folder with a metrics.jsonl nor a copy of one")
    curves = {label: curve(run) for label, run in zip(labels(args.runs), args.runs)}
    steps = sorted({s for c in curves.values() for s in c})
    steps = [s for i, s in enumerate(steps) if i % args.every == args.every - 1 or s == steps[-1]]
    head = ["update"] + [f"{name} {m}" for name in curves for m in metrics]
    print("| " + " | ".join(head) + " |\n|" + "--:|" * len(head))
    for s in steps:
        cells = [f"{s:,}"]
        for c in curves.values():
            for m in metrics:
                v = value(c[s], m) if s in c else None
                cells.append("" if v is None else f"{v:.0f}" if m == "ppl" else f"{v:.3f}")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
