"""The report's K et al. section: settings join the series that their stored configuration says (one
field differing from original), each point is the mean ± sample std over its seeds, the rank
correlation has the sign of the data, and `minimult report` writes the table and a real PNG."""

from __future__ import annotations

import copy
import json
import statistics
from pathlib import Path

import pytest
from click.testing import CliRunner

from minimult.cli import main
from minimult.report import series
from minimult.report.collect import Group, Run, Section

BASE = {"data": {"train": "bbe-nt", "vocab_size": 2048, "max_len": 128, "tokenizer": "wordpiece"},
        "model": {"hidden": 64, "intermediate": 256, "heads": 1, "layers": 12, "target_params": 0,
                  "max_positions": 128},
        "train": {"epochs": 25, "seed": 0}, "mods": "original", "preset": "quick"}


def config(mods="original", **changes) -> dict:
    cfg = copy.deepcopy(BASE)
    cfg["mods"] = mods
    for key, value in changes.items():
        section, field = key.split("__")
        cfg[section][field] = value
    return cfg


def run(cfg, mu, delta=None, parameters=878_784, seed=0, en=0.7) -> Run:
    results = {"mu": mu, "seed": seed, "mods": cfg["mods"], "layers": {"0": {}, "8": {}}, "mu_layers": [0, 8],
               "train": {"parameters": parameters}}
    if delta is not None:
        results["transfer"] = {"modes": {"full": {"en": en, "zero_shot": en - delta, "delta": delta},
                                         "frozen": {"en": 0.6, "zero_shot": 0.6, "delta": 0.0}},
                               "baselines": {"majority": 0.5, "bag_of_words": 0.77}, "delta": 0.0}
    return Run(Path(f"/nowhere/{cfg['mods']}-{seed}"), results, {**cfg, "train": {**cfg["train"], "seed": seed}})


# (id, mods, config changes, [(µ, ∆) per seed], parameters)
SETTINGS = [
    ("0", "original", {}, [(0.40, 0.10), (0.44, 0.12)], 878_784),
    ("d2", "original", {"model__layers": 2, "model__hidden": 120, "model__target_params": 880_000},
     [(0.10, 0.30), (0.14, 0.28)], 879_000),
    ("d6", "original", {"model__layers": 6, "model__hidden": 80, "model__target_params": 880_000},
     [(0.30, 0.20), (0.26, 0.22)], 881_000),
    ("h4", "original", {"model__heads": 4}, [(0.39, 0.11), (0.41, 0.13)], 878_784),
    ("p250k", "original", {"model__hidden": 24, "model__target_params": 250_000}, [(0.05, 0.4), (0.07, 0.4)],
     251_000),
    ("w0.5", "permute=0.5", {}, [(0.20, None), (0.22, None)], 878_784),
    ("w1", "permute=1.0", {}, [(0.10, None), (0.12, None)], 878_784),
    ("u", "unigram", {}, [(0.01, None), (0.02, None)], 878_784),
    ("tc", "original", {"data__tokenizer": "char", "data__vocab_size": 80}, [(0.30, 0.2), (0.20, 0.2)], 300_000),
    # in no series: two fields differ; another mod; a changed training setting
    ("x", "original", {"model__layers": 2, "model__heads": 2}, [(0.5, 0.0), (0.5, 0.0)], 800_000),
    ("lp", "lang-pos", {}, [(0.0, 0.5), (0.0, 0.5)], 878_784),
    ("e", "original", {"train__epochs": 50}, [(0.6, 0.0), (0.6, 0.0)], 878_784),
]


def groups() -> list[Group]:
    out = []
    for sid, mods, changes, values, params in SETTINGS:
        cfg = config(mods, **changes)
        out.append(Group(sid, mods, mods, [run(cfg, mu, d, params, seed) for seed, (mu, d) in zip((0, 42), values)]))
    return out


def test_settings_join_the_series_their_configuration_says():
    found = {s["axis"]: s for s in series.series([Section("K et al.", groups())])}
    xs = {axis: [(p["setting"].split()[0], p["x"]) for p in s["points"]] for axis, s in found.items()}
    assert xs == {"depth": [("d2", 2), ("d6", 6), ("0", 12)],
                  "heads": [("0", 1), ("h4", 4)],
                  "parameters": [("p250k", 251_000), ("0", 878_784)],
                  "permutation": [("0", 0.0), ("w0.5", 0.5), ("w1", 1.0), ("u", "unigram")],
                  "tokenization": [("0", "wordpiece"), ("tc", "char")]}


def test_points_are_seed_means_with_sample_std_and_the_correlation_has_the_datas_sign():
    found = {s["axis"]: s for s in series.series([Section("K et al.", groups())])}
    d2 = found["depth"]["points"][0]
    assert d2["mu"]["mean"] == pytest.approx(0.12) and d2["mu"]["std"] == pytest.approx(statistics.stdev([.10, .14]))
    assert d2["delta"]["mean"] == pytest.approx(0.29)  # the full mode's ∆, not the frozen one
    assert found["depth"]["spearman_mu"] == pytest.approx(1.0)  # µ rises with depth: .12, .28, .42
    assert found["depth"]["spearman_delta"] == pytest.approx(-1.0)
    assert found["permutation"]["spearman_mu"] == pytest.approx(-1.0)  # unigram has no p: left out
    assert found["permutation"]["points"][1]["delta"]["mean"] is None  # no transfer result: blank, not 0
    assert found["heads"]["spearman_mu"] is None  # two points are no ranking


