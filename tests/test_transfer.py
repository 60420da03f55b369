"""Zero-shot transfer on the New Testament part task: the task's labels and split by verse, layer
freezing, ∆, an untrained model, results.json, and bad input through the CLI. Tiny runs on
corpora/tiny/nt-parts.txt (100 BBE sentences of each part, each line tagged with its verse id)."""

from __future__ import annotations

import copy
import dataclasses
import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from conftest import ROOT, TINY_SETTINGS
from minimult.cli import main
from minimult.config import TransferConfig, resolve
from minimult.data.corpus import file_corpus
from minimult.data.prepare import prepare
from minimult.data.run_data import RunData
from minimult.data.tasks import CLASSES, SPLITS, nt_part, nt_parts, verse_split
from minimult.errors import MinimultError
from minimult.evaluate import evaluate_run, summary_parts
from minimult.evaluate.transfer import (combine, fine_tune, frozen_layer, frozen_names, task_data, transfer, transfer_run,
                                        with_headline)
from minimult.runs import Run, copy_vocab, write_json
from minimult.train import pretrain

NT = {**TINY_SETTINGS, "data.train": str(ROOT / "corpora" / "tiny" / "nt-parts.txt"), "data.train_sentences": 0}
QUICK = TransferConfig(modes="full,freeze:0,frozen", seeds=2, epochs=2)  # a few seconds on the tiny model
quiet = lambda s: None  # noqa: E731


def make_run(tmp_path, name, mods=None, settings=NT, **overrides):
    cfg, active = resolve("tiny", {**settings, **overrides}, mods)
    path = tmp_path / name
    path.mkdir()
    write_json(path / "config.json", cfg.to_dict())
    copy_vocab(prepare(cfg.data).path, path)
    pretrain(cfg, active, path, log=quiet)
    return Run.open(path)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("transfer")
    return {"trained": make_run(tmp, "trained"), "untrained": make_run(tmp, "untrained", "untrained"),
            "plain": make_run(tmp, "plain", settings=TINY_SETTINGS, **{"train.epochs": 1})}


# ---------------------------------------------------------------------------------------------
# The task


def test_parts_follow_the_books():
    ids = [40001001, 43021025, 44001001, 45001001, 58013025, 59001001, 65001025, 66022021, 1001001, 7]
    assert nt_part(np.array(ids)).tolist() == [0, 0, 1, 2, 2, 3, 3, 4, -1, -1]  # Hebrews with Paul
    assert CLASSES == ("gospels", "acts", "pauline", "other-letters", "revelation")


def test_split_is_by_verse_fixed_and_about_80_10_10():
    ids = np.array([b * 1_000_000 + c * 1000 + v for b in range(40, 67) for c in range(1, 21) for v in range(1, 31)])
    split = verse_split(ids)
    shares = np.bincount(split, minlength=3) / len(ids)
    assert np.allclose(shares, [0.8, 0.1, 0.1], atol=0.015)
    many = np.repeat(ids[:500], 3)  # a verse of several sentences: one split for all of them
    assert (verse_split(many).reshape(-1, 3) == split[:500, None]).all()
    assert (verse_split(ids[::-1]) == split[::-1]).all()  # a function of the id alone, not of its neighbours
    # the same in every run and every version of the code: changing these changes every published number
    assert verse_split(np.array([40001001, 40001004, 40001016, 43003016])).tolist() == [0, 1, 2, 0]


def test_split_buckets_are_80_10_10_at_their_edges():
    """A verse's bucket is blake2b("verse ID", 8 bytes) big-endian mod 100: 0-79 train, 80-89 dev, 90-99 test."""
    import hashlib

    ids = np.arange(40001001, 40001400)
    bucket = np.array([int.from_bytes(hashlib.blake2b(f"verse {v}".encode(), digest_size=8).digest(), "big") % 100
                       for v in ids])
    assert {79, 80, 89, 90, 99, 0} <= set(bucket.tolist())  # the edges are among them
    assert (verse_split(ids) == np.where(bucket < 80, 0, np.where(bucket < 90, 1, 2))).all()


