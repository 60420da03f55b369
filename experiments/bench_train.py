"""Training throughput: minimult's Bert against HuggingFace BertForMaskedLM, in one process.

    .venv/bin/python experiments/bench_train.py [--config small|overparam] [--steps 6] [--threads 1]
        [--omp-wait-policy passive] [--precision fp32|bf16] [--hf-precision fp32|bf16] [--device cpu|cuda]
        [--nproc N] [--profile N] [--json experiments/results/bench/NAME.json [--label TEXT]]

Models, alternated step by step after warm-up (the order rotates every round), each with its own
AdamW (lr 2e-3 small / 1e-4 overparam, wd 0.01, eps 1e-6) and dropout 0.1, on synthetic batches
whose sentence lengths follow a clipped lognormal (median 27 incl. [CLS]/[SEP], max 128) or
--lengths-from FILE.npy; 15% of each sentence's word pieces are selected:
  ours         minimult.model.Bert, length-bucketed batches (as minimult.data.batching.plan_epoch:
               shuffle, sort pools of 50 batches, cut), MLM output layer only on the selected tokens
  hf-bucketed  BertForMaskedLM, same weights and the same batches, logits over the full vocabulary
               at every position, labels -100 elsewhere
  hf-padded    BertForMaskedLM, random batches padded to 128 (how the paper's code trained)
Throughput counts real (non-pad) tokens, [CLS]/[SEP] included. Ratios are medians over rounds of
per-round ratios (ours and hf-bucketed see the same batch in a round).

Matmul FLOPs of ours per step (n = B*T positions computed incl. bucket padding, N selected tokens,
L layers, H hidden, I intermediate, V vocab); forward = 2 FLOPs per multiply-add, backward twice that:
    6*n*L*(3H*H + H*H + 2*H*I)  +  12*L*B*T^2*H  +  6*N*(H*H + H*V)
    (encoder linears)             (QK^T and PV)     (MLM head on the selected tokens)
Biases, LayerNorm, GELU, softmax, dropout, embeddings and the optimizer are not counted.
"GEMM rate" = the FLOPs of one layer's 12 linear-layer matmuls (forward X@W^T, backward dY@W and
dY^T@X for qkv, proj, fc_in, fc_out) at n = the median bucketed batch size, torch.matmul, same
threads, timed between the rounds; ours' share of it is the median of per-round ratios.

--nproc N (N > 1) measures instead one run's throughput on one process and on N (minimult.distributed, as
`minimult pretrain --nproc N` trains: gloo on CPU, each process --threads threads (default 1) and its share
of every batch's rows, gradients summed by one all-reduce), ours only, the same precision and batches,
alternated round by round in one invocation (the order rotating), so that a loaded machine's changes
touch both alike; the speed-up is the median of per-round ratios. This process is rank 0 and times the
N-process step from a common start (all ranks released together) to its optimizer step; the other ranks
wait in a blocking receive (no spinning) while the one-process step runs. Both steps are also timed by
phase (forward, backward, all-reduce: the collective and the wait for the slowest rank, optimizer step;
medians in ms, rank 0's), which says what does not split across the ranks. The load average before and
after is printed: the ratio means little on a machine whose cores are busy with other work.

--profile N then runs N more steps of ours (the measured batches in turn) under torch.profiler and says where
a step's time goes: every operator's self time per step (its own, without the operators it calls), its calls
per step and its share of all operators' self time, the largest first (in the JSON as "profile"; "step_ms" is
the profiled steps' mean wall time, which the profiler itself slows a little). docs/speed.md's operator
breakdowns (bf16, and fp32 at the paper preset's batch) come from it: experiments/results/bench/profile/.

--json writes the result (the last line printed), the command line and the machine to a JSON file
(experiments/bench_results.py); experiments/bench_table.py makes the Speed table (docs/speed.md) from those
in experiments/results/bench/, --label giving a run's first cell there. What was tried, and results
recorded by hand before the JSON files: experiments/results/bench/bench_train_history.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

WAIT_POLICIES = ["default", "passive", "active"]


def _set_omp_wait_policy():
    """OMP_WAIT_POLICY is read when libgomp starts (at `import torch`), so it is set before that."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--omp-wait-policy", choices=WAIT_POLICIES, default="default")
    policy = pre.parse_known_args()[0].omp_wait_policy
    if policy != "default":
        os.environ["OMP_WAIT_POLICY"] = policy.upper()


