"""Dev perplexity of a trained run as the lab scores it and as the published code's evaluation did.

    python experiments/ppl_mix.py RUN [--sentences N]

The lab corrupts every selected piece to [MASK] (docs/metrics.md). The published code's `evaluate.py`
corrupted the dev set with its training mix: of the selected pieces 80% [MASK], 10% a random id, 10% left
as they are, the loss still counted on all of them. A piece left as it is can be copied, so that mix
should give a lower perplexity from the same model. Both are computed here on the same selection (the
lab's fixed seed), so the ratio is the mix alone. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json

import torch

from minimult.evaluate.perplexity import mlm_perplexity
from minimult.runs import Run

MIXES = {"lab (all [MASK])": (1.0, 0.0, 0.0, 0.0), "published (0.8 mask, 0.1 keep, 0.1 random)": (0.8, 0.1, 0.1, 0.0)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--sentences", type=int, default=None, help="a fixed random subset of N dev sequences")
    args = ap.parse_args()
    torch.set_num_threads(1)
    run = Run.open(args.run)
    model = run.load_model("cpu", log=lambda s: None)
    sides, layouts, random_ids = run.data.views("dev"), run.data.layouts, run.data.random_ids()
    out = {"run": str(run.path), "sequences": args.sentences or "all"}
    for name, probs in MIXES.items():
        scored = mlm_perplexity(model, sides, layouts, random_ids, torch.device("cpu"), args.sentences,
                                attention=run.cfg.train.attention, probs=probs)
        out[name] = scored["perplexity"]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
