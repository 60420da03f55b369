"""Fully unsupervised cross-lingual mapping of static embeddings (Artetxe et al., ACL 2018).

Written from the paper and /work/shared/VECMAP.md, not from VecMap's (GPL) code:
normalise -> similarity-distribution seed dictionary -> self-learning with stochastic CSLS dictionary
induction and orthogonal Procrustes -> one final whiten / orthogonal map / re-weight / de-whiten step.
Similarities are float32 matmuls in row chunks (the similarity matrix of 20k x 20k words is never
held at once); SVDs and whitening are float64. Stochastic induction flips coins only for the top
candidates of each row (see `_pick`), which has the same distribution as masking the whole matrix.
"""

import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from minimult.errors import MinimultError

_CHUNK_ELEMS = 1 << 25  # ~128 MB of float32 similarities per chunk


@dataclass(frozen=True)
class VecMapConfig:
    init_vocab: int = 4000  # most frequent words used by the similarity-distribution seed
    vocab_cutoff: int = 20000  # most frequent words used in self-learning
    csls_k: int = 10
    keep_start: float = 0.1  # stochastic dictionary induction: keep probability, doubled on stall
    patience: int = 50  # iterations without an improvement > threshold before doubling keep
    threshold: float = 1e-6
    seed: int = 0
    max_iters: int = 10000  # safety net; the loop normally stops long before


def normalize(X):
    """Unit rows, centre columns, unit rows (VecMap's `unit center unit`); float64 numpy or tensor."""
    t = torch.as_tensor(X, dtype=torch.float64)
    t = _unit(t)
    t = _unit(t - t.mean(0, keepdim=True))
    return t.numpy() if isinstance(X, np.ndarray) else t


def _unit(t):
    return t / t.norm(dim=1, keepdim=True).clamp_min(1e-12)


