"""Runs that never leave the unigram plateau (issue 34, item 3): how often a configuration gets stuck,
per recipe variant, over many seeds, from the first few hundred updates of its own schedule.

    python experiments/analyses/plateau.py --mods no-segment --preset quick-b256 --steps 300 --seeds 0-9 \
        --variants base,warmup500,eps1e-8,lr1e-3,published-padding --json out.json

A run is stuck when its mean training loss over the last `--window` logged steps is within `--margin`
nats of the unigram entropy of its training pieces (the loss of predicting piece frequencies without
looking at the context but for its language). The schedule is the preset's own (warm-up, linear decay over all
its epochs): training simply stops after `--steps` updates, so the first steps are those of a full run
(at quick-b256 the committed stuck runs sat at 6.3 by update 142). Runs are trained one after the
other in a temporary folder (`--keep DIR` keeps them). Prints one line per variant: stuck seeds of
all, and each seed's final loss. Rerunning with more `--steps` and the same `--keep` continues the
kept runs from their checkpoints (training is resumable and resumed steps equal uninterrupted ones).

`--trace 25,50,100` also stops each run at those updates on its way and measures there, with
`plateau_diagnose.py`'s arithmetic, whether its tokens' hidden states have collapsed into one vector per
sentence (mean cosine of two tokens' last-layer states; the committed stuck runs sit at 1.000, runs
that train at 0.2-0.5) and how uniform the last layer's attention is.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
from pathlib import Path

import numpy as np

from minimult.config import resolve
from minimult.runs import Run
from minimult.sweep.grid import parse_seeds
from minimult.train import train

from plateau_diagnose import diagnose

# recipe variants: overrides as `--set` takes them (the candidates the issue names)
VARIANTS = {
    "base": {},
    "warmup500": {"train.warmup_steps": 500},
    "eps1e-8": {"train.adam_eps": 1e-8},
    "lr1e-3": {"train.lr": 1e-3},
    "noclip": {"train.clip": 0.0},
    "published-padding": {"train.batching": "random", "train.attention": "attend-padding"},
}


def final_loss(run_dir: Path, window: int) -> float:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in rows if "loss" in r]
    return float(np.mean(losses[-window:])) if losses else math.nan


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mods", default="no-segment")
    ap.add_argument("--preset", default="quick-b256")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--seeds", default="0-4", help="e.g. 0-9 or 0,42,43")
    ap.add_argument("--variants", default="base,warmup500,published-padding")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--window", type=int, default=3, help="logged steps averaged for the final loss")
    ap.add_argument("--margin", type=float, default=0.3, help="nats above the unigram entropy that count as stuck")
    ap.add_argument("--keep", default=None, help="keep the run folders here (and continue the ones kept there)")
    ap.add_argument("--trace", default="", help="updates at which to measure collapse on the way, e.g. 25,50,100")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    first, dash, last = args.seeds.partition("-")
    seeds = parse_seeds(",".join(map(str, range(int(first), int(last) + 1))) if dash else args.seeds)
    extra = dict(s.split("=", 1) for s in args.sets)
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="plateau-"))
    out = {"mods": args.mods, "preset": args.preset, "steps": args.steps, "variants": {}}
    trace: dict = {}
    for name in args.variants.split(","):
        if name not in VARIANTS:
            raise SystemExit(f"unknown variant {name!r}: choose from {', '.join(VARIANTS)}")
        losses = {}
        for seed in seeds:
            cfg, _ = resolve(args.preset, {**extra, **VARIANTS[name], "train.seed": seed}, args.mods)
            run = Run.create_at(root / f"{name}-s{seed}", cfg, log=lambda s: None)
            done = run.meta.get("steps", 0) if run.has_checkpoint() else 0
            for stop in [int(t) for t in args.trace.split(",") if t and int(t) > done] + [args.steps]:
                train([run], resume=True, log=lambda s: None, stop_after=stop)
                d = diagnose(run.path, batches=2, batch_size=64, seed=0)
                trace.setdefault(name, {}).setdefault(seed, []).append(
                    {"step": d["step"], "loss": d["loss"], "cosine": d["cosine"][-1], "entropy": d["entropy"][-1]})
                print(f"  {name} s{seed} step {d['step']}: loss {d['loss']:.2f}, last-layer cosine "
                      f"{d['cosine'][-1]:.3f}, attention entropy {d['entropy'][-1]:.3f}", flush=True)
            losses[seed] = final_loss(run.path, args.window)
            out.setdefault("unigram_entropy", run.data.unigram_entropy)
        floor = out["unigram_entropy"]
        stuck = [s for s, l in losses.items() if l > floor - args.margin]
        collapsed = [s for s in seeds if trace[name][s][-1]["cosine"] > 0.99]
        out["variants"][name] = {"losses": losses, "stuck": stuck, "collapsed": collapsed, "trace": trace[name]}
        shown = ", ".join(f"s{s} {l:.2f}" for s, l in losses.items())
        print(f"{name:>18}: {len(stuck)} of {len(seeds)} stuck (unigram entropy {floor:.2f}), {len(collapsed)} "
              f"collapsed  [{shown}]", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
