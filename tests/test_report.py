"""`minimult report`: the table equals the per-run results (mean and sample std over seeds computed
here independently), the CSV parses, Welch p-values are there for settings with 2 seeds, figures
are real PNGs; one seed gives blank std and p; no evaluated runs is a one-line error. The columns
and the training figure's panels come from the evaluator registry; the README's quick Table 1 is
what `--readme` writes between its markers, which `update_readme` alone touches."""

from __future__ import annotations

import csv
import json
import math
import shutil
import statistics
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats

from minimult.cli import main
from minimult.errors import MinimultError
from minimult.report import build_report, readme_table
from minimult.report.readme import table_marker, update_readme
from minimult.runs import read_json
from test_sweep import RUNS, SEEDS, SETTINGS, swept  # noqa: F401  (the shared tiny sweep)

ROOT = Path(__file__).resolve().parents[1]


def per_run(root, name) -> dict:
    r = read_json(root / name / "results.json")
    out = {"mu": r["mu"], "ppl_train": r["perplexity"]["train"], "ppl_dev": r["perplexity"]["dev"]}
    for l in ("0", "3"):  # µ's layers at 4 layers
        for k in ("align_f1", "retrieval", "translation"):
            out[f"{k}_L{l}"] = r["layers"][l][k]
    return out


def welch_p(a, b) -> float:
    """Welch's t-test written out (not scipy's ttest_ind), two-sided."""
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    t = (statistics.mean(a) - statistics.mean(b)) / math.sqrt(va + vb)
    dof = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    return 2 * stats.t.sf(abs(t), dof)


_DONE: dict = {}


@pytest.fixture
def reported(swept, tmp_path_factory):  # noqa: F811
    """The report of the shared sweep, made once."""
    assert swept.proc.returncode == 0, swept.proc.stdout + swept.proc.stderr
    if "report" not in _DONE:
        out = tmp_path_factory.mktemp("report") / "report"
        result = CliRunner().invoke(main, ["report", str(swept.root), "--out", str(out)])
        assert result.exit_code == 0, result.output
        _DONE["report"] = (swept, out, result.output)
    return _DONE["report"]


def test_table_equals_the_runs_mean_and_sample_std(reported):
    swept, out, output = reported
    rows = list(csv.DictReader((out / "table1.csv").open()))
    assert [r["id"] for r in rows] == list(SETTINGS) and {r["section"] for r in rows} == {"Tiny test grid"}
    for row in rows:
        sid = row["id"]
        runs = [per_run(swept.root, f"{sid}-{SETTINGS[sid]}-s{s}") for s in SEEDS]
        assert row["n_seeds"] == "2" and row["seeds"] == "0 42" and row["setting"] == SETTINGS[sid]
        for key in runs[0]:
            values = [r[key] for r in runs]
            assert float(row[f"{key}_mean"]) == pytest.approx(statistics.mean(values), rel=1e-12, abs=1e-15), key
            assert float(row[f"{key}_std"]) == pytest.approx(statistics.stdev(values), rel=1e-9, abs=1e-15), key
    # the markdown table shows the same numbers, rounded, in the paper's column order
    md = (out / "table1.md").read_text()
    printed = md[:md.index("## Language identification")].strip()  # the probe's table stays in the file
    assert printed in output and "## Language identification" not in output
    header = next(l for l in md.splitlines() if l.startswith("| ID"))
    assert [c.strip() for c in header.strip("|").split("|")] == [
        "ID", "setting", "n", "µ", "p (µ)", "align F1 L0", "ρ L0", "τ L0", "align F1 L3", "ρ L3", "τ L3",
        "ppl train", "ppl dev"]
    original = next(l for l in md.splitlines() if l.startswith("| 0 | original"))
    mus = [per_run(swept.root, f"0-original-s{s}")["mu"] for s in SEEDS]
    assert f"{statistics.mean(mus):.3f} ± {statistics.stdev(mus):.3f}" in original
    # report.json holds every number, including the per-seed values
    rep = json.loads((out / "report.json").read_text())
    row = rep["sections"][0]["rows"][1]
    assert row["id"] == "1" and row["metrics"]["mu"]["values"] == [
        per_run(swept.root, f"1-lang-pos-s{s}")["mu"] for s in SEEDS]


def test_runs_csv_has_one_row_per_run_with_that_runs_own_numbers(reported):
    """runs.csv: the numbers behind each mean, run by run (a split setting shows in it, its mean does not),
    with where and how each run trained."""
    swept, out, _ = reported
    rows = list(csv.DictReader((out / "runs.csv").open()))
    assert [(r["id"], r["seed"]) for r in rows] == [(sid, str(s)) for sid in SETTINGS for s in SEEDS]
    for row in rows:
        name = f"{row['id']}-{SETTINGS[row['id']]}-s{row['seed']}"
        assert Path(row["run"]).name == name and row["setting"] == SETTINGS[row["id"]]
        mine = per_run(swept.root, name)
        assert set(mine) <= set(row) and all(float(row[k]) == mine[k] for k in mine), name
        meta = read_json(swept.root / name / "run.json")  # where and how it trained, as run.json says
        assert (row["device"], row["precision"]) == (meta["device"], meta["precision"]) == ("cpu", "fp32"), name
        assert (float(row["train_seconds"]) == 0) == (row["setting"] == "untrained"), name  # nothing to time
        assert row["init_seed"] == row["seed"], name  # no train.init_seed: the weights are the seed's own


def test_p_values_against_original_for_settings_with_two_seeds(reported):
    swept, out, _ = reported
    rows = {r["id"]: r for r in csv.DictReader((out / "table1.csv").open())}
    assert rows["0"]["mu_p"] == ""  # the baseline itself
    base = [per_run(swept.root, f"0-original-s{s}")["mu"] for s in SEEDS]
    for sid in ("1", "18"):
        mine = [per_run(swept.root, f"{sid}-{SETTINGS[sid]}-s{s}")["mu"] for s in SEEDS]
        p = float(rows[sid]["mu_p"])
        assert 0.0 <= p <= 1.0 and p == pytest.approx(welch_p(mine, base), rel=1e-6)
        assert rows[sid]["ppl_dev_p"] != ""  # every metric gets its test


