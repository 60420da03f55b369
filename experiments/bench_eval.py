"""Where `minimult eval` spends its time, phase by phase, on a run folder.

    .venv/bin/python experiments/bench_eval.py RUN [--layers 0,8] [--threads 1] [--rounds 3]
        [--dev-sentences N] [--ppl-sentences N] [--ppl-subsets 2000,5000] [--json PATH]

1. Evaluates RUN as `minimult eval RUN --layer LAYERS` does (results.json is not written) and prints
   the seconds of every phase (minimult.evaluate's `timings`) with its rate in sequences or sentence
   pairs per second, and the total in dev sentences per second.
2. Forward passes in one process (docs/pipeline.md: ratios against a reference run in the same process):
   the dev English side through the blocks up to max(LAYERS), each 512-sentence length-sorted batch
   run whole as eval did before (`reference`) against in row slices of at most 2,048 tokens as it
   does now (`minimult.evaluate.piece_vectors`), alternated for --rounds rounds after a warm-up;
   prints the median ratio and checks that both give bit-identical vectors.
3. With --ppl-subsets, perplexity over fixed random subsets of that many sequences per split (what
   `minimult eval --ppl-sentences N` computes) next to the full pass, with seconds.
--json PATH also writes every number printed, the command line and the machine as JSON
(experiments/bench_results.py).

Measured (2026-11, quick-original-s0 = BERT-small after 25 quick-preset epochs, 10,000 dev sentences,
layers 0,8, 1 thread, this 2-core machine shared with a training job and other tests, load 1.5-4.7):
  before  74 s wall (cProfile): perplexity 42.5 (train + dev), forward dev + dictionary 25.9,
          retrieval + translation 2.4, alignment 2.3 + per-sentence gold links 0.2
  after   52-55 s wall at load ~3.3: forward dev 15.8, perplexity 11.2 + 21.1, alignment ~1.6,
          retrieval ~1.5, the rest < 0.5
  `minimult eval` old/new alternated at load 4.4-4.7: 106/113 vs 88/93 s wall, 73/78 vs 61/66 CPU s
What was tried:
  kept    the same length-sorted batches (512 sentences for hidden states, 256 for perplexity, whose
          masks they fix) run in row slices of at most 2,048 tokens (on CPU): a block's activations
          stay in a core's L2 cache (GELU alone went from 9.8 s to ~1 s); bit-identical outputs
  dropped new batches cut by a token budget: a sequence in an unpadded batch gets no attention mask
          and another rounding (up to 2e-6 at layer 8 for short sentences); slices keep the padding
  kept    alignment from flat vectors + offsets (one gather per chunk of 256 sentence pairs, gold
          links as (sentence, a, b) rows, correct = predicted target at each gold link) instead of
          per-sentence padding copies and (K, 2) tensors; links deduplicated via 1-D keys
          (torch.unique(dim=0) alone took 0.9 s)
  kept    retrieval in chunks of 256 queries instead of 2,048 (a 256 x 10,000 block stays near the
          caches): 0.78 vs 1.24 s per call
  kept    torch.inference_mode for every forward pass
  not done perplexity sharing the hidden-state pass: its inputs are masked, so it needs its own
          forward pass through all blocks; it is the largest phase (see --ppl-subsets)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_results import write_result  # noqa: E402

from minimult.data.batching import SequenceSet  # noqa: E402
from minimult.data.masking import random_replacement_ids  # noqa: E402
from minimult.evaluate import evaluate_run, mlm_perplexity, piece_vectors, truncate  # noqa: E402
from minimult.runs import Run  # noqa: E402


@torch.inference_mode()
def reference_vectors(model, side, layouts, layers, device, batch_size=512) -> dict[int, torch.Tensor]:
    """The hidden states as eval computed them before: fixed 512-sentence length-sorted batches."""
    seqs = SequenceSet.from_sides([side], layouts, device)
    order = np.argsort(side.lengths, kind="stable")
    out = {l: torch.zeros(len(side.ids), model.cfg.hidden, device=device) for l in layers}
    offsets = torch.as_tensor(side.offsets, device=device)
    for i in range(0, len(order), batch_size):
        index = order[i : i + batch_size]
        b = seqs.batch(index)
        hs = model.hidden_states(b.input_ids, b.position_ids, b.token_type_ids, b.attention_mask, layers=layers)
        rows, cols = b.maskable.nonzero(as_tuple=True)
        flat = offsets[torch.as_tensor(index, device=device)][rows] + cols - 1
        for l in layers:
            out[l][flat] = hs[l][rows, cols].float()
    return out


def timed(fn):
    """(wall seconds, process CPU seconds, fn's result)."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", help="run folder")
    p.add_argument("--layers", default="0,8")
    p.add_argument("--dev-sentences", type=int, default=None)
    p.add_argument("--ppl-sentences", type=int, default=None, help="as minimult eval --ppl-sentences (default all)")
    p.add_argument("--ppl-subsets", default="", help="comma-separated subset sizes to compare with the full perplexity")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (0: torch's default)")
    p.add_argument("--rounds", type=int, default=3, help="measured rounds of the forward comparison (0: skip it)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--json", metavar="PATH", help="also write the numbers, command line and machine as JSON to PATH")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    layers = tuple(int(x) for x in args.layers.split(","))

    timings: dict[str, list[float]] = {}
    total, total_cpu, r = timed(lambda: evaluate_run(args.run, layers, args.dev_sentences, args.ppl_sentences, args.device,
                                          log=lambda s: None, write=False, timings=timings))
    run = Run.open(args.run)
    model = run.load_model(args.device, log=lambda s: None)
    device = next(model.parameters()).device
    prepared, layouts = run.data.prepared, run.data.layouts
    n_train = 2 * len(prepared.train)
    n_dev_all = 2 * len(prepared.dev)
    if args.ppl_sentences:
        n_train, n_dev_all = min(n_train, args.ppl_sentences), min(n_dev_all, args.ppl_sentences)
    S, D = r["dev_sentences"], r["dictionary_entries"]
    per = {"forward_dev": (2 * S, "sequences"), "forward_dictionary": (2 * D, "sequences"),
           "alignment": (S * len(layers), "sentence pairs x layers"), "retrieval": (S * len(layers), "sentence pairs x layers"),
           "translation": (D * len(layers), "entries x layers"), "perplexity_train": (n_train, "sequences"),
           "perplexity_dev": (n_dev_all, "sequences")}
    print(f"{args.run}: layers {layers}, {S:,} dev sentences, {D:,} dictionary entries, "
          f"{torch.get_num_threads()} thread(s), device {device}")
    print(f"  {'phase':<20} {'wall s':>7} {'CPU s':>7}  rate (per wall second)")
    res = {"run": str(args.run), "layers": list(layers), "dev_sentences": S, "dictionary_entries": D,
           "threads": torch.get_num_threads(), "device": str(device), "phases": {}}
    for name, (wall, cpu) in timings.items():
        n, unit = per.get(name, (None, ""))
        rate = f"{n / wall:>10,.0f} {unit}/s" if n else ""
        print(f"  {name:<20} {wall:7.2f} {cpu:7.2f}  {rate}")
        res["phases"][name] = {"wall_s": wall, "cpu_s": cpu, **({"per_s": n / wall, "unit": unit} if n else {})}
    res.update(total_wall_s=total, total_cpu_s=total_cpu, dev_sentences_per_s=S / total)
    print(f"  {'total':<20} {total:7.2f} {total_cpu:7.2f}  {S / total:10,.0f} dev sentences/s "
          f"(phases sum to {sum(w for w, _ in timings.values()):.2f} s wall)")

    if args.rounds:
        english = run.data.views("dev")[0]
        if args.dev_sentences:
            english = english.subset(np.arange(min(args.dev_sentences, english.num_sentences)))
        english = truncate(english, run.cfg.data.max_len - 2)
        calls = {"reference": lambda: reference_vectors(model, english, layouts, layers, device),
                 "row slices": lambda: piece_vectors(model, english, layouts, layers, device)}
        outs = {k: f() for k, f in calls.items()}  # warm-up, and the equality check
        same = all(torch.equal(outs["reference"][l], outs["row slices"][l]) for l in layers)
        seconds = {k: [] for k in calls}  # CPU seconds: steadier than wall time on a shared machine
        for i in range(args.rounds):
            for k in (list(calls) if i % 2 == 0 else list(calls)[::-1]):
                seconds[k].append(timed(calls[k])[1])
        ratios = [a / b for a, b in zip(seconds["reference"], seconds["row slices"])]
        print(f"forward, dev English ({english.num_sentences:,} sequences, blocks up to {max(layers)}), "
              f"{args.rounds} rounds, median CPU seconds:")
        for k, v in seconds.items():
            print(f"  {k:<20} {statistics.median(v):7.2f} s  {english.num_sentences / statistics.median(v):10,.0f} sequences/s")
        print(f"  speed-up {statistics.median(ratios):.2f}x (per-round ratios {', '.join(f'{x:.2f}' for x in ratios)}); "
              f"identical vectors: {same}")
        res["forward"] = {"sequences": english.num_sentences, "rounds": args.rounds, "identical": same,
                          "median_cpu_s": {k: statistics.median(v) for k, v in seconds.items()},
                          "speedup": statistics.median(ratios), "ratios": ratios}

    if args.ppl_subsets:
        print("perplexity over a fixed random subset of N sequences per split (minimult eval --ppl-sentences N):")
        print(f"  {args.ppl_sentences or 'all':>8}  train {r['perplexity']['train']:8.2f}  dev {r['perplexity']['dev']:8.2f}  "
              f"{timings['perplexity_train'][1] + timings['perplexity_dev'][1]:6.2f} CPU s")
        res["perplexity_subsets"] = [{"n": args.ppl_sentences or "all", **r["perplexity"],
                                      "cpu_s": timings["perplexity_train"][1] + timings["perplexity_dev"][1]}]
        for n in (int(x) for x in args.ppl_subsets.split(",")):
            vals, secs = {}, 0.0
            for split in ("train", "dev"):
                sides = run.data.views(split)
                random_ids = random_replacement_ids(run.cfg.data.vocab_size, run.cfg.data.n_langs)
                _, cpu, out = timed(lambda: mlm_perplexity(model, sides, layouts, random_ids, device, n))
                vals[split], secs = out["perplexity"], secs + cpu
            print(f"  {n:>8,}  train {vals['train']:8.2f}  dev {vals['dev']:8.2f}  {secs:6.2f} CPU s")
            res["perplexity_subsets"].append({"n": n, **vals, "cpu_s": secs})
    if args.json:
        write_result(args.json, res)


if __name__ == "__main__":
    main()
