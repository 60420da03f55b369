"""How often the two halves of a parallel pair (English sentence i and its Fake-English copy) land in
the same training batch, bucketed vs random batches, on the real corpus (issue 19, item 3).

    python experiments/analyses/cobatching.py [--preset quick-b256] [--epochs 3] [--json out.json]

Prints one line per batching: the share of pairs sharing a batch, averaged over the epochs' plans
(the same plans training draws: `plan_epoch` with the config's seed).
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from minimult.config import resolve
from minimult.data.batching import SequenceSet, plan_epoch
from minimult.data.run_data import RunData


def together(lengths: np.ndarray, n: int, batch_size: int, seed: int, epochs: int, batching: str) -> float:
    shares = []
    for epoch in range(epochs):
        batch_of = np.empty(len(lengths), dtype=np.int64)
        for i, index in enumerate(plan_epoch(lengths, batch_size, seed, epoch, batching)):
            batch_of[index] = i
        shares.append(float(np.mean(batch_of[:n] == batch_of[n:2 * n])))
    return float(np.mean(shares))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="quick-b256")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    cfg, mods = resolve(args.preset)
    data = RunData(cfg, mods)
    sides = data.train_views
    seqs = SequenceSet.from_sides(sides, data.layouts, "cpu")
    n = sides[0].num_sentences
    rows = {b: together(seqs.lengths_np, n, cfg.train.batch_size, cfg.train.seed, args.epochs, b)
            for b in ("bucket", "random", "spread", "paired")}
    for b, share in rows.items():
        print(f"{args.preset} (batch {cfg.train.batch_size}), {b:6s}: {share:.1%} of {n:,} pairs share a batch "
              f"(mean of {args.epochs} epochs)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"preset": args.preset, "batch_size": cfg.train.batch_size, "pairs": n, **rows}, f, indent=2)


if __name__ == "__main__":
    main()
