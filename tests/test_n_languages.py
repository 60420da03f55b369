"""Runs with more than two languages (English, Spanish and Fake-English from `--fake en-es` with
data.n_langs=3; N Fake-Englishes by shift), one shared vocabulary (data.shared_vocab), inv-order on one
named language, and per-pair evaluation.

The SWORD modules are replaced by the raw verses of `fixtures/sword-verses.jsonl` (as in
test_real_languages.py), so nothing here needs the Debian packages.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from minimult.config import resolve
from minimult.data.batching import SequenceSet
from minimult.errors import MinimultError
from test_real_languages import fixture_modules  # noqa: F401  (a fixture: the SWORD modules from the fixture)

V = 256
THREE = {"data.fake": "en-es", "data.vocab_size": V, "data.n_langs": 3}


def run_data(settings, mods=None):
    from minimult.data.run_data import RunData

    cfg, active = resolve("tiny", settings, mods)
    return cfg, RunData(cfg, active)


def test_three_languages_under_lang_pos_get_their_offsets_positions_and_segments(fixture_modules):
    cfg, data = run_data(THREE, "lang-pos")
    assert [l.id_offset for l in data.layouts] == [0, V, 2 * V]
    assert [l.position_offset for l in data.layouts] == [0, 128, 256]
    assert [l.segment for l in data.layouts] == [0, 1, 2]
    # the model's tables are sized from the layouts
    assert (cfg.model.vocab_size, cfg.model.max_positions, cfg.model.type_vocab_size) == (3 * V, 3 * 128, 3)
    sides = data.views("train")
    assert [s.lang for s in sides] == [0, 1, 2] and len({s.num_sentences for s in sides}) == 1
    np.testing.assert_array_equal(sides[2].ids, sides[0].ids + 2 * V)  # Fake-English: English in block 2
    seqs = SequenceSet.from_sides(sides, data.layouts, "cpu")
    n = sides[0].num_sentences
    b = seqs.batch(np.array([0, n, 2 * n, 1, n + 1, 2 * n + 1]))  # sentences 0 and 1 in every language
    for row, lang in enumerate(b.lang.tolist()):
        real = b.maskable[row]
        ids = b.input_ids[row][real]
        assert ((ids >= lang * V) & (ids < (lang + 1) * V)).all()
        assert b.position_ids[row, 0] == lang * 128
        assert (b.position_ids[row, 1:3] == lang * 128 + torch.arange(1, 3)).all()
        assert (b.token_type_ids[row] == lang).all()
        assert b.input_ids[row, 0] == 2  # [CLS] stays shared without shift-special
    # shift-special moves each language's specials into its own block
    _, shifted = run_data(THREE, "lang-pos,shift-special")
    assert [l.cls for l in shifted.layouts] == [2, V + 2, 2 * V + 2]


def test_shared_vocabulary_gives_every_language_one_id_block(fixture_modules):
    cfg, data = run_data({**THREE, "data.shared_vocab": True})
    assert [l.id_offset for l in data.layouts] == [0, 0, 0]
    assert cfg.model.vocab_size == 3 * V  # the same id budget as three own vocabularies
    prepared = data.prepared
    assert len(prepared.vocab) <= 3 * V and prepared.vocab.stride == 3 * V
    en, es, fake = data.views("train")
    for side in (en, es, fake):
        assert side.ids.min() >= 0 and side.ids.max() < len(prepared.vocab)
    overlap = set(en.ids.tolist()) & set(es.ids.tolist())
    assert overlap  # names and punctuation are spelled alike: one id in both languages
    assert prepared.stats["shared_vocab"]["entries_used_by_both"] == len(
        set(prepared.extra["train_es"].ids.tolist()) & set(prepared.train.ids.tolist()))
    assert not set(fake.ids.tolist()) & set(en.ids.tolist()) - {1}  # another script: no piece in common
    dictionary = data.dictionary()
    assert len(dictionary) == 3 and len({d.num_sentences for d in dictionary}) == 1
    random_ids = data.random_ids()
    assert random_ids.min() == 5 and random_ids.max() == len(prepared.vocab) - 1
    # the two-language shared entry is another cache entry; own vocabularies keep the old one
    _, two = run_data({"data.fake": "en-es", "data.vocab_size": V, "data.shared_vocab": True})
    _, own = run_data({"data.fake": "en-es", "data.vocab_size": V})
    _, own3 = run_data(THREE)
    assert len({two.prepared.path, own.prepared.path, prepared.path}) == 3
    assert own3.prepared.path == own.prepared.path
    with pytest.raises(MinimultError, match="shift-special needs languages with their own ids.*--shared-vocab"):
        resolve("tiny", {**THREE, "data.shared_vocab": True}, "shift-special")


def test_inv_order_on_a_named_language_reorders_only_that_one(fixture_modules):
    _, plain = run_data(THREE)
    cfg, named = run_data(THREE, "inv-order=es")
    _, every = run_data(THREE, "inv-order")
    assert cfg.mods == "inv-order=es"
    for split in ("train", "dev"):
        base, es_only, both = plain.views(split), named.views(split), every.views(split)
        np.testing.assert_array_equal(es_only[0].ids, base[0].ids)
        np.testing.assert_array_equal(es_only[2].ids, base[2].ids)  # Fake-English keeps its order
        np.testing.assert_array_equal(es_only[2].gold, base[2].gold)
        for k, side in ((1, es_only[1]), (1, both[1]), (2, both[2])):
            for i in range(3):
                np.testing.assert_array_equal(side.sentence(i), base[k].sentence(i)[::-1])
                g = side.gold[side.offsets[i]:side.offsets[i + 1]]
                np.testing.assert_array_equal(g, base[k].gold[base[k].offsets[i]:base[k].offsets[i + 1]][::-1])
    for mods, fragment in (("inv-order=de", "no such language"),
                           ("inv-order=en", r"the first language \(en\) keeps its order")):
        with pytest.raises(MinimultError, match=fragment) as e:
            resolve("tiny", THREE, mods)
        assert "\n" not in str(e.value) and "es, fake" in str(e.value)


def test_language_counts_and_vocabulary_choices_a_source_cannot_give_are_one_line():
    for settings, fragment in (({**THREE, "data.n_langs": 4}, "at most 3 languages"),
                               ({"data.fake": "unicode", "data.n_langs": 3}, "at most 2 languages"),
                               ({"data.shared_vocab": True}, "does not apply to --source shift"),
                               ({"data.n_langs": 1}, "at least one more language")):
        with pytest.raises(MinimultError, match=fragment) as e:
            resolve("tiny", settings)
        assert "\n" not in str(e.value)


def test_shift_gives_any_number_of_fake_englishes(tiny_data_cfg):
    import dataclasses

    from minimult.data import sources
    from minimult.data.prepare import prepare

    data_cfg = dataclasses.replace(tiny_data_cfg, n_langs=4)
    source = sources.get("shift")
    prepared = prepare(data_cfg)
    sides = source.views(prepared, "dev", data_cfg)
    assert source.languages(4) == ("en", "fake", "fake2", "fake3")
    for k, side in enumerate(sides):
        np.testing.assert_array_equal(side.ids, sides[0].ids + k * 256)
    assert [len(d.ids) for d in source.dictionary(prepared, data_cfg)] == [len(prepared.vocab) - 5] * 4


def test_knn_table_of_three_languages_draws_each_language_alike():
    from minimult.knn.neighbours import _fill_columns

    # row 0: an English id with neighbours in language 1 (cols 0-1) and language 2 (cols 2-3);
    # row 1: a language-1 id with English neighbours in its pair's columns only; row 2: no neighbour
    table = torch.tensor([[5, 6, 9, 10], [3, 4, -1, -1], [-1, -1, -1, -1]])
    filled = _fill_columns(table)
    assert filled[0].tolist() == [5, 6, 9, 10]
    assert filled[1].tolist() == [3, 4, 3, 4] and filled[2].tolist() == [-1] * 4


def test_fill_columns_treats_id_0_as_a_neighbour_like_any_other():
    """Only -1 is missing: a row's id 0 is one of its neighbours, repeated in turn as any other."""
    from minimult.knn.neighbours import _fill_columns

    filled = _fill_columns(torch.tensor([[0, -1, 7, -1], [-1, 0, -1, -1]]))
    assert filled.tolist() == [[0, 7, 0, 7], [0, 0, 0, 0]]


