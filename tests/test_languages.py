"""Language views and the mods' effects on them (docs/pipeline.md): each mod changes what it should,
nothing else, and the gold alignment follows."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from minimult import mods as mods_mod
from minimult.config import RunConfig, resolve
from minimult.errors import MinimultError
from minimult.data import sources
from minimult.data.languages import build_sides, positions_within
from minimult.data.layout import layouts
from minimult.data.sources.unicode import UNICODE_SHIFT, shift_text
from minimult.mods import REGISTRY, parse_mods, registered
from minimult.mods.baseline import TRAINING_ONLY
from minimult.train import initial_model
from minimult.data.vocab import CLS, MASK, N_SPECIAL, PAD, SEP

V = 256
ORDER_MODS = [None, "inv-order", "permute=0.25", "permute", "permute=1.0"]


@pytest.fixture(scope="module")
def sides(tiny_prepared, tiny_data_cfg):
    def make(mods=None, split="train", seed=0, prepared=tiny_prepared, cfg=tiny_data_cfg):
        return build_sides(prepared, sources.get(cfg.fake), cfg, parse_mods(mods), split, seed)
    return make


def is_special(ids: np.ndarray, vocab_size: int) -> np.ndarray:
    """ids (...) int -> (...) bool: whether each id is one of a language block's five specials (ids k*V + 0..4)."""
    return (ids % vocab_size) < N_SPECIAL


def same_side(a, b) -> bool:
    return all(np.array_equal(getattr(a, f), getattr(b, f))
               for f in ("ids", "offsets", "word_starts", "english_index", "gold")) and a.lang == b.lang


def words_per_sentence(side) -> np.ndarray:
    return np.array([side.word_starts[side.offsets[i]: side.offsets[i + 1]].sum()
                     for i in range(side.num_sentences)])


def word_tuples(side) -> list[tuple]:
    bounds = np.append(np.flatnonzero(side.word_starts), len(side.ids))
    return [tuple(side.ids[a:b].tolist()) for a, b in zip(bounds[:-1], bounds[1:])]


# ---------------------------------------------------------------------------------------------
# Plain views


@pytest.mark.parametrize("split", ["train", "dev"])
def test_english_identity_and_shifted_second(sides, tiny_prepared, split):
    enc = tiny_prepared.train if split == "train" else tiny_prepared.dev
    english, second = sides(None, split)
    n = len(enc)
    assert english.lang == 0 and second.lang == 1
    assert np.array_equal(english.ids, enc.ids) and np.array_equal(english.offsets, enc.offsets)
    assert np.array_equal(english.word_starts, enc.word_starts)
    assert np.array_equal(english.english_index, np.arange(n)) and np.array_equal(second.english_index, np.arange(n))
    assert np.array_equal(english.gold, positions_within(enc.offsets))
    assert np.array_equal(second.ids, enc.ids.astype(np.int64) + V)
    assert np.array_equal(second.offsets, enc.offsets)
    assert np.array_equal(second.gold, positions_within(enc.offsets))  # identity alignment
    assert second.ids.min() >= V and second.ids.max() < 2 * V
    if split == "train":  # its own text has no [UNK] (dev may) and no special token
        assert second.ids.min() >= V + 5
    a = second.alignment(0)
    assert np.array_equal(a, np.stack([np.arange(len(enc.sentence(0)))] * 2, axis=1))
    shown = tiny_prepared.vocab.display(second.sentence(0))
    assert shown == ["::" + t for t in tiny_prepared.vocab.display(english.sentence(0))]


# ---------------------------------------------------------------------------------------------
# Order mods


def assert_gold_follows(english, second):
    """second.sentence(i)[j] == english.sentence(english_index[i])[gold[j]] + V, and gold is a permutation."""
    for i in range(second.num_sentences):
        en = english.sentence(int(second.english_index[i]))
        s = second.sentence(i)
        g = second.gold[second.offsets[i]: second.offsets[i + 1]]
        assert len(s) == len(en)
        assert sorted(g.tolist()) == list(range(len(en)))
        assert np.array_equal(s, en[g] + V)