def _chunks(n_rows, n_cols):
    step = max(1, _CHUNK_ELEMS // max(1, n_cols))
    return [(i, min(i + step, n_rows)) for i in range(0, n_rows, step)]


def _topk_mean(A, B, k, with_max=False):
    """For each row of A, the mean of its k largest similarities to the rows of B (and the largest)."""
    out, best = torch.empty(A.shape[0], dtype=A.dtype), torch.empty(A.shape[0], dtype=A.dtype)
    for i, j in _chunks(A.shape[0], B.shape[0]):
        top = (A[i:j] @ B.T).topk(k, dim=1).values
        out[i:j], best[i:j] = top.mean(1), top[:, 0]
    return (out, best) if with_max else out


def _inv_sqrt_and_sqrt(C, eps=1e-8):
    """C^(-1/2) and C^(1/2) of a symmetric PSD matrix; eigenvalues floored at eps * the largest."""
    w, V = torch.linalg.eigh(C)
    w = w.clamp_min(eps * max(float(w.max()), 1e-300))
    return (V * w.rsqrt()) @ V.T, (V * w.sqrt()) @ V.T


def _check_sizes(X, Z, cfg):
    for name, M in (("source", X), ("target", Z)):
        if M.ndim != 2:
            raise MinimultError(f"{name} embeddings must be a 2-D matrix, got shape {tuple(M.shape)}")
    if X.shape[1] != Z.shape[1]:
        raise MinimultError(f"embedding dimensions differ: source {X.shape[1]}, target {Z.shape[1]}")
    dim, need = X.shape[1], max(10, cfg.csls_k)
    for name, M in (("source", X), ("target", Z)):
        if M.shape[0] < need or M.shape[0] < dim:
            fits = f"; --set knn.dim=N with N <= {M.shape[0]} fits them" if M.shape[0] >= need else ""
            raise MinimultError(
                f"embeddings too small for unsupervised mapping: {name} has {M.shape[0]} words "
                f"(need >= {need}, and >= knn.dim = {dim}){fits}")
        if not torch.isfinite(M).all():
            raise MinimultError(f"{name} embeddings contain NaN or infinite values")
    if not (0.0 < cfg.keep_start <= 1.0):
        raise MinimultError(f"keep_start must be in (0, 1], got {cfg.keep_start}")
    if cfg.csls_k < 1 or cfg.patience < 1 or cfg.init_vocab < 1 or cfg.vocab_cutoff < 1:
        raise MinimultError("csls_k, patience, init_vocab and vocab_cutoff must all be >= 1")


def _seed_dictionary(X, Z, n, k):
    """Similarity-distribution initialisation: sorted rows of sqrt(Gram) are comparable across languages."""
    def sorted_sqrt_gram(M):
        U, s, _ = torch.linalg.svd(M[:n], full_matrices=False)  # M[:n] = U diag(s) V^T
        G = (U * s) @ U.T  # (n, n) = sqrt(M M^T)
        return normalize(G.sort(dim=1).values).float()

    sim = sorted_sqrt_gram(X) @ sorted_sqrt_gram(Z).T  # (n, n)
    k = min(k, n)
    r_x = sim.topk(k, dim=1).values.mean(1)
    r_z = sim.topk(k, dim=0).values.mean(0)
    csls = 2 * sim - r_x[:, None] - r_z[None, :]
    ids = torch.arange(n)
    src = torch.cat([ids, csls.argmax(0)])
    tgt = torch.cat([csls.argmax(1), ids])
    return src, tgt


def _candidates(keep, n):
    """How many top-ranked entries per row to consider under stochastic induction: enough that all of
    them being dropped has probability < 1e-6 (then the row falls back to its unmasked best)."""
    if keep >= 1.0:
        return 1
    return int(min(n, max(1, math.ceil(math.log(1e-6) / math.log(1.0 - keep)))))


def _pick(A, B, r_b, keep, gen):
    """For each row a of A, the row b of B maximising CSLS = 2 cos - r_a - r_b among the similarities
    kept with probability `keep`. The argmax over a random subset of a row is its highest-ranked kept
    entry, so only the top few entries of each row need a coin flip."""
    m = _candidates(keep, B.shape[0])
    idx = torch.empty(A.shape[0], dtype=torch.long)
    for i, j in _chunks(A.shape[0], B.shape[0]):
        top = (2 * A[i:j] @ B.T - r_b[None, :]).topk(m, dim=1)  # r_a: constant along a row
        first = torch.zeros(j - i, 1, dtype=torch.long)
        if m > 1:  # index of the first kept candidate; 0 (the unmasked best) if none is kept
            first = (torch.rand(j - i, m, generator=gen) < keep).byte().argmax(1, keepdim=True)
        idx[i:j] = top.indices.gather(1, first)[:, 0]
    return idx


def _induce(xw, zw, k, keep, gen):
    """CSLS dictionary induction in both directions (stochastic while keep < 1).

    Returns (src, tgt, objective): forward pairs (every source row) then backward pairs (every target
    row); the objective is the mean best cosine over both directions. It does not depend on the
    random mask, so a stall means the mapping, not the coin flips, stopped improving.
    """
    (r_x, best_x), (r_z, best_z) = _topk_mean(xw, zw, k, True), _topk_mean(zw, xw, k, True)
    fwd = _pick(xw, zw, r_z, keep, gen)
    bwd = _pick(zw, xw, r_x, keep, gen)
    src = torch.cat([torch.arange(xw.shape[0]), bwd])
    tgt = torch.cat([fwd, torch.arange(zw.shape[0])])
    return src, tgt, (best_x.mean().item() + best_z.mean().item()) / 2


def _procrustes(XD, ZD):
    """Orthogonal W minimising ||XD W - ZD||: W = U V^T from the SVD of XD^T ZD."""
    U, _, Vt = torch.linalg.svd(XD.T @ ZD)
    return U @ Vt


def _final_mapping(X, Z, src, tgt):
    """Whiten each side, map the whitened spaces orthogonally, re-weight by s^0.5, de-whiten each side."""
    XD, ZD = X[src], Z[tgt]
    wx1, sqrt_cx = _inv_sqrt_and_sqrt(XD.T @ XD)
    wz1, sqrt_cz = _inv_sqrt_and_sqrt(ZD.T @ ZD)
    U, s, Vt = torch.linalg.svd((XD @ wx1).T @ (ZD @ wz1))
    wx2, wz2 = U, Vt.T
    reweight = s.clamp_min(0).sqrt()
    Wx = (wx1 @ wx2 * reweight) @ (wx2.T @ sqrt_cx @ wx2)
    Wz = (wz1 @ wz2 * reweight) @ (wz2.T @ sqrt_cz @ wz2)
    return Wx, Wz


def unsupervised_map(X, Z, cfg=VecMapConfig(), seed_pairs=None):
    """Map X (n_x, d) and Z (n_z, d), rows sorted by frequency, into one space without a dictionary, or,
    given `seed_pairs` ((m, 2) rows of X and of Z known to translate each other, such as identically
    spelled words), self-learning from that seed instead of the similarity-distribution one (VecMap's
    semi-supervised mode).

    Returns (Xm, Zm, info): both full matrices mapped (float32 numpy) and a dict with iterations,
    objective (mean best cosine, both directions), dict_size, keep, converged, seconds.
    """
    t0 = time.time()
    X = torch.as_tensor(np.asarray(X), dtype=torch.float64)
    Z = torch.as_tensor(np.asarray(Z), dtype=torch.float64)
    _check_sizes(X, Z, cfg)
    X, Z = normalize(X), normalize(Z)
    gen = torch.Generator().manual_seed(cfg.seed)
    k = cfg.csls_k
    if seed_pairs is None:
        src, tgt = _seed_dictionary(X, Z, min(X.shape[0], Z.shape[0], cfg.init_vocab), k)
    else:
        seed = np.asarray(seed_pairs, dtype=np.int64).reshape(-1, 2)
        if len(seed) == 0 or seed.min() < 0 or seed[:, 0].max() >= X.shape[0] or seed[:, 1].max() >= Z.shape[0]:
            raise MinimultError(f"a seed dictionary needs at least one pair inside {X.shape[0]} source / "
                                f"{Z.shape[0]} target rows (got {len(seed)} pairs)")
        src, tgt = torch.as_tensor(seed[:, 0]), torch.as_tensor(seed[:, 1])
    nx, nz = min(X.shape[0], cfg.vocab_cutoff), min(Z.shape[0], cfg.vocab_cutoff)
    k = min(k, nx, nz)
    Xc, Zc = X[:nx].float(), Z[:nz].float()

    best, last_improvement, keep, it, objective = -float("inf"), 0, cfg.keep_start, 1, float("nan")
    converged = False
    while True:
        if it - last_improvement > cfg.patience:
            if keep >= 1.0:
                converged = True
                break
            keep, last_improvement = min(1.0, 2 * keep), it
        if it > cfg.max_iters:
            break
        W = _procrustes(X[src], Z[tgt]).float()
        src, tgt, objective = _induce(Xc @ W, Zc, k, keep, gen)
        if objective - best >= cfg.threshold:
            best, last_improvement = objective, it
        it += 1

    Wx, Wz = _final_mapping(X, Z, src, tgt)
    Xm, Zm = (X @ Wx).float().numpy(), (Z @ Wz).float().numpy()
    info = {"iterations": it - 1, "objective": objective, "best_objective": best,
            "dict_size": int(src.numel()), "keep": keep, "converged": converged,
            "seconds": time.time() - t0}
    return Xm, Zm, info


def nearest(Xm_rows, Zm, k):
    """(n, k) indices of the k rows of Zm with the highest cosine to each row of Xm_rows, best first."""
    A = _unit(torch.as_tensor(np.asarray(Xm_rows), dtype=torch.float32))
    B = _unit(torch.as_tensor(np.asarray(Zm), dtype=torch.float32))
    if not 1 <= k <= B.shape[0]:
        raise MinimultError(f"k={k} neighbours requested from {B.shape[0]} candidates")
    out = torch.empty(A.shape[0], k, dtype=torch.long)
    for i, j in _chunks(A.shape[0], B.shape[0]):
        out[i:j] = (A[i:j] @ B.T).topk(k, dim=1).indices
    return out.numpy()


def translation_p1(Xm, Zm, gold_pairs, method="nn", k=10):
    """P@1 of retrieving a gold target (among all rows of Zm) for each distinct gold source row."""
    gold = np.asarray(gold_pairs, dtype=np.int64).reshape(-1, 2)
    if len(gold) == 0:
        raise MinimultError("translation_p1 needs at least one gold pair")
    if gold.min() < 0 or gold[:, 0].max() >= len(Xm) or gold[:, 1].max() >= len(Zm):
        raise MinimultError(f"gold pairs index outside {len(Xm)} source / {len(Zm)} target rows")
    sources = np.unique(gold[:, 0])
    if method == "nn":
        pred = nearest(Xm[sources], Zm, 1)[:, 0]
    elif method == "csls":
        A = _unit(torch.as_tensor(np.asarray(Xm), dtype=torch.float32))
        B = _unit(torch.as_tensor(np.asarray(Zm), dtype=torch.float32))
        r_z = _topk_mean(B, A, min(k, A.shape[0]))  # the source-side term is constant per query
        Q = A[torch.as_tensor(sources)]
        pred = np.empty(len(sources), dtype=np.int64)
        for i, j in _chunks(Q.shape[0], B.shape[0]):
            pred[i:j] = (2 * Q[i:j] @ B.T - r_z[None, :]).argmax(1).numpy()
    else:
        raise MinimultError(f"unknown retrieval method {method!r} (use 'nn' or 'csls')")
    targets = {}
    for s, t in gold:
        targets.setdefault(int(s), set()).add(int(t))
    return float(np.mean([int(p) in targets[int(s)] for s, p in zip(sources, pred)]))
