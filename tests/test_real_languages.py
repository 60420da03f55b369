"""The real second language (en-es: KJV + Reina-Valera 1909 from SWORD modules) and link-file evaluation.

Unit tests read `fixtures/sword-verses.jsonl` (raw markup of a few verses of both modules, public
domain) in place of the Debian packages; one test reads the installed modules and skips without them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from minimult.config import resolve
from minimult.data import sword
from minimult.data.links import read_links, word_first_pieces
from minimult.errors import MinimultError

FIXTURE = Path(__file__).parent / "fixtures" / "sword-verses.jsonl"
ROWS = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines()]


def fixture_verses(language, testament, limit=None):
    """`sword.module_verses` over the fixture: every fixture verse of that testament, in order."""
    out = {r["verse"]: r["markup"] for r in ROWS if r["lang"] == language and r["testament"] == testament}
    return dict(list(sorted(out.items()))[:limit])


@pytest.fixture
def fixture_modules(monkeypatch):
    monkeypatch.setattr(sword, "module_verses", fixture_verses)
    monkeypatch.setattr(sword, "module_fingerprint", lambda language: f"fixture:{FIXTURE.stat().st_size}")


def markup(lang, verse):
    return next(r["markup"] for r in ROWS if r["lang"] == lang and r["verse"] == verse)


# ---------------------------------------------------------------------------------------------
# Markup


def test_stripping_keeps_word_boundaries_and_drops_notes():
    # RV1909 puts elements side by side without a space: they are separate words
    words, numbers = sword.verse_words('<w lemma="strong:G5024">enviada</w><w lemma="strong:G1223">por</w>'
                                       '<transChange type="added">medio de</transChange><w lemma="strong:G5402">Febe</w>.')
    assert words == ["enviada", "por", "medio", "de", "Febe", "."]
    assert numbers[1] == {"G1223"} and numbers[2] == frozenset() and numbers[4] == {"G5402"}
    # the KJV closes an element inside a word: the letters stay one word, with the element's number
    words, numbers = sword.verse_words('it <w lemma="strong:G4369">shall more be give</w>n.')
    assert words == ["it", "shall", "more", "be", "given", "."] and numbers[4] == {"G4369"}
    # a footnote goes with its text; a word with two numbers keeps both
    words, numbers = sword.verse_words('<w lemma="strong:H0914">divided</w><note placement="foot"><reference '
                                       'type="annotateRef">1.4 </reference>Heb. between</note> <w lemma="strong:G2424 '
                                       'G5547">Jesucristo</w>')
    assert words == ["divided", "Jesucristo"] and numbers[1] == {"G2424", "G5547"}


def test_real_verses_strip_to_their_words():
    en, _ = sword.verse_words(markup("en", 40001001))
    es, _ = sword.verse_words(markup("es", 40001001))
    assert " ".join(en) == "The book of the generation of Jesus Christ , the son of David , the son of Abraham ."
    assert " ".join(es) == "LIBRO de la generación de Jesucristo , hijo de David , hijo de Abraham ."
    # the KJV's subscription is a <title> after the verse; RV1909 has it inline: both keep it
    assert "Cenchrea" in sword.verse_words(markup("en", 45016027))[0]
    assert "Cencreas" in sword.verse_words(markup("es", 45016027))[0]
    assert not any("<" in w or ">" in w for r in ROWS for w in sword.verse_words(r["markup"])[0])


def test_silver_links_sure_only_for_one_word_each_side():
    en = [frozenset({"G1"}), frozenset(), frozenset({"G2"}), frozenset({"G3"}), frozenset({"G3"})]
    es = [frozenset({"G1"}), frozenset({"G2"}), frozenset({"G2"}), frozenset({"G3"})]
    assert sword.silver_links(en, es) == [(0, 0, "S"), (2, 1, "P"), (2, 2, "P"), (3, 3, "P"), (4, 3, "P")]


# ---------------------------------------------------------------------------------------------
# Alignment of verses


def test_empty_verses_do_not_shift_the_alignment(fixture_modules):
    en, es = sword.language_verses("en", "new"), sword.language_verses("es", "new")
    assert 44019041 in en and 44019041 not in es  # RV1909 merged Acts 19:41 into 19:40
    keep, report = sword.aligned_verses(en, es)
    assert 44019041 not in keep and 44019040 not in keep  # the merged verse's neighbour is left out
    assert 44019039 not in keep and 44019038 in keep  # within two verses of it only
    assert 47013013 not in keep and 47013012 not in keep and 47013011 in keep  # 2 Cor 13:14 is empty in RV1909
    for v in keep:  # every kept pair is the same verse in both (verse ids, never positions)
        assert en[v][0] and es[v][0]
    assert [v for v in keep if v // 1000 == 40001] == [40001000 + i for i in range(1, 26)]
    # a verse after the empty one keeps its own partner: Matthew 1:1 pairs with Matthew 1:1
    assert en[40001001][0][6] == "Jesus" and "Jesucristo" in es[40001001][0]


def test_a_renumbered_chapter_is_left_out(fixture_modules):
    en, es = sword.language_verses("en", "old"), sword.language_verses("es", "old")
    keep, report = sword.aligned_verses(en, es)
    assert report["shifted_chapters"] == ["4:13"]  # RV1909 Numbers 13:1 is the KJV's 12:16
    assert not any(v // 1000 == 4013 for v in keep) and 1001001 in keep


# ---------------------------------------------------------------------------------------------
# The source, its views and link files


@pytest.fixture
def enes(fixture_modules):
    from minimult.data.run_data import RunData

    cfg, active = resolve("tiny", {"data.fake": "en-es", "data.vocab_size": 256})
    data = RunData(cfg, active)
    return cfg, data


def test_views_align_verses_and_links_map_to_the_right_pieces(enes):
    cfg, data = enes
    prepared = data.prepared
    english, spanish = data.views("dev")
    assert english.num_sentences == spanish.num_sentences == len(prepared.dev)
    assert spanish.ids.min() >= cfg.data.vocab_size > english.ids.max()  # own block for Spanish
    es_vocab = data.source.spanish_vocab(prepared, cfg.data)
    rows = [l.split("\t") for l in (prepared.path / "silver-dev.links").read_text().splitlines() if not l.startswith("#")]
    verses = list(prepared.dev.verse_ids)
    en_words = {int(v): e.split(" ") for v, e, _ in (l.split("\t") for l in
                                                     (prepared.path / "verses-dev.tsv").read_text().splitlines())}
    es_words = {int(v): s.split(" ") for v, _, s in (l.split("\t") for l in
                                                     (prepared.path / "verses-dev.tsv").read_text().splitlines())}
    en_first = word_first_pieces(english.word_starts, english.offsets)
    es_first = word_first_pieces(spanish.word_starts, spanish.offsets)

    def pieces_of(side, first, i, w, vocab, shift):  # the word's pieces, glued back into the word
        ends = list(first[i][1:]) + [side.lengths[i]]
        ids = side.sentence(i)[first[i][w]:ends[w]] - shift
        return "".join(p[2:] if p.startswith("##") else p for p in vocab.display(ids))

    checked = 0
    for v, a, b, kind in rows:
        i = verses.index(int(v))
        for got, want in ((pieces_of(english, en_first, i, int(a), prepared.vocab, 0), en_words[int(v)][int(a)]),
                          (pieces_of(spanish, es_first, i, int(b), es_vocab, cfg.data.vocab_size), es_words[int(v)][int(b)])):
            if "[UNK]" not in got:  # a dev character the training verses never had
                assert got == want
                checked += 1
    assert checked > 40
    # Genesis 1:1: `God` <-> `Dios` share H0430 on one word each, a sure link; the gold follows it
    i = verses.index(1001001)
    en_w, es_w = en_words[1001001], es_words[1001001]
    assert ["1001001", str(en_w.index("God")), str(es_w.index("Dios")), "S"] in rows
    gold = spanish.gold[spanish.offsets[i]:spanish.offsets[i + 1]]
    assert gold[es_first[i][es_w.index("Dios")]] == en_first[i][en_w.index("God")]


def test_bad_link_files_are_one_line_naming_the_line(tmp_path):
    words_a, words_b = {40001001: 19}, {40001001: 15}
    good = tmp_path / "good.links"
    good.write_text("# silver test\n40001001\t1\t0\tS\n\n40001001\t18\t14\n40001001\t4\t3\tP\n")
    links = read_links(good, words_a, words_b)
    assert links.silver and list(links.a) == [1, 18, 4] and list(links.sure) == [True, True, False]
    for body, fragment in [("40001001\t19\t0\n", "out of range"), ("40001001\t1\t15\n", "out of range"),
                           ("40001002\t1\t1\n", "verse 40001002 is not among"), ("40001001 1 1\n", "bad link"),
                           ("40001001\t1\t1\tX\n", "bad link"), ("40001001\t-1\t1\n", "bad link"),
                           ("40001001\t1\n", "bad link")]:
        bad = tmp_path / "bad.links"
        bad.write_text("40001001\t0\t0\n" + body)
        with pytest.raises(MinimultError, match=fragment) as e:
            read_links(bad, words_a, words_b)
        assert f"{bad}:2:" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(MinimultError, match="not found"):
        read_links(tmp_path / "missing.links", words_a, words_b)


def test_link_scores_on_a_known_case():
    from minimult.evaluate.metrics import link_scores

    sure, possible = {(1, 0, 0), (1, 1, 1)}, {(1, 2, 2)}
    r = link_scores({(1, 0, 0), (1, 2, 2), (1, 3, 3)}, sure, possible)
    assert r["precision"] == pytest.approx(2 / 3) and r["recall"] == pytest.approx(1 / 2)
    assert r["aer"] == pytest.approx(1 - (1 + 2) / (3 + 2))


def test_the_diagonal_reference_links_word_i_to_its_place_in_the_other_verse():
    from minimult.evaluate.links import diagonal_links

    assert diagonal_links([7], {7: 3}, {7: 3}) == {(7, 0, 0), (7, 1, 1), (7, 2, 2)}
    assert diagonal_links([7, 8], {7: 2, 8: 4}, {7: 4, 8: 2}) == {(7, 0, 1), (7, 1, 3), (8, 0, 0), (8, 1, 0),
                                                                  (8, 2, 1), (8, 3, 1)}
    assert diagonal_links([9], {9: 3}, {}) == set()  # a verse with no words left on one side: no links


def test_spanish_vocabulary_comes_shipped_and_the_hash_covers_both_languages(enes, tmp_path, monkeypatch):
    """HF's trainer numbers `##` pieces in hash order: a shipped Spanish list (here a reordered one) must
    be used as it is, and the recorded vocabulary hash must change when only Spanish's ids do."""
    import hashlib
    import shutil

    from minimult.data import vocab as vocab_mod
    from minimult.data.prepare import prepare
    from minimult.data.vocab import N_SPECIAL

    cfg, data = enes
    monkeypatch.setenv("MINIMULT_CACHE", str(tmp_path / "a"))
    built = prepare(cfg.data)
    es_file = built.path / "es" / "vocab.txt"
    both = hashlib.sha256((built.path / "vocab.txt").read_bytes() + es_file.read_bytes()).hexdigest()
    assert built.vocab_hash == both
    pieces = es_file.read_text(encoding="utf-8").splitlines()
    reordered = vocab_mod.from_pieces(pieces[:N_SPECIAL] + pieces[N_SPECIAL:][::-1], built.vocab.stride)
    shipped = tmp_path / "vocabularies"
    shutil.copytree(vocab_mod.SHIPPED, shipped)
    monkeypatch.setattr(vocab_mod, "SHIPPED", shipped)
    train, _ = data.source.corpora(cfg.data, lambda s: None)
    vocab_mod.ship_vocab(built.vocab, data.source.training_text(train, cfg.data), "en-es", "test: English as built")
    vocab_mod.ship_vocab(reordered, train.second, "en-es", "test: Spanish, reversed")
    monkeypatch.setenv("MINIMULT_CACHE", str(tmp_path / "b"))
    again = prepare(cfg.data)
    assert (again.path / "es" / "vocab.txt").read_text(encoding="utf-8").splitlines() == reordered.pieces
    assert (again.path / "vocab.txt").read_bytes() == (built.path / "vocab.txt").read_bytes()  # English as before
    assert again.vocab_hash != built.vocab_hash


