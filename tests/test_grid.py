"""Grid files: every experiments/*.toml loads and validates; Table 1 has the paper's IDs and mods;
bad grid files fail with a clear MinimultError (and a one-line CLI error)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from minimult.cli import main
from minimult.config import resolve
from minimult.errors import MinimultError
from minimult.sweep.grid import load_grid, parse_seeds
from minimult.mods import parse_mods

ROOT = Path(__file__).resolve().parents[1]
GRIDS = sorted((ROOT / "experiments").glob("*.toml"))

# Dufter & Schütze (2020), Tables 1 and 2: ID -> mods
PAPER = {"0": "", "1": "lang-pos", "2": "shift-special", "3": "inv-order", "4": "no-random",
         "5": "lang-pos,shift-special", "6": "lang-pos,no-random", "7": "shift-special,no-random",
         "8": "lang-pos,shift-special,no-random", "9": "lang-pos,inv-order,shift-special,no-random",
         "15": "overparam", "16": "lang-pos,overparam", "17": "lang-pos,shift-special,no-random,overparam",
         "18": "untrained", "19": "untrained,lang-pos", "21": "no-parallel", "21b": "lang-pos,no-parallel",
         "30": "knn-replace"}


def names(mods: str) -> set[str]:
    return {a.mod.name for a in parse_mods(mods)}


def test_there_are_grid_files():
    assert {p.name for p in GRIDS} >= {"table1.toml", "extra.toml"}


@pytest.mark.parametrize("path", GRIDS, ids=[p.name for p in GRIDS])
def test_every_grid_file_loads_and_resolves_under_every_preset(path):
    grid = load_grid(path)
    assert grid.settings and grid.seeds
    for s in grid.settings:
        for preset in ("paper", "quick", "tiny"):
            cfg, _ = resolve(preset, grid.overrides_for(s, preset), s.mods)
            assert cfg.preset == preset


def test_table1_has_the_papers_ids_and_mods():
    grid = load_grid(ROOT / "experiments" / "table1.toml")
    assert [s.id for s in grid.settings].count("0") == 1
    variants = {"4p": "no-random"}  # the published code's 0.9/0.1 mix, beside the paper's IDs
    assert {s.id: names(s.mods) for s in grid.settings} == {k: names(v) for k, v in {**PAPER, **variants}.items()}
    assert grid.seeds == (0, 42, 43, 100, 101)
    for s in grid.settings:  # the paper's description lists the same mods
        if s.id not in variants:
            assert s.name == "original" if not s.mods else set(s.name.split(";")) == names(s.mods)
    cfg = {s.id: resolve(grid.preset, grid.overrides_for(s, grid.preset), s.mods)[0] for s in grid.settings}
    assert cfg["21"].train.epochs == cfg["21b"].train.epochs == 2 * cfg["0"].train.epochs
    assert cfg["18"].train.epochs == cfg["19"].train.epochs == 0
    assert cfg["15"].model.hidden == 768 and cfg["0"].model.hidden == 64
    assert cfg["30"].mask.probs[3] > 0 and cfg["4"].mask.probs[2] == 0
    assert cfg["4p"].mask.probs == (0.9, 0.1, 0.0, 0.0) and cfg["4"].mask.probs[:2] == (0.8, 0.2)
    assert cfg["1"].model.max_positions == 2 * cfg["0"].model.max_positions
    assert {s.id for s in grid.settings if s.needs_gpu} == {"15", "16", "17"}  # the overparam ones


def test_extra_grid_has_k_et_al_settings():
    grid = load_grid(ROOT / "experiments" / "extra.toml")
    mods = {s.mods for s in grid.settings}
    assert {"permute=0.25", "permute=0.5", "permute=1.0", "unigram"} <= mods
    unicode = [s for s in grid.settings if grid.overrides_for(s, "quick").get("data.fake") == "unicode"]
    assert unicode


GOOD = """
title = "t"
preset = "tiny"
seeds = [0, 1]
[[settings]]
id = "0"
name = "original"
mods = ""
"""


def write(tmp_path, text) -> Path:
    p = tmp_path / "grid.toml"
    p.write_text(text)
    return p


def test_a_minimal_grid_and_nested_override_tables(tmp_path):
    grid = load_grid(write(tmp_path, GOOD + '[overrides.train]\nepochs = 3\n[preset_overrides.quick]\n"train.lr" = 1e-3\n'))
    s = grid.settings[0]
    assert grid.overrides_for(s, "tiny") == {"train.epochs": 3}
    assert grid.overrides_for(s, "quick") == {"train.epochs": 3, "train.lr": 1e-3}


@pytest.mark.parametrize("extra, message", [
    ('[[settings]]\nid = "1"\nmods = "lang-pos,no-such-mod"\n', "unknown mod 'no-such-mod'"),
    ('[[settings]]\nid = "1"\nmods = "inv-order,permute"\n', "contradictory mods"),
    ('[[settings]]\nid = "1"\nmods = ""\noverrides = { "train.no_such_key" = 1 }\n', "unknown setting 'train.no_such_key'"),
    ('[[settings]]\nid = "1"\nmods = ""\noverrides = { "train.lr" = "fast" }\n', "bad value for train.lr"),
    ('[overrides]\n"model.nope" = 1\n', "unknown setting 'model.nope'"),
    ('[preset_overrides.huge]\n"train.lr" = 1e-3\n', "unknown preset"),
    ('[[settings]]\nid = "0"\nmods = "lang-pos"\n', "id given twice"),
    ('[[settings]]\nid = "1"\nmods = ""\ncolour = "red"\n', "unknown key(s) colour"),
    ('epochs = 3\n', "unknown key(s) epochs"),
    ('[[settings]]\nid = "1"\nmods = ""\nneeds_gpu = "yes"\n', "needs_gpu must be true or false"),
    ('[[settings]]\nid = "1"\nmods = "shift-special"\noverrides = { "data.fake" = "unicode" }\n', "shift-special"),
])
def test_bad_grid_files_are_clear_errors(tmp_path, extra, message):
    with pytest.raises(MinimultError, match=None) as e:
        load_grid(write(tmp_path, GOOD + extra))
    assert message in str(e.value) and "grid.toml" in str(e.value)


@pytest.mark.parametrize("text, message", [
    ("title = ", "not valid TOML"),
    ('title = "t"\n', "no settings"),
    ('seeds = [0, "x"]\n[[settings]]\nid = "0"\n', "bad seeds"),
    ('seeds = 0\n[[settings]]\nid = "0"\n', "grid.toml: bad seeds 0: use a list of whole numbers, e.g. seeds = [0, 42"),
    ('seeds = [1, 1]\n[[settings]]\nid = "0"\n', "grid.toml: seed given twice"),
    ('preset = "huge"\n[[settings]]\nid = "0"\n', "unknown preset"),
])
def test_malformed_grid_files(tmp_path, text, message):
    with pytest.raises(MinimultError) as e:
        load_grid(write(tmp_path, text))
    assert message in str(e.value)


def test_missing_grid_file_and_seed_parsing(tmp_path):
    with pytest.raises(MinimultError, match="grid file not found"):
        load_grid(tmp_path / "nope.toml")
    assert parse_seeds("0,42, 43") == (0, 42, 43)
    for bad in ("", "0,x", "1.5", "-1"):
        with pytest.raises(MinimultError, match="bad seeds .*: use whole numbers"):
            parse_seeds(bad)
    with pytest.raises(MinimultError, match="seed given twice in '0,0'"):
        parse_seeds("0,0")


def test_select_only_ids(tmp_path):
    grid = load_grid(ROOT / "experiments" / "table1.toml")
    assert [s.id for s in grid.select(["30", "0", "30"]).settings] == ["30", "0"]  # --only's order, once each
    with pytest.raises(MinimultError, match="no setting with ID 99"):
        grid.select(["99"])


@pytest.mark.parametrize("args, message", [
    (["--only", "99"], "no setting with ID 99"),
    (["--seeds", "0,x"], "bad seeds"),
    (["--address", "1.2.3.4:6379"], "--address is for --backend ray"),
    (["--jobs", "0"], "--jobs must be at least 1"),
    (["--set", "train.nope=1"], "unknown setting 'train.nope'"),
    (["--preset", "huge"], "unknown preset"),
])
def test_sweep_cli_refuses_bad_arguments_with_one_line(tmp_path, args, message):
    grid = write(tmp_path, GOOD)
    result = CliRunner().invoke(main, ["sweep", str(grid), "--root", str(tmp_path / "runs"), *args])
    assert result.exit_code == 2, result.output
    lines = [l for l in result.output.splitlines() if l.strip()]
    assert lines[-1].startswith("error:") and message in lines[-1]
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").glob("*/config.json"))


def test_sweep_cli_bad_grid_file(tmp_path):
    grid = write(tmp_path, GOOD + '[[settings]]\nid = "1"\nmods = "lang-pos,bogus"\n')
    result = CliRunner().invoke(main, ["sweep", str(grid)])
    assert result.exit_code == 2 and "error:" in result.output and "unknown mod 'bogus'" in result.output


@pytest.mark.parametrize("option, fragment", [("--seeds", "bad seeds"), ("--only", "--only needs at least one")])
def test_empty_seeds_or_only_is_an_error_not_everything(tmp_path, option, fragment):
    from click.testing import CliRunner

    from minimult.cli import main

    result = CliRunner().invoke(main, ["sweep", str(ROOT / "experiments" / "table1.toml"), option, "",
                                       "--root", str(tmp_path / "runs")])
    assert result.exit_code == 2 and fragment in result.output
    assert not (tmp_path / "runs").exists()


def test_a_settings_paper_numbers_carry_the_papers_standard_deviations(tmp_path):
    """`<key>_std` is the paper's standard deviation of a column (Table 1 gives one per cell but µ); the report
    shows it beside the paper's mean; a `_std` of no column is refused like any unknown key."""
    from minimult.report.tables import cell_text, table_columns

    grid = load_grid(Path(__file__).resolve().parents[1] / "experiments" / "table1.toml")
    lang_pos = next(s for s in grid.settings if s.id == "1")
    assert lang_pos.paper["align_f1_L0"] == 0.87 and lang_pos.paper["align_f1_L0_std"] == 0.05
    assert "mu_std" not in lang_pos.paper and lang_pos.paper["ppl_dev_std"] == 9.0
    column, layer = next((c, l) for c, l in table_columns("8") if c.key(l) == "align_f1_L0")
    agg = {"mean": 0.604, "std": 0.456, "n": 3}
    assert cell_text(agg, column, 0.87, 0.05) == "0.604 ± 0.456 (0.87 ± 0.05)"
    assert cell_text(agg, column, 0.87) == "0.604 ± 0.456 (0.87)"
    bad = tmp_path / "g.toml"
    bad.write_text('title = "t"\npreset = "tiny"\n[[settings]]\nid = "0"\nname = "o"\nmods = ""\n'
                   'paper = { mu = 0.7, speed_std = 0.1 }\n')
    with pytest.raises(MinimultError, match="unknown paper key 'speed_std'"):
        load_grid(bad)