def test_split_is_the_same_in_every_language_and_run():
    """Each sentence's verse, per split, in both languages of runs with other mods and seeds: the same
    verses, and no verse in two splits."""
    seen = []
    for mods, seed in ((None, 0), ("inv-order", 0), ("lang-pos,shift-special", 7), ("no-parallel", 3)):
        cfg, active = resolve("tiny", {**NT, "train.seed": seed}, mods)
        data = RunData(cfg, active)
        task, verses = data.task(), data.prepared.train.verse_ids
        sides = data.views("train-parallel")
        for side, parts in zip(sides, task_data(task, sides, cfg.data.max_len - 2)):
            for k, s in enumerate(SPLITS):
                mine = side.english_index[task.split[side.english_index] == k]  # the English sentences behind this split's
                assert (parts[s][1] == task.labels[mine]).all() and parts[s][0].num_sentences == len(mine)
            seen.append({s: set(verses[side.english_index[task.split[side.english_index] == k]]) for k, s in enumerate(SPLITS)})
    assert all(s == seen[0] for s in seen)
    a, b, c = (seen[0][s] for s in SPLITS)
    assert a and b and c and not (a & b or a & c or b & c)


def test_verse_tagged_file_keeps_its_ids_and_a_plain_file_has_none(tmp_path):
    tagged = tmp_path / "tagged.txt"
    tagged.write_text("40001001\tThe book of the generations .\n\n66022021\tThe grace of the Lord .\n")
    assert file_corpus(tagged).verse_ids == [40001001, 66022021]
    assert file_corpus(tagged).sentences[0] == ["The", "book", "of", "the", "generations", "."]
    mixed = tmp_path / "mixed.txt"
    mixed.write_text("40001001\tThe book .\nNo id here .\n")
    assert file_corpus(mixed).verse_ids == [1, 2]  # not every line tagged: line numbers, as before
    with pytest.raises(MinimultError, match=r"needs a verse id .* 2 of the 2 sentences of plain .*BBCCCVVV<TAB>"):
        nt_parts(np.array(file_corpus(mixed).verse_ids), "plain")
    gospels = np.arange(40001001, 40001301)  # the first verses, as a run on the tiny preset's sentences trained on
    with pytest.raises(MinimultError, match=r"gives \d+ train, \d+ dev, \d+ test sentences, and only gospels among "
                                            r".*corpora/tiny/nt-parts.txt"):
        nt_parts(gospels, "tiny")


# ---------------------------------------------------------------------------------------------
# Fine-tuning


def test_freezing_n_layers_keeps_exactly_those_parameters(runs):
    run = runs["trained"]
    model = run.load_model("cpu", log=quiet)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    task = run.data.task()
    en = task_data(task, run.data.views("train-parallel"), run.cfg.data.max_len - 2)[0]["train"]
    cfg = dataclasses.replace(QUICK, epochs=1)
    for freeze in (None, 0, 1, 2):
        encoder, _ = fine_tune(model, *en, len(CLASSES), run.data.layouts, freeze, cfg, 0)
        fixed = frozen_names(model, freeze)
        expected = set() if freeze is None else {n for n in before if n.startswith("embeddings.") or
                                                 any(n.startswith(f"blocks.{i}.") for i in range(freeze))}
        assert fixed == expected and (freeze != 0 or all(n.startswith("embeddings.") for n in fixed))
        for name, p in encoder.named_parameters():
            same = torch.equal(p, before[name])
            if name.startswith(("embeddings.", "blocks.")):
                assert same == (name in fixed), (freeze, name)
            else:  # the MLM head takes no part: the classifier replaces it
                assert same, name
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())  # the run's model is untouched


def test_untrained_model_transfers_no_better_than_chance(runs):
    """An untrained model's second language has embeddings unrelated to English's: whatever the English
    classifier learns, its zero-shot predictions carry no information about the labels."""
    run = runs["untrained"]
    results = transfer_run(run, QUICK, "cpu", log=quiet, write=False)["transfer"]
    test = np.array(list(results["task"]["class_counts"]["test"].values()))
    chance = max(results["baselines"]["majority"], test.max() / test.sum())  # the best constant guess on test
    for mode, m in results["modes"].items():
        assert m["zero_shot"] <= chance + 0.1, (mode, m["zero_shot"], chance)  # 43 test sentences: SE ~0.07
    assert 0 < results["baselines"]["majority"] <= chance < results["baselines"]["bag_of_words"]


