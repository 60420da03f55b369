"""Metrics on hand-made cases with known answers (docs/pipeline.md, Testing; definitions: docs/metrics.md)."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from minimult.errors import MinimultError
from minimult.evaluate.metrics import (alignment_prf, kendall_distance, match_order_distance, multilinguality,
                                      perplexity, retrieval_p1)


def sentences(seed=0, n=40, H=16):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 25, (n,), generator=g).tolist()
    return [torch.randn(L, H, generator=g) for L in lengths]


def links_of(gold):
    """Per-sentence gold, each 1-D (gold[a] = b, -1 = unaligned) or (K, 2) (a, b), as (K, 3) (s, a, b)."""
    rows = []
    for s, g in enumerate(gold):
        g = torch.as_tensor(g).long()
        if g.dim() == 1:
            g = torch.stack([torch.arange(len(g)), g], 1)[g >= 0]
        rows.append(torch.cat([torch.full((len(g), 1), s), g.view(-1, 2)], 1))
    return torch.cat(rows)


def align(src, tgt, gold, chunk=256):
    """alignment_prf on per-sentence lists: flat vectors, offsets and (s, a, b) links."""
    offsets = lambda vs: torch.tensor([0] + [len(v) for v in vs]).cumsum(0)
    return alignment_prf(torch.cat(src), offsets(src), torch.cat(tgt), offsets(tgt), links_of(gold), chunk)


def reference_alignment(src, tgt, gold):
    """(n_pred, n_gold, n_correct) straight from the definition, one sentence at a time, as sets."""
    n_pred = n_gold = n_correct = 0
    for s, (x, y) in enumerate(zip(src, tgt)):
        links = {(a, b) for s2, a, b in links_of(gold).tolist() if s2 == s}
        pred = set()
        if len(x) and len(y):
            sim = F.normalize(x, dim=1) @ F.normalize(y, dim=1).T
            row, col = sim.argmax(1).tolist(), sim.argmax(0).tolist()
            pred = {(a, row[a]) for a in range(len(x)) if col[row[a]] == a}
        n_pred, n_gold, n_correct = n_pred + len(pred), n_gold + len(links), n_correct + len(pred & links)
    return n_pred, n_gold, n_correct


def test_alignment_identical_vectors():
    src = sentences()
    r = align(src, [s.clone() for s in src], [torch.arange(len(s)) for s in src])
    assert r["f1"] == r["precision"] == r["recall"] == 1.0
    assert r["n_pred"] == r["n_gold"] == r["n_correct"] == sum(len(s) for s in src)


def test_alignment_permutation():
    g = torch.Generator().manual_seed(1)
    src = sentences(1)
    perms = [torch.randperm(len(s), generator=g) for s in src]
    tgt = [torch.empty_like(s).index_copy_(0, p, s) for s, p in zip(src, perms)]  # tgt[p[a]] = src[a]
    assert align(src, tgt, perms)["f1"] == 1.0
    wrong = align(src, tgt, [torch.arange(len(s)) for s in src])
    assert wrong["n_pred"] == sum(len(s) for s in src) and wrong["f1"] < 0.3
    reversed_tgt = [s.flip(0) for s in src]
    assert align(src, reversed_tgt, [torch.arange(len(s)).flip(0) for s in src])["f1"] == 1.0


def test_alignment_counts_by_hand():
    e = torch.eye(3)
    # sentence 0: src rows e0,e1,e2 vs tgt e0,e2,e1 -> predicted (0,0),(1,2),(2,1); gold (0,0),(1,1),(2,1)
    # sentence 1: 2 src tokens, 1 tgt token close to src 1 -> predicted (1,0); gold (0,0) and (1,0)
    src = [e, e[:2]]
    tgt = [e[[0, 2, 1]], torch.tensor([[0.1, 1.0, 0.0]])]
    gold = [torch.tensor([[0, 0], [1, 1], [2, 1]]), torch.tensor([0, 0])]
    r = align(src, tgt, gold, chunk=1)
    assert (r["n_pred"], r["n_gold"], r["n_correct"]) == (4, 5, 3)
    assert r["precision"] == 0.75 and r["recall"] == 0.6
    assert r["f1"] == pytest.approx(2 * 0.75 * 0.6 / 1.35)
    assert align(src, tgt, gold, chunk=100) == r
    # a duplicated gold link counts once
    assert align(src, tgt, [torch.tensor([[0, 0], [1, 1], [2, 1], [2, 1]]), torch.tensor([0, 0])]) == r


def test_alignment_ties_take_first_index():
    # src = [v, v], tgt = [v, w] with v . w = 0: rows 0 and 1 both pick tgt 0, column 0 picks src 0
    # (first maximum), column 1 also picks src 0; only (0, 0) is mutual
    v, w = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    r = align([torch.stack([v, v])], [torch.stack([v, w])], [torch.tensor([0, 1])])
    assert (r["n_pred"], r["n_correct"], r["n_gold"]) == (1, 1, 2)


def test_alignment_matches_sentence_by_sentence_reference():
    # ragged sentences of 0-9 pieces (empty ones on either side), exact duplicates within and across
    # sides (ties), random gold with unaligned pieces and duplicate links; chunks of 1, 7 and all
    g = torch.Generator().manual_seed(6)
    src, tgt, gold = [], [], []
    for _ in range(60):
        n, m = torch.randint(0, 10, (2,), generator=g).tolist()
        x, y = torch.randn(n, 8, generator=g), torch.randn(m, 8, generator=g)
        if n > 1:
            x[-1] = x[0]                                     # tied rows
        if n and m:
            y[torch.randint(m, (1,), generator=g)] = x[torch.randint(n, (1,), generator=g)] * 2  # same direction
            y[: min(n, m) // 2] += 3 * x[: min(n, m) // 2]   # pull some pairs together
        k = torch.randint(0, n * m + 1, (1,), generator=g).item() if n and m else 0
        links = torch.stack([torch.randint(max(n, 1), (k,), generator=g), torch.randint(max(m, 1), (k,), generator=g)], 1)
        src.append(x), tgt.append(y), gold.append(links)
    expected = reference_alignment(src, tgt, gold)
    assert expected[0] > 50 and expected[2] > 10             # a case where the counts say something
    for chunk in (1, 7, 1000):
        r = align(src, tgt, gold, chunk)
        assert (r["n_pred"], r["n_gold"], r["n_correct"]) == expected


def test_alignment_empty_and_chunked():
    src = sentences(2) + [torch.zeros(0, 16), torch.randn(3, 16)]
    tgt = [s.clone() for s in src[:-1]] + [torch.zeros(0, 16)]
    gold = [torch.arange(len(s)) for s in src[:-1]] + [torch.full((3,), -1)]
    a = align(src, tgt, gold, chunk=3)
    assert a == align(src, tgt, gold, chunk=1000) and a["f1"] == 1.0


def test_alignment_errors():
    x = torch.randn(5, 4)
    with pytest.raises(MinimultError, match="outside"):  # b = 2 in a 2 x 2 sentence
        alignment_prf(x[:2], [0, 2], x[:2], [0, 2], torch.tensor([[0, 0, 2]]))
    with pytest.raises(MinimultError, match="outside"):  # sentence 1 does not exist
        alignment_prf(x, [0, 2, 5], x, [0, 3, 5], torch.tensor([[2, 0, 0]]))
    with pytest.raises(MinimultError, match="outside"):  # a = 2 lies in sentence 1, not 0
        alignment_prf(x, [0, 2, 5], x, [0, 3, 5], torch.tensor([[0, 2, 0]]))
    with pytest.raises(MinimultError, match="offsets"):
        alignment_prf(x, [0, 2, 4], x, [0, 3, 5], torch.zeros(0, 3, dtype=torch.long))
    with pytest.raises(MinimultError, match="as many"):
        alignment_prf(x, [0, 2, 5], x, [0, 5], torch.zeros(0, 3, dtype=torch.long))
    with pytest.raises(MinimultError, match=r"\(K, 3\)"):
        alignment_prf(x, [0, 5], x, [0, 5], torch.tensor([[0, 0]]))


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
    with pytest.raises(MinimultError, match=r"retrieval needs two non-empty \(N, H\) tensors of equal shape"):
        retrieval_p1(x, y[:10])


def test_multilinguality_and_perplexity():
    assert multilinguality(0.2, 0.4, 0.6, 0.8) == pytest.approx(0.5)
    V = 2048
    targets = torch.randint(V, (500,), generator=torch.Generator().manual_seed(5))
    nll = F.cross_entropy(torch.zeros(500, V), targets, reduction="sum").item()
    assert perplexity(nll, 500) == pytest.approx(V, rel=1e-5)
    assert perplexity(0.0, 3) == 1.0
    with pytest.raises(MinimultError, match="perplexity over zero tokens is undefined"):
        perplexity(1.0, 0)


def test_kendall_distance_of_identity_reversal_and_scipy():
    from scipy.stats import kendalltau

    assert kendall_distance(np.arange(7)) == 0.0
    assert kendall_distance(np.arange(7)[::-1]) == 1.0
    assert kendall_distance(np.array([1, 0, 2])) == pytest.approx(1 / 3)
    assert math.isnan(kendall_distance(np.array([3])))
    rng = np.random.default_rng(0)
    for n in (2, 5, 30):
        p = rng.permutation(n)
        assert kendall_distance(p) == pytest.approx((1 - kendalltau(np.arange(n), p).statistic) / 2)


def test_match_recovers_a_known_permutation():
    rng = np.random.default_rng(1)
    xs = sentences(seed=3, n=12)
    perms = [rng.permutation(len(x)) for x in xs]
    ys = [x[torch.as_tensor(p)] for x, p in zip(xs, perms)]  # target j holds source perms[j]
    cat = lambda ts: torch.cat(ts)
    offsets = lambda ts: np.cumsum([0] + [len(t) for t in ts])
    out = match_order_distance(cat(xs), offsets(xs), cat(ys), offsets(ys))
    # source i sits at target position argsort(p)[i]; a sentence of one piece has no pairs
    expected = [kendall_distance(np.argsort(p)) for p in perms if len(p) >= 2]
    assert out["pairs"] == len(expected) and out["distance"] == pytest.approx(np.mean(expected))
    reversed_ = [x.flip(0) for x in xs]
    assert match_order_distance(cat(xs), offsets(xs), cat(reversed_), offsets(reversed_))["distance"] == 1.0
    with pytest.raises(MinimultError, match="as many source as target"):
        match_order_distance(cat(xs), offsets(xs), cat(ys[:-1]), offsets(ys[:-1]))