def test_aggregate_is_the_mean_and_sample_std_of_the_seeds_with_a_number():
    """Seeds without a number (None) are left out; the std is the sample one (n - 1), none for a single seed."""
    from minimult.report.tables import aggregate

    a = aggregate([1.0, None, 2.0, 6.0])  # mean 3, squares 4 + 1 + 9 over n - 1 = 2
    assert a["n"] == 3 and a["mean"] == pytest.approx(3.0) and a["std"] == pytest.approx(math.sqrt(7.0))
    one = aggregate([None, 0.5])
    assert (one["n"], one["mean"], one["std"]) == (1, 0.5, None)
    assert aggregate([None])["mean"] is None


def test_table_p_is_welchs_two_sided_test_of_the_seeds_with_a_number():
    """By hand: 1, 2, 3 against 4, 5, 6 is t = -3 / sqrt(2/3) at 4 degrees of freedom; with unequal variances
    Welch's test, not Student's pooled one; no p below two numbers a side or for identical values."""
    from minimult.report.tables import welch_p as table_p

    assert table_p([1.0, 2.0, 3.0], [4.0, 5.0, 6.0, None]) == pytest.approx(2 * stats.t.sf(3 / math.sqrt(2 / 3), 4))
    a, b = [1.0, 2.0, 3.0], [10.0, 20.0, 30.0, 40.0, 50.0]
    assert table_p(a, b) == pytest.approx(welch_p(a, b), rel=1e-9)
    assert table_p(a, b) != pytest.approx(stats.ttest_ind(a, b).pvalue, rel=1e-3)  # the pooled test's
    assert table_p([1.0, 2.0], [3.0, 5.0]) == pytest.approx(welch_p([1.0, 2.0], [3.0, 5.0]), rel=1e-9)  # 2 a side do
    assert table_p([1.0, None], [2.0, 3.0]) is None and table_p([1.0, 1.0], [1.0, 1.0]) is None


def test_figures_are_real_pngs(reported):
    import matplotlib.image as mpimg

    _, out, _ = reported
    expected = [f"positions_{n}.png" for n in ("0-original-s0", "1-lang-pos-s0", "18-untrained-s0")]
    expected += [f"pca_{n}.png" for n in ("0-original-s0", "1-lang-pos-s0", "18-untrained-s0")]
    expected += ["training_Tiny_test_grid.png", "language_id.png"]  # every final evaluation has a probe curve
    expected += ["seeds_Tiny_test_grid.png"]  # two seeds a row
    for name in expected:
        path = out / name
        assert path.is_file() and path.stat().st_size > 20_000, name
        img = mpimg.imread(path)
        assert img.ndim == 3 and img.shape[0] > 300 and img.shape[1] > 300 and img.std() > 0.05, name
    # lang-pos has 2 x 128 positions, original 128: the lang-pos matrix figure has more detail
    assert (out / "positions_1-lang-pos-s0.png").stat().st_size > (out / "positions_0-original-s0.png").stat().st_size
    assert set(json.loads((out / "report.json").read_text())["figures"]) == {str(out / n) for n in expected}


