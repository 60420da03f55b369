"""Training steps on fixed shapes, eager against captured once and replayed (CUDA graphs), for K stacked models.

    .venv/bin/python experiments/bench_graphs.py [--models 1,4,8,16] [--precisions fp32,bf16] [--steps 40]
        [--config small] [--batch-size 128] [--pad-multiple 16] [--device cuda] [--json PATH]

Batches as `train.pad_multiple` makes them (`microbatches.pad` to `fixed_shape`: batch-size rows, a multiple
of --pad-multiple columns, a fixed selected count per width), drawn from length-bucketed batches of synthetic
sentence lengths (bench_train's). For each K and precision, two copies of one model (one `Bert`, or K stacked
as one `StackedBert`) start equal and take the same steps on the same batches: the eager copy a whole step
(forward, backward, per-model clipping, fused AdamW) each time; the graphed copy, the first time a shape
comes, that step eagerly on a side stream (the warm-up) and then captures it (`torch.cuda.graph`, its own
memory pool per shape), and after that copies the batch into the shape's inputs and replays the graph. The
rounds alternate which copy goes first; on CUDA, rounds in which the graphed copy captured a new shape are
left out of the times.

Prints per K and precision: ms per update per model, eager and graphed, their ratio, the matmul rate
achieved against the same-shaped GEMM rate (bench_train's `GemmReference`), and the paper-budget runs one
10-minute call could train at that rate (K x 600 s / (14,100 updates x the step's time), training only).
First, a sameness check: with dropout off, the graphed copy's losses against the eager copy's (largest
relative difference; dropout draws differ between the two otherwise). On a CPU the graphed column is empty
(CUDA graphs need CUDA), so the script still checks that the eager steps run. --json writes the result
(experiments/bench_results.py).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import statistics
import sys
import time
import warnings
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_results import write_result  # noqa: E402
from bench_train import (CONFIGS, GemmReference, add_length_options, bucketed_batches, make_batch,  # noqa: E402
                         matmul_flops, sentence_lengths)
from minimult.data import microbatches  # noqa: E402
from minimult.model import Bert  # noqa: E402
from minimult.stacked import Packed, pack, stack  # noqa: E402

# the graphed copy's warm-up step runs its capturable optimizer outside a capture, which warns each time
warnings.filterwarnings("ignore", message="This instance was constructed with capturable=True")
PAPER_UPDATES = 14_100  # a paper-budget run (batches of 128)
FIELDS = ("input_ids", "position_ids", "token_type_ids", "attention_mask", "selected", "targets")


def inputs(batches: list[dict]) -> tuple[dict, list | None]:
    """The step's tensors: one padded batch's fields (K = 1), or K packed into one (M, B, T) layout."""
    if len(batches) == 1:
        return {k: batches[0][k] for k in FIELDS}, None
    packed = pack([{k: b[k] for k in FIELDS} for b in batches])
    return {k: getattr(packed, k) for k in (*FIELDS, "counts")}, packed.shapes


class Copy:
    """One model (or stack) and its optimizer, stepped eagerly or through CUDA graphs (`graphed`)."""

    def __init__(self, model, lr: float, precision: str, device, graphed: bool, clip: float = 1.0):
        self.model, self.device, self.clip, self.graphed = model.to(device).train(), device, clip, graphed
        self.stacked = hasattr(model, "stacked_losses")
        # a tensor lr (it can change between replays), for both copies on CUDA: the fused kernel reads a tensor
        # as float32 and a number as double, which would differ in the last bits of every update
        lr_arg = torch.tensor(lr, device=device) if device.type == "cuda" else lr
        self.opt = torch.optim.AdamW(self.model.param_groups(0.01), lr=lr_arg, eps=1e-6, fused=True,
                                     **({"capturable": True} if graphed else {}))
        self.bf16 = precision == "bf16"
        self.graphs: dict = {}  # shape key -> (graph, static inputs, static losses)
        self.stream = torch.cuda.Stream(device) if graphed else None

    def _autocast(self):  # the weight-cast cache off: a captured graph must not keep casts made at capture
        return (torch.autocast(self.device.type, dtype=torch.bfloat16, cache_enabled=False) if self.bf16
                else nullcontext())

    def _losses(self, x: dict, shapes) -> torch.Tensor:
        with self._autocast():
            if self.stacked:
                return self.model.stacked_losses(Packed(**{k: x[k] for k in FIELDS}, shapes=shapes,
                                                        counts=x["counts"]))
            return self.model.mlm_loss(*(x[k] for k in FIELDS)).view(1)

    def _step(self, x: dict, shapes) -> torch.Tensor:
        """Gradients set to None (a captured backward then allocates them in its graph's pool), forward,
        backward, clipping and the AdamW step."""
        self.opt.zero_grad(set_to_none=True)
        losses = self._losses(x, shapes)
        losses.sum().backward()
        if self.stacked:
            self.model.clip_grad_norm_per_model(self.clip)
        else:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
        self.opt.step()
        return losses.detach()

    def step(self, x: dict, shapes) -> tuple[torch.Tensor, bool]:
        """(losses, whether this step captured a new graph)."""
        if not self.graphed:
            return self._step(x, shapes), False
        key = tuple((k, tuple(v.shape)) if v is not None else (k, None) for k, v in x.items())
        if key in self.graphs:
            graph, static, losses = self.graphs[key]
            for k, v in x.items():
                if v is not None:
                    static[k].copy_(v)
            graph.replay()
            return losses, False
        static = {k: None if v is None else v.clone() for k, v in x.items()}
        self.stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self.stream):  # this step, eagerly: warms the shape up on the capture stream
            out = self._step(static, shapes).clone()
        torch.cuda.current_stream(self.device).wait_stream(self.stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=self.stream):
            losses = self._step(static, shapes)
        self.graphs[key] = (graph, static, losses)
        return out, True


def compare(cfg, K: int, precision: str, rounds: list, lr: float, device) -> dict:
    """Eager and graphed copies of one fresh model (K stacked) over `rounds` (each a list of K padded batches);
    the GEMM reference at the rounds' median rows x columns, in the precision's dtype."""
    torch.manual_seed(0)
    models = [Bert(cfg) for _ in range(K)]
    base = models[0] if K == 1 else stack(models)
    copies = {"eager": Copy(copy.deepcopy(base), lr, precision, device, False)}
    if device.type == "cuda":
        copies["graphed"] = Copy(copy.deepcopy(base), lr, precision, device, True)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    times = {name: [] for name in copies}
    losses = {name: [] for name in copies}
    kept_flops = []
    for r, batches in enumerate(rounds):
        x, shapes = inputs(batches)
        order = list(copies) if r % 2 == 0 else list(copies)[::-1]
        new, dt = False, {}
        for name in order:
            sync()
            t = time.perf_counter()
            out, captured = copies[name].step(x, shapes)
            sync()
            dt[name] = time.perf_counter() - t
            new |= captured
            losses[name].append(out.float().cpu())
        if not new:
            for name in copies:
                times[name].append(dt[name])
            B, T = batches[0]["input_ids"].shape
            kept_flops.append(K * matmul_flops(cfg, B, T, len(batches[0]["selected"])))
    if not times["eager"]:
        raise SystemExit("every round brought a new shape: give --steps more rounds than shapes")
    row = {"models": K, "precision": precision, "rounds_timed": len(times["eager"]), "shapes": len(
        {tuple(b[0]["input_ids"].shape) for b in rounds})}
    n = int(statistics.median(b[0]["input_ids"].numel() for b in rounds))
    gemm_rate = GemmReference(cfg, n, device, torch.bfloat16 if precision == "bf16" else torch.float32).rate()
    for name, ts in times.items():
        step = statistics.median(ts)
        row[f"{name}_ms_per_update_per_model"] = round(1000 * step / K, 3)
        row[f"{name}_gflops"] = round(statistics.median(f / t for f, t in zip(kept_flops, ts)) / 1e9, 1)
        row[f"{name}_runs_per_call"] = round(K * 600 / (PAPER_UPDATES * step), 2)
    row["gemm_gflops"] = round(gemm_rate, 1)
    if "graphed" in times:
        row["graphed_over_eager"] = round(statistics.median(a / b for a, b in zip(times["eager"], times["graphed"])), 2)
        diff = [float(((g - e).abs() / e.abs()).max()) for e, g in zip(losses["eager"], losses["graphed"])]
        row["loss_difference"] = max(diff)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="1,4,8,16")
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--steps", type=int, default=40, help="rounds per K and precision (on CUDA a new shape's are not timed)")
    ap.add_argument("--config", choices=sorted(CONFIGS), default="small")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--pad-multiple", type=int, default=16)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--threads", type=int, default=0)
    add_length_options(ap)
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    base, lr = CONFIGS[args.config]
    cfg = dataclasses.replace(base, max_positions=args.max_len)
    rng = np.random.default_rng(0)
    g = torch.Generator().manual_seed(0)
    lengths = sentence_lengths(args, rng)
    buckets = bucketed_batches(lengths, args.batch_size, rng)
    ks = [int(k) for k in args.models.split(",")]

    def draw(K: int, n: int) -> list:
        """n rounds of K batches padded to their fixed shapes (the K of a round share a length bucket's width)."""
        out = []
        for _ in range(n):
            picks = [buckets[i] for i in rng.integers(len(buckets), size=K)]
            width = max(int(lengths[b].max()) for b in picks)
            shape = microbatches.fixed_shape(width, args.batch_size, args.pad_multiple, args.max_len, 0.15, "exact")
            out.append([microbatches.pad(make_batch(lengths[b], int(lengths[b].max()), cfg.vocab_size, device, g),
                                         shape) for b in picks])
        return out

    print(f"# {args.config} ({Bert(cfg).num_parameters():,} parameters a model) | batch {args.batch_size} | "
          f"pad multiple {args.pad_multiple} | device {device} | torch {torch.__version__}", flush=True)
    check = compare(dataclasses.replace(cfg, dropout=0.0), min(ks), "fp32", draw(min(ks), 12), lr, device)
    if "loss_difference" in check:
        print(f"sameness, dropout off, K = {min(ks)}: graphed losses against eager, largest relative difference "
              f"{check['loss_difference']:.1e}", flush=True)
    rows = []
    for precision in args.precisions.split(","):
        for K in ks:
            row = compare(cfg, K, precision, draw(K, args.steps), lr, device)
            rows.append(row)
            graphed = (f" | graphed {row['graphed_ms_per_update_per_model']:.2f} ms ({row['graphed_over_eager']:.2f}x "
                       f"eager's speed, {row['graphed_gflops']:,.0f} GFLOP/s, {row['graphed_runs_per_call']:.1f} "
                       "runs a call)" if "graphed_over_eager" in row else " | graphed: needs CUDA")
            print(f"K {K:>2} {precision}: eager {row['eager_ms_per_update_per_model']:.2f} ms an update a model "
                  f"({row['eager_gflops']:,.0f} GFLOP/s of the GEMM's {row['gemm_gflops']:,.0f}, "
                  f"{row['eager_runs_per_call']:.1f} runs a call){graphed}", flush=True)
    result = {"config": args.config, "batch_size": args.batch_size, "pad_multiple": args.pad_multiple,
              "device": str(device), "sameness": check.get("loss_difference"), "rows": rows}
    print(json.dumps(result))
    if args.json:
        write_result(args.json, result)


if __name__ == "__main__":
    main()
