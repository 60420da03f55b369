"""The evaluator on real (tiny) runs: known outcomes of untrained models, mods in eval data, errors; its
vectorised and sliced parts against straightforward references."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import TINY_SETTINGS, cli, random_replacement_ids
from minimult.data.batching import SequenceSet
from minimult.config import resolve
from minimult.evaluate import (PPL_SEED, evaluate_run, gold_links, mlm_perplexity, piece_vectors, row_slices,
                               sentence_vectors, truncate)
from minimult.data.languages import Side
from minimult.data.run_data import RunData
from minimult.data.masking import MaskConfig, mask_batch
from minimult.model import Bert
from minimult.data.prepare import prepare
from minimult.runs import copy_vocab, write_json
from minimult.train import pretrain



def make_run(tmp_path, name, mods, preset="tiny", **overrides):
    cfg, active = resolve(preset, {**TINY_SETTINGS, **overrides}, mods)
    run = tmp_path / name
    run.mkdir()
    write_json(run / "config.json", cfg.to_dict())
    copy_vocab(prepare(cfg.data).path, run)
    pretrain(cfg, active, run, log=lambda s: None)
    return run


# what the untrained-model tests below read: every evaluator but the probe's 13 layers (tests/test_probe.py)
UNTRAINED_READS = ("alignment", "retrieval", "translation", "word_order", "perplexity", "multilinguality")


@pytest.fixture(scope="module")
def untrained_small(tmp_path_factory):
    """Untrained BERT-small (12 layers, hidden 64), shared vs language-specific positions."""
    tmp = tmp_path_factory.mktemp("untrained")
    return {m: make_run(tmp, m.replace(",", "+"), m, preset="paper") for m in ("untrained", "untrained,lang-pos",
                                                                                 "untrained,inv-order")}


def test_untrained_shared_positions_align_but_do_not_retrieve(untrained_small):
    r = evaluate_run(untrained_small["untrained"], (0, 8), ppl_sentences=100, log=lambda s: None,
                     only=UNTRAINED_READS)
    for layer in ("0", "8"):
        assert r["layers"][layer]["align_f1"] > 0.8  # positions alone align identical sequences (paper: .97)
        assert r["layers"][layer]["retrieval"] < 0.2
        assert r["layers"][layer]["translation"] < 0.05
        assert r["layers"][layer]["order_distance"] < 0.1  # Match follows the shared positions: same order
    assert r["mu"] == pytest.approx((r["layers"]["0"]["translation"] + r["layers"]["8"]["translation"]
                                     + r["layers"]["0"]["retrieval"] + r["layers"]["8"]["retrieval"]) / 4)
    assert r["perplexity"]["dev"] > 200  # near-uniform over 512 ids
    saved = json.loads((untrained_small["untrained"] / "results.json").read_text())
    assert saved["layers"]["8"]["align_f1"] == r["layers"]["8"]["align_f1"]
    assert saved["mods"] == "untrained" and "torch" in saved["environment"]
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():  # the machine its seconds were measured on: /proc/cpuinfo's model, with native bf16
        first = cpuinfo.read_text().split("\n\n")[0]
        model = re.search(r"^model name\s*:\s*(.*?)\s*$", first, re.M)
        flags = re.search(r"^flags\s*:(.*)$", first, re.M)
        assert not model or saved["environment"]["cpu"].startswith(model.group(1))
        assert ("amx_bf16" in saved["environment"]["cpu"]) == bool(flags and "amx_bf16" in flags.group(1).split())


def test_lang_pos_collapses_alignment_of_untrained_model(untrained_small):
    r = evaluate_run(untrained_small["untrained,lang-pos"], (0,), log=lambda s: None, only=("alignment", "word_order"))
    assert r["layers"]["0"]["align_f1"] < 0.2  # paper: .02
    assert 0.35 < r["layers"]["0"]["order_distance"] < 0.65  # nothing to align by: a random permutation's 0.5


def test_inv_order_evaluates_against_the_flipped_gold(untrained_small):
    # Untrained: the model aligns equal positions, but under inv-order the gold links i to L-1-i.
    r = evaluate_run(untrained_small["untrained,inv-order"], (0,), log=lambda s: None, only=("alignment", "word_order"))
    assert r["layers"]["0"]["align_f1"] < 0.2  # paper ID 3: .02
    assert r["layers"]["0"]["order_distance"] < 0.1  # the model's order (by position), not the gold's


def test_cli_eval_latest_run_and_errors(tmp_path):
    args = ["--preset", "tiny", "--train-file", TINY_SETTINGS["data.train"], "--dev-file", TINY_SETTINGS["data.dev"],
            "--set", "data.vocab_size=256", "--epochs", "1"]
    assert cli("pretrain", *args, cwd=tmp_path).returncode == 0
    run = next((tmp_path / "runs").iterdir())
    crashed = tmp_path / "runs" / "zz-crashed-before-its-first-checkpoint"  # started later, never checkpointed
    crashed.mkdir()
    (crashed / "config.json").write_text((run / "config.json").read_text())
    proc = cli("eval", "--layer", "0,2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "eval: alignment done" in proc.stderr and "eval: perplexity done" in proc.stderr  # progress
    assert f"most recent run: runs/{run.name}" in proc.stdout
    assert "align F1" in proc.stdout and (run / "results.json").is_file()
    # --layer says what it computed, that µ needs layers 0 and 1 at depth 2, and where the numbers went
    assert ("layers 0, 2 computed; no µ: it averages layers 0 and 1, so give both (--layer 0,1, or no --layer); "
            "they are the run's headline results (the top of results.json) until a complete") in proc.stdout
    first = json.loads((run / "results.json").read_text())
    assert cli("eval", str(run), "--layer", "0,1", "--threads", "1", cwd=tmp_path).returncode == 0  # complete
    assert json.loads((run / "results.json").read_text())["mu"] is not None
    proc = cli("eval", str(run), "--layer", "0,2", "--threads", "1", cwd=tmp_path)
    assert proc.returncode == 0 and "headline results (the top of results.json, which report and sweep read) are " \
        "unchanged" in proc.stdout, proc.stdout
    again = json.loads((run / "results.json").read_text())
    assert again["evaluations"][-1]["layers"]["2"] == first["layers"]["2"]
    assert again["layers"]["0"] == first["layers"]["0"] and "2" not in again["layers"]  # the top: layers 0, 1

    def one_line_error(p, fragment):
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        assert p.returncode != 0 and len(lines) == 1 and fragment in lines[0], p.stderr

    one_line_error(cli("eval", str(run), "--layer", "0,8", cwd=tmp_path), "layer 8 does not exist")
    one_line_error(cli("eval", str(run), "--dev-sentences", "1", cwd=tmp_path), "at least 2")
    one_line_error(cli("eval", str(run), "--device", "bogus", cwd=tmp_path), "unknown device 'bogus'")
    (run / "checkpoint.pt").unlink()
    one_line_error(cli("eval", str(run), cwd=tmp_path), "no checkpoint")
    one_line_error(cli("eval", str(tmp_path / "nothing"), cwd=tmp_path), "not a run folder")
    empty = tmp_path / "empty"
    empty.mkdir()
    one_line_error(cli("eval", cwd=empty), "no trained runs")


def test_eval_every_logs_multilinguality_curves(tmp_path):
    run = make_run(tmp_path, "curves", None, **{"train.eval_every": 20})
    rows = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in rows if "eval" in r]
    assert [r["step"] for r in evals] == [20, 40, 50]  # and at the end, off the cadence
    # µ's layers for 2 layers: 0 and round(2/3 x 2) = 1
    assert set(evals[0]["eval"]["layers"]) == {"0", "1"} and evals[0]["eval"]["perplexity"]["dev"] > 1
    assert evals[0]["eval"]["mu_layers"] == [0, 1] and evals[0]["eval"]["mu"] is not None


# ---------------------------------------------------------------------------------------------
# The vectorised pieces against straightforward references.


@pytest.fixture(scope="module")
def tiny_model():
    """An untrained tiny Bert with its config, prepared data and permuted dev sides, truncated to 60 pieces."""
    cfg, mods = resolve("tiny", TINY_SETTINGS, "permute")
    data = RunData(cfg, mods)
    torch.manual_seed(0)
    model = Bert(cfg.model).eval()
    english, second = data.views("dev")
    index = np.arange(60)
    return data, data.prepared, model, truncate(english.subset(index), 60), truncate(second.subset(index), 60)


def test_gold_links_equal_per_sentence_alignment(tiny_model):
    *_, english, second = tiny_model
    assert (second.gold == -1).any() and not (second.gold == np.arange(len(second.gold))).all()  # truncated, permuted
    empty = second.subset(np.array([0, 1]))
    empty = Side(1, empty.ids, np.array([0, 0, len(empty.ids)]), empty.word_starts, empty.english_index, empty.gold)
    for side in (second, empty):
        expected = np.concatenate([np.column_stack([np.full(len(a), i), a])
                                   for i in range(side.num_sentences) for a in [side.alignment(i)]])
        assert np.array_equal(gold_links(side), expected)


def test_sentence_vectors_mean_pieces_and_zero_for_empty():
    vectors = torch.arange(12, dtype=torch.float).view(6, 2)
    side = Side(0, np.zeros(6, np.int32), np.array([0, 2, 2, 6]), np.ones(6, bool), np.arange(3), np.zeros(6, np.int64))
    out = sentence_vectors(vectors, side)
    assert torch.equal(out[0], (vectors[0] + vectors[1]) / 2)
    assert torch.equal(out[1], torch.zeros(2))
    assert torch.equal(out[2], vectors[2:6].mean(0))


def test_sentence_vectors_of_a_one_piece_and_a_trailing_empty_sentence():
    """A one-piece sentence's vector is that piece; an empty last sentence still gets its (zero) row."""
    vectors = torch.arange(8, dtype=torch.float).view(4, 2)
    side = Side(0, np.zeros(4, np.int32), np.array([0, 1, 4, 4]), np.ones(4, bool), np.arange(3), np.zeros(4, np.int64))
    out = sentence_vectors(vectors, side)
    assert out.shape == (3, 2)
    assert torch.equal(out[0], vectors[0]) and torch.equal(out[1], vectors[1:4].mean(0))
    assert torch.equal(out[2], torch.zeros(2))


