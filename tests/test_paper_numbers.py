"""The paper's numbers beside the report's own: a grid setting's `paper` table is validated on load
(keys are the report's column keys, values numbers), the sweep manifest records it with the grid's
`paper_source`, a manifest from before falls back to the grid file it names (none when that file is
gone), and the report's Table 1 shows each published number in parentheses in its cell, with a line
saying what they are; a section without paper numbers renders as before. Run folders are written by
hand (no training)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from minimult.errors import MinimultError
from minimult.report import build_report
from minimult.sweep.grid import load_grid
from minimult.sweep.plan import plan, write_manifest

ROOT = Path(__file__).resolve().parents[1]
SOURCE = "Some et al. (2020), Table 1"

GRID = f"""
title = "Paper grid"
preset = "tiny"
paper_source = "{SOURCE}"

[[settings]]
id = "0"
name = "original"
mods = ""
paper = {{ mu = 0.70, align_f1_L0 = 1.00, retrieval_L8 = 0.97, ppl_dev = 217 }}

[[settings]]
id = "1"
name = "lang-pos"
mods = "lang-pos"
"""

# two seeds per setting: (µ, F1 L0, ρ L0, τ L0, F1 L8, ρ L8, τ L8, ppl train, ppl dev)
RESULTS = {"0": [(0.10, 0.90, 0.01, 0.10, 0.95, 0.30, 0.12, 36.0, 270.0),
                 (0.14, 0.94, 0.02, 0.12, 0.97, 0.32, 0.14, 38.0, 280.0)],
           "1": [(0.01, 0.10, 0.00, 0.01, 0.20, 0.02, 0.01, 41.0, 290.0),
                 (0.03, 0.20, 0.01, 0.02, 0.30, 0.03, 0.01, 42.0, 300.0)]}
MODS = {"0": "original", "1": "lang-pos"}


def write_grid(path: Path, text: str = GRID) -> Path:
    path.write_text(text)
    return path


def write_runs(root: Path, manifest: dict) -> None:
    """Run folders of RESULTS (config.json, results.json) and the sweep manifest `manifest` beside them."""
    for sid, seeds in RESULTS.items():
        for seed, v in zip((0, 42), seeds):
            d = root / f"{sid}-{MODS[sid]}-s{seed}"
            d.mkdir(parents=True)
            layer = lambda f1, rho, tau: {"align_f1": f1, "retrieval": rho, "translation": tau}  # noqa: E731
            results = {"mu": v[0], "seed": seed, "mods": MODS[sid], "mu_layers": [0, 8],
                       "layers": {"0": layer(*v[1:4]), "8": layer(*v[4:7])},
                       "perplexity": {"train": v[7], "dev": v[8]}}
            config = {"mods": MODS[sid], "preset": "tiny", "train": {"seed": seed}}
            (d / "results.json").write_text(json.dumps(results))
            (d / "config.json").write_text(json.dumps(config))
    (root / "paper.sweep.json").write_text(json.dumps(manifest))


def old_manifest(grid: str) -> dict:
    """A manifest as sweeps wrote them before they recorded paper numbers."""
    return {"grid": grid, "title": "Paper grid", "preset": "tiny",
            "settings": [{"id": sid, "name": MODS[sid], "mods": MODS[sid],
                          "runs": [f"{sid}-{MODS[sid]}-s{s}" for s in (0, 42)]} for sid in RESULTS]}


def report(tmp_path: Path, manifest: dict) -> tuple[dict, str, list[dict]]:
    write_runs(tmp_path / "runs", manifest)
    rep = build_report([tmp_path / "runs"], tmp_path / "out", log=lambda s: None)
    out = tmp_path / "out"
    return rep, (out / "table1.md").read_text(), list(csv.DictReader((out / "table1.csv").open()))


def row_of(md: str, sid: str) -> list[str]:
    line = next(l for l in md.splitlines() if l.startswith(f"| {sid} |"))
    return [c.strip() for c in line.strip("|").split("|")]


# ---------------------------------------------------------------------------------------------
# The grid file.

def test_a_settings_paper_numbers_load_keyed_as_the_reports_columns(tmp_path):
    grid = load_grid(write_grid(tmp_path / "paper.toml"))
    assert grid.paper_source == SOURCE
    assert grid.settings[0].paper == {"mu": 0.70, "align_f1_L0": 1.00, "retrieval_L8": 0.97, "ppl_dev": 217.0}
    assert grid.settings[1].paper == {}
    assert grid.select(["1"]).paper_source == SOURCE


@pytest.mark.parametrize("table, named", [
    ("{ mu = 0.7, f1_L0 = 1.0 }", "'f1_L0'"),  # not a column
    ("{ align_f1_0 = 1.0 }", "'align_f1_0'"),  # a per-layer column needs _L<layer>
    ("{ align_f1_L = 1.0 }", "'align_f1_L'"),
    ("{ mu_L0 = 0.7 }", "'mu_L0'"),  # µ is not per layer
    ('{ mu = "0.70" }', "'mu'"),  # not a number
    ("{ ppl_dev = true }", "'ppl_dev'"),
    ("{ mu = nan }", "'mu'"),
    ("0.70", "paper must be a table"),
])
def test_bad_paper_numbers_are_a_load_time_error_naming_setting_and_key(tmp_path, table, named):
    text = GRID.replace('mods = "lang-pos"\n', f'mods = "lang-pos"\npaper = {table}\n')
    with pytest.raises(MinimultError) as e:
        load_grid(write_grid(tmp_path / "bad.toml", text))
    assert "setting 1" in str(e.value) and named in str(e.value) and "\n" not in str(e.value)


def test_paper_source_must_be_a_string(tmp_path):
    with pytest.raises(MinimultError, match="paper_source must be a string"):
        load_grid(write_grid(tmp_path / "bad.toml", GRID.replace(f'"{SOURCE}"', "2020")))


def test_table1_has_the_papers_numbers_for_its_rows_only():
    grid = load_grid(ROOT / "experiments" / "table1.toml")
    assert "Dufter & Schütze (2020)" in grid.paper_source
    by_id = {s.id: s.paper for s in grid.settings}
    assert by_id.pop("4p") == {}  # not a paper row
    means = {i: {k: v for k, v in p.items() if not k.endswith("_std")} for i, p in by_id.items()}
    stds = {i: {k for k in p if k.endswith("_std")} for i, p in by_id.items()}
    assert all(len(p) == 9 for p in means.values())
    # Table 1 gives a std for every cell but µ; Table 2's no-parallel rows give none
    assert all(len(stds[i]) == (0 if i in ("21", "21b") else 8) and "mu_std" not in stds[i] for i in stds)
    assert by_id["1"]["retrieval_L0_std"] == 0.13 and by_id["18"]["ppl_dev_std"] == 42.7
    assert means["0"] == {"mu": 0.70, "align_f1_L0": 1.00, "retrieval_L0": 0.16, "translation_L0": 0.88,
                          "align_f1_L8": 1.00, "retrieval_L8": 0.97, "translation_L8": 0.79,
                          "ppl_train": 9, "ppl_dev": 217}
    assert (by_id["21b"]["mu"], by_id["18"]["ppl_dev"], by_id["30"]["translation_L8"]) == (0.07, 4128, 0.81)


# ---------------------------------------------------------------------------------------------
# The manifest.

def test_the_manifest_records_paper_numbers_and_their_source(tmp_path):
    grid = load_grid(write_grid(tmp_path / "paper.toml"))
    path = write_manifest(tmp_path, grid, "tiny", plan(grid, (0,), "tiny", tmp_path, {}))
    data = json.loads(path.read_text())
    assert data["paper_source"] == SOURCE
    assert data["settings"][0]["paper"] == grid.settings[0].paper and "paper" not in data["settings"][1]


def test_a_manifest_without_paper_numbers_has_no_paper_source(tmp_path):
    grid = load_grid(write_grid(tmp_path / "plain.toml", GRID.replace(f'paper_source = "{SOURCE}"\n', "")
                                .replace("paper = {", "# paper = {")))
    data = json.loads(write_manifest(tmp_path, grid, "tiny", plan(grid, (0,), "tiny", tmp_path, {}))
                      .read_text())
    assert "paper_source" not in data and not any("paper" in s for s in data["settings"])


# ---------------------------------------------------------------------------------------------
# The report.

def test_the_cell_shows_the_paper_number_beside_ours(tmp_path):
    grid = load_grid(write_grid(tmp_path / "paper.toml"))
    manifest = old_manifest(str(grid.path))
    manifest["paper_source"] = SOURCE
    manifest["settings"][0]["paper"] = grid.settings[0].paper
    rep, md, rows = report(tmp_path, manifest)
    cells = row_of(md, "0")
    assert cells[3] == "0.120 ± 0.028 (0.70)"  # µ: mean ± std of 0.10, 0.14, then the paper's
    assert cells[5] == "0.920 ± 0.028 (1.00)" and cells[6] == "0.015 ± 0.007"  # F1 L0; ρ L0 has none
    assert cells[9] == "0.310 ± 0.014 (0.97)" and cells[12] == "275 ± 7.1 (217)"
    assert "(" not in "".join(row_of(md, "1"))  # a setting without paper numbers
    assert f"In parentheses, the paper's numbers: {SOURCE}." in md
    sec = rep["sections"][0]
    assert sec["paper_source"] == SOURCE and sec["rows"][0]["paper"]["mu"] == 0.70 and sec["rows"][1]["paper"] == {}
    assert rows[0]["mu_paper"] == "0.7" and rows[0]["ppl_dev_paper"] == "217.0" and rows[0]["retrieval_L0_paper"] == ""
    assert rows[1]["mu_paper"] == ""


def test_an_old_manifest_falls_back_to_the_grid_file_it_names(tmp_path, monkeypatch):
    write_grid(tmp_path / "paper.toml")
    monkeypatch.chdir(tmp_path)  # the manifest names the grid relative to where the sweep ran
    rep, md, rows = report(tmp_path, old_manifest("paper.toml"))
    assert row_of(md, "0")[3] == "0.120 ± 0.028 (0.70)" and rows[0]["mu_paper"] == "0.7"
    assert rep["sections"][0]["paper_source"] == SOURCE


def test_the_quick_manifest_finds_table1_from_the_repository():
    from minimult.report.collect import paper_numbers

    data = json.loads((ROOT / "experiments" / "results" / "quick" / "table1.sweep.json").read_text())
    assert "paper_source" not in data and data["grid"] == "experiments/table1.toml"  # written before
    source, papers = paper_numbers(data)
    assert "Dufter & Schütze" in source and papers["0"]["mu"] == 0.70 and "4p" not in papers


def test_a_section_without_paper_numbers_renders_as_before(tmp_path):
    rep, md, rows = report(tmp_path, old_manifest(str(tmp_path / "gone.toml")))  # the grid file is gone
    header = "| ID | setting | n | µ | p (µ) | align F1 L0 | ρ L0 | τ L0 | align F1 L8 | ρ L8 | τ L8 | ppl train |"
    table = md[md.index(header):].strip().split("\n\n")[0].splitlines()
    assert table[2:] == [
        "| 0 | original | 2 | 0.120 ± 0.028 |  | 0.920 ± 0.028 | 0.015 ± 0.007 | 0.110 ± 0.014 | 0.960 ± 0.014 "
        "| 0.310 ± 0.014 | 0.130 ± 0.014 | 37.0 ± 1.4 | 275 ± 7.1 |",
        "| 1 | lang-pos | 2 | 0.020 ± 0.014 | 0.079 | 0.150 ± 0.071 | 0.005 ± 0.007 | 0.015 ± 0.007 "
        "| 0.250 ± 0.071 | 0.025 ± 0.007 | 0.010 ± 0.000 | 41.5 ± 0.7 | 295 ± 7.1 |"]
    assert "In parentheses" not in md and not any(k.endswith("_paper") for k in rows[0])
    assert rep["sections"][0]["paper_source"] == "" and all(r["paper"] == {} for r in rep["sections"][0]["rows"])


def test_a_paper_number_at_a_layer_the_table_lacks_is_named_under_it(tmp_path):
    manifest = old_manifest(str(tmp_path / "gone.toml"))
    manifest["paper_source"] = SOURCE
    manifest["settings"][0]["paper"] = {"mu": 0.70, "align_f1_L5": 1.00, "align_f1_L5_std": 0.01, "ppl_dev": 217}
    rep, md, rows = report(tmp_path, manifest)
    assert row_of(md, "0")[3] == "0.120 ± 0.028 (0.70)"  # the shown columns keep theirs
    assert ("Not shown: the paper's numbers at layer 5, which this table's columns do not have (its upper layer "
            "is 8).") in md
    manifest["settings"][0]["paper"] = {"mu": 0.70}
    assert "Not shown" not in report(tmp_path / "b", manifest)[1]
