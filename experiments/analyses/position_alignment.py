"""Whether a lang-pos run's two blocks of position embeddings came to mean the same: the cosine between
the English and the second language's embedding of one position, averaged over ranges of positions,
beside the mean cosine between different positions of the two blocks and the run's µ.

    python experiments/analyses/position_alignment.py RUN [RUN ...] [--ranges 1-32,33-64] [--json]

With language-specific positions (lang-pos) each language has its own block of `data.max_len` position
embeddings; nothing in training ties position p of one block to position p of the other, so whether they
end up alike is up to training (Dufter & Schütze 2020, Fig. 5 and 8). Position 0 holds [CLS]. A run with
one block of positions (no lang-pos) or without a checkpoint is named on stderr and left out.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from minimult.report.figures import POSITIONS  # the position embeddings' name in a checkpoint


def cosines(W: np.ndarray, per_lang: int, lo: int, hi: int) -> tuple[float, float]:
    """(same, other): over positions lo..hi-1, the mean cosine between the first two blocks' embeddings of
    the same position, and the mean cosine between their embeddings of two different positions."""
    unit = W / np.maximum(np.linalg.norm(W, axis=1, keepdims=True), 1e-12)
    sim = unit[lo:hi] @ unit[per_lang + lo:per_lang + hi].T
    n = hi - lo
    same = float(np.trace(sim) / n)
    other = float((sim.sum() - np.trace(sim)) / (n * (n - 1))) if n > 1 else float("nan")
    return same, other


def parse_ranges(text: str) -> list[tuple[int, int]]:
    """'1-32,33-64' -> [(1, 33), (33, 65)]: inclusive position ranges as half-open ones."""
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.append((int(lo), int(hi or lo) + 1))
    return out


def measure(run: Path, ranges: list[tuple[int, int]]) -> dict | None:
    from minimult.runs import read_json, read_weights

    W = (read_weights(run, [POSITIONS]) or {}).get(POSITIONS)
    if W is None:
        print(f"{run}: no readable checkpoint, left out", file=sys.stderr)
        return None
    per_lang = int(read_json(run / "config.json")["data"]["max_len"])
    if W.shape[0] < 2 * per_lang:
        print(f"{run}: one block of positions (no lang-pos), left out", file=sys.stderr)
        return None
    if max(hi for _, hi in ranges) > per_lang:
        raise SystemExit(f"error: position ranges go past data.max_len = {per_lang} of {run}")
    results = run / "results.json"
    mu = read_json(results).get("mu") if results.is_file() else None
    row = {"run": str(run), "mu": mu}
    for lo, hi in ranges:
        row[f"same {lo}-{hi - 1}"], row[f"other {lo}-{hi - 1}"] = cosines(W, per_lang, lo, hi)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--ranges", default="1-32,33-64", help="inclusive position ranges (default 1-32,33-64)")
    ap.add_argument("--json", action="store_true", help="one JSON list instead of the table")
    args = ap.parse_args(argv)
    rows = [r for r in (measure(run, parse_ranges(args.ranges)) for run in args.runs) if r is not None]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    if not rows:
        return 1
    keys = [k for k in rows[0] if k not in ("run", "mu")]
    print("| run | µ | " + " | ".join(f"cos {k}" for k in keys) + " |")
    print("|---|--:|" + "--:|" * len(keys))
    for r in rows:
        mu = "–" if r["mu"] is None else f"{r['mu']:.3f}"
        print(f"| {Path(r['run']).name} | {mu} | " + " | ".join(f"{r[k]:.3f}" for k in keys) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
