"""Training time per model size, to plan a grid: every model shape of a grid file timed against the
reference shape (BERT-small) in the same process, and what that makes a run of the grid's preset.

    .venv/bin/python experiments/bench_sizes.py [--grid experiments/k-et-al.toml] [--preset quick]
        [--steps 3] [--batch-size 128] [--threads 1] [--json experiments/results/bench/NAME.json [--label TEXT]]

Each setting of the grid is resolved as a sweep would (`config.resolve`, so `model.target_params` is
solved); settings of one model shape are timed once. Every round trains one step of each shape on the
same synthetic length-bucketed batch (bench_train.py's batches: clipped-lognormal sentence lengths,
median 27 pieces with [CLS]/[SEP], 15% selected), the order rotating every round, each shape with its
own AdamW (the run's lr, weight decay, eps) and dropout. A shape's speed is the median over rounds of
its per-round time relative to the reference's in that round ("x ref": 2.0 = twice as long per token),
which cancels most of what the rest of the machine does to both. "predicted" is the sweep's cost model
(`minimult.sweep.progress.run_cost`, per epoch) relative to the reference's: the sweep's time estimate
scales finished runs' lengths by it, so the two columns side by side say how far to trust it.

A setting with other units (`data.tokenizer` char or word, K et al.'s Table 10) is its own shape: it
trains on the same sentences, each of its lengths (without [CLS]/[SEP]) scaled by the granularity's
units per word-piece (`progress.units_ratio`: 3.29 for characters on BBE NT) and cut at its
data.max_len, with ids from its own vocabulary; "x ref" is then the time per step of the same
sentences, so per run, not per token (tok/s counts its own units).

"run" is the time of one run of the preset at that size: `--reference-run` (default: the
train_seconds of experiments/results/quick/0-original-s0, a BERT-small quick-b256 run on one core
while another run used the other) times "x ref" times the run's epochs over the reference run's.
It is training only; evaluation adds about a minute per run at these sizes (transfer: minutes more).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from bench_results import write_result  # noqa: E402
from bench_train import Runner, bucketed_batches, make_batch, ours_step, sentence_lengths  # noqa: E402
from minimult.model import Bert  # noqa: E402

REFERENCE_RUN = ROOT / "experiments" / "results" / "quick" / "0-original-s0"


def reference_seconds(path: Path) -> tuple[float, int, str]:
    """(train_seconds, epochs, where) of a finished run folder."""
    meta = json.loads((path / "run.json").read_text())
    cfg = json.loads((path / "config.json").read_text())
    return float(meta["train_seconds"]), int(cfg["train"]["epochs"]), str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)


def shapes(grid_path: str, preset: str) -> tuple[dict, dict]:
    """({shape key: (ModelConfig, lr, epochs, [setting ids], data config)}, the reference's entry)."""
    from minimult.config import resolve
    from minimult.sweep.grid import load_grid

    grid = load_grid(grid_path)
    out = {}
    for s in grid.settings:
        cfg, _ = resolve(preset, grid.overrides_for(s, preset), s.mods)
        if cfg.train.epochs == 0:
            continue  # untrained: nothing to time
        m = cfg.model
        key = (m.layers, m.heads, m.hidden, m.intermediate, m.vocab_size, m.max_positions, m.type_vocab_size, m.nsp,
               cfg.data.tokenizer, cfg.data.max_len)
        entry = out.setdefault(key, [m, cfg.train.lr, cfg.train.epochs, [], cfg.data])
        entry[3].append(s.id)
    ref_cfg, _ = resolve(preset)  # BERT-small under the preset
    r = ref_cfg.model
    ref_key = (r.layers, r.heads, r.hidden, r.intermediate, r.vocab_size, r.max_positions, r.type_vocab_size, r.nsp,
               ref_cfg.data.tokenizer, ref_cfg.data.max_len)
    out.setdefault(ref_key, [r, ref_cfg.train.lr, ref_cfg.train.epochs, [], ref_cfg.data])
    return out, ref_key


def fmt_seconds(s: float) -> str:
    return f"{s / 3600:.1f} h" if s >= 5400 else f"{s / 60:.0f} min"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--grid", default=str(ROOT / "experiments" / "k-et-al.toml"))
    p.add_argument("--preset", default=None, help="the grid's own preset unless given")
    p.add_argument("--batch-size", type=int, default=128, help="sentences per step (the quick preset's 128)")
    p.add_argument("--steps", type=int, default=3, help="measured rounds (one step of every shape per round)")
    p.add_argument("--warmup", type=int, default=1, help="unmeasured rounds first")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (sweeps run one thread per run)")
    p.add_argument("--sentences", type=int, default=9009, help="synthetic sentences to draw batches from")
    p.add_argument("--median-length", type=float, default=27.0, help="incl. [CLS]/[SEP]")
    p.add_argument("--length-sigma", type=float, default=0.35)
    p.add_argument("--max-len", type=int, default=128)
    p.add_argument("--reference-run", default=str(REFERENCE_RUN),
                   help="a finished BERT-small run folder whose train_seconds scale the 'run' column")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="PATH", help="also write the result, command line and machine as JSON to PATH")
    p.add_argument("--label", help="with --json: a label for the result file")
    args = p.parse_args()
    args.lengths_from = None

    from minimult.sweep.grid import load_grid
    from minimult.sweep.progress import run_cost, units_ratio

    preset = args.preset or load_grid(args.grid).preset
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    g = torch.Generator().manual_seed(args.seed)
    found, ref_key = shapes(args.grid, preset)
    keys = [ref_key] + [k for k in found if k != ref_key]
    lengths = sentence_lengths(args, rng)
    buckets = [b for b in bucketed_batches(lengths, args.batch_size, rng) if len(b) == args.batch_size]
    by_len = sorted(buckets, key=lambda b: lengths[b].max())
    pick = [by_len[i] for i in np.round(np.linspace(0, len(by_len) - 1, args.steps)).astype(int)]
    pick = [by_len[len(by_len) // 2]] * args.warmup + [pick[i] for i in rng.permutation(len(pick))]
    wordpiece = [k for k in keys if units_ratio(vars(found[k][4])) == 1.0]
    vocab = max(found[k][0].vocab_size for k in wordpiece)
    batches = [make_batch(lengths[b], int(lengths[b].max()), vocab, torch.device("cpu"), g) for b in pick]
    shape_batches = {k: batches for k in wordpiece}
    for k in keys:  # other units: the same sentences in their own lengths and ids
        if k not in shape_batches:
            m, data = found[k][0], found[k][4]
            units = [np.clip(np.round(2 + (lengths[b] - 2) * units_ratio(vars(data))).astype(np.int64), 4,
                             data.max_len) for b in pick]
            shape_batches[k] = [make_batch(u, int(u.max()), m.vocab_size,
                                           torch.device("cpu"), g) for u in units]
    runners = {}
    for k in keys:
        cfg, lr = found[k][0], found[k][1]
        runners[k] = Runner(str(k), Bert(cfg), lr, ours_step, "cpu", "fused", "fp32")
    print(f"# {args.grid} under preset {preset}: {len(keys)} model shapes | batch {args.batch_size} | "
          f"threads {torch.get_num_threads()} | torch {torch.__version__}", flush=True)
    t0 = time.perf_counter()
    rounds = args.warmup + args.steps
    per_round: dict = {k: [] for k in keys}
    for r in range(rounds):
        order = keys[r % len(keys):] + keys[:r % len(keys)]
        for k in order:
            dt = runners[k].step(shape_batches[k][r], r >= args.warmup)
            if r >= args.warmup:
                per_round[k].append(dt)
        print(f"#   round {r + 1}/{rounds}{' (warm-up)' if r < args.warmup else ''} done "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)

    ref_seconds, ref_epochs, ref_where = reference_seconds(Path(args.reference_run))
    def epoch_cost(k) -> float:  # the sweep's cost model for one epoch of the shape
        return run_cost({"train": {"epochs": 1}, "model": vars(found[k][0]), "data": vars(found[k][4])})

    ref_cost = epoch_cost(ref_key)
    rows = []
    print(f"\n{'settings':<22} {'units':>9} {'layers':>6} {'heads':>5} {'hidden':>6} {'parameters':>11} {'tok/s':>7} "
          f"{'x ref':>6} {'predicted':>9} {'run':>8}")
    for k in keys:
        cfg, _, epochs, ids, data = found[k]
        tokens = [b["real_tokens"] for b in shape_batches[k][args.warmup:]]
        ratio = statistics.median(a / b for a, b in zip(per_round[k], per_round[ref_key]))
        predicted = epoch_cost(k) / ref_cost
        run_s = ref_seconds * ratio * epochs / ref_epochs
        row = {"settings": ids or ["reference"], "tokenizer": data.tokenizer, "layers": cfg.layers, "heads": cfg.heads, "hidden": cfg.hidden,
               "parameters": Bert(cfg).num_parameters(), "tok_s": round(statistics.median(n / t for n, t in zip(tokens, per_round[k]))),
               "x_ref": round(ratio, 3), "predicted": round(predicted, 3), "run_seconds": round(run_s),
               "round_seconds": [round(t, 6) for t in per_round[k]]}
        rows.append(row)
        print(f"{','.join(row['settings']):<22} {data.tokenizer:>9} {cfg.layers:>6} {cfg.heads:>5} {cfg.hidden:>6} {row['parameters']:>11,} "
              f"{row['tok_s']:>7,} {ratio:>6.2f} {predicted:>9.2f} {fmt_seconds(run_s):>8}")
    total = sum(r["run_seconds"] * len(r["settings"]) for r in rows if r["settings"] != ["reference"])
    print(f"one seed of every trained setting: {fmt_seconds(total)} of training on one core ('run' = {ref_where}'s "
          f"{ref_seconds:.0f} s for {ref_epochs} epochs x 'x ref' x epochs / {ref_epochs})")
    res = {"grid": str(args.grid), "preset": preset, "batch_size": args.batch_size, "steps": args.steps,
           "threads": torch.get_num_threads(), "torch": torch.__version__, "reference_run": ref_where,
           "reference_seconds": round(ref_seconds), "rows": rows, "seed_seconds": round(total),
           "wall_s": round(time.perf_counter() - t0, 1)}
    print(json.dumps(res))
    if args.json:
        write_result(args.json, res, args.label)


if __name__ == "__main__":
    main()