def test_knn_seeds_from_identical_pieces_or_the_silver_dictionary(enes):
    from minimult.knn.neighbours import seed_pairs, seed_translations

    cfg, data = enes
    prepared, V = data.prepared, cfg.data.vocab_size
    en_ids = np.arange(5, len(prepared.vocab))
    es_ids = np.arange(5, len(data.source.spanish_vocab(prepared, cfg.data))) + V
    dictionary = data.source.dictionary(prepared, cfg.data)
    identical = seed_translations("identical", prepared, data.source, cfg.data, (en_ids, es_ids), dictionary)
    es_vocab = data.source.spanish_vocab(prepared, cfg.data)
    assert identical and all(prepared.vocab.pieces[a] == es_vocab.pieces[b - V] for a, bs in identical.items() for b in bs)
    assert prepared.vocab.index["."] in identical  # punctuation is spelled alike
    silver = seed_translations("dictionary", prepared, data.source, cfg.data, (en_ids, es_ids), dictionary)
    assert sum(map(len, silver.values())) == len(dictionary[0].ids)
    rows = seed_pairs(en_ids[::-1], es_ids, identical)  # rows of the two spaces, whatever their order
    assert len(rows) and all(en_ids[::-1][r] in identical and es_ids[c] in identical[en_ids[::-1][r]] for r, c in rows)
    with pytest.raises(MinimultError, match="seed_dictionary must be one of"):
        resolve("tiny", {"knn.seed_dictionary": "silver"})