def test_tiny_three_language_run_evaluates_every_pair(fixture_modules, tmp_path):
    from minimult.evaluate import evaluate_run
    from minimult.runs import Run, write_json
    from minimult.train import pretrain

    cfg, data = run_data(THREE, "lang-pos")
    run = tmp_path / "three"
    run.mkdir()
    write_json(run / "config.json", cfg.to_dict())
    pretrain(cfg, data.mods, run, log=lambda s: None)
    results = evaluate_run(Run.open(run), log=lambda s: None)
    pairs = results["pairs"]
    assert list(pairs) == ["en-es", "en-fake"]
    for name, pair in pairs.items():
        assert set(pair["layers"]) == {"0", "1"}
        for layer in pair["layers"].values():
            assert 0 <= layer["retrieval"] <= 1 and 0 <= layer["translation"] <= 1
            assert layer["align_f1"] is None or 0 <= layer["align_f1"] <= 1
        assert pair["mu"] is not None
    assert pairs["en-es"]["alignment_gold"] == "silver" and "alignment_gold" not in pairs["en-fake"]
    assert pairs["en-es"]["layers"] != pairs["en-fake"]["layers"]  # each pair scored on its own language's data
    # the top level is English and language 1, as in a two-language run; the probe sees all three
    assert results["layers"] == pairs["en-es"]["layers"] and results["mu"] == pairs["en-es"]["mu"]
    assert results["perplexity"]["dev"] > 0 and len(results["probe"]["sentence"]) == cfg.model.layers + 1
    stored = json.loads((run / "results.json").read_text())
    assert stored["pairs"]["en-fake"]["mu"] == pairs["en-fake"]["mu"]
    assert stored["evaluations"][-1]["pairs"]["en-es"]["mu"] == pairs["en-es"]["mu"]
