"""Evaluation measures (DESIGN §8) as pure tensor functions; the evaluator supplies the vectors.

Similarities are cosine. Every argmax is `torch.argmax`, which returns the first maximal index, so a
tie goes to the lowest index: in retrieval a query counts as correct only if the right row is that
first maximum, and in alignment a tied row or column points at its first candidate only.
Zero vectors have cosine 0 with everything.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from minimult.errors import MinimultError


def _links(gold: torch.Tensor, n: int, m: int, i: int) -> torch.Tensor:
    """Gold alignment of sentence i as a (K, 2) long tensor of (src index, tgt index) links."""
    gold = torch.as_tensor(gold).long()
    if gold.dim() == 1:  # gold[a] = tgt index aligned to src token a, -1 = unaligned
        if gold.numel() != n:
            raise MinimultError(f"gold alignment of sentence {i} has {gold.numel()} entries for {n} source tokens")
        a = torch.arange(n, device=gold.device)
        gold = torch.stack([a, gold], 1)[gold >= 0]
    elif gold.dim() != 2 or gold.shape[1] != 2:
        raise MinimultError(f"gold alignment of sentence {i} must be (n,) or (K, 2), got {tuple(gold.shape)}")
    if gold.numel() and (gold.min() < 0 or gold[:, 0].max() >= n or gold[:, 1].max() >= m):
        raise MinimultError(f"gold alignment of sentence {i} links outside its {n} x {m} tokens")
    return gold


def _pad(vectors: list[torch.Tensor], H: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Unit-normalised, zero-padded (C, Tmax, H) and the (C, Tmax) validity mask."""
    lengths = torch.tensor([v.shape[0] for v in vectors], device=device)
    Tmax = int(lengths.max()) if len(vectors) else 0
    out = torch.zeros(len(vectors), Tmax, H, device=device)
    for c, v in enumerate(vectors):  # copies only; the matrix work is batched below
        out[c, : v.shape[0]] = v.float()
    valid = torch.arange(Tmax, device=device)[None, :] < lengths[:, None]
    return F.normalize(out, dim=-1), valid


def alignment_prf(src: list[torch.Tensor], tgt: list[torch.Tensor], gold: list[torch.Tensor],
                  chunk: int = 256) -> dict:
    """Word alignment by mutual argmax of cosine similarity, scored against gold, pooled over pairs.

    src[i] (n_i, H), tgt[i] (m_i, H): wordpiece vectors of parallel sentence i without specials.
    gold[i] is either a (K, 2) long tensor of (a, b) links (a indexes src[i], b indexes tgt[i]) or a
    1-D long tensor of length n_i with gold[i][a] = b (-1 = unaligned); identity gold is arange(n_i).
    (a, b) is predicted iff b is the argmax of row a and a the argmax of column b (first maximum on
    ties). Counts are summed over all sentences, then turned into ratios (0 where undefined).
    """
    if not len(src) == len(tgt) == len(gold):
        raise MinimultError(f"alignment needs as many src, tgt and gold entries, got {len(src)}, {len(tgt)}, {len(gold)}")
    if not src:
        raise MinimultError("alignment needs at least one sentence pair")
    H = src[0].shape[-1]
    if any(v.dim() != 2 or v.shape[1] != H for v in list(src) + list(tgt)):
        raise MinimultError(f"alignment vectors must all be (n_i, {H})")
    device = src[0].device
    links = [_links(g, s.shape[0], t.shape[0], i).to(device) for i, (s, t, g) in enumerate(zip(src, tgt, gold))]
    n_pred = n_gold = n_correct = 0
    order = sorted(range(len(src)), key=lambda i: (src[i].shape[0], tgt[i].shape[0]))  # less padding
    for start in range(0, len(order), chunk):
        idx = order[start:start + chunk]
        xs, xvalid = _pad([src[i] for i in idx], H, device)                    # (C, Tn, H), (C, Tn)
        ys, yvalid = _pad([tgt[i] for i in idx], H, device)                    # (C, Tm, H), (C, Tm)
        C, Tn, Tm = xs.shape[0], xs.shape[1], ys.shape[1]
        if Tn == 0 or Tm == 0:
            n_gold += sum(links[i].shape[0] for i in idx)  # nothing can be predicted here
            continue
        sim = torch.bmm(xs, ys.transpose(1, 2))                               # (C, Tn, Tm)
        sim = sim.masked_fill(~(xvalid[:, :, None] & yvalid[:, None, :]), float("-inf"))
        row_best = sim.argmax(2)                                               # (C, Tn) best tgt per src
        col_best = sim.argmax(1)                                               # (C, Tm) best src per tgt
        mutual = (col_best.gather(1, row_best) == torch.arange(Tn, device=device)) & xvalid
        mutual &= yvalid.any(1, keepdim=True)                                  # empty tgt: no links
        pred = torch.zeros(C, Tn, Tm, dtype=torch.bool, device=device).scatter_(2, row_best[..., None], mutual[..., None])
        gold_dense = torch.zeros(C, Tn, Tm, dtype=torch.bool, device=device)
        sent = torch.cat([torch.full((links[i].shape[0],), c, device=device) for c, i in enumerate(idx)])
        ab = torch.cat([links[i] for i in idx])                                # (K, 2)
        gold_dense[sent, ab[:, 0], ab[:, 1]] = True                            # duplicates count once
        n_pred += int(pred.sum())
        n_gold += int(gold_dense.sum())
        n_correct += int((pred & gold_dense).sum())
    precision = n_correct / n_pred if n_pred else 0.0
    recall = n_correct / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return dict(precision=precision, recall=recall, f1=f1, n_pred=n_pred, n_gold=n_gold, n_correct=n_correct)