def test_context_cuts_dev_sentences_to_the_window_and_encodes_every_piece():
    """`Context.dev` keeps at most max_len - 2 pieces of each sentence (the rest of a sentence as it was), counts
    the sentences it cut, and `dev_vectors` gives every kept piece a vector."""
    from minimult.evaluate.representations import Context

    cfg, mods = resolve("tiny", {**TINY_SETTINGS, "data.max_len": 40}, None)
    data = RunData(cfg, mods)
    torch.manual_seed(0)
    model = Bert(cfg.model).eval()
    ctx = Context(model, data.views, data.dictionary, data.layouts, 40, (0,), torch.device("cpu"), dev_sentences=30)
    raw = [s.subset(np.arange(30)) for s in data.views("dev")]
    cut = sum(int((s.lengths > 38).sum()) for s in raw)
    dev = ctx.dev  # sets dev_sentences_cut
    assert 0 < cut < 60 and ctx.dev_sentences_cut == cut
    for side, full, vectors in zip(dev, raw, ctx.dev_vectors):
        assert np.array_equal(side.lengths, np.minimum(full.lengths, 38))
        assert vectors[0].shape[0] == len(side.ids) and (vectors[0].abs().sum(1) > 0).all()


def test_row_slices_cover_the_batch_within_budget():
    assert row_slices(10, 7, 30) == [slice(0, 4), slice(4, 8), slice(8, 10)]  # 4 rows x 7 tokens <= 30
    assert row_slices(3, 50, 30) == [slice(0, 1), slice(1, 2), slice(2, 3)]   # at least one row
    assert row_slices(10, 7, 10**6) == [slice(0, 10)]


