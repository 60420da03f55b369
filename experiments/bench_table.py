"""The Speed table (docs/speed.md), made from the bench_train.py result files instead of pasted.

    .venv/bin/python experiments/bench_table.py [--results experiments/results/bench] [--readme docs/speed.md]
                                                [--check]

Every `bench_train.py --json PATH` file in --results is one row, in file-name order (hence names
like `train-10-fp32.json`): its --label, else its options in backticks (without `--threads 1`, which
the header says). Numbers: real tokens/s per model, the ratios ours/HF to three significant digits,
and ours' share of the same-shaped GEMM rate, with both GFLOP/s rates where the file has them (the
unit written on the first such row only). The table replaces the lines between
`<!-- BEGIN bench-train -->` and `<!-- END bench-train -->` in --readme (default docs/speed.md;
minimult.report.readme);
--check only says whether the page is up to date (exit 1 if not), writing nothing.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_results import BENCH_DIR, ROOT, read_results  # noqa: E402

MARKER = "bench-train"
HEADER = ["command (`bench_train.py --threads 1 ...`)", "ours", "HF bucketed", "HF padded (paper's code)",
          "ours / bucketed", "ours / padded", "ours / same-shaped GEMM rate"]


def _sig3(x: float) -> str:
    """Three significant digits, trailing zeros kept: 1.50, 10.8, 141."""
    digits = max(0, 2 - math.floor(math.log10(abs(x)))) if x else 2
    return f"{x:.{digits}f}"


def label(data: dict) -> str:
    if data.get("label"):
        return data["label"]
    argv, out, i = data.get("argv", []), [], 0
    while i < len(argv):
        if argv[i] == "--threads" and argv[i + 1:i + 2] == ["1"]:
            i += 2
            continue
        out.append(argv[i])
        i += 1
    return f"`{' '.join(out)}`" if out else "(defaults)"


def row(data: dict, unit: bool) -> list[str]:
    """One table row; `unit`: write "GFLOP/s" after the rates (the first row that has them)."""
    r = data["result"]
    if "nproc_speedup" in r:  # bench_train.py --nproc N: one run's tokens/s on N processes against one
        n = r.get("nproc", 2)
        ours = (f"{r[f'tok_s_ours_nproc{n}']:,} on {n} processes, {r['tok_s_ours_nproc1']:,} on 1: "
                f"{_sig3(r['nproc_speedup'])}×")
        return [label(data), ours, "–", "–", "–", "–", "–"]
    tok = [f"{r[k]:,}" if k in r else "–" for k in ("tok_s_ours", "tok_s_hf-bucketed", "tok_s_hf-padded")]
    ratios = [f"{_sig3(r[k])}×" if k in r else "–" for k in ("ours_over_hf-bucketed", "ours_over_hf-padded")]
    gemm = f"{100 * r['ours_frac_of_gemm']:.0f}%" if "ours_frac_of_gemm" in r else "–"
    if "ours_frac_of_gemm" in r and "ours_gflops" in r and "gemm_gflops" in r:
        gemm += f" ({r['ours_gflops']:.1f} of {r['gemm_gflops']:.1f}{' GFLOP/s' if unit else ''})"
    return [label(data), *tok, *ratios, gemm]


def speed_table(folder: Path) -> str:
    results = read_results(folder, "bench_train.py")
    if not results:
        raise SystemExit(f"error: no bench_train.py result files (bench_train.py --json PATH) in {folder}")
    lines = ["| " + " | ".join(HEADER) + " |", "|---|" + "--:|" * (len(HEADER) - 1)]
    unit = True
    for _, data in results:
        lines.append("| " + " | ".join(row(data, unit)) + " |")
        unit = unit and not {"ours_gflops", "gemm_gflops"} <= set(data["result"])
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, default=BENCH_DIR, help="folder of result files")
    p.add_argument("--readme", type=Path, default=ROOT / "docs" / "speed.md")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if the page's table differs")
    args = p.parse_args()
    sys.path.insert(0, str(ROOT))
    from minimult.errors import MinimultError
    from minimult.report.readme import update_readme

    table = speed_table(args.results)
    print(table, end="")
    try:
        changed = update_readme(args.readme, table, MARKER, write=not args.check)
    except MinimultError as e:
        sys.exit(f"error: {e}")
    if args.check and changed:
        sys.exit(f"{args.readme}: its Speed table differs from the result files in {args.results}")
    print(f"{args.readme}: {'updated' if changed else 'unchanged'} between its {MARKER} markers", file=sys.stderr)


if __name__ == "__main__":
    main()
