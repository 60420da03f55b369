"""`run_all.sh`, the batch script, end to end on the tiny corpus: the Table 1 grid's sweep then the
report, whose table it prints, then the path of its HTML site last; a second call runs nothing; --precision gets its own folders; a
bad preset or precision is one line and exit 2.
(That the overparam rows are left out on a CPU is tests/test_sweep.py's.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import torch

from minimult.precision import describe, native_bf16
from minimult.sweep.grid import load_grid


ROOT = Path(__file__).resolve().parents[1]
# the tiny corpus, half of it, and 2 layers rather than the grid's 8 under the tiny preset (`--set` goes to the
# sweep): what run_all.sh does is the same at any size
TINY_DATA = ["--set", f"data.train={ROOT / 'corpora/tiny/train.txt'}", "--set", f"data.dev={ROOT / 'corpora/tiny/dev.txt'}",
             "--set", "data.vocab_size=256", "--set", "data.train_sentences=200", "--set", "data.dev_sentences=100",
             "--set", "model.layers=2"]


def run_all(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([str(ROOT / "run_all.sh"), *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=900)


def test_run_all_sweeps_then_prints_the_table(tmp_path):
    args = ["--preset", "tiny", "--seeds", "0", "--only", "0,1", "--jobs", "2", "--out", "out", *TINY_DATA]
    proc = run_all(*args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = tmp_path / "out"
    assert "2 runs: 2 done, 0 skipped (already complete), 0 failed;" in proc.stdout
    assert sorted(p.name for p in (out / "runs" / "tiny").iterdir()) == ["0-original-s0", "1-lang-pos-s0",
                                                                          "table1.sweep.json"]
    rest = proc.stdout[proc.stdout.index("| ID |"):].strip().splitlines()  # the report's table comes last,
    table = rest[:next(i for i, line in enumerate(rest) if not line.startswith("|"))]  # then its orderings,
    after = rest[len(table):]                                                         # then the probe table's pointer
    report = out.resolve() / "report" / "tiny"
    source = load_grid(ROOT / "experiments" / "table1.toml").paper_source  # the paper's numbers beside ours
    assert after[:3] == ["", f"In parentheses, the paper's numbers (± its standard deviation over seeds, where it gives "
                             f"one): {source}.", ""]
    assert after[3:5] == ["Not shown: the paper's numbers at layer 8, which this table's columns do not have (its "
                          "upper layer is 1).", ""]  # TINY_DATA trains 2 layers: µ's upper layer is 1
    after = after[:3] + after[5:]
    assert after[3].startswith("Training: 2 runs, ") and " on cpu (" in after[3]  # what the training took
    original_mu = json.loads((out / "runs" / "tiny" / "0-original-s0" / "results.json").read_text())["mu"]  # one seed
    low = ["", f"The baseline, 0 original, is on the floor itself (mean µ {original_mu:.3f}, under 0.05): its runs "
               f"learned too little multilinguality for the rows' µ and p against it to say much."]
    assert (after[4:6] == low) == (original_mu < 0.05)  # under the table where original is that low
    after = after[:4] + after[6:] if after[4:6] == low else after
    assert after[4:6] == ["", "## Table 1: multilinguality and model fit (Dufter & Schütze 2020): the paper's orderings"]
    tables = [block.splitlines() for block in "\n".join(after).split("\n\n") if block.startswith("|")]
    orderings, floor = tables[0], tables[1]  # one seed a side: a direction, never a verdict
    assert orderings[0].startswith("| claim |") and len(orderings) == 4, orderings  # 1 < 0 (µ), 1 ≈ 0 (ppl dev)
    assert all(line.endswith("| **cannot tell** |") for line in orderings[2:])
    assert "These are tiny-preset models, which check that the machinery runs" in proc.stdout  # no evidence
    assert floor[0] == "| setting | on the floor | seeds' µ |" and floor[2].startswith("| 1 lang-pos | 1 of 1 (100%")
    assert ("lang-pos seed on the floor here says nothing of lang-pos" in proc.stdout) == (original_mu < 0.05)
    assert after[-4:] == ["", f"Language identification per layer (2 settings): {report}/table1.md and "
                              f"{report}/language_id.png", "", f"site: {report}/index.html"]
    assert [row.split("|")[1].strip() for row in table[2:]] == ["0", "1"]
    assert "µ" in table[0] and "n/a" not in table[2]  # µ exists (layers 0 and 1 of 2)
    assert (out / "report" / "tiny" / "table1.md").is_file() and any((out / "report" / "tiny").glob("*.png"))
    # the HTML site beside the report: the index, the claims, the grid's page and a page per run
    assert {"index.html", "claims.html", "style.css"} <= {p.name for p in report.iterdir()}
    assert (report / "tiny" / "index.html").is_file() and (report / "tiny" / "runs" / "1-lang-pos-s0.html").is_file()
    assert ("tip: this CPU computes bf16 natively" in proc.stdout) == native_bf16(torch.device("cpu"))

    again = run_all(*args, cwd=tmp_path)
    assert again.returncode == 0 and "0 done, 2 skipped (already complete)" in again.stdout


def test_run_all_dry_run_lists_the_runs_and_ends_there(tmp_path):
    """A dry run of a grid never swept lists its runs and exits 0: no report of a folder that does not exist."""
    proc = run_all("--preset", "tiny", "--seeds", "0", "--only", "0,1", "--dry-run", "--out", "out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0-original-s0" in proc.stdout and "1-lang-pos-s0" in proc.stdout and not proc.stderr
    assert not (tmp_path / "out" / "runs").exists() and not (tmp_path / "out" / "report").exists()


def test_run_all_refuses_an_unknown_preset(tmp_path):
    proc = run_all("--preset", "huge", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "run_all.sh: unknown preset 'huge': use tiny, quick, paper, published, quick-b256 or paper-b256"]
    assert not any(tmp_path.iterdir())


def test_run_all_knows_every_preset():
    """run_all.sh checks --preset against a list of its own (instant, before any set-up): it must be PRESETS."""
    from minimult.config import PRESETS

    script = (ROOT / "run_all.sh").read_text()
    accepted = re.search(r"^  ([\w|-]+)\) ;;", script, re.M).group(1).split("|")
    named = re.search(r"unknown preset '\$preset': use ([^\"]+)\"", script).group(1).replace(" or", ",").split(", ")
    assert sorted(accepted) == sorted(named) == sorted(PRESETS)


def test_run_all_precision_trains_in_bf16_into_its_own_folders(tmp_path):
    proc = run_all("--preset", "tiny", "--seeds", "0", "--only", "0", "--precision", "bf16", "--out", "out",
                   *TINY_DATA, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = tmp_path / "out" / "runs" / "tiny-bf16" / "0-original-s0"
    assert json.loads((run / "run.json").read_text())["precision"] == "bf16"
    assert json.loads((run / "config.json").read_text())["train"]["precision"] == "bf16"
    # the log names bf16, with the emulation warning on a CPU without native bf16 (this test's machine may be either)
    log = (run / "sweep.log").read_text()
    assert f"device cpu ({describe('bf16', torch.device('cpu'))})" in log
    assert ("emulated" in log) != native_bf16(torch.device("cpu"))
    assert (tmp_path / "out" / "report" / "tiny-bf16" / "table1.md").is_file()
    assert not (tmp_path / "out" / "runs" / "tiny").exists()
    assert "tip:" not in proc.stdout  # already in bf16


@pytest.mark.skipif(not Path("/proc/cpuinfo").is_file(), reason="reads the CPU's flags from /proc/cpuinfo")
def test_native_bf16_on_a_cpu_means_bf16_instructions():
    """The bf16 tip and the emulation warning rest on `native_bf16`: yes only with AVX512-BF16 or AMX. oneDNN's
    own check says yes for plain AVX-512 too, where bf16 training ran at less than half fp32's speed."""
    flags = set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            flags |= set(line.split(":", 1)[1].split())
    assert native_bf16(torch.device("cpu")) == bool(flags & {"avx512_bf16", "amx_bf16"}), sorted(flags)


def test_run_all_refuses_an_unknown_precision(tmp_path):
    proc = run_all("--precision", "fp16", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "run_all.sh: unknown precision 'fp16': use auto, fp32 or bf16"]
    assert not any(tmp_path.iterdir())



def test_sourcing_env_sh_leaves_the_callers_shell_options_as_they_were():
    """`source scripts/env.sh` activates the venv without `set -euo pipefail` leaking into the caller: a failing
    command afterwards does not end the shell, and an unset variable is still just empty."""
    root = Path(__file__).resolve().parents[1]
    script = 'source scripts/env.sh; false; echo alive; echo "[$never_set]"; echo "$-"; command -v minimult'
    out = subprocess.run(["bash", "-c", script], cwd=root, capture_output=True, text=True, timeout=600)
    lines = out.stdout.splitlines()
    assert out.returncode == 0 and lines[:2] == ["alive", "[]"], out.stdout + out.stderr
    assert "e" not in lines[2] and "u" not in lines[2]
    assert lines[3] == str(root / ".venv" / "bin" / "minimult")