def test_tiny_training_on_en_es_evaluates(enes, tmp_path):
    from minimult.evaluate import evaluate_run
    from minimult.report import build_report
    from minimult.runs import Run
    from minimult.train import pretrain

    cfg, data = enes
    run = Run.create_at(tmp_path / "enes", cfg, log=lambda s: None).path  # as a sweep makes it
    assert (run / "es" / "vocab.txt").is_file()  # both languages' ids travel with the run
    pretrain(cfg, data.mods, run, log=lambda s: None)
    (run / "hf").mkdir()  # another vocab.txt in the folder (an export there) is not the run's
    (run / "hf" / "vocab.txt").write_text("[PAD]\n")
    results = evaluate_run(Run.open(run), log=lambda s: None, link_file="silver")
    assert results["alignment_gold"] == "silver" and results["dictionary_entries"] > 0
    for layer in results["layers"].values():
        assert layer["retrieval"] is not None
    links = results["links"]
    assert links["kind"] == "silver" and links["verses"] > 0
    assert all(0 <= s["f1"] <= 1 and 0 <= s["aer"] <= 1 for s in [*links["layers"].values(), links["diagonal"]])
    report = build_report([run], tmp_path / "report", log=lambda s: None)  # the report's link-file section
    (row,) = report["links"]
    top = str(report["top_layer"])
    assert row["n"] == 1 and row["kinds"] == ["silver"]
    assert row["f1"][top]["mean"] == links["layers"][top]["f1"] and row["diagonal_f1"]["mean"] == links["diagonal"]["f1"]
    assert row["retrieval_backward"]["mean"] == results["layers"][top]["retrieval_backward"]
    assert "## Word alignment against link files (silver)" in (tmp_path / "report" / "table1.md").read_text()
    # exported, the run reads Spanish with its own tokenizer at its own ids: eval --hf gives the run's numbers
    from minimult.evaluate.hf import evaluate_hf
    from minimult.export import language_record, save_hf

    opened = Run.open(run)
    hf = save_hf(opened.load_model("cpu", log=lambda s: None), cfg.model, tmp_path / "hf-export",
                 vocab_file=run / "vocab.txt", languages=language_record(data.source, cfg.data, opened.data.layouts))
    assert (hf / "es" / "tokenizer.json").read_bytes() == (run / "es" / "tokenizer.json").read_bytes()
    verses = [l.split("\t") for l in (data.prepared.path / "verses-dev.tsv").read_text(encoding="utf-8").splitlines()]
    line_of = {v: str(i + 1) for i, (v, _, _) in enumerate(verses)}
    pair = [tmp_path / "dev.en", tmp_path / "dev.es"]
    for k, path in enumerate(pair):
        path.write_text("\n".join(v[k + 1] for v in verses) + "\n", encoding="utf-8")
    numbered = tmp_path / "numbered.links"
    numbered.write_text("".join("\t".join([line_of[l.split("\t")[0]], *l.split("\t")[1:]]) + "\n"
                                for l in (data.prepared.path / "silver-dev.links").read_text().splitlines()
                                if not l.startswith("#")))
    theirs = evaluate_hf(hf, *pair, langs=("en", "es"), link_file=numbered, only=("retrieval", "links"),
                         device="cpu", log=lambda s: None)
    for layer, scores in links["layers"].items():
        assert theirs["links"]["layers"][layer]["f1"] == pytest.approx(scores["f1"], abs=1e-6)
        assert theirs["layers"][layer]["retrieval"] == pytest.approx(results["layers"][layer]["retrieval"], abs=1e-6)
    assert theirs["links"]["diagonal"] == links["diagonal"] and theirs["links"]["kind"] == "gold"  # no `# silver` line
    with pytest.raises(MinimultError, match="tokenizers of their own.*--langs en,es"):
        evaluate_hf(hf, *pair, device="cpu", log=lambda s: None)
    bad = tmp_path / "bad.links"
    bad.write_text("1001001\t0\t0\n1001001\t999\t0\n")
    with pytest.raises(MinimultError, match=f"{bad}:2:.*out of range"):
        evaluate_run(Run.open(run), log=lambda s: None, link_file=str(bad), only=("links",), write=False)
    with pytest.raises(MinimultError, match="train-file"):
        resolve("tiny", {"data.fake": "en-es", "data.train": "corpora/tiny/train.txt"})