def test_delta_is_en_minus_zero_shot_and_vanishes_for_an_indistinguishable_language(runs):
    run = runs["trained"]
    model = run.load_model("cpu", log=quiet)
    task, sides = run.data.task(), run.data.views("train-parallel")
    out = transfer(model, task, sides, run.data.layouts, run.cfg.data.max_len, QUICK)
    for m in out["modes"].values():
        assert m["runs"] and all(r["delta"] == r["en"] - r["zero_shot"] for r in m["runs"])
        assert m["delta"] == m["en"] - m["zero_shot"]
    assert len(out["modes"]["full"]["runs"]) == 2 and out["modes"]["full"]["en_std"] is not None
    assert out["delta"] == out["modes"]["full"]["delta"] and out["headline"] == "full"
    # zero-shot reads the second language's own ids: a barely trained tiny model tells them apart
    assert out["modes"]["frozen"]["zero_shot"] != out["modes"]["frozen"]["en"]
    # The second language's token rows made equal to English's (no lang-pos: same positions and segment):
    # the model cannot tell the languages apart, so where the embeddings stay fixed ∆ is exactly 0.
    twin = copy.deepcopy(model)
    V = run.cfg.data.vocab_size
    with torch.no_grad():
        table = twin.embeddings.lookups["token"].weight
        table[V : 2 * V] = table[:V]
    out = transfer(twin, task, sides, run.data.layouts, run.cfg.data.max_len, QUICK)
    for mode in ("freeze:0", "frozen"):
        assert out["modes"][mode]["runs"], mode
        assert all(r["zero_shot"] == r["en"] and r["delta"] == 0 for r in out["modes"][mode]["runs"]), mode
    # and a second language that is English in English's ids: ∆ is 0 even after full fine-tuning
    copy_sides = [sides[0], dataclasses.replace(sides[0], lang=1)]
    out = transfer(model, task, copy_sides, run.data.layouts, run.cfg.data.max_len,
                   dataclasses.replace(QUICK, modes="full"))
    assert out["modes"]["full"]["runs"] and all(r["delta"] == 0 for r in out["modes"]["full"]["runs"])


# ---------------------------------------------------------------------------------------------
# results.json and the CLI


def test_results_keep_transfer_at_the_top_through_later_evaluations(runs, tmp_path):
    run = make_run(tmp_path, "blocks")
    transfer_run(run, dataclasses.replace(QUICK, modes="frozen"), "cpu", log=quiet)
    evaluate_run(run, (0, 1), log=quiet)  # a complete evaluation (µ's layers at 2 layers) without transfer
    saved = json.loads((run.path / "results.json").read_text())
    assert saved["evaluation"]["complete"] and "layers" in saved and saved["transfer"]["headline"] == "frozen"
    assert [b["evaluation"].get("kind") for b in saved["evaluations"]] == ["transfer", None]
    assert "transfer" in saved["evaluations"][0] and "transfer" not in saved["evaluations"][1]
    transfer_run(run, dataclasses.replace(QUICK, modes="freeze:0", seeds=1), "cpu", log=quiet)  # another mode
    saved = json.loads((run.path / "results.json").read_text())
    assert list(saved["transfer"]["modes"]) == ["frozen", "freeze:0"]  # the same steps: modes add up
    # the headline does not follow the latest call: full where it ran, else the first mode held
    assert saved["transfer"]["headline"] == "frozen" and saved["evaluation"]["complete"]
    assert saved["transfer"]["zero_shot_acc"] == saved["transfer"]["modes"]["frozen"]["zero_shot"]
    assert saved["transfer"]["settings"]["modes"] == "frozen,freeze:0"
    # a run whose config enables transfer gets it from `eval` (and so from a sweep), in the summary line too
    enabled = make_run(tmp_path, "enabled", **{"transfer.enabled": True, "transfer.modes": "frozen"})
    results = evaluate_run(enabled, (0, 1), log=quiet)
    assert results["transfer"]["modes"]["frozen"]["layer"] == 1  # µ's upper layer of a 2-layer model
    assert results["transfer"]["steps"] == results["steps"]
    assert any(p.startswith("∆ ") for p in summary_parts(results))
    assert not any(p.startswith("∆ ") for p in summary_parts({k: v for k, v in results.items() if k != "transfer"}))


