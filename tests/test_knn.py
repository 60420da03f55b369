"""knn-replace end to end on the tiny corpus: the table, the masking mix it produces, the cache, errors."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import torch

from conftest import TINY_SETTINGS, cli, random_replacement_ids
from minimult.data.batching import SequenceSet, plan_epoch
from minimult.config import resolve
from minimult.knn.neighbours import neighbour_table, p1_text, table_info
from minimult.data.run_data import RunData
from minimult.data.masking import mask_batch

TINY = {**TINY_SETTINGS, "knn.dim": 32}


@pytest.fixture(scope="module")
def knn_setup(tmp_path_factory):
    """The tiny corpus's neighbour table, built in a cache of this module's own (another test module may
    have built the same table in the session's cache), and the log of building it."""
    session_cache = os.environ["MINIMULT_CACHE"]
    os.environ["MINIMULT_CACHE"] = str(tmp_path_factory.mktemp("knn-cache"))
    try:
        cfg, mods = resolve("tiny", TINY, "knn-replace")
        data = RunData(cfg, mods)
        prepared, sides = data.prepared, data.views("train")
        logs = []
        table = neighbour_table(prepared, data.source, cfg, 1, sides, log=logs.append)
        yield cfg, data, prepared, sides, table, logs
    finally:
        os.environ["MINIMULT_CACHE"] = session_cache


def test_table_links_each_language_to_the_other(knn_setup):
    cfg, _, prepared, _, table, _ = knn_setup
    V = prepared.vocab.stride
    assert table.shape == (2 * V, 1)
    have = table[:, 0] >= 0
    en, l1 = torch.arange(2 * V) < V, torch.arange(2 * V) >= V
    assert (table[en & have, 0] >= V).all() and (table[l1 & have, 0] < V).all()  # always the other language
    assert not have[:5].any() and not have[V:V + 5].any()  # specials have no vector
    # Fake-English is an exact copy: the mapping must find the identity for nearly every word
    info = table_info(prepared, cfg, 1, knn_setup[3])
    p1 = info["identity_p1"]
    assert p1["nn"] > 0.9 and p1["pairs"] > 100
    assert p1_text(info).startswith("translation P@1 against the identity dictionary")  # en-es: the silver one
    assert (table[en & have, 0] == torch.arange(2 * V)[en & have] + V).float().mean() > 0.9


def test_table_rows_of_the_second_language_hold_their_english_neighbours(knn_setup):
    """Both directions are searched: a Fake-English id's row holds an English id, nearly always its own copy."""
    _, _, prepared, _, table, _ = knn_setup
    V = prepared.vocab.stride
    ids = torch.arange(2 * V)
    l1 = (ids >= V) & (table[:, 0] >= 0)
    assert l1.sum() > 100 and (table[l1, 0] < V).all()
    assert (table[l1, 0] == ids[l1] - V).float().mean() > 0.9


def test_the_cache_key_holds_the_number_of_neighbours(knn_setup):
    """A table of k = 2 is never the cached table of k = 1 (nor its info)."""
    from minimult.knn.neighbours import _key

    cfg, _, prepared, sides, _, _ = knn_setup
    assert _key(prepared, cfg, 1, sides) != _key(prepared, cfg, 2, sides)
    assert table_info(prepared, cfg, 2, sides) == {}  # not built


def test_seed_translations_from_a_dictionary_and_from_identical_spelling():
    """dictionary: English id -> every id it translates to; identical: pieces spelled alike once all of the
    language prefixes are gone (`::::` for a third language's piece)."""
    from types import SimpleNamespace

    import numpy as np

    from minimult.knn.neighbours import seed_translations

    dictionary = [SimpleNamespace(ids=np.array([5, 6, 5])), SimpleNamespace(ids=np.array([27, 28, 29]))]
    assert seed_translations("dictionary", None, None, None, (), dictionary) == {5: {27, 29}, 6: {28}}
    names = {1: "the", 2: "##s", 3: "cat", 41: "::::the", 42: "::::##s", 43: "::::dog", 44: "::::the"}
    source = SimpleNamespace(display=lambda prepared, cfg, ids: [names[int(i)] for i in ids])
    got = seed_translations("identical", None, source, None, ((1, 2, 3), (41, 42, 43, 44)), dictionary)
    assert got == {1: {41, 44}, 2: {42}}


def test_token_name_of_an_id_past_the_vocabulary_is_its_number():
    """Ids j < len(vocab) of a block are display pieces; j >= len(vocab) (a larger vocabulary's) are `[idj]`."""
    from minimult.knn.neighbours import token_name

    class Vocab:
        stride = 10

        def __len__(self):
            return 7

        def display(self, ids):
            return [f"{'::' * (int(i) // 10)}p{int(i) % 10}" for i in ids]

    assert [token_name(i, Vocab()) for i in (6, 7, 16, 17, 19)] == ["p6", "[id7]", "::p6", "::[id7]", "::[id9]"]


def test_second_build_reuses_the_cache(knn_setup):
    cfg, data, prepared, sides, table, logs = knn_setup
    again = []
    assert torch.equal(neighbour_table(prepared, data.source, cfg, 1, sides, log=again.append), table)
    assert "reused" in again[-1] and "built" in logs[-1]


def test_knn_mix_replaces_30_percent_of_selected_tokens_by_their_neighbour(knn_setup):
    cfg, data, prepared, sides, table, _ = knn_setup
    assert cfg.mask.probs == (0.5, 0.1, 0.1, 0.3)
    seqs = SequenceSet.from_sides(sides, data.layouts, "cpu")
    random_ids = random_replacement_ids(cfg.data.vocab_size, 2)
    gen = torch.Generator().manual_seed(0)
    hits = selected = 0
    for epoch in range(5):
        for index in plan_epoch(seqs.lengths_np, 64, 0, epoch):
            b = seqs.batch(index)
            m = mask_batch(b.input_ids, b.maskable, seqs.mask_id[b.lang], random_ids, cfg.mask, gen, table)
            neighbour = table[m.targets, 0]
            ok = neighbour >= 0
            hits += int((m.input_ids.flatten()[m.selected][ok] == neighbour[ok]).sum())
            selected += int(ok.sum())
    assert selected > 5000
    assert abs(hits / selected - 0.3) < 0.02, hits / selected


def test_the_neighbours_command_shows_p1_once_and_each_word_s_neighbours_in_the_other_language(knn_setup):
    """`minimult neighbours` on the tiny corpus (the table cached by the fixture, in the same cache): the P@1 line
    once (it is the build's log line), the share of ids with neighbours, and a word's neighbours as Fake-English
    pieces (`::`), the word itself first for this exact copy."""
    proc = cli("neighbours", "--preset", "tiny", "--train-file", TINY["data.train"], "--dev-file", TINY["data.dev"],
               "--set", "data.vocab_size=256", "--set", "knn.dim=32", "--words", "God,zzzq")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout + proc.stderr
    assert out.count("translation P@1 against the identity dictionary") == 1, out
    assert re.search(r"[\d,]+ of [\d,]+ ids have neighbours", out) and "  zzzq: not in the vocabulary" in out
    assert "  God -> ::God" in out, out


def test_embeddings_smaller_than_the_dimension_fail_cleanly(tmp_path):
    """The error names the setting that fits them; the run folder it made holds nothing trained and is removed,
    so the same --out takes the second try."""
    args = ["--preset", "tiny", "--train-file", TINY["data.train"], "--dev-file", TINY["data.dev"],
            "--set", "data.vocab_size=256", "--mods", "knn-replace", "--out", str(tmp_path / "run")]
    proc = cli("pretrain", *args, "--set", "knn.dim=400")
    lines = [l for l in proc.stderr.splitlines() if l.strip() and not l.startswith("knn-replace")]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert lines[-1].startswith("error:") and "too small" in lines[-1], proc.stderr
    words = int(re.search(r"has (\d+) words", lines[-1]).group(1))
    assert f"--set knn.dim=N with N <= {words} fits them" in lines[-1]
    assert f"({tmp_path / 'run'} removed: nothing was trained in it)" in lines[-1]
    assert not (tmp_path / "run").exists()
    proc = cli("pretrain", *args, "--set", "knn.dim=32", "--stop-after", "2")
    assert proc.returncode == 0 and (tmp_path / "run" / "checkpoint.pt").is_file(), proc.stderr


def test_a_run_records_its_table_and_says_when_it_resumes_with_another(knn_setup, tmp_path):
    """run.json's knn_tables holds the content hash of the table a run trained with; resumed with a
    table that differs under the same cache key (another machine's build), one line says so and both are
    recorded."""
    from minimult.knn.neighbours import table_sha256
    from minimult.runs import Run
    from minimult.train import train

    cfg, mods = resolve("tiny", {**TINY, "model.layers": 1}, "knn-replace=1")
    run = Run.create_at(tmp_path / "run", cfg, log=lambda s: None)
    train([run], log=lambda s: None, stop_after=3)
    table = knn_setup[4]  # k=1 on the same tiny text: the table this run trained with
    assert run.meta["knn_tables"] == [table_sha256(table)]
    train([Run.open(run.path)], log=lambda s: None, stop_after=5)  # resumed with the same table: said once
    assert Run.open(run.path).meta["knn_tables"] == [table_sha256(table)]
    (cached,) = (p for p in (Path(os.environ["MINIMULT_CACHE"])).glob("neighbours-*")
                 if torch.equal(torch.load(p / "neighbours.pt"), table))
    other = table.roll(1, dims=0)  # as if built differently
    torch.save(other, cached / "neighbours.pt")
    try:
        logs = []
        train([Run.open(run.path)], log=logs.append)
        assert any(l.startswith("note: run resumes with neighbour table " + table_sha256(other)) for l in logs), logs
        assert Run.open(run.path).meta["knn_tables"] == [table_sha256(table), table_sha256(other)]
    finally:
        torch.save(table, cached / "neighbours.pt")