def test_a_run_that_learned_nothing_is_left_out_of_mu_and_delta_and_named():
    # w1's seed 42 fine-tunes to the majority class in English too (pretraining stuck): its ∆ of 0.001 is
    # no transfer at all, not perfect transfer
    gs = [g for g in groups() if g.id in ("0", "w1")]
    w1 = gs[1]
    w1.runs[:] = [run(w1.runs[0].config, 0.10, 0.25, seed=0), run(w1.runs[0].config, 0.12, 0.001, seed=42, en=0.51)]
    point = next(s for s in series.series([Section("K et al.", gs)]) if s["axis"] == "permutation")["points"][1]
    assert point["delta"]["mean"] == pytest.approx(0.25) and point["delta"]["std"] is None
    assert point["mu"]["mean"] == pytest.approx(0.10) and point["mu"]["std"] is None  # its µ says nothing either
    assert point["unlearned_seeds"] == [42] and point["n"] == 2
    md = series.markdown(series.series([Section("K et al.", gs)]))
    assert "µ and ∆ of w1 permute=1.0 leave out seed(s) 42: fine-tuned English accuracy at the majority" in md
    # no seed trained: no point on either axis, and the line says so
    w1.runs[0] = run(w1.runs[0].config, 0.005, 0.0, seed=0, en=0.50)
    point = next(s for s in series.series([Section("K et al.", gs)]) if s["axis"] == "permutation")["points"][1]
    assert point["mu"]["mean"] is None and point["delta"]["mean"] is None and point["unlearned_seeds"] == [0, 42]
    md = series.markdown(series.series([Section("K et al.", gs)]))
    assert "leave out seed(s) 0, 42 (every seed: no point)" in md
    assert "over the 1 settings with a trained run" in md  # original alone: w1 has no point


def test_an_original_with_another_recipe_anchors_its_own_series():
    # "e" (50 epochs) is in none of original's series; a 2-layer model at 50 epochs joins no series of
    # original's (two fields differ) but makes a depth series with "e", named by what "e" changes
    e2 = ("e-d2", "original", {"train__epochs": 50, "model__layers": 2, "model__hidden": 120,
                              "model__target_params": 880_000}, [(0.2, 0.3), (0.3, 0.3)], 879_000)
    gs = groups()
    cfg = config(e2[1], **e2[2])
    gs.append(Group(e2[0], e2[1], e2[1], [run(cfg, mu, d, e2[4], seed) for seed, (mu, d) in zip((0, 42), e2[3])]))
    found = series.series([Section("K et al.", gs)])
    main = {s["axis"]: s for s in found if not s["context"]}
    assert [p["setting"].split()[0] for p in main["depth"]["points"]] == ["d2", "d6", "0"]  # as before
    other = [s for s in found if s["context"]]
    assert [(s["axis"], s["context"]) for s in other] == [("depth", "train.epochs=50")]
    assert [(p["setting"].split()[0], p["x"]) for p in other[0]["points"]] == [("e-d2", 2), ("e", 12)]
    assert other[0]["points"][1]["mu"]["mean"] == pytest.approx(0.6)
    assert "### depth (Table 4; K et al.; at train.epochs=50)" in series.markdown(found)
    # without a partner "e" anchors nothing: no series of one point
    assert all(not s["context"] for s in series.series([Section("K et al.", groups())]))


def test_no_original_no_series():
    assert series.series([Section("K et al.", [g for g in groups() if g.mods != "original"])]) == []


def test_report_writes_the_section_and_a_png(tmp_path):
    root = tmp_path / "runs"
    settings = [{"id": g.id, "name": f"name of {g.id}", "mods": g.mods, "runs": [f"{g.id}-s{r.seed}" for r in g.runs]}
                for g in groups()]
    root.mkdir()
    (root / "k.sweep.json").write_text(json.dumps({"grid": "k.toml", "title": "K et al.", "preset": "quick",
                                                   "settings": settings}))
    for g in groups():
        for r in g.runs:
            d = root / f"{g.id}-s{r.seed}"
            d.mkdir(parents=True)
            (d / "config.json").write_text(json.dumps(r.config))
            (d / "results.json").write_text(json.dumps(r.results))
    result = CliRunner().invoke(main, ["report", str(root), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    md = (tmp_path / "out" / "table1.md").read_text()
    assert "## K et al.'s series" in md and "### depth (Table 4; K et al.)" in md
    assert "over the 3 settings with a trained run (their direction: µ up, ∆ down)." in md  # the signs to compare the correlations with
    assert "| 2 | d2 name of d2 | 2 | 879,000 | 0.120 ± 0.028 | 0.290 ± 0.014 |" in md
    assert "| unigram | u name of u | 2 | 878,784 | 0.015 ± 0.007 | – |" in md
    assert (tmp_path / "out" / "k_et_al.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert {s["axis"] for s in report["k_et_al"]} == {"depth", "heads", "parameters", "permutation", "tokenization"}


def test_parameter_ticks_keep_three_digits():
    # the ~1.75M setting solves to 1,761,568 parameters; its tick read "1.76157M"
    assert [series.count_tick(v) for v in (253_264, 878_784, 1_761_568, 3_500_000)] == ["253k", "879k", "1.76M", "3.5M"]