@pytest.mark.parametrize("split", ["train", "dev"])
@pytest.mark.parametrize("mods", ORDER_MODS)
def test_every_order_mod_keeps_gold_right(sides, mods, split):
    english, second = sides(mods, split)
    plain_english, _ = sides(None, split)
    assert same_side(english, plain_english)  # English untouched
    assert_gold_follows(english, second)


@pytest.mark.parametrize("split", ["train", "dev"])
def test_inv_order_reverses(sides, split):
    english, second = sides("inv-order", split)
    for i in range(english.num_sentences):
        L = len(english.sentence(i))
        assert np.array_equal(second.sentence(i), english.sentence(i)[::-1] + V)
        assert second.gold[second.offsets[i]: second.offsets[i + 1]].tolist() == list(range(L - 1, -1, -1))
    if split == "train":  # no special ids inside ([CLS]/[SEP] are added later, so they stay in place)
        assert not is_special(second.ids, V).any()


@pytest.mark.parametrize("split", ["train", "dev"])
def test_permute_deterministic_per_seed(sides, split):
    a = sides("permute=0.5", split, seed=3)[1]
    assert same_side(a, sides("permute=0.5", split, seed=3)[1])
    assert not same_side(a, sides("permute=0.5", split, seed=4)[1])
    assert not same_side(a, sides(None, split)[1])


def test_permute_amount_grows_with_p(sides):
    english, _ = sides(None)
    plain = positions_within(english.offsets)
    moved = {}
    for p in (0.25, 0.5, 1.0):
        _, second = sides(f"permute={p}")
        moved[p] = float(np.mean(second.gold != plain))
    assert 0 < moved[0.25] < moved[0.5] < moved[1.0] < 1


def _parity(perm: np.ndarray) -> int:
    seen, odd = np.zeros(len(perm), bool), 0
    for i in range(len(perm)):
        j, cycle = i, 0
        while not seen[j]:
            seen[j], j, cycle = True, perm[j], cycle + 1
        odd ^= (cycle > 0 and cycle % 2 == 0)
    return int(odd)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 80), st.sampled_from([0.25, 0.5, 1.0]), st.integers(0, 2**32 - 1))
def test_permute_swaps_round_pL_over_2_pairs(length, p, seed):
    """Each of the round(p*L/2) swaps exchanges two different positions: the permutation's parity is
    the number of swaps (mod 2), at most 2 per swap move, one swap moves exactly two."""
    reorder = REGISTRY["permute"].reorder
    perm = reorder(length, np.random.default_rng(seed), p)
    n = int(round(p * length / 2)) if length >= 2 else 0
    assert sorted(perm.tolist()) == list(range(length))
    moved = int(np.sum(perm != np.arange(length)))
    assert moved <= 2 * n
    assert _parity(perm) == n % 2
    if n == 1:
        assert moved == 2
    assert np.array_equal(perm, reorder(length, np.random.default_rng(seed), p))


# ---------------------------------------------------------------------------------------------
# Training-data mods


def test_no_parallel_halves(sides, tiny_prepared):
    enc = tiny_prepared.train
    n = len(enc)
    english, second = sides("no-parallel")
    half = n // 2
    assert english.num_sentences == half and second.num_sentences == n - half
    assert english.english_index.tolist() == list(range(half))
    assert second.english_index.tolist() == list(range(half, n))
    assert set(english.english_index) .isdisjoint(second.english_index)
    for i in range(english.num_sentences):
        assert np.array_equal(english.sentence(i), enc.sentence(i))
    for i in range(second.num_sentences):
        assert np.array_equal(second.sentence(i), enc.sentence(half + i).astype(np.int64) + V)
    assert_gold_follows(sides(None)[0], second)  # gold still points into the (full) English sentences
    for a, b in zip(sides("no-parallel", "dev"), sides(None, "dev")):
        assert same_side(a, b)  # evaluation data stay parallel


