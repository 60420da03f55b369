"""WordPiece vocabulary: size, special ids, [UNK], the `::` display of shifted ids, Encoded files (§4)."""

from __future__ import annotations

import hashlib
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import TINY_DEV, TINY_TRAIN
from minimult.data.corpus import file_corpus
from minimult.errors import MinimultError
from minimult.data.vocab import (CLS, MASK, N_SPECIAL, PAD, SEP, SPECIALS, UNK, Encoded, Vocab, from_pieces,
                            train_wordpiece)


@pytest.fixture(scope="module")
def tiny_sentences(tiny_data_cfg):
    return file_corpus(tiny_data_cfg.train).sentences


@pytest.fixture(scope="module")
def vocab(tiny_prepared):
    return tiny_prepared.vocab


def test_specials_first():
    assert SPECIALS == ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
    assert (PAD, UNK, CLS, SEP, MASK, N_SPECIAL) == (0, 1, 2, 3, 4, 5)


def test_size_and_special_ids(vocab, tiny_sentences):
    assert vocab.stride == 256 and len(vocab) == 256  # the tiny corpus has enough text to fill 256
    assert vocab.pieces[:5] == list(SPECIALS)
    assert [vocab.tokenizer.token_to_id(s) for s in SPECIALS] == [0, 1, 2, 3, 4]
    assert len(set(vocab.pieces)) == len(vocab.pieces)
    big = train_wordpiece(tiny_sentences, 2048)  # more than the corpus supports: fewer, never more
    assert N_SPECIAL < len(big) <= 2048 and big.pieces[:5] == list(SPECIALS)
    assert len(big) > len(vocab)


def test_training_order_free_where_it_can_be(tiny_sentences, vocab):
    """Whatever the input order: specials, then every character of the corpus sorted, at the same ids; same
    size (and, trained deterministically, the same vocabulary: test_ties_go_to_the_pair_of_lower_ids)."""
    shuffled = list(tiny_sentences)
    random.Random(1).shuffle(shuffled)
    other = train_wordpiece(shuffled, 256)
    chars = sorted({c for s in tiny_sentences for w in s for c in w})
    for v in (vocab, other):
        assert len(v) == 256
        assert v.pieces[: N_SPECIAL + len(chars)] == list(SPECIALS) + chars
    assert other.pieces == train_wordpiece(tiny_sentences, 256).pieces


def test_ties_go_to_the_pair_of_lower_ids():
    """A handmade corpus whose vocabulary is known: specials, the characters, the `##` characters (both in
    code-point order), then merges by count, equal counts by the lower ids (left piece, then right), whatever
    the order of the text. HF's trainer numbers its `##` pieces in hash-map order, so its ties vary."""
    sentences = [["ab", "ab", "ba"], ["cd", "cd", "dc"], ["ef", "ef"]]
    chars = ["a", "b", "c", "d", "e", "f", "##a", "##b", "##c", "##d", "##f"]
    for text in (sentences, [s[::-1] for s in reversed(sentences)]):
        assert train_wordpiece(text, 2048).pieces == [*SPECIALS, *chars, "ab", "cd", "ef", "ba", "dc"]
        assert train_wordpiece(text, 18).pieces == [*SPECIALS, *chars, "ab", "cd"]  # at most `size` entries
    # ("a", "##b") before ("##b", "##c"): the lower left id, though "##b" comes first as a string
    assert train_wordpiece([["abc", "abc"]], 2048).pieces == [*SPECIALS, "a", "b", "c", "##b", "##c", "ab", "abc"]


@pytest.mark.parametrize("size", [-1, 0, 1, 5])
def test_size_without_room_for_words(tiny_sentences, size):
    from minimult.config import DataConfig

    from minimult.data.vocab import train_char, train_word

    for train in (train_wordpiece, train_char, train_word):
        with pytest.raises(MinimultError, match=f"vocabulary size {size} leaves no room: it must exceed the 5 special"):
            train(tiny_sentences, size)
    with pytest.raises(MinimultError, match="special"):  # caught before any corpus is read
        DataConfig(vocab_size=size)


