"""Throughput of M models trained as one stacked Bert (`stacked.stack`) against the same M models stepped one by one.

    .venv/bin/python experiments/bench_stacked.py [--models 4] [--config small] [--batches same|different]
                                                  [--steps 6] [--threads 1] [--device cpu|cuda]
                                                  [--precision auto|fp32|bf16] [--json PATH]

Each round: every separate model takes one step (forward, backward, clipping, AdamW) on its batch,
then the stacked model takes one step on all M batches at once; the order alternates per round.
`--batches same` gives every model the same length bucket (runs of one seed with different
settings: their batch plans are identical, so there is no padding between models); `different`
draws each model's batch independently (different seeds: the stacked step pads to the longest
and largest batch of the round). Throughput counts real tokens of all M models, [CLS]/[SEP]
included; the ratio is the median of per-round ratios (stacked over separate). --json PATH also
writes the result (the last line printed), the command line and the machine as JSON
(experiments/bench_results.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_results import write_result  # noqa: E402
from bench_train import CONFIGS, add_length_options, bucketed_batches, make_batch, sentence_lengths  # noqa: E402
from minimult.model import Bert, ModelConfig  # noqa: E402
from minimult.precision import autocast as precision_autocast  # noqa: E402
from minimult.stacked import pack, stack  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", type=int, default=4, help="M, models trained at once")
    p.add_argument("--config", choices=sorted(CONFIGS), default="small")
    p.add_argument("--batches", choices=["same", "different"], default="same")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--precision", choices=["auto", "fp32", "bf16"], default="auto",
                   help="as train.precision (auto: bf16 autocast on CUDA, fp32 on CPU)")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    add_length_options(p)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="PATH", help="also write the result, command line and machine as JSON to PATH")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    rng = np.random.default_rng(args.seed)
    g = torch.Generator().manual_seed(args.seed)
    base, lr = CONFIGS[args.config]
    cfg = ModelConfig(**{**base.__dict__, "max_positions": args.max_len})
    M = args.models

    lengths = sentence_lengths(args, rng)
    buckets = [b for b in bucketed_batches(lengths, args.batch_size, rng) if len(b) == args.batch_size]
    rounds = args.warmup + args.steps
    picks = []
    for _ in range(rounds):
        if args.batches == "same":
            picks.append([buckets[rng.integers(len(buckets))]] * M)
        else:
            picks.append([buckets[i] for i in rng.integers(len(buckets), size=M)])
    data = [[make_batch(lengths[b], int(lengths[b].max()), cfg.vocab_size, device, g) for b in row] for row in picks]

    torch.manual_seed(args.seed)
    separate = [Bert(cfg).to(device).train() for _ in range(M)]
    stacked = stack(separate).to(device).train()
    if device.type == "cpu":
        stacked.context.generators = [torch.Generator().manual_seed(i) for i in range(M)]
    opts = [torch.optim.AdamW(m.param_groups(0.01), lr=lr, eps=1e-6, fused=True) for m in separate]
    opt_stacked = torch.optim.AdamW(stacked.param_groups(0.01), lr=lr, eps=1e-6, fused=True)
    autocast = precision_autocast(args.precision, device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def step_separate(batches):
        for model, opt, b in zip(separate, opts, batches):
            with autocast:
                loss = model.mlm_loss(b["input_ids"], b["position_ids"], b["token_type_ids"], b["attention_mask"],
                                      b["selected"], b["targets"])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()

    def step_stacked(batches):
        with autocast:
            losses = stacked.stacked_losses(pack(batches))
        opt_stacked.zero_grad(set_to_none=True)
        losses.sum().backward()
        stacked.clip_grad_norm_per_model(1.0)
        opt_stacked.step()

    times = {"separate": [], "stacked": []}
    tokens = []
    print(f"# {M} x {args.config} ({separate[0].num_parameters():,} parameters each) | batch {args.batch_size} per "
          f"model | batches {args.batches} | threads {torch.get_num_threads()} | device {device} | torch "
          f"{torch.__version__} | precision {args.precision}", flush=True)
    for r in range(rounds):
        batches = data[r]
        order = ["separate", "stacked"] if r % 2 == 0 else ["stacked", "separate"]
        line = []
        for name in order:
            sync()
            t = time.perf_counter()
            (step_separate if name == "separate" else step_stacked)(batches)
            sync()
            dt = time.perf_counter() - t
            line.append(f"{name} {dt:.2f}s")
            if r >= args.warmup:
                times[name].append(dt)
        if r >= args.warmup:
            tokens.append(sum(b["real_tokens"] for b in batches))
        pad = sum(b["B"] * b["T"] for b in batches) / (M * max(b["B"] for b in batches) * max(b["T"] for b in batches))
        print(f"#   round {r + 1}/{rounds}{'' if r >= args.warmup else ' (warm-up)'}: {', '.join(line)} | "
              f"stacked layout {100 * pad:.0f}% real", flush=True)

    tps = {k: [n / t for n, t in zip(tokens, v)] for k, v in times.items()}
    ratio = statistics.median(a / b for a, b in zip(tps["stacked"], tps["separate"]))
    res = {"models": M, "config": args.config, "batches": args.batches, "device": str(device),
           "threads": torch.get_num_threads(), "precision": args.precision,
           "tok_s_separate": round(statistics.median(tps["separate"])),
           "tok_s_stacked": round(statistics.median(tps["stacked"])), "stacked_over_separate": round(ratio, 2),
           "round_tok_s": {k: [round(x, 1) for x in v] for k, v in tps.items()}}
    print(f"\n{'mode':<10} {'real tok/s, all models (median)':>32}")
    for k in ("separate", "stacked"):
        print(f"{k:<10} {statistics.median(tps[k]):>32,.0f}")
    print(f"stacked / separate {ratio:.2f}x (median of per-round ratios)")
    print(json.dumps(res))
    if args.json:
        write_result(args.json, res)


if __name__ == "__main__":
    main()
