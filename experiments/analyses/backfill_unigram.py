"""Adds `unigram_entropy` to the run.json of run folders made before training recorded it, so that
`minimult report` can tell the runs that never left the unigram plateau (docs/metrics.md):

    python experiments/analyses/backfill_unigram.py experiments/results

It prepares each run's data (cached) and changes nothing else; folders that already have it are left alone.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from minimult.runs import Run, write_json


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("roots", nargs="+")
    args = ap.parse_args()
    done: dict[str, float] = {}  # data config and mods -> entropy
    for root in args.roots:
        for config in sorted(Path(root).rglob("config.json")):
            meta_path = config.parent / "run.json"
            if not meta_path.is_file():
                continue
            meta = json.loads(meta_path.read_text())
            if "unigram_entropy" in meta:
                continue
            run = Run.open(config.parent)
            key = json.dumps([run.cfg.to_dict()["data"], run.cfg.mods, run.cfg.train.seed], sort_keys=True)
            if key not in done:
                done[key] = run.data.unigram_entropy
            write_json(meta_path, {**meta, "unigram_entropy": done[key]})
            print(f"{config.parent}: {done[key]:.3f}", flush=True)


if __name__ == "__main__":
    main()