def test_a_size_that_just_holds_the_alphabet_is_enough():
    """specials + characters + `##` characters = 9 entries: size 9 holds them (no merge), 8 does not; an empty
    word adds nothing."""
    sentences = [["ab", "", "ba", "ab"]]
    assert train_wordpiece(sentences, 9).pieces == [*SPECIALS, "a", "b", "##a", "##b"]
    with pytest.raises(MinimultError, match="too small"):
        train_wordpiece(sentences, 8)
    assert train_wordpiece(sentences, 10).pieces[-1] == "ab"


def test_char_and_word_entries_are_by_frequency_ties_in_string_order():
    """Most frequent first, equal counts in string order, whatever the order of the text: the same list on every
    machine; the `##` forms by their own counts inside words."""
    from minimult.data.vocab import train_char, train_word

    text = [["zc", "ac", "ab", "ac"], ["y", "b", "a"]]
    assert train_char(text, 64).pieces == [*SPECIALS, "a", "b", "y", "z", "##c", "##b"]
    assert train_word(text, 64).pieces == [*SPECIALS, "ac", "a", "ab", "b", "y", "zc"]
    assert train_word(text, 7).pieces == [*SPECIALS, "ac", "a"]


def test_size_smaller_than_the_alphabet(tiny_sentences):
    """WordPiece keeps every character whatever the size: a vocabulary larger than asked would make
    English ids collide with the shifted ids of the second language, so it is an error."""
    with pytest.raises(MinimultError, match="too small"):
        train_wordpiece(tiny_sentences, 20)


def test_encode_pieces_rebuild_words(vocab, tiny_sentences):
    enc = vocab.encode(tiny_sentences, list(range(1, len(tiny_sentences) + 1)))
    assert len(enc) == len(tiny_sentences) and enc.ids.dtype == np.uint16
    assert enc.verse_ids.tolist() == list(range(1, len(tiny_sentences) + 1))
    assert enc.ids.max() < len(vocab) and enc.ids.min() >= N_SPECIAL  # no specials, no [UNK] in its own text
    for i, words in enumerate(tiny_sentences):
        pieces = vocab.display(enc.sentence(i))
        starts = enc.word_starts[enc.offsets[i]: enc.offsets[i + 1]]
        assert starts.sum() == len(words) and starts[0]
        rebuilt = []
        for p, s in zip(pieces, starts):
            assert s != p.startswith("##")
            rebuilt.append(p) if s else rebuilt.__setitem__(-1, rebuilt[-1] + p[2:])
        assert rebuilt == words


def test_encoding_in_chunks_gives_the_arrays_of_encoding_at_once(vocab, tiny_sentences, monkeypatch):
    """Vocab.encode takes ENCODE_CHUNK sentences at a time (memory of one chunk's lists, whatever the text):
    the arrays are those of one encode_batch over every sentence, chunk boundaries anywhere."""
    from minimult.data import vocab as vocab_mod

    out = vocab.tokenizer.encode_batch(tiny_sentences, is_pretokenized=True, add_special_tokens=False)
    whole = Encoded.from_lists([e.ids for e in out], [vocab_mod._word_starts(e.word_ids) for e in out],
                               range(len(tiny_sentences)))
    for chunk in (1, 7, len(tiny_sentences) - 1, len(tiny_sentences)):
        monkeypatch.setattr(vocab_mod, "ENCODE_CHUNK", chunk)
        enc = vocab.encode(tiny_sentences, range(len(tiny_sentences)))
        for a, b in zip((enc.ids, enc.offsets, enc.word_starts, enc.verse_ids),
                        (whole.ids, whole.offsets, whole.word_starts, whole.verse_ids)):
            assert a.dtype == b.dtype and np.array_equal(a, b)


def test_sorted_digest_spills_runs_and_merges_to_the_digest_of_sorting_in_memory():
    """vocab_key's digest of the sorted training text, in runs written to disk when the text is larger than
    its chunk: the same digest as sorting every line in memory, for prefixes, control characters below
    "\\n", non-ASCII and repeated lines."""
    from minimult.data.vocab import sorted_digest

    rng = random.Random(0)
    alphabet = ["a", "b", " ", "\t", "\x01", "é", "ß", "中", "\U0001F600", "Z"]
    lines = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 6))) for _ in range(500)]
    lines += ["a", "a b", "a", ""]
    expected = hashlib.sha256("\n".join(sorted(lines)).encode("utf-8")).hexdigest()
    for chunk in (1, 100, 5_000, 10**9):
        assert sorted_digest(iter(lines), chunk) == expected