def test_unigram(sides):
    english, second = sides("unigram")
    plain_english, plain_second = sides(None)
    assert same_side(english, plain_english)
    assert second.num_sentences == plain_second.num_sentences
    assert np.array_equal(words_per_sentence(second), words_per_sentence(plain_second))
    types = set(word_tuples(plain_second))
    drawn = word_tuples(second)
    assert len(drawn) == len(word_tuples(plain_second)) and set(drawn) <= types
    assert not np.array_equal(second.ids, plain_second.ids)
    assert (second.gold == -1).all() and (second.english_index == -1).all()  # no sentence translates another
    # the frequent words stay frequent: the ten most frequent types of the sample are common originals
    from collections import Counter
    original = Counter(word_tuples(plain_second))
    common = {w for w, _ in original.most_common(30)}
    assert {w for w, _ in Counter(drawn).most_common(10)} <= common
    for a, b in zip(sides("unigram", "dev"), sides(None, "dev")):
        assert same_side(a, b)  # dev unaffected
    assert same_side(second, sides("unigram")[1])
    assert not same_side(second, sides("unigram", seed=1)[1])


@pytest.mark.parametrize("order", ["inv-order", "permute=1.0"])
def test_unigram_then_word_order(sides, order):
    """Combined with a word-order mod, sentences are still sampled word by word (then reordered),
    not whole sentences at a time; dev gets only the reordering."""
    _, sample = sides("unigram")
    english, second = sides(f"{order},unigram")
    assert same_side(english, sides(None)[0])
    assert np.array_equal(second.lengths, sample.lengths)
    for i in range(second.num_sentences):
        s, u = second.sentence(i), sample.sentence(i)
        if order == "inv-order":
            assert np.array_equal(s, u[::-1])
        else:
            assert sorted(s.tolist()) == sorted(u.tolist())
    for a, b in zip(sides(f"{order},unigram", "dev"), sides(order, "dev")):
        assert same_side(a, b)


# ---------------------------------------------------------------------------------------------
# Fake-English by unicode shift (K et al.)


@pytest.fixture(scope="module")
def unicode_prepared(tiny_data_cfg):
    from minimult.data.prepare import prepare

    cfg = dataclasses.replace(tiny_data_cfg, source="unicode")
    return cfg, prepare(cfg)


def test_shift_text():
    assert shift_text("He") == chr(ord("H") + UNICODE_SHIFT) + chr(ord("e") + UNICODE_SHIFT)
    assert shift_text(shift_text("word."), -UNICODE_SHIFT) == "word."


@pytest.mark.parametrize("split", ["train", "dev"])
def test_unicode_fake_english(unicode_prepared, sides, split):
    cfg, prepared = unicode_prepared
    vocab = prepared.vocab
    assert vocab.stride == 2 * V and len(vocab) <= 2 * V
    english, second = sides(None, split, prepared=prepared, cfg=cfg)
    assert second.num_sentences == english.num_sentences
    assert np.array_equal(second.english_index, np.arange(english.num_sentences))
    assert second.ids.max() < 2 * V  # one shared vocabulary over both scripts: no id shift

    def text(piece):
        return piece[2:] if piece.startswith("##") else piece

    def words_of(side, i):  # (word index per piece, word strings)
        s = side.sentence(i)
        ws = side.word_starts[side.offsets[i]: side.offsets[i + 1]]
        idx = np.cumsum(ws) - 1
        out = [""] * int(ws.sum())
        for k, p in zip(idx, vocab.display(s)):
            out[k] += text(p)
        return idx, out

    links = 0
    for i in range(english.num_sentences):
        en_pieces, fk_pieces = vocab.display(english.sentence(i)), vocab.display(second.sentence(i))
        assert all(ord(c) < UNICODE_SHIFT for p in en_pieces if p != "[UNK]" for c in text(p))
        assert all(ord(c) >= UNICODE_SHIFT for p in fk_pieces if p != "[UNK]" for c in text(p))
        en_idx, en_words = words_of(english, i)
        fk_idx, fk_words = words_of(second, i)
        assert len(fk_words) == len(en_words)
        for en_word, fk_word in zip(en_words, fk_words):
            assert fk_word == ("[UNK]" if en_word == "[UNK]" else shift_text(en_word))
        alignment = second.alignment(i)
        assert len(alignment) >= len(en_words)  # every word's first pieces are linked
        for e, f in alignment:
            assert en_idx[e] == fk_idx[f]  # links join pieces of the same word ...
            assert e - np.flatnonzero(en_idx == en_idx[e])[0] == f - np.flatnonzero(fk_idx == fk_idx[f])[0]
            links += 1
        assert len(set(alignment[:, 0].tolist())) == len(alignment)  # ... one to one
    assert links > 0


