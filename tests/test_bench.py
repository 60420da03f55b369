"""The benchmark scripts run end to end on tiny inputs and report what the README quotes (their
timings are not checked: speed claims come from full runs of these scripts, never from tests)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--batch-size", "8", "--steps", "2", "--sentences", "200", "--threads", "1"]


def bench(script: str, *args: str) -> dict:
    proc = subprocess.run([sys.executable, str(ROOT / "experiments" / script), *TINY, *args],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])  # the machine-readable last line


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_bench_train_reports_ratios_and_gemm_share(precision):
    res = bench("bench_train.py", "--precision", precision, "--hf-precision", "fp32")
    assert (res["precision"], res["hf_precision"], res["steps"]) == (precision, "fp32", 2)
    for key in ("tok_s_ours", "tok_s_hf-bucketed", "tok_s_hf-padded", "ours_over_hf-bucketed",
                "ours_over_hf-padded", "gemm_gflops", "ours_gflops", "ours_frac_of_gemm"):
        assert res[key] > 0, key


def test_bench_stacked_reports_the_ratio_to_separate_models():
    res = bench("bench_stacked.py", "--models", "2", "--precision", "bf16")
    assert (res["models"], res["precision"]) == (2, "bf16")
    assert res["tok_s_separate"] > 0 and res["tok_s_stacked"] > 0 and res["stacked_over_separate"] > 0
