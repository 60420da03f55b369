"""The benchmark scripts run end to end on tiny inputs and report what the README quotes (their
timings are not checked: speed claims come from full runs of these scripts, never from tests);
`--json` files hold the same result with the command and the machine, and the Speed table (docs/speed.md)
is what bench_table.py makes from the result files in experiments/results/bench/."""

from __future__ import annotations

import json
import shutil
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


def filed(path: Path, res: dict, script: str) -> dict:
    """The --json file: the printed result, the options, the machine."""
    data = json.loads(path.read_text())
    assert data["result"] == res and data["script"] == script and "--json" not in data["argv"]
    assert data["command"].startswith(f"python experiments/{script} ") and data["date"]
    assert data["machine"]["threads"] == 1 and data["machine"]["cpu"] and data["machine"]["torch"]
    return data


def median_ratio(a: list[float], b: list[float]) -> float:
    """The median of per-round ratios a/b, as the scripts compute their ratios (from their rounded rates)."""
    import statistics

    assert len(a) == len(b) > 0
    return statistics.median(x / y for x, y in zip(a, b))


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_bench_train_reports_ratios_and_gemm_share(precision, tmp_path):
    res = bench("bench_train.py", "--precision", precision, "--hf-precision", "fp32",
                "--json", str(tmp_path / "r.json"))
    assert filed(tmp_path / "r.json", res, "bench_train.py")["argv"][-4:] == [
        "--precision", precision, "--hf-precision", "fp32"]
    assert (res["precision"], res["hf_precision"], res["steps"]) == (precision, "fp32", 2)
    for key in ("tok_s_ours", "tok_s_hf-bucketed", "tok_s_hf-padded", "ours_over_hf-bucketed",
                "ours_over_hf-padded", "gemm_gflops", "ours_gflops", "ours_frac_of_gemm"):
        assert res[key] > 0, key
    rounds = res["round_tok_s"]  # each ratio is ours over the other, round by round: not inverted, not another pair
    for other in ("hf-bucketed", "hf-padded"):
        assert res[f"ours_over_{other}"] == pytest.approx(median_ratio(rounds["ours"], rounds[other]), abs=0.006)
    gflops = res["round_gflops"]
    assert res["ours_frac_of_gemm"] == pytest.approx(median_ratio(gflops["ours"], gflops["gemm"]), abs=6e-4)


def test_bench_train_profile_says_where_a_step_of_ours_spends_its_time():
    prof = bench("bench_train.py", "--models", "ours", "--profile", "2")["profile"]
    ops = prof["ops"]
    assert prof["steps"] == 2 and prof["step_ms"] > 0 and prof["ops_per_step"] > 100
    assert [o["self_ms_per_step"] for o in ops] == sorted((o["self_ms_per_step"] for o in ops), reverse=True)
    assert {"aten::mm", "aten::addmm"} <= {o["op"] for o in ops}  # the linear layers' products are there
    assert next(o for o in ops if o["op"] == "aten::addmm")["calls_per_step"] >= 12  # forward linears of 12 layers at least
    assert 0 < sum(o["share"] for o in ops) <= 1 + 1e-6


def test_bench_train_nproc_reports_one_run_on_one_process_and_on_two(tmp_path):
    res = bench("bench_train.py", "--nproc", "2", "--json", str(tmp_path / "n.json"))
    filed(tmp_path / "n.json", res, "bench_train.py")
    assert (res["nproc"], res["threads"], res["precision"]) == (2, 1, "fp32")
    assert res["tok_s_ours_nproc1"] > 0 and res["tok_s_ours_nproc2"] > 0
    rounds = res["round_tok_s"]
    assert res["nproc_speedup"] == pytest.approx(median_ratio(rounds["nproc2"], rounds["nproc1"]), abs=0.006)
    one, two = res["phases_ms_nproc1"], res["phases_ms_nproc2"]
    assert set(one) == {"forward", "backward", "optimizer", "step"} and set(two) == set(one) | {"all_reduce"}
    assert all(ms > 0 for phases in (one, two) for ms in phases.values())
    assert len(res["load_avg_before"]) == len(res["load_avg_after"]) == 3


def test_bench_stacked_reports_the_ratio_to_separate_models(tmp_path):
    res = bench("bench_stacked.py", "--models", "2", "--precision", "bf16", "--json", str(tmp_path / "s.json"))
    filed(tmp_path / "s.json", res, "bench_stacked.py")
    assert (res["models"], res["precision"]) == (2, "bf16")
    assert res["tok_s_separate"] > 0 and res["tok_s_stacked"] > 0
    rounds = res["round_tok_s"]
    assert res["stacked_over_separate"] == pytest.approx(median_ratio(rounds["stacked"], rounds["separate"]), abs=0.006)