def test_unicode_conflicts_with_shift_special(tiny_data_cfg):
    with pytest.raises(MinimultError, match="contradictory"):
        resolve("tiny", {"data.fake": "unicode"}, "shift-special")


# ---------------------------------------------------------------------------------------------
# Special ids


def _layouts(mods=None, **settings):
    cfg, active = resolve("tiny", {"data.vocab_size": V, **settings}, mods)
    return layouts(cfg, sources.get(cfg.data.fake), active)


def specials(layout) -> tuple:
    return layout.pad, layout.cls, layout.sep, layout.mask


def test_special_ids_shared_or_shifted():
    shared, shifted = _layouts(), _layouts("shift-special")
    assert [specials(l) for l in shared] == [(PAD, CLS, SEP, MASK)] * 2
    assert [specials(l) for l in shifted] == [(PAD, CLS, SEP, MASK), (PAD + V, CLS + V, SEP + V, MASK + V)]
    assert [l.id_offset for l in shared] == [0, V]
    assert is_special(np.array([0, 4, 5, V, V + 4, V + 5]), V).tolist() == [True, True, False, True, True, False]


# ---------------------------------------------------------------------------------------------
# Parsing --mods


@pytest.mark.parametrize("text, message", [
    ("nope", "unknown mod 'nope'; valid mods: " + ", ".join(m.name for m in registered())),  # canonical order
    ("lang-pos,nope", "unknown mod 'nope'"),
    ("lang-pos,lang-pos", "given twice"),
    ("permute=0.5,permute=1.0", "given twice"),
    ("inv-order,permute", "contradictory mods: inv-order and permute"),
    ("permute=0.25,inv-order", "contradictory mods"),
    ("no-random,knn-replace", "contradictory mods: no-random and knn-replace"),
    ("no-parallel,unigram", "contradictory mods"),
    ("untrained,knn-replace", "contradictory mods: untrained and knn-replace cannot be combined: knn-replace acts "
                              "only on training"),
    ("unigram,untrained", "contradictory mods: untrained and unigram"),
    ("permute=2", "bad value for mod 'permute'"),
    ("permute=0", "bad value for mod 'permute'"),
    ("permute=abc", "bad value for mod 'permute'"),
    ("knn-replace=0", "bad value for mod 'knn-replace'"),
    ("knn-replace=1.5", "bad value for mod 'knn-replace'"),
    ("lang-pos=1", "takes no value"),
])
def test_parse_mods_errors(text, message):
    with pytest.raises(MinimultError) as e:
        parse_mods(text)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_a_run_made_before_a_conflict_was_declared_still_loads():
    """A new run with untrained,knn-replace is refused, but an existing run's config naming them (made before
    untrained declared the conflict) still reads back, so eval and report keep working on it."""
    with pytest.raises(MinimultError, match="contradictory"):
        parse_mods("knn-replace,untrained")
    assert [a.mod.name for a in mods_mod.from_canonical("knn-replace,untrained")] == ["knn-replace", "untrained"]
    with pytest.raises(MinimultError, match="unknown mod"):  # unjudged is not unchecked
        mods_mod.from_canonical("knn-replace,nope")