_set_omp_wait_policy()
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_results import write_result  # noqa: E402
from minimult.export import to_hf  # noqa: E402
from minimult.model import Bert, ModelConfig  # noqa: E402
from minimult.precision import autocast, native_bf16  # noqa: E402

CLS, SEP, MASK, PAD, N_SPECIAL = 2, 3, 4, 0, 5
CONFIGS = {
    "small": (ModelConfig(vocab_size=4096, hidden=64, intermediate=256, heads=1, layers=12), 2e-3),
    "overparam": (ModelConfig(vocab_size=4096, hidden=768, intermediate=3072, heads=12, layers=12), 1e-4),
}


# ------------------------------------------------------------------------------------------------
# data

def add_length_options(p: argparse.ArgumentParser) -> None:
    """The options `sentence_lengths` reads (every benchmark on synthetic batches takes them)."""
    p.add_argument("--lengths-from", help=".npy of sentence lengths in word pieces (see --lengths-include-specials)")
    p.add_argument("--lengths-include-specials", action="store_true", help="the .npy lengths already count [CLS]/[SEP]")
    p.add_argument("--sentences", type=int, default=9009, help="synthetic sentences (epoch size)")
    p.add_argument("--median-length", type=float, default=27.0, help="incl. [CLS]/[SEP]")
    p.add_argument("--length-sigma", type=float, default=0.35, help="lognormal sigma (0.35: max ~90 of 9009)")
    p.add_argument("--max-len", type=int, default=128)


def sentence_lengths(args, rng) -> np.ndarray:
    """Lengths incl. [CLS]/[SEP], in [4, max_len]."""
    if args.lengths_from:
        lengths = np.load(args.lengths_from).astype(np.int64).ravel()
        if args.lengths_include_specials:
            return np.clip(lengths, 4, args.max_len)
        return np.clip(lengths + 2, 4, args.max_len)
    raw = np.exp(np.log(args.median_length) + args.length_sigma * rng.standard_normal(args.sentences))
    return np.clip(np.round(raw).astype(np.int64), 4, args.max_len)


def bucketed_batches(lengths: np.ndarray, batch_size: int, rng, pool_batches: int = 50) -> list[np.ndarray]:
    order = rng.permutation(len(lengths))
    pool, batches = batch_size * pool_batches, []
    for p in range(0, len(order), pool):
        chunk = order[p:p + pool]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    return batches


def make_batch(lens: np.ndarray, T: int, vocab: int, device, g: torch.Generator) -> dict:
    """Random word ids, [CLS] ... [SEP] [PAD]..., 15% of the word pieces selected and set to [MASK]."""
    B = len(lens)
    L = torch.as_tensor(lens)[:, None]
    col = torch.arange(T)[None, :]
    real = col < L
    ids = torch.randint(N_SPECIAL, vocab, (B, T), generator=g)
    ids = torch.where(col == 0, CLS, torch.where(col == L - 1, SEP, torch.where(real, ids, PAD)))
    maskable = (col >= 1) & (col < L - 1)
    k = torch.clamp(torch.round(0.15 * (L - 2)), min=1)  # per sentence
    score = torch.rand(B, T, generator=g).masked_fill(~maskable, 2.0)
    rank = score.argsort(1).argsort(1)
    chosen = (rank < k) & maskable
    selected = chosen.flatten().nonzero().squeeze(1)
    targets = ids.flatten()[selected]
    ids = ids.masked_fill(chosen, MASK)
    labels = torch.full((B, T), -100).masked_scatter(chosen, targets)
    padded = bool((L != T).any())
    out = dict(input_ids=ids, position_ids=col.expand(B, T).contiguous(), token_type_ids=torch.zeros_like(ids),
               attention_mask=real if padded else None, hf_mask=real.long(), selected=selected, targets=targets,
               labels=labels, real_tokens=int(lens.sum()), B=B, T=T)
    return {k: v.to(device) if torch.is_tensor(v) else v for k, v in out.items()}