def test_piece_vectors_equal_one_sentence_at_a_time(tiny_model):
    data, _, model, english, second = tiny_model
    device = torch.device("cpu")
    for side in (english, second):
        seqs = SequenceSet.from_sides([side], data.layouts, device)
        single = []
        for i in range(side.num_sentences):
            b = seqs.batch(np.array([i]))
            with torch.no_grad():
                single.append(model.hidden_states(b.input_ids, b.position_ids, b.token_type_ids, b.attention_mask))
        for batch_size, tokens in ((16, 100), (512, 10**6)):  # padded batches in slices of 1-3 rows; all at once
            out = piece_vectors(model, side, data.layouts, (0, 2), device, batch_size, tokens)
            for l in (0, 2):
                expected = torch.cat([hs[l][0, 1:-1] for hs in single])  # without [CLS] and [SEP]
                torch.testing.assert_close(out[l], expected, rtol=1e-6, atol=1e-6)


def reference_perplexity(model, sides, data, batch_size, attend_padding=False):
    """mlm_perplexity as first written: every masking batch through the model whole (attend_padding: the
    sequences in their order, no attention mask, as the published evaluation)."""
    seqs = SequenceSet.from_sides(list(sides), data.layouts, "cpu")
    order = np.arange(len(seqs)) if attend_padding else np.argsort(seqs.lengths_np, kind="stable")
    gen = torch.Generator().manual_seed(PPL_SEED)
    random_ids = random_replacement_ids(data.cfg.data.vocab_size, data.cfg.data.n_langs)
    nll, count = 0.0, 0
    for i in range(0, len(order), batch_size):
        b = seqs.batch(order[i : i + batch_size])
        m = mask_batch(b.input_ids, b.maskable, seqs.mask_id[b.lang], random_ids, MaskConfig(probs=(1.0, 0, 0, 0)), gen)
        with torch.no_grad():
            hidden = model(m.input_ids, b.position_ids, b.token_type_ids, None if attend_padding else b.attention_mask)
            logits = model.mlm_logits(hidden.flatten(0, 1)[m.selected])
        nll += float(torch.nn.functional.cross_entropy(logits, m.targets, reduction="sum"))
        count += len(m.targets)
    return math.exp(nll / count)