def test_headline_is_full_fine_tuning_whichever_call_added_it():
    def block(**modes):
        return with_headline({"modes": {m: {"en": e, "zero_shot": z, "delta": e - z} for m, (e, z) in modes.items()},
                              "settings": {"modes": ",".join(modes)}, "steps": 10})

    full_first = combine(block(full=(.7, .4), frozen=(.6, .5)), block(**{"freeze:9": (.65, .6)}))
    full_later = combine(block(**{"freeze:9": (.65, .6)}), block(full=(.7, .4)))
    for t in (full_first, full_later):
        assert (t["headline"], t["en_acc"], t["zero_shot_acc"]) == ("full", .7, .4)
        assert t["delta"] == pytest.approx(.3)
    assert full_later["settings"]["modes"] == "freeze:9,full"
    again = combine(full_first, block(full=(.8, .6)))  # a mode run again replaces its numbers
    assert (again["zero_shot_acc"], list(again["modes"])) == (.6, ["full", "frozen", "freeze:9"])


def test_the_frozen_layer_is_the_one_asked_for_from_the_embeddings_to_the_last():
    """-1: µ's upper layer (8 of 12); 0 (the embeddings) and the last layer are layers a mode may name; one more
    is one error line."""
    assert frozen_layer(TransferConfig(), 12) == 8
    assert frozen_layer(TransferConfig(layer=0), 12) == 0
    assert frozen_layer(TransferConfig(layer=12, modes="full,freeze:12"), 12) == 12
    with pytest.raises(MinimultError, match="transfer.layer: layer 13 does not exist: the model has layers 0..12"):
        frozen_layer(TransferConfig(layer=13), 12)
    with pytest.raises(MinimultError, match="mode freeze:13: layer 13 does not exist"):
        frozen_layer(TransferConfig(modes="freeze:13"), 12)


def cli(*args):
    result = CliRunner().invoke(main, ["transfer", *map(str, args)])
    return result.exit_code, result.output.strip().splitlines()


def test_cli_prints_the_table_and_writes_json(runs, tmp_path):
    code, lines = cli(runs["trained"].path, "--modes", "frozen", "--layer", "1", "--set", "transfer.seeds=1",
                      "--json", tmp_path / "t.json")
    assert code == 0, lines
    assert any(line.startswith("frozen ") for line in lines) and any("majority class" in line for line in lines)
    written = json.loads((tmp_path / "t.json").read_text())
    assert written["transfer"]["modes"]["frozen"]["layer"] == 1 and written["evaluation"]["kind"] == "transfer"


@pytest.mark.parametrize("args, message", [
    (("--layer", "3"), "transfer.layer: layer 3 does not exist: the model has layers 0..2"),
    (("--modes", "full,freeze:5"), "mode freeze:5: layer 5 does not exist"),
    (("--modes", "frozen,half"), "unknown transfer mode 'half'"),
    (("--set", "train.lr=1"), "transfer takes transfer.* settings only"),
    (("--set", "transfer.epochs=0"), "transfer.seeds, epochs and batch_size >= 1"),
])
def test_cli_bad_settings_are_one_error_line(runs, args, message):
    code, lines = cli(runs["trained"].path, *args)
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines


def test_cli_corpus_without_verse_ids_is_one_clear_error(runs):
    code, lines = cli(runs["plain"].path)
    assert code == 2 and len(lines) == 1, lines
    assert "needs a verse id (BBCCCVVV" in lines[0] and "train.txt" in lines[0] and "bbe-nt" in lines[0]