# ------------------------------------------------------------------------------------------------
# FLOPs and the GEMM reference

def matmul_flops(cfg: ModelConfig, B: int, T: int, n_selected: int) -> float:
    H, I, L, V = cfg.hidden, cfg.intermediate, cfg.layers, cfg.vocab_size
    n = B * T
    return 6 * n * L * (3 * H * H + H * H + 2 * H * I) + 12 * L * B * T * T * H + 6 * n_selected * (H * H + H * V)


class GemmReference:
    """One layer's linear-layer matmuls (forward and both backward products) at n rows."""

    def __init__(self, cfg: ModelConfig, n: int, device, dtype=torch.float32):
        H, I = cfg.hidden, cfg.intermediate
        self.cases = []
        for d_in, d_out in ((H, 3 * H), (H, H), (H, I), (I, H)):
            x = torch.randn(n, d_in, device=device, dtype=dtype)
            w = torch.randn(d_out, d_in, device=device, dtype=dtype) * 0.02
            dy = torch.randn(n, d_out, device=device, dtype=dtype)
            self.cases += [(x, w.t()), (dy, w), (dy.t(), x)]  # X@W^T, dY@W, dY^T@X
        self.flops = sum(2 * a.shape[0] * a.shape[1] * b.shape[1] for a, b in self.cases)
        self.sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)

    def rate(self, repeats: int = 3) -> float:
        """GFLOP/s of the whole set, best of `repeats` passes (each pass = all 12 products)."""
        best = float("inf")
        for _ in range(repeats):
            self.sync()
            t = time.perf_counter()
            for a, b in self.cases:
                torch.matmul(a, b)
            self.sync()
            best = min(best, time.perf_counter() - t)
        return self.flops / best / 1e9


# ------------------------------------------------------------------------------------------------
# the three runners

class Runner:
    def __init__(self, name, model, lr, step_fn, device, adamw: str, precision: str):
        self.name, self.model, self.step_fn = name, model.to(device).train(), step_fn
        self.autocast = lambda: autocast(precision, torch.device(device))
        groups = model.param_groups(0.01) if hasattr(model, "param_groups") else hf_param_groups(model, 0.01)
        impl = {"fused": {"fused": True}, "foreach": {"foreach": True}, "loop": {"foreach": False}}[adamw]
        self.opt = torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.999), eps=1e-6, **impl)
        self.sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
        self.times, self.tokens, self.flops, self.losses = [], [], [], []

    def step(self, batch, record: bool, flops: float = 0.0):
        self.sync()
        t = time.perf_counter()
        with self.autocast():
            loss = self.step_fn(self.model, batch)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        self.sync()
        dt = time.perf_counter() - t
        if record:
            self.times.append(dt)
            self.tokens.append(batch["real_tokens"])
            self.flops.append(flops)
            self.losses.append(float(loss.detach()))
        return dt


def hf_param_groups(model, wd):
    params = [p for p in model.parameters() if p.requires_grad]
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": wd},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


def ours_step(model, b):
    return model.mlm_loss(b["input_ids"], b["position_ids"], b["token_type_ids"], b["attention_mask"],
                          b["selected"], b["targets"])


def hf_step(model, b):
    return model(input_ids=b["input_ids"], attention_mask=b["hf_mask"], token_type_ids=b["token_type_ids"],
                 position_ids=b["position_ids"], labels=b["labels"]).loss


# ------------------------------------------------------------------------------------------------
# --profile: where a step of ours spends its time