def test_probe_section_averages_each_settings_curves(reported):
    swept, out, output = reported
    md = (out / "table1.md").read_text()
    assert "## Language identification per layer" in md
    assert "| 0 original | token |" not in output and "language_id.png" in output  # printed: Table 1 only
    curves = [json.loads((swept.root / f"0-original-s{s}" / "results.json").read_text())["probe"] for s in SEEDS]
    row = next(l for l in md.splitlines() if l.startswith("| 0 original | token |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] == str(len(SEEDS)) and len(cells) == 3 + len(curves[0]["layers"])
    assert [float(c) for c in cells[3:]] == pytest.approx(np.mean([c["token"] for c in curves], 0), abs=5e-4)


def test_one_seed_leaves_std_and_p_blank(swept, tmp_path):  # noqa: F811
    assert swept.proc.returncode == 0
    out = tmp_path / "one"
    result = CliRunner().invoke(main, ["report", str(swept.root / RUNS[0]), str(swept.root / RUNS[2]),
                                       "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader((out / "table1.csv").open()))
    assert [(r["id"], r["n_seeds"]) for r in rows] == [("0", "1"), ("1", "1")]
    assert all(r["mu_std"] == "" and r["mu_p"] == "" and r["mu_mean"] != "" for r in rows)


def test_report_without_results_is_a_clear_error(tmp_path):
    run = tmp_path / "runs" / "x"
    run.mkdir(parents=True)
    (run / "config.json").write_text("{}")
    result = CliRunner().invoke(main, ["report", str(tmp_path / "runs"), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and result.output.strip().splitlines()[-1].startswith("error:")
    assert "results.json" in result.output
    empty = tmp_path / "empty"
    empty.mkdir()
    result = CliRunner().invoke(main, ["report", str(empty), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "no run folders" in result.output


QUICK = ROOT / "experiments" / "results" / "quick"


def test_report_leaves_out_unreadable_and_failed_runs_with_a_line_each(tmp_path):
    """One corrupt, one failed, one unfinished and one damaged run among good ones: the table of the rest,
    one line naming each left-out folder, and none of them is a row or the baseline."""
    import shutil

    runs = tmp_path / "runs"
    for name in ("0-original-s0", "0-original-s42", "1-lang-pos-s0", "1-lang-pos-s42"):
        shutil.copytree(QUICK / name, runs / name)
    (runs / "1-lang-pos-s42" / "results.json").write_bytes(b"\x00\xff not json")
    failed = runs / "0-original-s7"
    shutil.copytree(QUICK / "0-original-s0", failed)
    meta = json.loads((failed / "run.json").read_text())
    (failed / "run.json").write_text(json.dumps({**meta, "status": "failed: loss nan at step 3"}))
    # evaluated before it had finished training (run.json: the steps it was to make), and a damaged number
    unfinished, damaged = runs / "0-original-s8", runs / "0-original-s9"
    for folder in (unfinished, damaged):
        shutil.copytree(QUICK / "0-original-s0", folder)
    results = json.loads((unfinished / "results.json").read_text())
    (unfinished / "results.json").write_text(json.dumps({**results, "steps": 920}))
    (damaged / "results.json").write_text(json.dumps({**results, "mu": "x"}))
    # diverged in training, so never evaluated (was: "Not evaluated yet"), and evaluated with a corrupt run.json
    diverged, corrupt = runs / "0-original-s10", runs / "0-original-s11"
    shutil.copytree(failed, diverged)
    (diverged / "results.json").unlink()
    shutil.copytree(QUICK / "0-original-s0", corrupt)
    (corrupt / "run.json").write_text('{"status": "compl')
    result = CliRunner().invoke(main, ["report", str(runs), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    notes = [l for l in result.output.splitlines() if l.startswith("note: left out")]
    assert len(notes) == 6 and any("1-lang-pos-s42" in l and "unreadable" in l for l in notes)
    assert any("0-original-s7" in l and "failed" in l for l in notes)
    assert any("0-original-s10" in l and "failed: loss nan at step 3" in l for l in notes)
    assert any("0-original-s11" in l and "run.json is unreadable" in l for l in notes)
    table = (tmp_path / "out" / "table1.md").read_text()
    assert "Not evaluated yet" not in table
    assert "Failed in training, left out: 0-original-s10 (failed: loss nan at step 3), 0-original-s7" in table
    assert any("0-original-s8" in l and f"unfinished (step 920 of {meta['total_steps']:,})" in l for l in notes)
    assert any("0-original-s9" in l and "'mu' is 'x'" in l for l in notes)
    rows = {r["mods"]: r for r in csv.DictReader((tmp_path / "out" / "table1.csv").open())}
    assert rows["original"]["n_seeds"] == "2" and rows["original"]["seeds"] == "0 42"
    assert rows["lang-pos"]["n_seeds"] == "1"



def test_report_leaves_out_runs_whose_headline_is_not_a_complete_evaluation(tmp_path):
    """A run evaluated only on 500 dev sentences (`eval --dev-sentences 500`, its headline until a complete
    evaluation replaces it: retrieval among 500 sentences is easier than among 10,000) is no row of the table,
    and the line leaving it out says what its evaluation was."""
    runs = tmp_path / "runs"
    for name in ("0-original-s0", "0-original-s42"):
        shutil.copytree(QUICK / name, runs / name)
    partial = runs / "0-original-s42" / "results.json"
    results = json.loads(partial.read_text())
    evaluation = {"layers": [0, 8], "dev_sentences": 500, "ppl_sentences": None, "precision": "fp32",
                  "segment": "original", "attention": "masked", "complete": False}
    partial.write_text(json.dumps({**results, "evaluation": evaluation}))
    result = CliRunner().invoke(main, ["report", str(runs), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    notes = [l for l in result.output.splitlines() if l.startswith("note: left out")]
    assert len(notes) == 1 and "0-original-s42" in notes[0] and "500 dev sentences of 10,000" in notes[0], notes
    rows = list(csv.DictReader((tmp_path / "out" / "table1.csv").open()))
    assert [(r["mods"], r["seeds"]) for r in rows] == [("original", "0")]


def test_runs_of_no_sweep_that_ran_in_other_precisions_are_other_rows(tmp_path):
    """Two runs of one configuration with precision `auto`, one of which ran in bf16 (on a GPU) and one in fp32
    (on a CPU), as run.json says: not one row averaging both, but a row each, named by precision."""
    runs = tmp_path / "runs"
    for name, ran in (("0-original-s0", "fp32"), ("0-original-s42", "bf16"), ("0-original-s43", "fp32")):
        shutil.copytree(QUICK / ("0-original-s42" if name.endswith("43") else name), runs / name)
        config = json.loads((runs / name / "config.json").read_text())
        config["train"] = {**config["train"], "precision": "auto", "seed": int(name.rsplit("-s", 1)[1])}
        (runs / name / "config.json").write_text(json.dumps(config))
        results = json.loads((runs / name / "results.json").read_text())
        (runs / name / "results.json").write_text(json.dumps({**results, "seed": config["train"]["seed"]}))
        meta = json.loads((runs / name / "run.json").read_text())
        (runs / name / "run.json").write_text(json.dumps({**meta, "precision": ran}))
    result = CliRunner().invoke(main, ["report", str(runs), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    rows = {r["setting"]: r["seeds"] for r in csv.DictReader((tmp_path / "out" / "table1.csv").open())}
    assert sorted(rows.values()) == ["0 43", "42"], rows
    (fp32,) = [k for k, v in rows.items() if v == "0 43"]
    (bf16,) = [k for k, v in rows.items() if v == "42"]
    assert fp32.startswith("original (") and "fp32" in fp32 and "bf16" in bf16


def test_rows_of_one_mods_trained_otherwise_are_named_by_what_differs(tmp_path):
    """Runs of no sweep with the same mods and preset but other settings (a researcher's own vocabulary sizes)
    are a row each, named by the settings that set them apart, not by a config hash."""
    runs = tmp_path / "runs"
    for name, vocab in (("a", 98), ("b", 98), ("c", 512)):
        shutil.copytree(QUICK / ("0-original-s0" if name != "b" else "0-original-s42"), runs / name)
        config = json.loads((runs / name / "config.json").read_text())
        config["data"]["vocab_size"] = vocab
        (runs / name / "config.json").write_text(json.dumps(config))
    result = CliRunner().invoke(main, ["report", str(runs), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    rows = {r["setting"]: r["seeds"] for r in csv.DictReader((tmp_path / "out" / "table1.csv").open())}
    preset = config["preset"]
    assert rows == {f"original ({preset}, data.vocab_size=98)": "0 42",
                    f"original ({preset}, data.vocab_size=512)": "0"}, rows


def test_rows_are_named_by_settings_under_their_names_now(tmp_path):
    """A committed run's config.json says `data.fake`; a row apart by its language source is named by the key
    that sets it now, `data.source`, whichever name its config.json holds."""
    runs = tmp_path / "runs"
    for name, source in (("a", "shift"), ("b", "unicode")):
        shutil.copytree(QUICK / "0-original-s0", runs / name)
        config = json.loads((runs / name / "config.json").read_text())
        config["data"] = {**{k: v for k, v in config["data"].items() if k not in ("fake", "source")}, "source": source}
        (runs / name / "config.json").write_text(json.dumps(config))
    assert "fake" in json.loads((QUICK / "0-original-s0" / "config.json").read_text())["data"]
    result = CliRunner().invoke(main, ["report", str(runs), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    rows = {r["setting"] for r in csv.DictReader((tmp_path / "out" / "table1.csv").open())}
    assert rows == {f"original ({config['preset']}, data.source={s})" for s in ("shift", "unicode")}, rows


def test_rows_carry_the_preset_their_runs_trained_at_not_the_last_sweeps(tmp_path):
    """A sweep of another preset into a root rewrites its manifest's preset; the rows keep their runs' own."""
    runs = tmp_path / "runs"
    for name in ("0-original-s0", "0-original-s42"):
        shutil.copytree(QUICK / name, runs / name)
    manifest = json.loads((QUICK / "table1.sweep.json").read_text())
    (runs / "table1.sweep.json").write_text(json.dumps({**manifest, "preset": "paper"}))
    result = CliRunner().invoke(main, ["report", str(runs), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader((tmp_path / "out" / "table1.csv").open()))
    assert [r["preset"] for r in rows] == ["quick"]


def test_a_seed_twice_is_counted_once_and_hidden_copies_not_at_all(tmp_path):
    """Runs of no sweep: the same run twice (pretrain --seed 0 run again) is one seed, not n = 2 with std 0, and
    the second is named as left out; a hidden folder (a copy half made by bring_runs or unpack_call) is no run."""
    runs = tmp_path / "runs"
    for name in ("0-original-s0", "0-original-s42", "1-lang-pos-s0", "1-lang-pos-s42"):
        shutil.copytree(QUICK / name, runs / name)
    shutil.copytree(QUICK / "1-lang-pos-s0", runs / "1-lang-pos-s0-again")
    shutil.copytree(QUICK / "1-lang-pos-s42", runs / ".1-lang-pos-s42.replaced")
    result = CliRunner().invoke(main, ["report", str(runs), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    rows = {r["setting"]: r for r in csv.DictReader((tmp_path / "out" / "table1.csv").open())}
    assert rows["lang-pos"]["seeds"] == "0 42" and rows["lang-pos"]["n_seeds"] == "2"
    md = (tmp_path / "out" / "table1.md").read_text()
    assert "Left out of lang-pos: 1-lang-pos-s0-again, a second run of seed 0 beside" in md
    assert "| lang-pos | 2 |" in md and ".replaced" not in md


def test_a_row_without_mu_still_counts_its_seeds(tmp_path):
    """A run evaluated without a dictionary has no µ ("–") but every other column: the table's n is the row's
    seeds, as table1.csv's n_seeds (was µ's count, 0)."""
    run = tmp_path / "runs" / "0-original-s0"
    shutil.copytree(QUICK / "0-original-s0", run)
    (run / "results.json").write_text(json.dumps({**read_json(run / "results.json"), "mu": None}))
    result = CliRunner().invoke(main, ["report", str(run.parent), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "| original | 1 | – |" in (tmp_path / "out" / "table1.md").read_text()


@pytest.mark.parametrize("in_sweep", [True, False])
def test_seeds_of_a_setting_trained_under_other_mod_versions_are_named(tmp_path, in_sweep):
    """Two seeds of lang-pos, one trained before its behaviour changed (run.json: mod_versions lang-pos 0): the row
    averaging them says so under the table, in a sweep's section and among runs of no sweep alike."""
    runs = tmp_path / "runs"
    for name in ("0-original-s0", "1-lang-pos-s0", "1-lang-pos-s42"):
        shutil.copytree(QUICK / name, runs / name)
    if in_sweep:
        shutil.copy(QUICK / "table1.sweep.json", runs / "table1.sweep.json")
    meta = json.loads((runs / "1-lang-pos-s42" / "run.json").read_text())
    (runs / "1-lang-pos-s42" / "run.json").write_text(json.dumps({**meta, "mod_versions": {"lang-pos": 0}}))
    result = CliRunner().invoke(main, ["report", str(runs), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    md = (tmp_path / "out" / "table1.md").read_text()
    assert "Not trained alike in " in md and "mod_versions.lang-pos 1 (seed 0), 0 (seed 42)" in md, md


def test_seeds_of_knn_replace_trained_with_other_neighbour_tables_are_named(tmp_path):
    """knn-replace at the paper's budget: seed 0's neighbour table was built on a GPU machine and holds other
    neighbours than seed 42's (run.json's knn_tables); the row says so under the table. Where one run predates
    the record, nothing is compared."""
    paper, runs = ROOT / "experiments/results/table1-paper", tmp_path / "runs"
    for name in ("0-original-s0", "30-knn-replace1-s0", "30-knn-replace1-s42"):
        shutil.copytree(paper / name, runs / name, ignore=shutil.ignore_patterns("*.log"))
    tables = [read_json(runs / f"30-knn-replace1-s{s}" / "run.json")["knn_tables"] for s in (0, 42)]
    assert tables == [["8b330b452479190f"], ["d863e51e502b516d"]]

    def report() -> str:
        result = CliRunner().invoke(main, ["report", str(runs), "--out", str(tmp_path / "out")])
        assert result.exit_code == 0, result.output
        return (tmp_path / "out" / "table1.md").read_text()

    assert "knn_tables 8b330b452479190f (seed 0), d863e51e502b516d (seed 42)" in report()
    meta = read_json(runs / "30-knn-replace1-s0" / "run.json")
    del meta["knn_tables"]
    (runs / "30-knn-replace1-s0" / "run.json").write_text(json.dumps(meta))
    assert "knn_tables" not in report()


def test_a_baseline_borrowed_from_another_section_is_named_with_its_section(tmp_path):
    """A sweep section without an `original` (fidelity-quick's Table 1 part: only 21 no-parallel) takes its p-values
    against an original of the same preset from another section, here one trained on random batches: the header
    says which section the baseline comes from, so the p-value is not read as against its own table's original."""
    result = CliRunner().invoke(main, ["report", str(ROOT / "experiments/results/fidelity-quick"), "--out",
                                       str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    md = (tmp_path / "out" / "table1.md").read_text()
    fidelity = "Fidelity: masking mix, batching and budget"
    table1 = md[md.index("## Table 1"):]
    assert f"baseline for p: 0r original, random batches (from the section {fidelity})." in table1, table1
    assert "baseline for p: 0r original, random batches." in md[md.index(f"## {fidelity}"):md.index("## Table 1")]
    # but 21 (bucketed) and 4p (bucketed, its own masking mix) get no p against random batches: it would test
    # the batching as well as their own setting, and the line under the table says why
    rows = {r["setting"]: r for r in csv.DictReader((tmp_path / "out" / "table1.csv").open())}
    assert rows["no-parallel"]["mu_p"] == "" and rows["no-random (0.9/0.1, published code)"]["mu_p"] == ""
    assert "No p for 21: the baseline trained with train.batching random (the row bucket)." in table1
    assert "No p for 4p: the baseline trained with train.batching random" in md


def test_a_row_that_sets_the_baselines_own_key_itself_keeps_its_p(tmp_path):
    """original on random batches as the baseline, lang-pos on random batches (alike: p) and original in bf16
    (another precision: no p, and the line names it); a row differing only by its mods keeps p."""
    runs = tmp_path / "runs"
    for name in ("0-original-s0", "0-original-s42", "1-lang-pos-s0", "1-lang-pos-s42"):
        shutil.copytree(QUICK / name, runs / name)
    shutil.copy(QUICK / "table1.sweep.json", runs / "table1.sweep.json")
    for name in ("0-original-s0", "0-original-s42", "1-lang-pos-s0", "1-lang-pos-s42"):
        config = json.loads((runs / name / "config.json").read_text())
        config["train"] = {**config["train"], "batching": "random"}
        (runs / name / "config.json").write_text(json.dumps(config))
    result = CliRunner().invoke(main, ["report", str(runs), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    rows = {r["setting"]: r for r in csv.DictReader((tmp_path / "out" / "table1.csv").open())}
    assert rows["lang-pos"]["mu_p"] != "" and "No p for" not in (tmp_path / "out" / "table1.md").read_text()
    for name in ("1-lang-pos-s0", "1-lang-pos-s42"):
        meta = json.loads((runs / name / "run.json").read_text())
        (runs / name / "run.json").write_text(json.dumps({**meta, "precision": "bf16"}))
        config = json.loads((runs / name / "config.json").read_text())
        config["train"] = {**config["train"], "precision": "bf16"}
        (runs / name / "config.json").write_text(json.dumps(config))
    result = CliRunner().invoke(main, ["report", str(runs), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    rows = {r["setting"]: r for r in csv.DictReader((tmp_path / "out" / "table1.csv").open())}
    assert rows["lang-pos"]["mu_p"] == ""
    assert "No p for 1: the baseline trained with train.precision fp32 (the row bf16)." in \
        (tmp_path / "out" / "table1.md").read_text()

def test_a_renamed_preset_that_trains_alike_keeps_its_p(tmp_path):
    """The committed quick runs record the preset `quick` from when it meant batches of 256 (now `quick-b256`);
    overparam trained later at `quick-b256` (a lent GPU): the same training, so its row keeps a p against them.
    A row at a preset that trains otherwise (`paper`: 100 epochs of 128 sentences) gets none, and the line says
    which presets."""
    runs = tmp_path / "runs"
    for name in ("0-original-s0", "0-original-s42", "15-overparam-s0", "15-overparam-s42"):
        shutil.copytree(QUICK / name, runs / name, ignore=shutil.ignore_patterns("checkpoint.pt"))
    shutil.copy(QUICK / "table1.sweep.json", runs / "table1.sweep.json")
    presets = {json.loads((runs / n / "config.json").read_text())["preset"]
               for n in ("0-original-s0", "15-overparam-s0")}
    assert presets == {"quick", "quick-b256"}

    def report():
        result = CliRunner().invoke(main, ["report", str(runs), "--out", str(tmp_path / "out")])
        assert result.exit_code == 0, result.output
        rows = {r["setting"]: r for r in csv.DictReader((tmp_path / "out" / "table1.csv").open())}
        return rows["overparam"]["mu_p"], (tmp_path / "out" / "table1.md").read_text()

    p, md = report()
    assert p != "" and "No p for" not in md
    for name in ("15-overparam-s0", "15-overparam-s42"):
        config = json.loads((runs / name / "config.json").read_text())
        config["preset"] = "paper"
        config["train"] = {**config["train"], "epochs": 100, "batch_size": 128}
        (runs / name / "config.json").write_text(json.dumps(config))
    p, md = report()
    assert p == "" and "No p for 15: the baseline is at the quick preset, the row at paper." in md

# ---------------------------------------------------------------------------------------------
# Columns from the evaluator registry; the README's generated table.

@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """The report of the kept quick-preset runs (no checkpoints: tables and the training figure)."""
    out = tmp_path_factory.mktemp("quick")
    return build_report([QUICK], out, log=lambda s: None), out


def test_columns_come_from_the_evaluator_registry(quick):
    from minimult.evaluate.registry import table_columns

    report, out = quick
    cols = table_columns(report["top_layer"])
    assert report["columns"] == [c.key(l) for c, l in cols]
    header = next(l for l in (out / "table1.md").read_text().splitlines() if l.startswith("| ID"))
    (first, layer), rest = cols[0], cols[1:]
    assert [c.strip() for c in header.strip("|").split("|")] == (
        ["ID", "setting", "n", first.heading(layer), f"p ({first.heading(layer)})"] + [c.heading(l) for c, l in rest])
    fields = next(csv.reader((out / "table1.csv").open()))
    assert fields[7:] == ([f"{c.key(l)}_{s}" for c, l in cols for s in ("mean", "std", "p")]
                          + [f"{c.key(l)}_paper" for c, l in cols])  # quick's manifest names table1.toml's numbers


def test_training_panels_are_the_registry_curve_columns():
    from minimult.report.figures import curve_panels

    assert [t for t, _, _ in curve_panels("8")] == [
        "multilinguality µ", "retrieval ρ, layer 0", "translation τ, layer 0", "retrieval ρ, layer 8",
        "translation τ, layer 8", "dev perplexity"]
    assert [c.key(l) for _, c, l in curve_panels("0")] == ["mu", "retrieval_L0", "translation_L0", "ppl_dev"]


def test_training_figure_draws_each_seed_beside_the_mean(tmp_path):
    """Two seeds that split (one stays at 0, one rises to .6) draw as the mean and both seeds' own curves, so a
    split never hides in a band; a one-seed setting is its one curve."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from minimult.report.collect import Group, Run
    from minimult.report.figures import _draw_panel, curve_panels

    def run(name, mus):
        rows = [{"step": s, "eval": {"mu": m}} for s, m in zip((100, 200, 300), mus)]
        return Run(tmp_path / name, {}, {}, metrics_rows=rows)

    split = Group("1", "lang-pos", "lang-pos", [run("1-s0", (0.0, 0.0, 0.0)), run("1-s42", (0.1, 0.4, 0.6))])
    single = Group("0", "original", "", [run("0-s0", (0.2, 0.5, 0.7))])
    title, column, layer = curve_panels("8")[0]
    fig, ax = plt.subplots()
    _draw_panel(ax, title, column, layer, [split, single], plt.get_cmap("tab10"))
    curves = [list(ln.get_ydata()) for ln in ax.get_lines()]
    assert curves == [[0.05, 0.2, 0.3], [0.0, 0.0, 0.0], [0.1, 0.4, 0.6], [0.2, 0.5, 0.7]]
    assert [t.get_text() for t in ax.legend().get_texts()] == ["1 lang-pos (n=2)", "0 original (n=1)"]
    plt.close(fig)


def test_seeds_figure_puts_each_seed_on_its_rows_line():
    """A row whose seeds split (.004 and .53) draws both seeds as dots on its line, the mean as a bar between
    them and the paper's number as a diamond; the first row is at the top, as in the table."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from minimult.report.figures import seeds_panel
    from minimult.report.tables import table_columns

    def row(sid, name, values, paper=None):
        mean = sum(values) / len(values)
        return {"id": sid, "setting": name, "seeds": [0, 42][:len(values)],
                "metrics": {"mu": {"mean": mean, "values": values}}, "paper": {"mu": paper} if paper else {}}

    rows = [row("0", "original", [0.6, 0.61], 0.70), row("1", "lang-pos", [0.004, 0.53], 0.30)]
    rows.insert(0, {"id": "2", "setting": "never trained", "seeds": [], "metrics": {}, "paper": {}})  # no marks
    column, layer = table_columns("8")[0]
    fig, ax = plt.subplots()
    seeds_panel(ax, column, layer, rows)
    dots = [[tuple(map(float, xy)) for xy in c.get_offsets()] for c in ax.collections]
    assert dots == [[(0.6, 1.0), (0.61, 1.0)], [(0.7, 1.0)], [(0.004, 0.0), (0.53, 0.0)], [(0.3, 0.0)]]
    bars = [tuple(ln.get_xdata()) for ln in ax.get_lines()]
    assert bars == [(0.605, 0.605), (0.267, 0.267)]
    ticks = {float(y): t.get_text() for y, t in zip(ax.get_yticks(), ax.get_yticklabels())}
    assert ticks == {2.0: "2 never trained", 1.0: "0 original", 0.0: "1 lang-pos"}
    assert [t.get_text() for t in ax.legend().get_texts()] == ["each seed", "mean", "paper"]
    plt.close(fig)


def test_seeds_figure_marks_the_device_each_seed_trained_on_where_the_table_mixes_them():
    """Seeds trained on a CPU, on a GPU and on both (a run the GPU began) get a mark each, named in the
    legend; a table trained on one device keeps the one mark (the test above)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from minimult.report.figures import seeds_panel
    from minimult.report.tables import table_columns

    rows = [{"id": "8", "setting": "three mods", "seeds": [0, 42, 43],
             "metrics": {"mu": {"mean": 0.044, "values": [0.008, 0.121, 0.002]}}, "paper": {},
             "trained": [{"device": "cpu"}, {"device": "cpu"}, {"device": "cuda"}]},
            {"id": "6", "setting": "lang-pos;no-random", "seeds": [0, 43],
             "metrics": {"mu": {"mean": 0.1, "values": [0.021, 0.2]}}, "paper": {},
             "trained": [{"device": "cpu"}, {"device": "cuda+cpu"}]}]
    column, layer = table_columns("8")[0]
    fig, ax = plt.subplots()
    seeds_panel(ax, column, layer, rows)
    dots = [[float(x) for x, _ in c.get_offsets()] for c in ax.collections]
    assert dots == [[0.008, 0.121], [0.002], [0.021], [0.2]]
    assert [t.get_text() for t in ax.legend().get_texts()] == [
        "a seed on cpu", "a seed on cuda", "mean", "a seed on cuda+cpu"]
    plt.close(fig)


def test_seeds_figure_needs_a_row_with_two_seeds(tmp_path):
    from minimult.report.figures import seeds_figure

    rows = [{"id": "0", "setting": "original", "seeds": [0], "metrics": {"mu": {"mean": 0.6, "values": [0.6]}}}]
    assert seeds_figure({"title": "T: x", "rows": rows}, "8", tmp_path) is None
    assert list(tmp_path.iterdir()) == []


def test_pca_needs_one_id_block_per_language():
    from minimult.report.figures import shares_vocabulary

    assert not shares_vocabulary({"fake": "shift"}) and not shares_vocabulary({})
    assert shares_vocabulary({"fake": "unicode"})  # one vocabulary learned over both scripts
    assert shares_vocabulary({"fake": "no-such-source"})  # unknown: no figure rather than a wrong one


README_TEXT = "intro\n\n<!-- BEGIN t -->\nold 1\nold 2\n<!-- END t -->\n\n<!-- BEGIN u -->\nkeep\n<!-- END u -->\nend\n"


def test_update_readme_replaces_only_between_its_markers(tmp_path):
    path = tmp_path / "README.md"
    path.write_text(README_TEXT)
    assert update_readme(path, "| a |\n|---|\n| 1 |\n", "t")
    assert path.read_text() == README_TEXT.replace("old 1\nold 2\n", "| a |\n|---|\n| 1 |\n")
    before = path.stat().st_mtime_ns
    assert not update_readme(path, "\n| a |\n|---|\n| 1 |", "t")  # the same text, blank edges aside: not rewritten
    assert path.stat().st_mtime_ns == before
    assert update_readme(path, "new", "u", write=False) and "keep" in path.read_text()  # would change; a dry run


@pytest.mark.parametrize("text", ["no markers\n", "<!-- BEGIN t -->\nx\n", "<!-- END t -->\n<!-- BEGIN t -->\n",
                                  README_TEXT + "<!-- BEGIN t -->\n"])
def test_update_readme_refuses_missing_or_misplaced_markers(tmp_path, text):
    path = tmp_path / "README.md"
    path.write_text(text)
    with pytest.raises(MinimultError, match="<!-- BEGIN t -->") as e:
        update_readme(path, "| a |", "t")
    assert "\n" not in str(e.value) and path.read_text() == text
    with pytest.raises(MinimultError, match="cannot read"):
        update_readme(tmp_path / "missing.md", "| a |", "t")


def test_readme_table_round_trip(quick, tmp_path):
    """docs/results.md's quick Table 1 is exactly what `report --readme` writes there."""
    report, _ = quick
    readme = tmp_path / "results.md"
    shutil.copyfile(ROOT / "docs" / "results.md", readme)
    original = readme.read_bytes()
    assert table_marker(report["sections"][0]) == "quick-table1"
    assert not update_readme(readme, readme_table(report), "quick-table1")
    build_report([QUICK], tmp_path / "out", log=lambda s: None, readme=readme)
    assert readme.read_bytes() == original
    assert readme_table(report) in report["markdown"]


STRUCTURE = ROOT / "experiments" / "results" / "structure-quick"


def test_runs_that_never_trained_are_left_out_and_named_under_their_setting(tmp_path):
    """The committed no-segment seed 42 sat at the unigram plateau for all 1,775 updates (training
    perplexity 541 against 272 for piece frequencies alone): not a row's seed, named under its setting;
    a setting whose every seed never trained is a "No row" line saying so, not "no evaluated run yet"."""
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copyfile(STRUCTURE / "structure.sweep.json", runs / "structure.sweep.json")
    for name in ("0-original-s0", "0-original-s42", "s2-no-segment-s0", "s2-no-segment-s42",
                 "s2l-lang-pos+no-segment-s0", "s2l-lang-pos+no-segment-s42"):
        shutil.copytree(STRUCTURE / name, runs / name)
    assert read_json(runs / "s2-no-segment-s42" / "run.json")["unigram_entropy"] == pytest.approx(5.6, abs=0.1)
    # the rule needs run.json's entropy: without it a run is a row as before
    meta = read_json(runs / "0-original-s42" / "run.json")
    (runs / "0-original-s42" / "run.json").write_text(json.dumps({k: v for k, v in meta.items()
                                                                   if k != "unigram_entropy"}))
    result = CliRunner().invoke(main, ["report", str(runs), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    notes = [l for l in result.output.splitlines() if l.startswith("note: left out")]
    assert sorted(Path(l.split()[3].rstrip(":")).name for l in notes) == [
        "s2-no-segment-s42", "s2l-lang-pos+no-segment-s0", "s2l-lang-pos+no-segment-s42"]
    assert all("never trained: training perplexity" in l for l in notes)
    rows = {r["id"]: r for r in csv.DictReader((tmp_path / "out" / "table1.csv").open())}
    assert rows["s2"]["seeds"] == "0" and rows["0"]["seeds"] == "0 42" and "s2l" not in rows
    per_run_rows = [(r["id"], r["seed"]) for r in csv.DictReader((tmp_path / "out" / "runs.csv").open())]
    assert per_run_rows == [("0", "0"), ("0", "42"), ("s2", "0")]  # as the rows count them
    md = (tmp_path / "out" / "table1.md").read_text()
    assert "Left out of s2 no-segment: s2-no-segment-s42, never trained: training perplexity 541" in md
    s2l = next(l for l in md.splitlines() if l.startswith("No row: s2l "))
    assert "s2l-lang-pos+no-segment-s0 left out, never trained" in s2l and "no evaluated run yet" not in s2l


@pytest.mark.parametrize("folder,marker,page", [("table1-paper", "paper-table1", "README.md"),
                                                ("fidelity-paper", "paper-fidelity", "docs/results.md")])
def test_readme_paper_budget_table_is_what_its_folder_gives(tmp_path, folder, marker, page):
    """The paper-budget blocks (Table 1 in the README, the fidelity runs in docs/results.md) are what `report
    experiments/results/<folder> --readme PAGE` writes: rerun as the background sweeps add runs, never edited
    by hand."""
    readme = tmp_path / "page.md"
    shutil.copyfile(ROOT / page, readme)
    original = readme.read_bytes()
    report = build_report([ROOT / "experiments/results" / folder], tmp_path / "out", log=lambda s: None, readme=readme)
    assert table_marker(report["sections"][0]) == marker
    assert readme.read_bytes() == original


def test_each_grid_has_its_own_readme_markers(tmp_path):
    """A report of another grid's sweep at the paper's budget (fidelity.toml) writes between its own
    markers, never into the Table 1 block of the same preset; runs no sweep claims keep `table1`."""
    report = build_report([ROOT / "experiments/results/fidelity-paper"], tmp_path / "out", log=lambda s: None)
    assert table_marker(report["sections"][0]) == "paper-fidelity"
    assert table_marker({"preset": "quick", "grid": None}) == "quick-table1"
    assert table_marker({"preset": "", "grid": None}) == "table1"


def test_a_setting_whose_runs_trained_differently_says_so_under_the_table(swept, tmp_path):  # noqa: F811
    """Seeds of one setting swept with other `--set` values (or brought from another machine) are averaged
    into one row; the report names what differs, under the table and as a note. Precision "auto" counts as
    what run.json says it ran, and how a run executed (threads, device) is not a difference."""
    assert swept.proc.returncode == 0
    root = tmp_path / "runs"
    shutil.copytree(swept.root, root)
    same = root / "1-lang-pos-s42"  # fp32 asked for by name on another device: trained alike
    cfg = read_json(same / "config.json")
    cfg["train"].update(precision="fp32", threads=4, device="cuda")
    (same / "config.json").write_text(json.dumps(cfg))
    assert read_json(same / "run.json")["precision"] == "fp32"
    other = root / "0-original-s42"
    cfg = read_json(other / "config.json")
    cfg["train"]["lr"] = 0.001
    (other / "config.json").write_text(json.dumps(cfg))
    result = CliRunner().invoke(main, ["report", str(root), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    md = (tmp_path / "out" / "table1.md").read_text()
    differ = [l for l in md.splitlines() if l.startswith("Not trained alike")]
    lr = read_json(root / "0-original-s0" / "config.json")["train"]["lr"]
    assert differ == [f"Not trained alike in 0 original: train.lr {lr} (seed 0), 0.001 (seed 42)."]
    assert "note: the runs of 0 original did not train alike: train.lr" in result.output


def test_runs_trained_alike_have_no_such_line(reported):
    _, out, output = reported
    assert "Not trained alike" not in (out / "table1.md").read_text() and "did not train alike" not in output


def test_the_training_time_under_a_table_sums_the_runs_training_seconds(reported):
    swept, out, _ = reported
    section = read_json(out / "report.json")["sections"][0]
    runs = [d for d in swept.root.iterdir() if (d / "results.json").is_file()]

    def logged(run):  # one stretch each: its last logged elapsed_s (an untrained run has no log)
        log = run / "metrics.jsonl"
        rows = [json.loads(line) for line in log.read_text().splitlines() if "elapsed_s" in line] if log.is_file() else []
        return rows[-1]["elapsed_s"] if rows else 0.0

    assert section["training"]["runs"] == len(runs) and section["training"]["unknown"] == 0
    assert section["training"]["seconds"]["cpu"] == pytest.approx(sum(map(logged, runs)), rel=1e-9)
    line = next(l for l in (out / "table1.md").read_text().splitlines() if l.startswith("Training: "))
    assert line.startswith(f"Training: {len(runs)} runs, ") and " on cpu (the sum of each run's" in line


def test_training_seconds_add_up_the_stretches_of_a_log_whose_clock_restarted(tmp_path):
    from minimult.report.collect import training_seconds

    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"device": "cuda:0", "total_steps": 40, "train_seconds": 7.0}))
    assert training_seconds(run) == (7.0, "cuda")  # no log: run.json's
    rows = [{"step": 10, "elapsed_s": 10.0}, {"step": 20, "elapsed_s": 20.0}, {"step": 20, "eval": {}},
            {"step": 30, "elapsed_s": 4.0}, {"step": 40, "elapsed_s": 15.0}]  # resumed at 20 by an older version
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert training_seconds(run) == (35.0, "cuda")
    (run / "run.json").write_text(json.dumps({"device": "cpu", "total_steps": 0}))
    assert training_seconds(run) == (0.0, "cpu")  # untrained


def test_a_run_begun_on_a_gpu_and_ended_on_a_cpu_counts_each_stretchs_seconds_on_its_device(tmp_path):
    """run.json's `execution` says where the device changed; the log's seconds up to that step go to the
    first device, the rest to the second (the time under a table sums them by device)."""
    from minimult.report.collect import device_seconds, training_seconds
    from minimult.report.tables import training_time

    run = tmp_path / "run"
    run.mkdir()
    execution = [{"from_step": 0, "device": "cuda:0"}, {"from_step": 20, "device": "cpu"}]
    (run / "run.json").write_text(json.dumps({"device": "cpu", "total_steps": 40, "execution": execution}))
    rows = [{"step": 10, "elapsed_s": 5.0}, {"step": 20, "elapsed_s": 10.0}, {"step": 30, "elapsed_s": 40.0},
            {"step": 40, "elapsed_s": 70.0}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert device_seconds(run) == {"cuda": 10.0, "cpu": 60.0}
    assert training_seconds(run) == (70.0, "cuda+cpu")
    trained = [{"train_seconds": 70.0, "device_seconds": {"cuda": 10.0, "cpu": 60.0}},
               {"train_seconds": 5.0, "device_seconds": {"cpu": 5.0}}]
    assert training_time([{"trained": trained}])["seconds"] == {"cuda": 10.0, "cpu": 65.0}
    execution.append({"from_step": 30, "device": "cuda"})  # back on a GPU: both GPU stretches add up
    (run / "run.json").write_text(json.dumps({"device": "cuda", "total_steps": 40, "execution": execution}))
    assert device_seconds(run) == {"cuda": 40.0, "cpu": 30.0}


def test_a_live_sweeps_report_names_the_planned_runs_not_in_the_table_yet(swept, tmp_path):  # noqa: F811
    """A report on a sweep's root while it trains: the runs its manifest plans that are not rows yet, as
    each with a folder (but no results.json) as its run.json says it stands, then those without a folder; none
    on a finished sweep."""
    root = tmp_path / "root"
    shutil.copytree(swept.root, root, ignore=shutil.ignore_patterns("*.pt"))
    (root / "1-lang-pos-s42" / "results.json").unlink()
    shutil.rmtree(root / "18-untrained-s42")
    result = CliRunner().invoke(main, ["report", str(root), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    md = (tmp_path / "out" / "table1.md").read_text()
    steps = read_json(root / "1-lang-pos-s42" / "run.json")["total_steps"]
    status = f"run.json status: complete, step {steps} of {steps}"
    assert ("Planned by the sweep and not in the table yet: 1 run with a folder but no results.json: "
            f"1-lang-pos-s42 ({status}); 1 run without a folder: 18-untrained-s42.") in md
    assert read_json(tmp_path / "out" / "report.json")["sections"][0]["pending"] == [
        {"run": "1-lang-pos-s42", "status": status}, {"run": "18-untrained-s42", "status": None}]


def test_a_finished_sweeps_report_plans_nothing_more(reported):
    _, out, _ = reported
    assert "Planned by the sweep" not in (out / "table1.md").read_text()


def test_runs_csv_names_the_seed_the_weights_came_from(tmp_path):
    """A run whose initial weights another seed drew (`train.init_seed`) says so in runs.csv's init_seed; a
    plain run (init_seed -1, or equal to its seed) has its own seed there."""
    from minimult.report.collect import Run, how_trained

    for seed, init_seed, shown in ((0, 42, 42), (0, -1, 0), (42, 42, 42)):
        run = Run(tmp_path, {"seed": seed}, {"train": {"seed": seed, "init_seed": init_seed}})
        assert how_trained(run)["init_seed"] == shown, (seed, init_seed)


def test_item63_2_a_run_counts_as_the_setting_its_own_config_says_not_the_manifests(tmp_path):
    """Issue 63 item 2: a grid whose setting 1 changed its mods (lang-pos -> shift-special), swept into the same
    root, leaves a manifest listing the old runs beside the new ones. The row counts only the runs trained as
    it says; the others are named (one note line, and under the table) and counted as their own mods."""
    runs = tmp_path / "runs"
    for name in ("0-original-s0", "0-original-s42", "1-lang-pos-s0", "1-lang-pos-s42"):
        shutil.copytree(QUICK / name, runs / name)
    for seed in (0, 42):
        shutil.copytree(QUICK / f"2-shift-special-s{seed}", runs / f"1-shift-special-s{seed}")
    manifest = json.loads((QUICK / "table1.sweep.json").read_text())
    manifest["settings"] = [manifest["settings"][0], {
        "id": "1", "name": "shift-special", "mods": "shift-special",
        "runs": ["1-lang-pos-s0", "1-lang-pos-s42", "1-shift-special-s0", "1-shift-special-s42"]}]
    (runs / "table1.sweep.json").write_text(json.dumps(manifest))
    result = CliRunner().invoke(main, ["report", str(runs), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    rows = {(r["id"], r["setting"]): r for r in csv.DictReader((tmp_path / "out" / "table1.csv").open())}
    assert rows[("1", "shift-special")]["n_seeds"] == "2", rows  # was 4: seeds 0 and 42 counted twice
    assert rows[("", "lang-pos")]["n_seeds"] == "2"  # the old runs, as what they trained as
    per_run = {r["run"].rstrip("/").split("/")[-1]: r for r in csv.DictReader((tmp_path / "out" / "runs.csv").open())}
    assert per_run["1-lang-pos-s0"]["setting"] == "lang-pos" and per_run["1-shift-special-s0"]["setting"] == "shift-special"
    notes = [l for l in result.output.splitlines() if "1-lang-pos-s0, 1-lang-pos-s42 under 1 shift-special" in l]
    assert len(notes) == 1 and "trained as lang-pos" in notes[0], result.output
    md = (tmp_path / "out" / "table1.md").read_text()
    assert "Left out of 1 shift-special: 1-lang-pos-s0, trained as lang-pos (its config.json)" in md