def test_perplexity_in_row_slices_equals_whole_batches(tiny_model):
    data, _, model, english, second = tiny_model
    expected = reference_perplexity(model, (english, second), data, 16)
    random_ids = random_replacement_ids(data.cfg.data.vocab_size, data.cfg.data.n_langs)
    for tokens in (100, 10**6):  # slices of 1-3 rows; whole batches
        r = mlm_perplexity(model, (english, second), data.layouts, random_ids, torch.device("cpu"), batch_size=16,
                           tokens=tokens)
        assert r["perplexity"] == pytest.approx(expected, rel=1e-6) and r["sequences"] == 120
    other = mlm_perplexity(model, (english, second), data.layouts, random_ids, torch.device("cpu"), batch_size=8)
    assert other["perplexity"] != pytest.approx(expected, rel=1e-6)  # the masks follow the batches


def test_perplexity_under_attend_padding_runs_the_sequences_in_order_without_a_mask(tiny_model):
    """Under attend-padding the batches follow the sequences' order (English, then the next language) with no
    attention mask; a `limit` subset is scored as the same sentences given as the sides themselves."""
    data, _, model, english, second = tiny_model
    random_ids = random_replacement_ids(data.cfg.data.vocab_size, data.cfg.data.n_langs)
    cpu = torch.device("cpu")
    expected = reference_perplexity(model, (english, second), data, 16, attend_padding=True)
    got = mlm_perplexity(model, (english, second), data.layouts, random_ids, cpu, batch_size=16, tokens=100,
                         attention="attend-padding")
    assert got["perplexity"] == pytest.approx(expected, rel=1e-6)
    picked = np.sort(np.random.default_rng(PPL_SEED).choice(120, 50, replace=False))  # the limit's subset
    subset = (english.subset(picked[picked < 60]), second.subset(picked[picked >= 60] - 60))
    limited = mlm_perplexity(model, (english, second), data.layouts, random_ids, cpu, limit=50, batch_size=16,
                             attention="attend-padding")
    whole = mlm_perplexity(model, subset, data.layouts, random_ids, cpu, batch_size=16, attention="attend-padding")
    assert limited["sequences"] == 50 and limited["perplexity"] == pytest.approx(whole["perplexity"], rel=1e-9)


