"""Metrics on hand-made cases with known answers (STYLE 11)."""

import math

import pytest
import torch
import torch.nn.functional as F

from minimult.errors import MinimultError
from minimult.metrics import alignment_prf, mean_pool, multilinguality, perplexity, retrieval_p1


def sentences(seed=0, n=40, H=16):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 25, (n,), generator=g).tolist()
    return [torch.randn(L, H, generator=g) for L in lengths]


def test_alignment_identical_vectors():
    src = sentences()
    r = alignment_prf(src, [s.clone() for s in src], [torch.arange(len(s)) for s in src])
    assert r["f1"] == r["precision"] == r["recall"] == 1.0
    assert r["n_pred"] == r["n_gold"] == r["n_correct"] == sum(len(s) for s in src)


def test_alignment_permutation():
    g = torch.Generator().manual_seed(1)
    src = sentences(1)
    perms = [torch.randperm(len(s), generator=g) for s in src]
    tgt = [torch.empty_like(s).index_copy_(0, p, s) for s, p in zip(src, perms)]  # tgt[p[a]] = src[a]
    assert alignment_prf(src, tgt, perms)["f1"] == 1.0
    links = [torch.stack([torch.arange(len(p)), p], 1) for p in perms]            # same gold as (K, 2) links
    assert alignment_prf(src, tgt, links) == alignment_prf(src, tgt, perms)
    wrong = alignment_prf(src, tgt, [torch.arange(len(s)) for s in src])
    assert wrong["n_pred"] == sum(len(s) for s in src) and wrong["f1"] < 0.3
    reversed_tgt = [s.flip(0) for s in src]
    assert alignment_prf(src, reversed_tgt, [torch.arange(len(s)).flip(0) for s in src])["f1"] == 1.0


def test_alignment_counts_by_hand():
    e = torch.eye(3)
    # sentence 0: src rows e0,e1,e2 vs tgt e0,e2,e1 -> predicted (0,0),(1,2),(2,1); gold (0,0),(1,1),(2,1)
    # sentence 1: 2 src tokens, 1 tgt token close to src 1 -> predicted (1,0); gold (0,0) and (1,0)
    src = [e, e[:2]]
    tgt = [e[[0, 2, 1]], torch.tensor([[0.1, 1.0, 0.0]])]
    gold = [torch.tensor([[0, 0], [1, 1], [2, 1]]), torch.tensor([0, 0])]
    r = alignment_prf(src, tgt, gold, chunk=1)
    assert (r["n_pred"], r["n_gold"], r["n_correct"]) == (4, 5, 3)
    assert r["precision"] == 0.75 and r["recall"] == 0.6
    assert r["f1"] == pytest.approx(2 * 0.75 * 0.6 / 1.35)
    assert alignment_prf(src, tgt, gold, chunk=100) == r


def test_alignment_ties_take_first_index():
    # src = [v, v], tgt = [v, w] with v . w = 0: rows 0 and 1 both pick tgt 0, column 0 picks src 0
    # (first maximum), column 1 also picks src 0; only (0, 0) is mutual
    v, w = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    r = alignment_prf([torch.stack([v, v])], [torch.stack([v, w])], [torch.tensor([0, 1])])
    assert (r["n_pred"], r["n_correct"], r["n_gold"]) == (1, 1, 2)


def test_alignment_empty_and_chunked():
    src = sentences(2) + [torch.zeros(0, 16), torch.randn(3, 16)]
    tgt = [s.clone() for s in src[:-1]] + [torch.zeros(0, 16)]
    gold = [torch.arange(len(s)) for s in src[:-1]] + [torch.full((3,), -1)]
    a = alignment_prf(src, tgt, gold, chunk=3)
    assert a == alignment_prf(src, tgt, gold, chunk=1000) and a["f1"] == 1.0
    with pytest.raises(MinimultError):
        alignment_prf(src[:2], tgt[:2], [torch.arange(len(src[0])), torch.arange(len(src[1]) + 1)])
    with pytest.raises(MinimultError):
        alignment_prf([torch.randn(2, 4)], [torch.randn(2, 4)], [torch.tensor([[0, 2]])])


def test_retrieval_identical_and_random():
    x = torch.randn(1000, 64, generator=torch.Generator().manual_seed(0))
    assert retrieval_p1(x, x.clone() * 3) == dict(forward=1.0, backward=1.0, mean=1.0)  # cosine: scale-free
    y = torch.randn(1000, 64, generator=torch.Generator().manual_seed(1))
    r = retrieval_p1(x, y)
    assert r["forward"] < 0.05 and r["backward"] < 0.05


def test_retrieval_one_direction():
    # y_i = e_i; x_0 a hub close to every y (slightly more to y_0), x_i (i >= 1) weakly towards y_i only.
    # forward: every x_i's nearest is y_i -> 1. backward: y_0 finds x_0, every other y_j also finds
    # the hub x_0 (cos ~0.49 > 0.3) -> 1/N.
    N = 4
    y = torch.cat([torch.eye(N), torch.zeros(N, 1)], 1)                         # (N, N+1)
    x = torch.zeros(N, N + 1)
    x[0, :N] = 1.0
    x[0, 0] = 1.1
    for i in range(1, N):
        x[i, i], x[i, N] = 0.3, math.sqrt(1 - 0.09)
    r = retrieval_p1(x, y)
    assert r == dict(forward=1.0, backward=1 / N, mean=(1 + 1 / N) / 2)
    assert retrieval_p1(y, x) == dict(forward=1 / N, backward=1.0, mean=(1 + 1 / N) / 2)


def test_retrieval_ties_take_first_index():
    y = torch.randn(10, 8, generator=torch.Generator().manual_seed(3))
    y[1] = y[0]
    r = retrieval_p1(y.clone(), y)  # x_1 and y_1 both find index 0 first -> each direction 9/10
    assert r["forward"] == r["backward"] == 0.9


def test_retrieval_chunked_equals_unchunked():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(1000, 32, generator=g)
    y = x + 1.2 * torch.randn(1000, 32, generator=g)
    full = retrieval_p1(x, y, chunk=5000)
    assert 0.1 < full["forward"] < 0.99
    assert retrieval_p1(x, y, chunk=7) == full == retrieval_p1(x, y, chunk=1000)
    with pytest.raises(MinimultError):
        retrieval_p1(x, y[:10])


def test_mean_pool():
    hidden = torch.arange(24, dtype=torch.float).view(2, 3, 4)
    keep = torch.tensor([[True, False, True], [False, False, False]])
    out = mean_pool(hidden, keep)
    assert torch.equal(out[0], (hidden[0, 0] + hidden[0, 2]) / 2)
    assert torch.equal(out[1], torch.zeros(4))


def test_multilinguality_and_perplexity():
    assert multilinguality(0.2, 0.4, 0.6, 0.8) == pytest.approx(0.5)
    V = 2048
    targets = torch.randint(V, (500,), generator=torch.Generator().manual_seed(5))
    nll = F.cross_entropy(torch.zeros(500, V), targets, reduction="sum").item()
    assert perplexity(nll, 500) == pytest.approx(V, rel=1e-5)
    assert perplexity(0.0, 3) == 1.0
    with pytest.raises(MinimultError):
        perplexity(1.0, 0)