def test_unseen_characters_are_unk(vocab):
    assert "He" in vocab.index and "said" in vocab.index
    enc = vocab.encode([["He", "\u2603", "Ωμέγα", "said", "\u00e9"]], [7])
    assert vocab.display(enc.ids) == ["He", "[UNK]", "[UNK]", "said", "[UNK]"]
    assert enc.ids.tolist().count(UNK) == 3 and enc.word_starts.tolist() == [True] * 5


def test_encode_nothing_is_an_error(vocab):
    with pytest.raises(MinimultError, match="nothing to encode: the corpus has no sentences"):
        vocab.encode([], [])


def test_display_example(vocab):
    he = vocab.index["He"]
    assert vocab.display([he, he + 256, CLS, CLS + 256, MASK + 256]) == ["He", "::He", "[CLS]", "::[CLS]",
                                                                          "::[MASK]"]
    assert vocab.parse(["::He", "He", "::[MASK]"]) == [he + 256, he, MASK + 256]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 255)), max_size=40))
def test_display_parse_round_trip(vocab, pairs):
    ids = [k * vocab.stride + i for k, i in pairs]
    shown = vocab.display(ids)
    for (k, i), t in zip(pairs, shown):
        assert t == "::" * k + vocab.pieces[i]
    assert vocab.parse(shown) == ids


def test_a_vocabulary_smaller_than_its_stride_shifts_ids_by_the_stride():
    """8 entries, 20 ids per language (a character set leaves its block part empty): language 1's ids are
    id + 20, whatever the number of entries, in display, parse and decode; a one-piece sentence begins a word,
    and decoding from a piece inside a word (a cut sentence) keeps that piece as its first word."""
    v = from_pieces(list(SPECIALS) + ["He", "said", "##s"], 20)
    assert len(v) == 8 and v.stride == 20
    he, said = v.index["He"], v.index["said"]
    assert v.display([he, he + 20, said + 20, MASK + 20]) == ["He", "::He", "::said", "::[MASK]"]
    assert v.parse(["::He", "said", "::[MASK]"]) == [he + 20, said, MASK + 20]
    enc = v.encode([["said"], ["Hes", "said"]], [0, 1])
    assert enc.word_starts.tolist() == [True, True, False, True]
    assert v.decode(enc.ids[1:] + 20, enc.word_starts[1:]) == ["Hes", "said"]
    assert v.decode(enc.ids[:1] + 20, enc.word_starts[:1]) == ["said"]
    assert v.decode(enc.ids[2:] + 20, enc.word_starts[2:]) == ["##s", "said"]


def test_round_trip_of_every_id_two_languages(vocab):
    ids = list(range(2 * vocab.stride))
    assert vocab.parse(vocab.display(ids)) == ids


def test_a_piece_that_begins_with_the_language_prefix_parses_as_itself():
    """`::x`, a piece of language 0 (a word vocabulary may hold one), is that piece, not language 1's `x`."""
    v = from_pieces(list(SPECIALS) + ["::x", "x"], 10)
    assert v.parse(["::x", "::::x", "x"]) == [5, 15, 6]
    assert v.display([5, 15, 6, 16]) == ["::x", "::::x", "x", "::x"]  # language 1's x reads as the piece ::x


def test_vocab_files_and_digest_in_their_order(tmp_path):
    """vocab.txt first, then each language's own LANG/vocab.txt in name order; the digest hashes them so."""
    import hashlib

    from minimult.data.vocab import vocab_digest, vocab_files

    for where, text in (("", "top"), ("zz/", "last"), ("es/", "middle")):
        (tmp_path / where).mkdir(exist_ok=True)
        (tmp_path / where / "vocab.txt").write_text(text)
    assert vocab_files(tmp_path) == [tmp_path / "vocab.txt", tmp_path / "es" / "vocab.txt",
                                     tmp_path / "zz" / "vocab.txt"]
    assert vocab_digest(tmp_path) == hashlib.sha256(b"topmiddlelast").hexdigest()