def _p1(queries: torch.Tensor, keys: torch.Tensor, chunk: int) -> float:
    """Fraction of rows i whose first most-similar row of `keys` is i (both unit-normalised)."""
    N = queries.shape[0]
    correct = torch.zeros((), dtype=torch.long, device=queries.device)
    for start in range(0, N, chunk):
        best = (queries[start:start + chunk] @ keys.T).argmax(1)               # (c,) from a (c, N) block
        correct += (best == torch.arange(start, start + best.shape[0], device=queries.device)).sum()
    return int(correct) / N


def retrieval_p1(x: torch.Tensor, y: torch.Tensor, chunk: int = 2048) -> dict:
    """P@1 of cosine nearest-neighbour retrieval between parallel rows of x and y (both (N, H)).

    forward: x_i finds y_i among all rows of y; backward: y_i finds x_i; mean: their average.
    At most chunk x N similarities exist at a time.
    """
    if x.dim() != 2 or x.shape != y.shape or x.shape[0] == 0:
        raise MinimultError(f"retrieval needs two non-empty (N, H) tensors of equal shape, got {tuple(x.shape)} "
                            f"and {tuple(y.shape)}")
    if chunk < 1:
        raise MinimultError(f"retrieval chunk must be >= 1, got {chunk}")
    xn, yn = F.normalize(x.float(), dim=1), F.normalize(y.float(), dim=1)
    forward, backward = _p1(xn, yn, chunk), _p1(yn, xn, chunk)
    return dict(forward=forward, backward=backward, mean=(forward + backward) / 2)


def mean_pool(hidden: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """(B, T, H), (B, T) bool -> (B, H) mean over kept positions; a row with none kept is zero."""
    w = keep.to(hidden.dtype)[..., None]                                       # (B, T, 1)
    return (hidden * w).sum(1) / w.sum(1).clamp(min=1)


def multilinguality(tau0: float, tau8: float, rho0: float, rho8: float) -> float:
    """µ = (τ0 + τ8 + ρ0 + ρ8) / 4."""
    return (tau0 + tau8 + rho0 + rho8) / 4


def perplexity(nll_sum: float, count: int) -> float:
    """exp(mean natural-log negative log-likelihood); inf if that overflows."""
    if count <= 0:
        raise MinimultError("perplexity over zero tokens is undefined")
    try:
        return math.exp(float(nll_sum) / count)
    except OverflowError:
        return float("inf")
