"""Compare the numbers of two runs' results.json, leaf by leaf: how many there are and which differ.

    python experiments/compare_results.py experiments/results/parallel-quick/en-es-s0 \
        experiments/results/parallel-quick/parallel-s0

Every number the evaluators wrote (per-layer scores, µ, perplexities, the probe, link-file scores,
transfer) is compared; the run's bookkeeping (settings, timings, environment, evaluation history) is not.
docs/corpora.md's worked example of the parallel source cites its output.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

SKIP = {"evaluation", "run", "config", "environment", "train", "evaluations", "eval_seconds", "mod_versions",
        "evaluator_versions", "vocab_sha256", "preset", "mods", "seed", "seconds", "file", "sha256", "directory"}


def leaves(x, path: str = "") -> dict:
    """{path: number or None} of a results dict, SKIP keys left out."""
    if isinstance(x, dict):
        return {k: v for key, value in x.items() if key not in SKIP for k, v in leaves(value, f"{path}/{key}").items()}
    if isinstance(x, list):
        return {k: v for i, value in enumerate(x) for k, v in leaves(value, f"{path}/{i}").items()}
    if x is None or (isinstance(x, (int, float)) and not isinstance(x, bool)):
        return {path: x}
    return {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    args = ap.parse_args()
    a, b = (leaves(json.loads((Path(p) / "results.json").read_text())) for p in (args.a, args.b))
    differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    print(f"{len(a.keys() & b.keys())} numbers in both, {len(differ)} differ")
    for k in differ:
        print(f"  {k}: {a.get(k, '(none)')} vs {b.get(k, '(none)')}")


if __name__ == "__main__":
    main()