def test_links_on_a_three_language_run_score_english_against_spanish(fixture_modules, tmp_path):
    from minimult.data.run_data import RunData
    from minimult.evaluate import evaluate_run
    from minimult.runs import Run
    from minimult.train import pretrain

    cfg, active = resolve("tiny", {"data.fake": "en-es", "data.vocab_size": 256, "data.n_langs": 3,
                                   "model.layers": 2})
    run = Run.create_at(tmp_path / "three", cfg, log=lambda s: None).path
    pretrain(cfg, active, run, log=lambda s: None)
    two = RunData(resolve("tiny", {"data.fake": "en-es", "data.vocab_size": 256})[0], ()).prepared
    links = evaluate_run(Run.open(run), log=lambda s: None, link_file="silver", only=("links",), write=False)["links"]
    assert links["verses"] == len({l.split("\t")[0] for l in (two.path / "silver-dev.links").read_text().splitlines()
                                   if not l.startswith("#")})
    assert set(links["layers"]) == {"0", "1"} and 0 < links["diagonal"]["f1"] < 1


def test_installed_modules_give_the_new_testament():
    try:
        sword.module_fingerprint("en"), sword.module_fingerprint("es")
        import pysword  # noqa: F401
    except (MinimultError, ImportError) as e:
        pytest.skip(f"the SWORD modules or pysword are not installed here ({e})")
    en, es = sword.language_verses("en", "new"), sword.language_verses("es", "new")
    keep, _ = sword.aligned_verses(en, es)
    assert len(en) == 7957 and 7900 < len(keep) <= 7957
    assert markup("es", 47013013) == sword.module_verses("es", "new")[47013013]  # the fixture is real markup


def test_corpus_stats_prints_each_testament_s_aligned_verses(fixture_modules):
    """`minimult corpus-stats` on the fixture's verses: a row per language and one line per testament, which
    names renumbered chapters only where there are some (was: "... in renumbered chapters -)")."""
    from conftest import cli

    proc = cli("corpus-stats", "--testament", "new")
    assert proc.returncode == 0, proc.stderr
    line = next(l for l in proc.stdout.splitlines() if l.startswith("new testament: "))
    assert re.fullmatch(r"new testament: [\d,]+ aligned verses \([\d,]+ with words in both; left out: \d+ next to a "
                        r"verse empty in one language, \d+ in renumbered chapters( \([^)]*\))?\)", line), line
