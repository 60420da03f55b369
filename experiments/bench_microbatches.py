"""Random batches split into micro-batches of similar length (`train.microbatches`): speed and sameness.

    .venv/bin/python experiments/bench_microbatches.py [--preset paper] [--mods lang-pos]
        [--batching random] [--parts 1,2,4,8] [--pad 8,16] [--rounds 8] [--threads 1] [--no-bucket] [--json FILE]

Builds the preset's real training data and model (one run, as `minimult pretrain` would, in a temporary
folder) and times whole optimisation steps (masked batch, forward, backward, clipping, AdamW) on the
same batches of its first epoch's plan, once per `--parts` value in every round, the order rotating
round by round so that a loaded machine touches every variant alike. Prints per variant the median
tokens/s (real tokens, [CLS]/[SEP] included) and the median of per-round ratios against the first
value (1: the whole batch in one pass, the default); unless --no-bucket, also the same model's steps on
the default length-bucketed batches (in one pass), timed in the same rounds: the speed that random
batches in micro-batches are to be compared with; with --pad, also the bucketed batches padded to fixed
shapes (`train.pad_multiple`, each value), what static shapes cost against them. Then it checks sameness:
with dropout off, the loss and gradient of one batch computed in parts (or padded) against in one pass
(largest relative difference).
--json writes the result with the command line and the machine (experiments/bench_results.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_results import write_result  # noqa: E402
from minimult.config import override, resolve  # noqa: E402
from minimult.data.batching import plan_epoch  # noqa: E402
from minimult.runs import Run  # noqa: E402
from minimult.train import Stepper, setup  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="paper")
    ap.add_argument("--mods", default="")
    ap.add_argument("--batching", default="random")
    ap.add_argument("--parts", default="1,2,4,8")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--pad", default="", help="bucketed batches padded to multiples of these (train.pad_multiple)")
    ap.add_argument("--no-bucket", action="store_true", help="leave out the bucketed reference")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    parts = [int(p) for p in args.parts.split(",")]
    pads = {f"pad {m}": int(m) for m in args.pad.split(",") if m}
    cfg, active = resolve(args.preset, {"train.batching": args.batching, "train.device": "cpu",
                                        "train.precision": "fp32"}, args.mods or None)
    with tempfile.TemporaryDirectory() as tmp:
        run = Run.create(cfg, active, Path(tmp) / "run", log=lambda s: None)
        member = setup(run, torch.device("cpu"), lambda s: None)
    plan = plan_epoch(member.train_set.lengths_np, cfg.train.batch_size, cfg.train.seed, 0, cfg.train.batching,
                      languages=cfg.data.n_langs)
    buckets = plan_epoch(member.train_set.lengths_np, cfg.train.batch_size, cfg.train.seed, 0, "bucket",
                         languages=cfg.data.n_langs)
    # the run's config for each variant (the step reads train.microbatches from it); bucketed: one pass
    steppers = {p: override(cfg, {"train.microbatches": p}) for p in {1, *parts}} | {"bucket": cfg}
    steppers |= {label: override(cfg, {"train.pad_multiple": m}) for label, m in pads.items()}
    model = member.model
    optimizer = torch.optim.AdamW(model.param_groups(cfg.train.weight_decay), lr=1e-4, fused=True)

    def step(p: int, index) -> float:
        member.run.cfg = steppers[p]
        t = time.perf_counter()
        loss = Stepper([member]).losses(0, [index])
        optimizer.zero_grad(set_to_none=True)
        loss.sum().backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return time.perf_counter() - t

    variants = [(p, plan) for p in parts] + ([] if args.no_bucket else [("bucket", buckets)])
    variants += [(label, buckets) for label in pads]
    for p, batches in variants:  # warm-up
        step(p, batches[0])
    times = {p: [] for p, _ in variants}
    tokens = {p: [] for p, _ in variants}
    for r in range(args.rounds):
        order = variants[r % len(variants):] + variants[: r % len(variants)]
        for p, batches in order:
            index = batches[1 + r % (len(batches) - 1)]
            times[p].append(step(p, index))
            tokens[p].append(member.train_set.tokens(index))
    def ratio(p, base) -> float:  # the median over rounds of p's tokens/s over base's
        return statistics.median(tokens[p][i] / times[p][i] / (tokens[base][i] / times[base][i])
                                 for i in range(args.rounds))

    rows = []
    for p, _ in variants:
        speed = statistics.median(n / t for n, t in zip(tokens[p], times[p]))
        rows.append({"microbatches": p, "tokens_per_s": round(speed), "speedup": round(ratio(p, parts[0]), 3)})
        label = (f"bucket, {p} (train.pad_multiple)" if p in pads else "bucket (reference), one pass" if p == "bucket"
                 else f"{args.batching}, microbatches {p}")
        print(f"{label}: {speed:,.0f} tokens/s, {ratio(p, parts[0]):.2f}x the tokens/s of {args.batching} in one pass"
              + (f", {ratio(p, 'bucket'):.2f}x bucketed" if p in pads and "bucket" in times else ""))
        if p in pads and "bucket" in times:
            rows[-1]["against_bucket"] = round(ratio(p, "bucket"), 3)
    same = sameness(member, steppers, plan[1], parts[1:] + list(pads))
    member.run.cfg = cfg
    print("largest relative difference from one pass (dropout off): "
          + ", ".join(f"{p}: loss {d[0]:.1e}, gradient {d[1]:.1e}" for p, d in same.items()))
    result = {"preset": args.preset, "mods": args.mods, "batching": args.batching, "threads": args.threads,
              "rounds": args.rounds, "rows": rows, "sameness": {str(p): d for p, d in same.items()}}
    print(json.dumps(result))
    if args.json:
        write_result(args.json, result)


def sameness(member, steppers, index, parts) -> dict:
    """Loss and gradients of batch `index` with dropout off, in each variant of `parts` (a number of parts, or
    a `--pad` label) against one pass."""
    model = member.model
    model.eval()  # dropout off; the loss and its gradient are still computed

    def loss_and_grads(p):
        member.run.cfg = steppers[p]
        model.zero_grad(set_to_none=True)
        loss = Stepper([member]).losses(0, [index]).sum()
        loss.backward()
        return loss.detach(), torch.cat([q.grad.flatten() for q in model.parameters() if q.grad is not None])

    one, g1 = loss_and_grads(1)
    out = {}
    for p in parts:
        loss, g = loss_and_grads(p)
        out[p] = (float((loss - one).abs() / one.abs()), float((g - g1).abs().max() / g1.abs().max()))
    model.train()
    return out


if __name__ == "__main__":
    main()