def profile_steps(runner: Runner, batches: list[dict], steps: int, top: int = 25) -> dict:
    """`steps` steps of `runner` under torch.profiler: the operators by self time per step, largest first."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available()
                                            and next(runner.model.parameters()).is_cuda else [])
    with profile(activities=activities) as prof:
        t = time.perf_counter()
        for i in range(steps):
            runner.step(batches[i % len(batches)], record=False)
        wall = time.perf_counter() - t
    cuda = ProfilerActivity.CUDA in activities
    rows = []
    for e in prof.key_averages():
        us = e.self_device_time_total if cuda else e.self_cpu_time_total
        rows.append({"op": e.key, "self_ms_per_step": us / 1e3 / steps, "calls_per_step": e.count / steps})
    rows.sort(key=lambda r: -r["self_ms_per_step"])
    step_ms = wall / steps * 1e3
    counted = sum(r["self_ms_per_step"] for r in rows)
    for r in rows:
        r["share"] = r["self_ms_per_step"] / counted if counted else 0.0
    return {"steps": steps, "step_ms": round(step_ms, 2), "ops_per_step": round(sum(r["calls_per_step"] for r in rows)),
            "self_ms_per_step": round(counted, 2),
            "ops": [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()} for r in rows[:top]]}


def print_profile(prof: dict) -> None:
    print(f"\nprofile of ours, {prof['steps']} steps: {prof['step_ms']:.1f} ms a step, {prof['ops_per_step']:,} "
          f"operator calls a step, {prof['self_ms_per_step']:.1f} ms of operators' self time")
    print(f"{'operator':<44} {'self ms/step':>12} {'calls/step':>11} {'share':>6}")
    for r in prof["ops"]:
        print(f"{r['op'][:44]:<44} {r['self_ms_per_step']:>12.2f} {r['calls_per_step']:>11.1f} {100 * r['share']:>5.1f}%")


# ------------------------------------------------------------------------------------------------
# --nproc: one process against N


SHARE_KEYS = ("input_ids", "position_ids", "token_type_ids", "attention_mask", "selected", "targets")


def _nproc_model(cfg, lr, seed, adamw):
    torch.manual_seed(seed)
    model = Bert(cfg).train()
    impl = {"fused": {"fused": True}, "foreach": {"foreach": True}, "loop": {"foreach": False}}[adamw]
    return model, torch.optim.AdamW(model.param_groups(0.01), lr=lr, betas=(0.9, 0.999), eps=1e-6, **impl)


PHASES = ("forward", "backward", "all_reduce", "optimizer")


def _nproc_step(world, model, opt, batch, precision, device) -> dict:
    """One data-parallel step of `model` on this rank's share of `batch` (as minimult.train does it),
    from a common start (several processes: all released together): seconds spent in each of `PHASES`
    (the all-reduce's includes waiting for the slowest rank) and in the whole `step`. On one process
    (`world.size` 1) the same step on the whole batch, without the collectives."""
    from minimult import distributed
    from minimult.train import step_losses

    if world.size > 1:
        distributed.barrier()  # every rank starts together
    t0 = time.perf_counter()
    with autocast(precision, torch.device(device)):  # this rank's rows, its loss over the whole batch's counts
        loss = step_losses(model, [{k: batch[k] for k in SHARE_KEYS}], world)
    t1 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    t2 = time.perf_counter()
    if world.size > 1:
        distributed.all_reduce(list(model.parameters()), loss)
    t3 = time.perf_counter()
    opt.step()
    t4 = time.perf_counter()
    return dict(zip(PHASES + ("step",), (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0)))


def _nproc_rank(rank, nproc, port, threads, cfg, lr, seed, adamw, batches, precision, device):
    """Ranks 1..N-1 (spawned): the N-process step of every round, in step with rank 0."""
    import torch.distributed as dist

    from minimult.ranks import World

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(threads)
    dist.init_process_group("gloo", rank=rank, world_size=nproc)
    model, opt = _nproc_model(cfg, lr, seed, adamw)
    for b in batches:
        _nproc_step(World(rank, nproc), model, opt, b, precision, device)
    dist.destroy_process_group()


def bench_nproc(args, cfg, lr, batches, device) -> dict:
    """Ours on one process and on --nproc, alternated round by round (see the module doc)."""
    import torch.distributed as dist
    import torch.multiprocessing as mp

    from minimult.ranks import World, free_port

    if device.type != "cpu":
        raise SystemExit("error: --nproc measures CPU processes (gloo); use --device cpu")
    n, threads = args.nproc, args.threads or 1
    torch.set_num_threads(threads)
    load_before = os.getloadavg()
    port = free_port()
    ctx = mp.get_context("spawn")
    helpers = [ctx.Process(target=_nproc_rank, args=(r, n, port, threads, cfg, lr, args.seed, args.adamw, batches,
                                                     args.precision, str(device))) for r in range(1, n)]
    for h in helpers:
        h.start()
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=0, world_size=n)
    one, one_opt = _nproc_model(cfg, lr, args.seed, args.adamw)
    model, opt = _nproc_model(cfg, lr, args.seed, args.adamw)
    world = World(0, n)
    times, phases = {1: [], n: []}, {1: [], n: []}
    print(f"# {args.config}: {model.num_parameters():,} parameters | batch {args.batch_size} | one process vs {n}, "
          f"{threads} thread(s) each | precision {args.precision} | torch {torch.__version__} | load average "
          f"{' '.join(f'{x:.2f}' for x in load_before)}", flush=True)
    t_start = time.perf_counter()
    for r, b in enumerate(batches):
        record = r >= args.warmup
        line = []
        for k in ((1, n) if r % 2 == 0 else (n, 1)):
            ph = (_nproc_step(World(), one, one_opt, b, args.precision, device) if k == 1
                  else _nproc_step(world, model, opt, b, args.precision, device))
            line.append(f"{k} process{'es' if k > 1 else ''} {ph['step']:.2f}s")
            if record:
                times[k].append((b["real_tokens"], ph["step"]))
                phases[k].append(ph)
        print(f"#   round {r + 1}/{len(batches)}{'' if record else ' (warm-up)'}: " + ", ".join(line), flush=True)
    dist.destroy_process_group()
    for h in helpers:
        h.join()
    load_after = os.getloadavg()
    tps = {k: [tok / t for tok, t in v] for k, v in times.items()}
    res = {"config": args.config, "device": str(device), "threads": threads, "nproc": n,
           "batch_size": args.batch_size, "steps": args.steps, "adamw": args.adamw, "torch": torch.__version__,
           "precision": args.precision, "tok_s_ours_nproc1": round(statistics.median(tps[1])),
           f"tok_s_ours_nproc{n}": round(statistics.median(tps[n])),
           "nproc_speedup": round(statistics.median(b / a for a, b in zip(tps[1], tps[n])), 2),
           "round_tok_s": {f"nproc{k}": [round(x, 1) for x in v] for k, v in tps.items()},
           "load_avg_before": [round(x, 2) for x in load_before], "load_avg_after": [round(x, 2) for x in load_after],
           "cpus": os.cpu_count(), "wall_s": round(time.perf_counter() - t_start, 1)}
    for k in (1, n):  # median ms per phase over the measured rounds (rank 0's, for n processes)
        res[f"phases_ms_nproc{k}"] = {name: round(1000 * statistics.median(p[name] for p in phases[k]), 1)
                                      for name in PHASES + ("step",) if k > 1 or name != "all_reduce"}
    print()
    for k in (1, n):
        print(f"{k} process{'es' if k > 1 else ''}, median ms (rank 0): "
              + ", ".join(f"{name} {ms}" for name, ms in res[f"phases_ms_nproc{k}"].items()))
    print(f"one run, real tok/s (median): 1 process {res['tok_s_ours_nproc1']:,}, {n} processes "
          f"{res[f'tok_s_ours_nproc{n}']:,}: {res['nproc_speedup']:.2f}x (median of per-round ratios) | "
          f"load average {' '.join(f'{x:.2f}' for x in load_before)} before, "
          f"{' '.join(f'{x:.2f}' for x in load_after)} after, {os.cpu_count()} CPUs")
    return res


# ------------------------------------------------------------------------------------------------

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", choices=sorted(CONFIGS), default="small")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--steps", type=int, default=6, help="measured rounds (one step of each model per round)")
    p.add_argument("--warmup", type=int, default=1, help="unmeasured rounds first")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: leave torch's default)")
    p.add_argument("--omp-wait-policy", choices=WAIT_POLICIES, default="default",
                   help="OMP_WAIT_POLICY for torch's OpenMP threads (passive: idle threads sleep instead of "
                        "spinning; 'default' leaves the environment alone)")
    add_length_options(p)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--hf-attn", default="sdpa", choices=["sdpa", "eager"], help="HF attention implementation")
    p.add_argument("--adamw", choices=["fused", "foreach", "loop"], default="fused",
                   help="torch.optim.AdamW implementation, the same for all models")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                   help="ours' precision (bf16 = autocast, as train.precision=bf16); the GEMM reference uses it too")
    p.add_argument("--hf-precision", choices=["fp32", "bf16"], default=None,
                   help="the HF models' precision (default: the same as --precision)")
    p.add_argument("--models", default="ours,hf-bucketed,hf-padded", help="comma-separated subset")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--nproc", type=int, default=1,
                   help="N > 1: one run's tokens/s on 1 process and on N (ours only; see the module doc)")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="then N steps of ours under torch.profiler: operators by self time per step")
    p.add_argument("--json", metavar="PATH", help="also write the result, command line and machine as JSON to PATH")
    p.add_argument("--label", help="with --json: the run's first cell in the Speed table (docs/speed.md) (bench_table.py)")
    args = p.parse_args()

    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    hf_precision = args.hf_precision or args.precision
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    g = torch.Generator().manual_seed(args.seed)
    base_cfg, lr = CONFIGS[args.config]
    cfg = ModelConfig(**{**base_cfg.__dict__, "dropout": args.dropout, "max_positions": args.max_len})

    lengths = sentence_lengths(args, rng)
    buckets = bucketed_batches(lengths, args.batch_size, rng)
    buckets = [b for b in buckets if len(b) == args.batch_size] or buckets  # full batches only
    by_len = sorted(buckets, key=lambda b: lengths[b].max())
    rounds = args.warmup + args.steps
    # measured rounds: bucketed batches spread evenly over the length range, in random order
    pick = [by_len[i] for i in np.round(np.linspace(0, len(by_len) - 1, args.steps)).astype(int)]
    pick = [by_len[len(by_len) // 2]] * args.warmup + [pick[i] for i in rng.permutation(len(pick))]
    bucketed = [make_batch(lengths[b], int(lengths[b].max()), cfg.vocab_size, device, g) for b in pick]
    padded = [make_batch(lengths[rng.choice(len(lengths), args.batch_size, replace=False)], args.max_len,
                         cfg.vocab_size, device, g) for _ in range(rounds)]

    if args.nproc > 1:
        res = bench_nproc(args, cfg, lr, bucketed, device)
        print(json.dumps(res))
        if args.json:
            write_result(args.json, res, args.label)
        return

    ours_model = Bert(cfg)
    wanted = args.models.split(",")
    runners = {}
    if "ours" in wanted:
        runners["ours"] = Runner("ours", ours_model, lr, ours_step, device, args.adamw, args.precision)
    for name in ("hf-bucketed", "hf-padded"):
        if name in wanted:
            hf = to_hf(ours_model, cfg, attn_implementation=args.hf_attn)
            runners[name] = Runner(name, hf, lr, hf_step, device, args.adamw, hf_precision)
    data = {"ours": bucketed, "hf-bucketed": bucketed, "hf-padded": padded}
    gemm_dtype = torch.bfloat16 if args.precision == "bf16" else torch.float32
    gemm = GemmReference(cfg, int(np.median([b["B"] * b["T"] for b in bucketed])), device, gemm_dtype)
    gemm_rates = []

    print(f"# {args.config}: {Bert(cfg).num_parameters():,} parameters | batch {args.batch_size} | "
          f"{len(lengths)} sentences, median length {np.median(lengths):.0f}, max {lengths.max()} | "
          f"{len(buckets)} bucketed batches, tokens/batch median "
          f"{np.median([lengths[b].sum() for b in buckets]):.0f} | threads {torch.get_num_threads()} | "
          f"device {device} | torch {torch.__version__} | HF attention {args.hf_attn} | AdamW {args.adamw} | "
          f"precision ours {args.precision}, HF {hf_precision} (native bf16: {native_bf16(device)})", flush=True)
    t_start = time.perf_counter()
    names = list(runners)
    for r in range(rounds):
        record = r >= args.warmup
        order = names[r % len(names):] + names[:r % len(names)]
        line = []
        for name in order:
            b = data[name][r]
            flops = matmul_flops(cfg, b["B"], b["T"], len(b["selected"])) if name == "ours" else 0.0
            dt = runners[name].step(b, record, flops)
            line.append(f"{name} {dt:.2f}s")
        if record:
            gemm_rates.append(gemm.rate())
        print(f"#   round {r + 1}/{rounds}{'' if record else ' (warm-up)'}: " + ", ".join(line)
              + (f", GEMM {gemm_rates[-1]:.0f} GFLOP/s" if record else ""), flush=True)

    def tps(name):  # per-step real tokens/s
        run = runners[name]
        return [n / t for n, t in zip(run.tokens, run.times)]

    res = {"config": args.config, "device": str(device), "threads": torch.get_num_threads(),
           "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "unset"),
           "batch_size": args.batch_size, "steps": args.steps, "adamw": args.adamw, "torch": torch.__version__,
           "precision": args.precision, "hf_precision": hf_precision}
    print()
    print(f"{'model':<12} {'s/step (median)':>16} {'real tok/s (median)':>20} {'real tok/s (total)':>19}")
    for name, run in runners.items():
        med = statistics.median(tps(name))
        total = sum(run.tokens) / sum(run.times)
        res[f"tok_s_{name}"] = round(med)
        res[f"tok_s_total_{name}"] = round(total)
        res.setdefault("round_tok_s", {})[name] = [round(x, 1) for x in tps(name)]  # the ratios' rounds
        print(f"{name:<12} {statistics.median(run.times):>16.3f} {med:>20,.0f} {total:>19,.0f}")
    for other in ("hf-bucketed", "hf-padded"):
        if "ours" in runners and other in runners:
            ratio = statistics.median(a / b for a, b in zip(tps("ours"), tps(other)))
            res[f"ours_over_{other}"] = round(ratio, 2)
            print(f"ours / {other:<12} {ratio:6.2f}x   (median of per-round ratios)")
    res["gemm_gflops"] = round(statistics.median(gemm_rates), 1)
    if "ours" in runners:
        ours = runners["ours"]
        achieved = [f / t / 1e9 for f, t in zip(ours.flops, ours.times)]
        res["ours_gflops"] = round(statistics.median(achieved), 1)
        res["ours_frac_of_gemm"] = round(statistics.median(a / g_ for a, g_ in zip(achieved, gemm_rates)), 3)
        res["round_gflops"] = {"ours": [round(a, 6) for a in achieved], "gemm": [round(g_, 6) for g_ in gemm_rates]}
        print(f"ours achieved matmul GFLOP/s {res['ours_gflops']:.1f} | same-shaped GEMM GFLOP/s "
              f"{res['gemm_gflops']:.1f} | ours/GEMM {100 * res['ours_frac_of_gemm']:.0f}%")
    if args.profile:
        if "ours" not in runners:
            raise SystemExit("bench_train.py: --profile profiles ours: keep it in --models")
        res["profile"] = profile_steps(runners["ours"], bucketed[args.warmup:] or bucketed, args.profile)
        print_profile(res["profile"])
    res["wall_s"] = round(time.perf_counter() - t_start, 1)
    print(json.dumps(res))
    if args.json:
        write_result(args.json, res, args.label)


if __name__ == "__main__":
    main()
