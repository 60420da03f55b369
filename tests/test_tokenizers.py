"""Tokenization granularity (data.tokenizer, `--tokenizer`): character and word vocabularies beside
WordPiece. Round trips, [UNK] counting, the too-small character vocabulary as one error line, and tiny
runs at each granularity that every evaluator scores, with gold links inside words."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import TINY_DEV, TINY_SETTINGS, TINY_TRAIN
from minimult.data.corpus import load_corpus
from minimult.data.vocab import N_SPECIAL, SPECIALS, UNK, train_char, train_vocab, train_word
from minimult.errors import MinimultError


@pytest.fixture(scope="module")
def sentences():
    return load_corpus(str(TINY_TRAIN)).sentences


def _words(enc, i):
    a, b = enc.offsets[i], enc.offsets[i + 1]
    return enc.ids[a:b], enc.word_starts[a:b]


def test_char_vocabulary_is_the_character_set_and_round_trips(sentences):
    vocab = train_char(sentences, 256)
    chars = {c for s in sentences for w in s for c in w}
    assert vocab.pieces[:N_SPECIAL] == list(SPECIALS)
    units = vocab.pieces[N_SPECIAL:]
    assert all(len(p) == 1 or (p.startswith("##") and len(p) == 3) for p in units)
    assert {p[-1] for p in units} == chars  # every character, nothing else
    assert len(units) == len(set(units))
    enc = vocab.encode(sentences, np.arange(len(sentences)))
    assert len(enc.ids) == sum(len(w) for s in sentences for w in s)  # one unit per character
    assert not (enc.ids == UNK).any()
    for i, s in enumerate(sentences):
        ids, starts = _words(enc, i)
        assert vocab.decode(ids, starts) == s
        assert int(starts.sum()) == len(s)  # word_starts: the first character of every word


def test_word_vocabulary_keeps_the_most_frequent_words_and_counts_unk(sentences):
    size = 60
    vocab = train_word(sentences, size)
    assert len(vocab) == size and vocab.pieces[:N_SPECIAL] == list(SPECIALS)
    counts = {}
    for s in sentences:
        for w in s:
            counts[w] = counts.get(w, 0) + 1
    kept = set(vocab.pieces[N_SPECIAL:])
    assert min(counts[w] for w in kept) >= max(c for w, c in counts.items() if w not in kept)
    enc = vocab.encode(sentences, np.arange(len(sentences)))
    assert enc.word_starts.all() and len(enc.ids) == sum(map(len, sentences))  # one unit per word
    for i, s in enumerate(sentences[:50]):
        ids, starts = _words(enc, i)
        assert vocab.decode(ids, starts) == [w if w in kept else "[UNK]" for w in s]
        assert int((ids == UNK).sum()) == sum(w not in kept for w in s)
    assert (enc.ids == UNK).sum() == sum(c for w, c in counts.items() if w not in kept)
    assert train_word(sentences, 256).encode([sentences[0]], [0]).ids.tolist() == \
        train_word(sentences, 256).encode([sentences[0]], [0]).ids.tolist()  # deterministic


def test_wordpiece_is_still_the_default_and_round_trips(tiny_prepared, sentences):
    from minimult.config import DataConfig
    from minimult.data.prepare import cache_key

    assert DataConfig().tokenizer == "wordpiece"
    assert "tokenizer" not in cache_key(DataConfig())  # the cache entries of existing runs keep their names
    assert cache_key(DataConfig(tokenizer="char"))["tokenizer"] == "char"
    vocab, enc = tiny_prepared.vocab, tiny_prepared.train
    for i in range(50):
        assert vocab.decode(*_words(enc, i)) == sentences[i]


def test_too_small_character_vocabulary_is_one_error(sentences):
    with pytest.raises(MinimultError) as e:
        train_char(sentences, 40)
    message = str(e.value)
    assert "\n" not in message and "smaller than the character set" in message and "data.vocab_size=" in message
    with pytest.raises(MinimultError, match="unknown tokenizer 'bpe': use wordpiece, char, word"):
        train_vocab("bpe", sentences, 256)


def test_cli_refuses_a_too_small_character_vocabulary(minimult_cache):
    from minimult.cli import main

    args = ["prepare", "--train-file", str(TINY_TRAIN), "--dev-file", str(TINY_DEV), "--tokenizer", "char",
            "--set", "data.vocab_size=40"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "smaller than the character set" in errors[0], result.stderr
    assert "Traceback" not in result.output
    bad = CliRunner().invoke(main, ["prepare", "--train-file", str(TINY_TRAIN), "--dev-file", str(TINY_DEV),
                                    "--set", "data.tokenizer=bpe"])
    assert bad.exit_code == 2 and "unknown tokenizer 'bpe'" in bad.stderr


def test_cli_prepare_with_a_tokenizer(minimult_cache):
    from minimult.cli import main

    result = CliRunner().invoke(main, ["prepare", "--train-file", str(TINY_TRAIN), "--dev-file", str(TINY_DEV),
                                       "--tokenizer", "char", "--set", "data.vocab_size=256", "--examples", "1"])
    assert result.exit_code == 0, result.output
    assert "86 character entries" in result.stdout
    assert "37 training and 37 dev sentences are cut to fit" in result.stdout  # max_len 128: reported
    en = next(line for line in result.stdout.splitlines() if line.startswith("  en: ")).split()[1:]
    assert en[:5] == ["F", "##r", "##o", "##m", "t"]  # "From the ..."


def _word_index(side):
    """For every unit, the number of its word inside its sentence."""
    word = np.cumsum(side.word_starts) - 1
    first = np.repeat(word[side.offsets[:-1]], side.lengths)
    return word - first


def _gold_links(views, vocab_size, reordered):
    """The second language's linked units and the English units they link to; each links to the same
    unit (shifted) of the same English word (word boundaries of a reordered side are gone: there the
    unit itself is checked)."""
    en, l1 = views
    assert l1.gold.max() >= 0
    linked = np.flatnonzero(l1.gold >= 0)
    sentence = np.repeat(np.arange(l1.num_sentences), l1.lengths)[linked]
    en_pos = en.offsets[l1.english_index[sentence]] + l1.gold[linked]
    if not reordered:
        assert (_word_index(en)[en_pos] == _word_index(l1)[linked]).all()  # a unit of the same word
    return linked, en_pos


RUNS = {  # (tokenizer, source, mods): each granularity, both sources, and mods that act on units
    "char": ("char", "shift", None),
    "word": ("word", "shift", None),
    "char-unicode": ("char", "unicode", None),
    "word-unicode": ("word", "unicode", None),
    "char-mods": ("char", "shift", "lang-pos,shift-special,no-random,unigram"),
    "word-mods": ("word", "shift", "lang-sep,inv-order,no-parallel"),
    "char-knn": ("char", "shift", "knn-replace"),  # with knn.dim below the 81 characters (see the test)
}


@pytest.mark.parametrize("name", list(RUNS))
def test_tiny_run_at_each_granularity_is_evaluated_by_every_evaluator(tmp_path, name):
    from minimult.config import resolve
    from minimult.evaluate import evaluate_run
    from minimult.evaluate.registry import evaluators
    from minimult.runs import Run
    from minimult.train import train

    tokenizer, fake, mods = RUNS[name]
    settings = {**TINY_SETTINGS, "data.tokenizer": tokenizer, "data.fake": fake, "data.max_len": 256,
                **({"knn.dim": 32} if mods == "knn-replace" else {})}  # a mapping needs dim <= the units
    cfg, active = resolve("tiny", settings, mods)
    run = Run.create(cfg, active, tmp_path / name, log=lambda s: None)
    train([run], log=lambda s: None)
    results = evaluate_run(run, log=lambda s: None)  # the default layers: µ's
    saved = json.loads((run.path / "results.json").read_text())
    assert saved["config"]["data"]["tokenizer"] == tokenizer
    vocab = run.data.prepared.vocab
    assert run.data.prepared.stats["tokenizer"] == tokenizer
    for ev in evaluators():
        if ev.standalone or ev.name == "nsp":
            continue
        for column in ev.columns:
            if column.per_layer:
                assert all(column.value(results, l) is not None for l in results["layers"]), (ev.name, column.name)
            elif not column.name.startswith("train_parallel") or "train_parallel" in results["perplexity"]:
                assert column.value(results) is not None, (ev.name, column.name)
    ppl = results["perplexity"]
    assert np.isfinite(ppl["dev"]) and np.isfinite(ppl["dev_word"])
    if tokenizer == "word":
        assert ppl["dev_word"] == pytest.approx(ppl["dev"])  # one unit per word
    else:
        assert ppl["dev_word"] > ppl["dev"]  # several characters per word
    assert results["dev_sentences_cut"] == 0  # max_len 256 holds every tiny sentence's characters
    # eval's text summary: per unit, then per word (the number that compares across granularities)
    from minimult.evaluate import summary_table

    line = next(l for l in summary_table(results).splitlines() if "perplexity" in l)
    assert line.endswith(f"dev {ppl['dev']:.1f} per unit, train {ppl['train_word']:.1f}/word, "
                         f"dev {ppl['dev_word']:.1f}/word"), line
    # translation τ over the granularity's own vocabulary
    if fake == "shift":
        assert results["dictionary_entries"] == len(vocab) - N_SPECIAL
    else:
        assert 0 < results["dictionary_entries"] <= (len(vocab) - N_SPECIAL) // 2
    # every unit of the second language that has a gold link links into the same English word
    views = run.data.views("dev")
    linked, en_pos = _gold_links(views, vocab.stride, reordered=any(a.mod.reorder for a in active))
    if fake == "shift":
        assert (views[1].ids[linked] % vocab.stride == views[0].ids[en_pos]).all()  # the same unit, shifted
    if fake == "shift" and mods is None:
        assert len(linked) == len(views[1].ids)  # every character / word is linked
    # random replacements draw only from the vocabulary's entries
    ids = run.data.random_ids()
    assert (ids % vocab.stride < len(vocab)).all() and (ids % vocab.stride >= N_SPECIAL).all()


def test_char_dev_sentences_cut_to_the_window_are_counted(tmp_path):
    """max_len: sentences longer than the window are cut, and the cut is reported, never silent."""
    from minimult.config import resolve
    from minimult.evaluate import evaluate_run
    from minimult.runs import Run
    from minimult.train import train

    cfg, active = resolve("tiny", {**TINY_SETTINGS, "data.tokenizer": "char", "train.epochs": 1}, None)
    run = Run.create(cfg, active, tmp_path / "cut", log=lambda s: None)
    lines = []
    train([run], log=lines.append)
    assert any("74 of 800 training sequences" in line and "cut to fit" in line for line in lines), lines
    notes = []
    results = evaluate_run(run, (0,), log=notes.append, write=False, only={"alignment"})
    assert results["dev_sentences_cut"] == 2 * 37


def test_unicode_char_vocabulary_holds_both_scripts(minimult_cache, tiny_data_cfg):
    from minimult.data.prepare import prepare
    from minimult.data.sources.unicode import shift_piece

    cfg = dataclasses.replace(tiny_data_cfg, tokenizer="char", source="unicode")
    vocab = prepare(cfg).vocab
    english = [p for p in vocab.pieces[N_SPECIAL:] if p[-1].isascii()]
    assert english and all(shift_piece(p) in vocab.index for p in english)


def test_runs_from_before_the_tokenizer_setting_are_wordpiece_runs():
    """A config.json without data.tokenizer reads as wordpiece: the report keeps such runs in one
    setting with new wordpiece runs, apart from char runs."""
    from minimult.config import RunConfig, resolve
    from minimult.report.collect import _fingerprint

    new = resolve("tiny")[0].to_dict()
    old = json.loads(json.dumps(new))
    del old["data"]["tokenizer"]
    assert RunConfig.from_dict(old).data.tokenizer == "wordpiece"
    assert _fingerprint(old) == _fingerprint(new)
    assert _fingerprint(resolve("tiny", {"data.tokenizer": "char"})[0].to_dict()) != _fingerprint(new)