def test_bench_microbatches_times_groups_and_padding_against_one_pass_and_checks_they_compute_the_same(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "experiments" / "bench_microbatches.py"), "--preset", "tiny",
                           "--rounds", "2", "--parts", "1,3", "--pad", "8", "--json", str(tmp_path / "m.json")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    filed(tmp_path / "m.json", res, "bench_microbatches.py")
    assert [r["microbatches"] for r in res["rows"]] == [1, 3, "bucket", "pad 8"]
    assert all(r["tokens_per_s"] > 0 and r["speedup"] > 0 for r in res["rows"])
    for variant in ("3", "pad 8"):  # dropout off: the groups' (or padded batch's) step is the one-pass step
        loss, gradient = res["sameness"][variant]
        assert loss < 1e-5 and gradient < 1e-5


def test_bench_graphs_times_stacked_steps_on_fixed_shapes(tmp_path):
    """On a CPU only the eager steps run (CUDA graphs need CUDA): K = 1 and 2 stacked, on batches padded to
    fixed shapes, each step's time and matmul rate against the same-shaped GEMM's; no graphed column."""
    proc = subprocess.run([sys.executable, str(ROOT / "experiments" / "bench_graphs.py"), "--device", "cpu",
                           "--batch-size", "8", "--sentences", "300", "--models", "1,2", "--precisions", "fp32",
                           "--steps", "6", "--pad-multiple", "64", "--threads", "1", "--json", str(tmp_path / "g.json")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    filed(tmp_path / "g.json", res, "bench_graphs.py")
    assert [r["models"] for r in res["rows"]] == [1, 2] and res["sameness"] is None
    for r in res["rows"]:
        assert r["eager_ms_per_update_per_model"] > 0 and 0 < r["eager_gflops"] and r["gemm_gflops"] > 0
        assert 1 <= r["shapes"] <= 2 and r["rounds_timed"] == 6 and "graphed_over_eager" not in r


def test_readme_speed_table_is_made_from_the_result_files(tmp_path):
    """Regenerating the Speed table (docs/speed.md) from experiments/results/bench/ changes nothing; a new
    result file is a new row, labelled by its options."""
    readme = tmp_path / "speed.md"
    readme.write_bytes((ROOT / "docs" / "speed.md").read_bytes())
    table = [sys.executable, str(ROOT / "experiments" / "bench_table.py"), "--readme", str(readme)]
    proc = subprocess.run(table + ["--check"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    results = tmp_path / "bench"
    shutil.copytree(ROOT / "experiments" / "results" / "bench", results)
    new = json.loads((results / "train-10-fp32.json").read_text())
    new.pop("label")
    new["argv"] += ["--steps", "12"]
    # fixed numbers (an earlier measurement), so re-measuring the committed files does not change this row
    new["result"].update({"tok_s_ours": 12388, "tok_s_hf-bucketed": 8048, "tok_s_hf-padded": 1109,
                          "ours_over_hf-bucketed": 1.51, "ours_over_hf-padded": 10.8, "gemm_gflops": 73.2,
                          "ours_gflops": 51.3, "ours_frac_of_gemm": 0.70})
    (results / "train-99-new.json").write_text(json.dumps(new))
    proc = subprocess.run(table + ["--results", str(results)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    text = readme.read_text()
    assert text != (ROOT / "docs" / "speed.md").read_text()
    row = "| `--precision fp32 --steps 12` | 12,388 | 8,048 | 1,109 | 1.51× | 10.8× | 70% (51.3 of 73.2) |"
    assert row + "\n<!-- END bench-train -->" in text  # the GFLOP/s unit only on the first row with rates


def test_bench_sizes_times_every_shape_of_a_grid_against_the_reference(tmp_path):
    from minimult.sweep.grid import load_grid

    res = bench("bench_sizes.py", "--json", str(tmp_path / "z.json"))
    filed(tmp_path / "z.json", res, "bench_sizes.py")
    rows = {s: r for r in res["rows"] for s in r["settings"]}
    assert set(rows) >= {s.id for s in load_grid(ROOT / "experiments" / "k-et-al.toml").settings}
    assert res["rows"][0]["x_ref"] == 1.0 and rows["0"] is res["rows"][0]  # BERT-small is the reference
    ref = res["rows"][0]["round_seconds"]
    for r in res["rows"]:
        assert r["predicted"] > 0 and r["run_seconds"] > 0 and r["tok_s"] > 0
        assert r["x_ref"] == pytest.approx(median_ratio(r["round_seconds"], ref), abs=6e-4)