def test_minimult_mods_lists_exactly_the_pairs_the_parser_refuses():
    """Each mod's 'not with' line in `minimult mods` names every mod parse_mods refuses beside it, in either
    order, and no other."""
    from click.testing import CliRunner
    from minimult.cli import main

    out = CliRunner().invoke(main, ["mods"]).output.splitlines()
    listed = {m.name: set() for m in registered()}
    for line, after in zip(out, out[1:] + [""]):
        if not line.startswith(" ") and after.strip().startswith("not with: "):
            listed[line.split()[0].split("=")[0]] = set(after.split("not with: ")[1].split(", "))
    for a in registered():
        refused = set()
        for b in registered():
            for pair in ([a.name, b.name], [b.name, a.name]):
                try:
                    parse_mods(pair)
                except MinimultError as e:
                    if a is not b and "contradictory" in str(e):
                        refused.add(b.name)
        assert listed[a.name] == refused, a.name
    assert listed["untrained"] == set(TRAINING_ONLY) and listed["lang-pos"] == set()


def test_the_mods_untrained_refuses_are_those_that_act_only_on_training():
    """baseline.TRAINING_ONLY is exactly the mods that leave what an untrained run has as original's: the
    layouts, the evaluation text (no reorder) and the initial weights. A new mod that acts only on training
    fails here until it joins the list (untrained would otherwise accept it silently)."""
    plain = initial_model(resolve("tiny")[0]).state_dict()

    def same_weights(name):
        weights = initial_model(resolve("tiny", mods=name)[0]).state_dict()
        return weights.keys() == plain.keys() and all(weights[k].shape == v.shape and torch.equal(weights[k], v)
                                                      for k, v in plain.items())
    acts_on_training_only = {m.name for m in registered() if m.name != "untrained" and m.reorder is None
                             and _layouts(m.name) == _layouts() and same_weights(m.name)}
    assert acts_on_training_only == set(TRAINING_ONLY), "mods/baseline.py's TRAINING_ONLY must list exactly these"


def test_parse_mods_values_and_order():
    assert parse_mods(None) == () and parse_mods("") == ()
    active = parse_mods(" permute=0.25 , shift-special,lang-pos ")
    assert [a.mod.name for a in active] == ["lang-pos", "shift-special", "permute"]  # registry order
    assert active[-1].value == 0.25
    assert mods_mod.canonical(active) == "lang-pos,shift-special,permute=0.25"
    assert mods_mod.canonical(()) == "original"
    assert parse_mods("permute")[0].value == 0.5 and parse_mods("knn-replace=5")[0].value == 5
    assert mods_mod.versions(active) == {a.mod.name: a.mod.version for a in active}
    assert parse_mods(["lang-pos", "no-random"]) == parse_mods("no-random,lang-pos")


# ---------------------------------------------------------------------------------------------
# Every registered mod: described, versioned, and with an effect


def _data_changes(sides, spec) -> set:
    changed = set()
    for split in ("train", "dev"):
        for name, a, b in zip(("english", "second"), sides(spec, split), sides(None, split)):
            if not same_side(a, b):
                changed.add(f"{split}.{name}")
    return changed


def _layout_changes(spec) -> set:
    return {f"layout.{f.name}" for a, b in zip(_layouts(spec), _layouts()) for f in dataclasses.fields(a)
            if getattr(a, f.name) != getattr(b, f.name)}


def _config_changes(spec) -> set:
    base, _ = resolve("tiny")
    cfg, _ = resolve("tiny", mods=spec)
    a, b = base.to_dict(), cfg.to_dict()
    return {f"{s}.{k}" for s in a if isinstance(a[s], dict) for k in a[s] if a[s][k] != b[s][k]}