def test_transfer_settings_do_not_split_a_setting_in_the_report():
    """Transfer settings say how a run is evaluated, not trained: a run made before the section existed
    and one with other transfer settings are one setting of the report's "other runs"."""
    from minimult.report.collect import _fingerprint

    base = resolve("tiny")[0].to_dict()
    other = resolve("tiny", {"transfer.enabled": True, "transfer.seeds": 5})[0].to_dict()
    before = {k: v for k, v in base.items() if k != "transfer"}
    assert _fingerprint(base) == _fingerprint(other) == _fingerprint(before)
    assert _fingerprint(base) != _fingerprint(resolve("tiny", {"train.lr": 1e-3})[0].to_dict())


def test_report_transfer_rows_are_the_runs_mean_and_the_scatter_has_every_run(tmp_path):
    from minimult.report import build_report
    from minimult.report.transfer import pearson_test

    made = [make_run(tmp_path, f"r{s}", **{"train.seed": s, "transfer.enabled": True, "transfer.modes": "frozen",
                                           "transfer.seeds": 1}) for s in (0, 1)]
    for run in made:
        evaluate_run(run, (0, 1), log=quiet)
    report = build_report([tmp_path], tmp_path / "report", log=quiet)
    frozen = [json.loads((r.path / "results.json").read_text())["transfer"]["modes"]["frozen"] for r in made]
    (row,) = report["transfer"]
    assert row["mode"] == "frozen" and row["n"] == 2
    assert row["zero_shot"]["mean"] == pytest.approx(np.mean([m["zero_shot"] for m in frozen]))
    assert row["delta"]["mean"] == pytest.approx(np.mean([m["delta"] for m in frozen]))
    assert len(report["transfer_word_order"]["points"]) == 2  # r needs three runs: n/a here
    assert report["transfer_word_order"]["pearson"] is None and "## Zero-shot transfer" in report["markdown"]
    line = [{"order_distance": x, "zero_shot": 0.9 - x} for x in (0.0, 0.2, 0.5)]  # falls as order departs
    r, p = pearson_test(line)
    assert r == pytest.approx(-1.0) and p < 1e-6
    noisy = [{"order_distance": x, "zero_shot": z} for x, z in ((0, .5), (1, .6), (2, .6), (3, .5))]
    r, p = pearson_test(noisy)
    assert r == pytest.approx(0.0, abs=1e-12) and p == pytest.approx(1.0)


def test_a_sweep_asking_for_transfer_evaluates_finished_runs_without_training_them(tmp_path):
    from minimult.sweep import run_sweep
    from minimult.sweep.grid import load_grid

    (tmp_path / "g.toml").write_text(f"""
title = "transfer grid"
preset = "tiny"
seeds = [0]
[overrides]
"data.train" = "{NT['data.train']}"
"data.dev" = "{NT['data.dev']}"
"data.vocab_size" = 256
[[settings]]
id = "0"
name = "original"
mods = ""
""")
    grid, root = load_grid(tmp_path / "g.toml"), tmp_path / "runs"
    assert run_sweep(grid, root=root, log=quiet, jobs=1).ok
    run = root / "0-original-s0"
    trained = (run / "checkpoint.pt").read_bytes(), (run / "metrics.jsonl").read_text()
    assert "transfer" not in json.loads((run / "results.json").read_text())
    asked = {"transfer.enabled": True, "transfer.modes": "frozen", "transfer.seeds": 1}
    lines = []
    assert run_sweep(grid, root=root, log=lines.append, jobs=1, overrides=asked).ok  # not "another configuration"
    results = json.loads((run / "results.json").read_text())
    assert results["transfer"]["steps"] == results["steps"] and "frozen" in results["transfer"]["modes"]
    assert ((run / "checkpoint.pt").read_bytes(), (run / "metrics.jsonl").read_text()) == trained  # no training
    lines.clear()
    run_sweep(grid, root=root, log=lines.append, jobs=1, overrides=asked)
    assert "1 runs: 0 done, 1 skipped" in "\n".join(lines)