def test_perplexity_per_language_scores_each_languages_own_tokens(tiny_model):
    """With batches that each hold one language (attend-padding, English's 60 sentences a batch), English's
    perplexity is that of English scored alone; a language without a sequence has none."""
    data, _, model, english, second = tiny_model
    random_ids = random_replacement_ids(data.cfg.data.vocab_size, data.cfg.data.n_langs)
    cpu = torch.device("cpu")
    both = mlm_perplexity(model, (english, second), data.layouts, random_ids, cpu, batch_size=60,
                          attention="attend-padding")
    alone = mlm_perplexity(model, (english,), data.layouts, random_ids, cpu, batch_size=60, attention="attend-padding")
    assert alone["languages"][0] == pytest.approx(alone["perplexity"], rel=1e-5) and alone["languages"][1] is None
    assert both["languages"][0] == pytest.approx(alone["perplexity"], rel=1e-5)  # float32 vs float64 sums
    assert min(both["languages"]) < both["perplexity"] < max(both["languages"])  # the pooled one between them


def test_units_per_word_count_english_inside_the_window():
    """Pieces and word starts of English's sentences inside max_len - 2, [CLS] and [SEP] aside: sentences of
    3 pieces (2 words) and 6 pieces (words at 0, 2, 3, 5) in a window of 5 keep 3 + 3 pieces and 2 + 2 words."""
    from minimult.data.layout import Layout
    from minimult.evaluate.perplexity import units_per_word

    starts = np.array([1, 0, 1, 1, 0, 1, 1, 0, 1], bool)
    en = Side(0, np.arange(5, 14, dtype=np.int32), np.array([0, 3, 9]), starts, np.arange(2), np.arange(9))
    assert units_per_word([en], [Layout(0, 0, max_len=5)]) == pytest.approx(6 / 4)
    assert units_per_word([en], [Layout(0, 0, max_len=128)]) == pytest.approx(9 / 6)


def test_perplexity_per_word_is_the_per_unit_one_to_the_units_per_word(tiny_model):
    """exp(NLL per unit x units / words) = ppl ** (units / words), the units and words of the dev split's English
    sentences inside the window (counted here sentence by sentence); per language under the languages' names."""
    from minimult.evaluate import perplexity
    from minimult.evaluate.representations import Context

    data, _, model, *_ = tiny_model
    random_ids = random_replacement_ids(data.cfg.data.vocab_size, data.cfg.data.n_langs)
    ctx = Context(model, data.views, data.dictionary, data.layouts, data.cfg.data.max_len, (0,), torch.device("cpu"),
                  ppl_sentences=20, ppl_splits=("dev",), random_ids=random_ids, languages=("en", "fake"))
    out = perplexity.run(ctx)["perplexity"]
    en, room = data.views("dev")[0], data.cfg.data.max_len - 2
    units = sum(min(len(en.sentence(i)), room) for i in range(en.num_sentences))
    words = sum(int(en.word_starts[en.offsets[i]:en.offsets[i + 1]][:room].sum()) for i in range(en.num_sentences))
    assert units > words > 0 and out["dev_word"] == pytest.approx(out["dev"] ** (units / words), rel=1e-9)
    direct = mlm_perplexity(model, data.views("dev"), data.layouts, random_ids, torch.device("cpu"), limit=20)
    assert direct["languages"][0] != pytest.approx(direct["languages"][1], rel=1e-3)
    assert out["dev_languages"] == {"en": direct["languages"][0], "fake": direct["languages"][1]}  # by name


def test_perplexity_limit_of_every_sequence_is_no_limit(tiny_model):
    """A `limit` of all the sequences or more scores them as no limit does (not a reshuffled draw)."""
    data, _, model, english, second = tiny_model
    random_ids = random_replacement_ids(data.cfg.data.vocab_size, data.cfg.data.n_langs)
    whole = mlm_perplexity(model, (english, second), data.layouts, random_ids, torch.device("cpu"), batch_size=16)
    for limit in (120, 500):
        got = mlm_perplexity(model, (english, second), data.layouts, random_ids, torch.device("cpu"), limit=limit,
                             batch_size=16)
        assert got == whole