@pytest.mark.parametrize("name", list(REGISTRY))
def test_every_mod_is_complete_and_has_an_effect(sides, name):
    mod = REGISTRY[name]
    assert mod.name == name and mod.name == mod.name.strip().lower() and "," not in name and "=" not in name
    assert isinstance(mod.description, str) and len(mod.description) > 10 and "\n" not in mod.description
    assert isinstance(mod.version, int) and mod.version >= 1
    assert resolve("tiny", mods=name)[0].mods == mod.spec(mod.default)
    assert _config_changes(name) or _layout_changes(name) or _data_changes(sides, name), f"mod {name} changes nothing"


# What each known mod changes, and nothing else: config fields, layout fields, data views, and
# whether it builds something for training (a new mod adds its row here with its test).
POSITIONS = {"layout.position_offset", "layout.segment"}
SPECIALS = {"layout.pad", "layout.cls", "layout.sep", "layout.mask"}
EXPECTED = {
    "lang-pos": ({"model.max_positions"}, POSITIONS, set(), False),
    "shift-special": (set(), SPECIALS, set(), False),
    "no-sep": (set(), {"layout.sep"}, set(), False),
    "lang-sep": (set(), {"layout.sep"}, set(), False),
    "no-segment": ({"model.type_vocab_size"}, {"layout.segment"}, set(), False),
    "nsp": ({"model.nsp"}, {"layout.pair_segment"}, set(), False),
    "no-random": ({"mask.probs"}, set(), set(), False),
    "knn-replace": ({"mask.probs"}, set(), set(), True),
    "overparam": ({"model.hidden", "model.intermediate", "model.heads", "model.layers", "train.lr"}, set(), set(),
                  False),
    "inv-order": (set(), set(), {"train.second", "dev.second"}, False),
    "permute": (set(), set(), {"train.second", "dev.second"}, False),
    "no-parallel": ({"train.epochs"}, set(), {"train.english", "train.second"}, False),
    "unigram": (set(), set(), {"train.second"}, False),
    "untrained": ({"train.epochs"}, set(), set(), False),
}


def test_every_registered_mod_is_in_the_table():
    assert set(EXPECTED) == set(REGISTRY), "each registered mod needs its row in EXPECTED (tests/test_languages.py)"


@pytest.mark.parametrize("name", list(EXPECTED))
def test_mod_changes_exactly(sides, name):
    config, layout, data, builds = EXPECTED[name]
    assert _config_changes(name) == config
    assert _layout_changes(name) == layout
    assert _data_changes(sides, name) == data
    assert (REGISTRY[name].build is not None) == builds


def test_config_mod_values():
    base, _ = resolve("tiny")
    assert resolve("tiny", mods="lang-pos")[0].model.max_positions == 2 * base.data.max_len
    assert [(l.position_offset, l.segment) for l in _layouts("lang-pos")] == [(0, 0), (base.data.max_len, 1)]
    assert resolve("tiny", mods="no-random")[0].mask.probs == (0.8, 0.2, 0.0, 0.0)
    knn, _ = resolve("tiny", mods="knn-replace=5")
    assert knn.mask.probs == (0.5, 0.1, 0.1, 0.3) and parse_mods(knn.mods)[0].value == 5
    big, _ = resolve("tiny", mods="overparam")
    assert (big.model.hidden, big.model.intermediate, big.model.heads, big.model.layers, big.train.lr) == \
        (768, 3072, 12, 12, 1e-4)
    assert resolve("tiny", mods="no-parallel")[0].train.epochs == 2 * base.train.epochs
    assert resolve("tiny", mods="untrained")[0].train.epochs == 0
    assert resolve("paper", mods="shift-special")[0].model.vocab_size == 2 * RunConfig().data.vocab_size
