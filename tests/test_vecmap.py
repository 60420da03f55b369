"""Unsupervised VecMap on planted problems with known answers, and the fastText / neighbour-table glue."""

import numpy as np
import pytest
import torch

from minimult.knn.fasttext import neighbour_table, train_fasttext
from minimult.errors import MinimultError
from minimult.knn.vecmap import VecMapConfig, nearest, normalize, translation_p1, unsupervised_map

FAST = VecMapConfig(patience=5)


def planted(n=600, d=50, noise=0.01, seed=0):
    """X with a decaying spectrum; Z = X Q + noise with its rows shuffled. Returns X, Z, gold (src, tgt)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * np.arange(1, d + 1) ** -0.5
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    perm = rng.permutation(n)  # row j of Z is the translation of row perm[j] of X
    Z = (X @ Q + noise * rng.standard_normal((n, d)))[perm]
    return X, Z, np.stack([perm, np.arange(n)], 1)


@pytest.fixture(scope="module")
def mapped():
    X, Z, gold = planted()
    return X, Z, gold, unsupervised_map(X, Z, FAST)


def test_normalize_unit_rows_zero_mean_columns():
    X = np.random.default_rng(0).standard_normal((50, 8)) + 3.0
    N = normalize(X)
    assert np.allclose(np.linalg.norm(N, axis=1), 1.0)
    assert np.abs(N.mean(0)).max() < 0.1  # centred, then re-normalised: close to zero mean


def test_recovers_planted_rotation_without_dictionary(mapped):
    X, Z, gold, (Xm, Zm, info) = mapped
    assert Xm.shape == X.shape and Zm.shape == Z.shape
    assert translation_p1(Xm, Zm, gold, method="nn") >= 0.95
    assert translation_p1(Xm, Zm, gold, method="csls") >= 0.95
    assert info["keep"] == 1.0 and info["iterations"] > 0 and info["dict_size"] == 2 * len(X)


def test_same_seed_same_result(mapped):
    X, Z, _, (Xm, Zm, info) = mapped
    Xm2, Zm2, info2 = unsupervised_map(X, Z, FAST)
    assert np.array_equal(Xm, Xm2) and np.array_equal(Zm, Zm2)
    assert info["iterations"] == info2["iterations"] and info["objective"] == info2["objective"]


def test_objective_is_the_mean_best_cosine_and_every_keep_level_waits_its_patience(mapped):
    """Planted with little noise, each word's best cosine is near 1, and the objective (their mean) is the best seen;
    keep goes 0.1, 0.2, 0.4, 0.8, 1, each level doubled only after `patience` iterations without improvement."""
    _, _, _, (_, _, info) = mapped
    assert info["best_objective"] >= info["objective"] > 0.99
    assert info["iterations"] >= 5 * FAST.patience and info["converged"]


def test_stochastic_induction_keeps_each_candidate_with_probability_keep():
    """200 candidates ranked by cosine: the best one is picked when its coin keeps it, with probability `keep`."""
    from minimult.knn.vecmap import _pick

    angles = torch.linspace(0, 1.5, 200, dtype=torch.float64)
    B = torch.stack([angles.cos(), angles.sin()], 1).float()  # cosine to (1, 0) falls with the index
    A = torch.tensor([[1.0, 0.0]]).repeat(4000, 1)
    for keep in (0.1, 0.3):
        picked = _pick(A, B, torch.zeros(200), keep, torch.Generator().manual_seed(0))
        assert (picked == 0).float().mean().item() == pytest.approx(keep, abs=0.03)
    assert (_pick(A, B, torch.zeros(200), 1.0, torch.Generator()) == 0).all()


def test_candidates_are_just_enough_that_all_dropped_has_probability_below_one_in_a_million():
    from minimult.knn.vecmap import _candidates

    for keep in (0.1, 0.3, 0.5, 0.9):
        m = _candidates(keep, 10**6)
        assert (1 - keep) ** m < 1e-6 <= (1 - keep) ** (m - 1), keep
    assert _candidates(0.1, 50) == 50 and _candidates(1.0, 50) == 1


@pytest.mark.parametrize("n_src, n_tgt, dim", [(8, 40, 5), (40, 8, 5), (30, 40, 50), (60, 20, 30)])
def test_too_small_is_a_minimult_error(n_src, n_tgt, dim):
    rng = np.random.default_rng(0)
    with pytest.raises(MinimultError, match="too small"):
        unsupervised_map(rng.standard_normal((n_src, dim)), rng.standard_normal((n_tgt, dim)), FAST)


def test_bad_input_is_a_minimult_error():
    rng = np.random.default_rng(0)
    with pytest.raises(MinimultError, match="dimensions differ"):
        unsupervised_map(rng.standard_normal((40, 5)), rng.standard_normal((40, 6)), FAST)
    X = rng.standard_normal((40, 5))
    X[3, 2] = np.nan
    with pytest.raises(MinimultError, match="NaN"):
        unsupervised_map(X, rng.standard_normal((40, 5)), FAST)


def test_bad_settings_are_a_minimult_error():
    """At least 10 words on a side whatever csls_k; keep_start in (0, 1]; counts >= 1."""
    rng = np.random.default_rng(0)
    X, Z = rng.standard_normal((9, 5)), rng.standard_normal((40, 5))
    with pytest.raises(MinimultError, match=r"source has 9 words \(need >= 10"):
        unsupervised_map(X, Z, VecMapConfig(csls_k=3))
    X = rng.standard_normal((40, 5))
    for bad, match in ((VecMapConfig(keep_start=0.0), "keep_start must be in"),
                       (VecMapConfig(keep_start=1.5), "keep_start must be in"),
                       (VecMapConfig(csls_k=0), "must all be >= 1"), (VecMapConfig(patience=0), "must all be >= 1")):
        with pytest.raises(MinimultError, match=match):
            unsupervised_map(X, Z, bad)


def test_degenerate_but_allowed_input_does_not_crash():
    # n == dim: centring leaves the whitening covariance singular; the epsilon floor must cope
    rng = np.random.default_rng(1)
    Xm, Zm, _ = unsupervised_map(rng.standard_normal((20, 20)), rng.standard_normal((20, 20)),
                                 VecMapConfig(patience=2))
    assert np.isfinite(Xm).all() and np.isfinite(Zm).all()


def test_translation_p1_and_nearest_on_known_case():
    Xm = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    Zm = np.array([[0.0, 2.0], [3.0, 0.1], [1.0, 0.9]])
    assert nearest(Xm, Zm, 2).tolist() == [[1, 2], [0, 2], [2, 1]]
    assert translation_p1(Xm, Zm, [[0, 1], [1, 0], [2, 2]]) == 1.0
    assert translation_p1(Xm, Zm, [[0, 0], [1, 0], [2, 2]]) == pytest.approx(2 / 3)
    assert translation_p1(Xm, Zm, [[0, 0], [0, 1]]) == 1.0  # any gold target counts
    with pytest.raises(MinimultError, match="unknown retrieval method 'cosine'"):
        translation_p1(Xm, Zm, [[0, 1]], method="cosine")
    assert nearest(Xm, Zm, 3).tolist() == [[1, 2, 0], [0, 2, 1], [2, 1, 0]]  # every candidate, ranked
    for k in (0, 4):
        with pytest.raises(MinimultError, match=f"k={k} neighbours requested from 3 candidates"):
            nearest(Xm, Zm, k)
    for gold in ([[0, 3]], [[3, 0]], [[-1, 0]]):
        with pytest.raises(MinimultError, match="gold pairs index outside 3 source / 3 target rows"):
            translation_p1(Xm, Zm, gold)


def test_csls_retrieval_discounts_a_hub_that_plain_nearest_neighbours_pick():
    """Target 0 is the nearest neighbour of every source (a hub); CSLS, which subtracts each target's mean
    similarity to its nearest sources, gives sources 0 and 3 their own targets."""
    Xm = np.array([[0.8, 0.6], [0.75, 0.66], [0.7, 0.72], [0.66, 0.75]])
    Zm = np.array([[0.7, 0.7], [0.9, 0.45], [0.5, 0.85], [0.3, 0.95]])
    gold = [[0, 1], [3, 2]]
    assert nearest(Xm, Zm, 1)[:, 0].tolist() == [0, 0, 0, 0]
    assert translation_p1(Xm, Zm, gold, method="nn") == 0.0
    assert translation_p1(Xm, Zm, gold, method="csls") == 1.0


def test_neighbour_table_known_case_and_missing_rows():
    src_ids = np.array([2, 5])
    src_vecs = np.array([[1.0, 0.0], [0.0, 1.0]])
    tgt_ids = np.array([7, 8, 9])
    tgt_vecs = np.array([[0.1, 1.0], [1.0, 0.2], [-1.0, 0.0]])
    table = neighbour_table(src_ids, src_vecs, tgt_ids, tgt_vecs, table_size=10, k=2)
    assert table.dtype == torch.long and table.shape == (10, 2)
    assert table[2].tolist() == [8, 7] and table[5].tolist() == [7, 8]
    missing = [i for i in range(10) if i not in (2, 5)]
    assert (table[missing] == -1).all()
    with pytest.raises(MinimultError, match="k=4 neighbours requested from 3 targets"):
        neighbour_table(src_ids, src_vecs, tgt_ids, tgt_vecs, table_size=10, k=4)
    with pytest.raises(MinimultError, match=r"target ids outside 0\.\.7"):
        neighbour_table(src_ids, src_vecs, tgt_ids, tgt_vecs, table_size=8, k=1)


def tiny_corpus(n=300, seed=0):
    rng = np.random.default_rng(seed)
    nouns, verbs, adjs = ["cat", "dog", "bird", "fish", "tree"], ["sees", "eats", "likes"], ["big", "red"]
    out = []
    for _ in range(n):
        s = ["the", adjs[rng.integers(2)], nouns[rng.integers(5)], verbs[rng.integers(3)], "the",
             nouns[rng.integers(5)]]
        out.append(s + ["and", "the", nouns[rng.integers(5)], "sleeps"] if rng.random() < 0.3 else s)
    return out


@pytest.fixture(scope="module")
def fasttext_pair():
    sentences = tiny_corpus()
    kw = dict(dim=16, epoch=3, seed=0, thread=1)
    return sentences, train_fasttext(sentences, **kw), train_fasttext(sentences, **kw)


def test_train_fasttext_vocabulary_and_shapes(fasttext_pair):
    sentences, emb, _ = fasttext_pair
    counts = {}
    for s in sentences:
        for w in s:
            counts[w] = counts.get(w, 0) + 1
    assert "</s>" not in emb.words
    assert sorted(emb.words) == sorted(counts)
    assert emb.freqs.tolist() == [counts[w] for w in emb.words]
    assert (np.diff(emb.freqs) <= 0).all() and emb.words[0] == "the"
    assert emb.vectors.shape == (len(counts), 16) and emb.vectors.dtype == np.float32
    assert np.isfinite(emb.vectors).all() and np.abs(emb.vectors).sum() > 0
    assert emb.params["thread"] == 1 and emb.params["maxn"] == 0 and emb.params["dim"] == 16


def test_train_fasttext_thread1_is_reproducible_and_seeded(fasttext_pair):
    sentences, a, b = fasttext_pair
    assert a.words == b.words and np.array_equal(a.vectors, b.vectors)
    c = train_fasttext(sentences, dim=16, epoch=3, seed=1, thread=1)
    assert c.words == a.words and not np.array_equal(c.vectors, a.vectors)


def test_train_fasttext_rejects_bad_input():
    with pytest.raises(MinimultError, match="train_fasttext got no tokens to train on"):
        train_fasttext([[], []])
    with pytest.raises(MinimultError, match="tokens must be non-empty and contain no whitespace"):
        train_fasttext([["a b", "c"]])


def test_a_seed_dictionary_maps_what_the_unsupervised_seed_cannot():
    """Noisy enough that the similarity-distribution seed finds nothing; 60 known pairs recover the
    planted rotation for the other 340 words."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 40))  # a flat spectrum: nothing for the similarity distributions to match
    Q, _ = np.linalg.qr(rng.standard_normal((40, 40)))
    perm = rng.permutation(400)
    Z = (X @ Q + 0.5 * rng.standard_normal((400, 40)))[perm]
    gold = np.stack([perm, np.arange(400)], 1)
    Xm, Zm, _ = unsupervised_map(X, Z, FAST)
    assert translation_p1(Xm, Zm, gold[60:]) < 0.1
    Xm, Zm, info = unsupervised_map(X, Z, FAST, seed_pairs=gold[:60])
    assert translation_p1(Xm, Zm, gold[60:]) >= 0.95
    for bad in (np.zeros((0, 2)), np.array([[0, 400]])):
        with pytest.raises(MinimultError, match="seed dictionary"):
            unsupervised_map(X, Z, FAST, seed_pairs=bad)