def test_results_keep_one_block_per_evaluation(tmp_path):
    """A partial evaluation (fewer layers, fewer sentences) adds its own block and never mixes into the
    complete one that report and sweep read at the top of results.json."""
    run = make_run(tmp_path, "blocks", None)
    quiet = lambda s: None  # noqa: E731
    full = evaluate_run(run, (0, 1), log=quiet)  # µ's layers at 2 layers: a complete evaluation
    partial = evaluate_run(run, (0,), dev_sentences=20, ppl_sentences=30, log=quiet)
    saved = json.loads((run / "results.json").read_text())
    assert full["evaluation"]["complete"] and not partial["evaluation"]["complete"]
    assert saved["layers"] == full["layers"] and saved["perplexity"] == full["perplexity"]
    assert saved["dev_sentences"] == 200 and saved["evaluation"] == full["evaluation"]
    assert [b["evaluation"]["dev_sentences"] for b in saved["evaluations"]] == [200, 20]
    second = saved["evaluations"][1]
    assert set(second["layers"]) == {"0"} and second["layers"]["0"] == partial["layers"]["0"]
    assert second["layers"]["0"] != full["layers"]["0"]  # 20 sentences: other numbers
    again = evaluate_run(run, (0, 1), log=quiet)  # a new complete evaluation replaces the top
    saved = json.loads((run / "results.json").read_text())
    assert len(saved["evaluations"]) == 3 and saved["evaluation"] == again["evaluation"]


def _fake_run(tmp_path):
    from types import SimpleNamespace

    cfg = SimpleNamespace(mods="original", preset="tiny", train=SimpleNamespace(seed=0), to_dict=lambda: {})
    return SimpleNamespace(path=tmp_path, cfg=cfg, meta={}, trained=None, checkpoint_steps=lambda: 10,
                           data=SimpleNamespace(prepared=SimpleNamespace(vocab_hash="h")))


def test_record_writes_the_run_keys_and_the_block_keys_and_nothing_else(tmp_path):
    """`results.BLOCK_KEYS` mirrors what `record` writes about an evaluation (and `evaluate_model`'s layers and
    pairs); everything else `record` writes is about the run (`RUN_KEYS`), which blocks leave to the top."""
    from minimult.evaluate.results import BLOCK_KEYS, MODEL_KEYS, RUN_KEYS, record, standalone_record

    recorded = record(_fake_run(tmp_path), {"complete": True}, {k: {} for k in MODEL_KEYS}, 1.0)
    assert set(recorded) == set(RUN_KEYS) | set(BLOCK_KEYS)
    assert not set(RUN_KEYS) & set(BLOCK_KEYS)
    run = _fake_run(tmp_path)
    run.trained = {"steps": 10, "total_steps": 10}
    alone = standalone_record(run, "transfer", {"transfer": {}}, 0.0)  # transfer's command: no per-layer numbers
    assert set(alone) - {"transfer"} <= set(RUN_KEYS) | set(BLOCK_KEYS) and not alone["evaluation"]["complete"]


def test_results_json_records_its_schema_and_older_files_still_read(tmp_path):
    """New results.json files say their layout (`schema`); one written before it was recorded reads as schema 1,
    one of a later schema is one error line."""
    from minimult.errors import MinimultError
    from minimult.evaluate.results import SCHEMA, read_results, results_problem, schema, write_results

    results = {"evaluation": {"complete": True}, "steps": 10, "total_steps": 10, "layers": {"0": {}}}
    write_results(tmp_path, results)
    saved = read_results(tmp_path / "results.json")
    assert saved["schema"] == SCHEMA and list(saved)[0] == "schema" and len(saved["evaluations"]) == 1
    write_results(tmp_path, results)  # a second evaluation: one schema key at the top, none in the blocks
    saved = read_results(tmp_path / "results.json")
    assert len(saved["evaluations"]) == 2 and not any("schema" in b for b in saved["evaluations"])
    old = {k: v for k, v in saved.items() if k != "schema"}
    assert schema(old) == 1 and results_problem(old) is None
    (tmp_path / "results.json").write_text(json.dumps({**old, "schema": SCHEMA + 1}))
    with pytest.raises(MinimultError, match="schema"):
        read_results(tmp_path / "results.json")