def test_parse_rejects_unknown_pieces(vocab):
    for bad in ("xyzzy-not-a-piece", "::", "::xyzzy"):
        with pytest.raises(MinimultError, match="not in the vocabulary"):
            vocab.parse(["He", bad])


def test_encoded_save_load(tmp_path, tiny_prepared):
    enc = tiny_prepared.dev
    enc.save(tmp_path / "dev.npz")
    back = Encoded.load(tmp_path / "dev.npz")
    for name in ("ids", "offsets", "word_starts", "verse_ids"):
        a, b = getattr(enc, name), getattr(back, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    assert len(back) == 200 and back.sentence(3).tolist() == enc.sentence(3).tolist()
    assert back.lengths.sum() == len(back.ids)


def test_encoded_from_lists():
    enc = Encoded.from_lists([[7, 8, 9], [], [10]], [[True, False, True], [], [True]], [5, 6, 7])
    assert enc.offsets.tolist() == [0, 3, 3, 4] and enc.lengths.tolist() == [3, 0, 1]
    assert enc.sentence(0).tolist() == [7, 8, 9] and enc.sentence(1).tolist() == []
    assert enc.word_starts.tolist() == [True, False, True, True] and enc.verse_ids.tolist() == [5, 6, 7]


def test_vocab_save_load(tmp_path, vocab, tiny_sentences):
    vocab.save(tmp_path)
    assert (tmp_path / "vocab.txt").read_text(encoding="utf-8").splitlines() == vocab.pieces
    back = Vocab.load(tmp_path, 256)
    assert back.pieces == vocab.pieces and back.stride == 256
    a, b = vocab.encode(tiny_sentences[:20], range(20)), back.encode(tiny_sentences[:20], range(20))
    assert np.array_equal(a.ids, b.ids)
    with pytest.raises(MinimultError, match="no vocabulary"):
        Vocab.load(tmp_path / "missing", 256)


def test_fresh_builds_give_the_same_vocabulary(tmp_path, monkeypatch):
    """Two prepares in fresh caches give the same vocabulary hash: the built-in configurations use a
    shipped vocabulary (HF's trainer alone differs between builds)."""
    import json

    from minimult.config import DataConfig
    from minimult.data import vocab as vocab_mod
    from minimult.data.prepare import prepare

    cfg = DataConfig(train=str(TINY_TRAIN), dev=str(TINY_DEV), vocab_size=256, dev_sentences=50)
    hashes = []
    for cache in ("a", "b"):
        monkeypatch.setenv("MINIMULT_CACHE", str(tmp_path / cache))
        hashes.append(prepare(cfg).vocab_hash)
    index = json.loads((vocab_mod.SHIPPED / "index.json").read_text())
    assert hashes[0] == hashes[1] == index["shift-256-58e68296e7306d7a.txt"]["sha256"]


def test_shipped_vocabularies_match_their_index_and_tampering_is_refused(tmp_path, monkeypatch):
    import json
    import shutil

    from minimult.data import vocab as vocab_mod
    from minimult.data.corpus import load_corpus

    index = json.loads((vocab_mod.SHIPPED / "index.json").read_text())
    assert len(index) >= 6
    for name, entry in index.items():
        data = (vocab_mod.SHIPPED / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"] and len(data.splitlines()) == entry["entries"]
    copy = tmp_path / "vocabularies"
    shutil.copytree(vocab_mod.SHIPPED, copy)
    monkeypatch.setattr(vocab_mod, "SHIPPED", copy)
    sentences = load_corpus(str(TINY_TRAIN), None).sentences
    vocab, path = vocab_mod.shipped_vocab(sentences, 256, "shift")
    assert path.name == "shift-256-58e68296e7306d7a.txt" and len(vocab) == 256
    assert vocab_mod.shipped_vocab(sentences[:-1], 256, "shift") == (None, None)  # another text: none shipped
    path.write_text(path.read_text().replace("the", "teh", 1))
    with pytest.raises(MinimultError, match="does not match its sha256"):
        vocab_mod.shipped_vocab(sentences, 256, "shift")


def _prepare_twice(tmp_path, monkeypatch, cfg, *more) -> list:
    """The vocabulary hashes of `cfg` (then of each config of `more`), each prepared in a fresh cache."""
    from minimult.data.prepare import prepare

    hashes = []
    for i, c in enumerate((cfg, cfg, *more)):
        monkeypatch.setenv("MINIMULT_CACHE", str(tmp_path / f"cache{i}"))
        hashes.append(prepare(c).vocab_hash)
    return hashes


def test_fresh_builds_of_your_own_files_give_the_same_vocabulary(tmp_path, monkeypatch):
    """No shipped list for this text and size: trained, twice, the same (HF's trainer gave another each time),
    and a changed dev file leaves it as it was: it is trained on the training text only."""
    from minimult.config import DataConfig

    train = tmp_path / "train.txt"
    train.write_bytes(TINY_TRAIN.read_bytes())
    dev = tmp_path / "dev.txt"
    dev.write_text("".join(line[::-1] + "\n" for line in TINY_DEV.read_text(encoding="utf-8").splitlines()))
    cfg = DataConfig(train=str(train), dev=str(TINY_DEV), vocab_size=2048, dev_sentences=50)
    hashes = _prepare_twice(tmp_path, monkeypatch, cfg, DataConfig(train=str(train), dev=str(dev), vocab_size=2048))
    assert hashes[0] == hashes[1] == hashes[2]
    pieces = train_wordpiece(file_corpus(str(train)).sentences, 2048).pieces  # the vocab.txt it wrote
    assert hashes[0] == hashlib.sha256(("\n".join(pieces) + "\n").encode()).hexdigest()
    assert N_SPECIAL < len(pieces) < 2048  # the whole text merged into words: not shipped, trained


def test_fresh_builds_of_parallel_files_give_the_same_vocabularies(tmp_path, monkeypatch):
    from minimult.config import resolve

    lines = TINY_TRAIN.read_text(encoding="utf-8").splitlines()[:200]
    files = {"en": lines, "xx": [" ".join(w[::-1] for w in line.split()) for line in lines]}
    for name, text in files.items():
        (tmp_path / f"{name}.txt").write_text("".join(t + "\n" for t in text), encoding="utf-8")
    spec = ",".join(f"{name}={tmp_path / name}.txt" for name in files)
    cfg = resolve("tiny", {"data.source": "parallel", "data.parallel.files": spec, "data.vocab_size": 1024})[0].data
    hashes = _prepare_twice(tmp_path, monkeypatch, cfg)
    assert hashes[0] == hashes[1]


def test_an_entry_of_another_trainer_is_not_reused_as_this_ones(tmp_path, monkeypatch):
    """User text is keyed by the trainer (an entry HF's trainer built is never found); any other entry with a
    trained vocabulary that does not record this trainer is refused, one line."""
    import json

    from minimult.config import DataConfig
    from minimult.data.prepare import cache_key, prepare
    from minimult.data.vocab import WORDPIECE_TRAINER

    assert "wordpiece" not in cache_key(DataConfig())  # built-in corpora keep their keys (shipped lists)
    cfg = DataConfig(train=str(TINY_TRAIN), dev=str(TINY_DEV), vocab_size=300, dev_sentences=50)
    assert cache_key(cfg)["wordpiece"] == WORDPIECE_TRAINER
    assert "wordpiece" not in cache_key(DataConfig(train=str(TINY_TRAIN), tokenizer="char"))
    monkeypatch.setenv("MINIMULT_CACHE", str(tmp_path))
    path = prepare(cfg).path
    stats = json.loads((path / "stats.json").read_text())
    assert stats["wordpiece_trainer"] == WORDPIECE_TRAINER and prepare(cfg).reused
    del stats["wordpiece_trainer"]
    (path / "stats.json").write_text(json.dumps(stats))
    with pytest.raises(MinimultError, match="another trainer .* delete it to rebuild"):
        prepare(cfg)
