"""Masking proportions by counting (docs/pipeline.md, Testing): selection, replacement mix, ids, determinism."""

import math

import pytest
import torch

from minimult.errors import MinimultError
from conftest import random_replacement_ids
from minimult.data.masking import (KNN, KNN_PUBLISHED, NO_RANDOM, NO_RANDOM_PUBLISHED, STANDARD, MaskConfig,
                              mask_batch, parse_probs)

V, N_SPECIAL = 2048, 5
PAD, CLS, SEP, MASK = 0, 2, 3, 4


def make_batch(gen, B=64, T=40, lang=None):
    """[CLS] ordinary ids [SEP] [PAD]... with lengths 0..T-2 of ordinary tokens; lang (B,) picks 0 or 1."""
    n = torch.randint(0, T - 1, (B,), generator=gen)
    n[0] = 0                                                                   # always an empty sequence
    lang = torch.zeros(B, dtype=torch.long) if lang is None else lang
    pos = torch.arange(T)[None, :]
    ids = torch.randint(N_SPECIAL, V, (B, T), generator=gen)
    ids = torch.where(pos == 0, CLS, ids)
    ids = torch.where(pos == n[:, None] + 1, SEP, ids)
    ids = torch.where(pos > n[:, None] + 1, PAD, ids)
    maskable = (pos >= 1) & (pos <= n[:, None])
    ids = torch.where(maskable, ids + lang[:, None] * V, ids)                  # shared specials
    return ids, maskable, n


def run_many(probs, n_batches=200, seed=0, neighbours=None, lang=None):
    gen = torch.Generator().manual_seed(seed)
    cfg = MaskConfig(probs=probs)
    rand_ids = random_replacement_ids(V, 2)
    out = []
    for _ in range(n_batches):
        ids, maskable, n = make_batch(gen, lang=lang)
        mask_ids = torch.full((ids.shape[0],), MASK)
        out.append((ids, maskable, n, mask_batch(ids, maskable, mask_ids, rand_ids, cfg, gen, neighbours)))
    return out


def test_selection_counts_and_positions():
    total_sel = total_maskable = 0
    for ids, maskable, n, m in run_many(STANDARD):
        chosen = torch.zeros(ids.numel(), dtype=torch.bool)
        chosen[m.selected] = True
        chosen = chosen.view(ids.shape)
        assert not (chosen & ~maskable).any()                                  # never specials / padding
        want = torch.where(n > 0, torch.round(0.15 * n).clamp(min=1), torch.zeros(()))
        assert torch.equal(chosen.sum(1), want.long())                        # exact per-row count
        assert (chosen.sum(1)[n > 0] >= 1).all()
        assert torch.equal(m.targets, ids.flatten()[m.selected])
        unchanged = ~chosen
        assert torch.equal(m.input_ids[unchanged], ids[unchanged])
        total_sel += int(chosen.sum())
        total_maskable += int(maskable.sum())
    assert abs(total_sel / total_maskable - 0.15) < 0.01                      # rounding only, over lengths 1..38


def test_selection_is_uniform_over_positions():
    # every row has 20 maskable tokens -> 3 selected; each position must be hit with p = 3/20
    gen = torch.Generator().manual_seed(1)
    B, T, n_batches = 256, 22, 50
    ids = torch.randint(N_SPECIAL, V, (B, T))
    maskable = torch.ones(B, T, dtype=torch.bool)
    maskable[:, 0] = maskable[:, -1] = False
    hits = torch.zeros(T)
    for _ in range(n_batches):
        m = mask_batch(ids, maskable, torch.full((B,), MASK), random_replacement_ids(V, 1), MaskConfig(), gen)
        hits += torch.bincount(m.selected % T, minlength=T)
    p, rows = 3 / 20, B * n_batches
    freq = hits[1:-1] / rows
    se = math.sqrt(p * (1 - p) / rows)
    assert hits[0] == hits[-1] == 0
    assert ((freq - p).abs() < 4 * se).all(), freq


def test_bernoulli_selection_draws_each_piece_on_its_own():
    # the published code's selection: each maskable piece with p = 0.15, so a row's count is Binomial(n, .15)
    # (short rows often have none) and every position is equally likely; never a special or padding
    gen = torch.Generator().manual_seed(2)
    cfg = MaskConfig(selection="bernoulli")
    rand_ids = random_replacement_ids(V, 2)
    rows_of_length: dict[int, list[int]] = {}
    selected = maskable_total = 0
    for _ in range(200):
        ids, maskable, n = make_batch(gen)
        m = mask_batch(ids, maskable, torch.full((ids.shape[0],), MASK), rand_ids, cfg, gen)
        chosen = torch.zeros(ids.numel(), dtype=torch.bool)
        chosen[m.selected] = True
        chosen = chosen.view(ids.shape)
        assert not (chosen & ~maskable).any()
        assert torch.equal(m.input_ids[~chosen], ids[~chosen])
        for length, count in zip(n.tolist(), chosen.sum(1).tolist()):
            rows_of_length.setdefault(length, []).append(count)
        selected += int(chosen.sum())
        maskable_total += int(maskable.sum())
    rate, se = selected / maskable_total, math.sqrt(0.15 * 0.85 / maskable_total)
    assert abs(rate - 0.15) < 4 * se, rate
    short = rows_of_length[3]                      # P(no piece of 3 selected) = .85^3 = .614
    none = sum(c == 0 for c in short) / len(short)
    assert abs(none - 0.85 ** 3) < 4 * math.sqrt(0.614 * 0.386 / len(short)), none
    assert len(set(rows_of_length[30])) > 3        # the count varies where exact selection gives round(4.5) = 4


def test_bernoulli_selection_never_leaves_a_batch_without_a_target():
    # one short row: most draws select nothing, and then one piece is taken so the step has a loss
    ids = torch.tensor([[CLS, 10, 11, SEP, PAD]])
    maskable = torch.tensor([[False, True, True, False, False]])
    gen = torch.Generator().manual_seed(0)
    counts = [mask_batch(ids, maskable, torch.tensor([MASK]), random_replacement_ids(V, 1),
                         MaskConfig(selection="bernoulli"), gen).selected.numel() for _ in range(200)]
    assert min(counts) == 1 and set(counts) <= {1, 2}
    assert sum(c == 2 for c in counts) < 20        # both pieces: p = .0225


def neighbour_table(k=2):
    """(2V, k): id t -> t +/- V shifted by j (other language); multiples of 7 have none, of 11 only one."""
    t = torch.arange(2 * V)
    other = (t + V) % (2 * V)
    table = torch.stack([other, (other + 1) % (2 * V)], 1)[:, :k].clone()
    table[t % 7 == 0] = -1
    table[(t % 11 == 0) & (t % 7 != 0), k - 1] = -1
    table[t % V < N_SPECIAL] = -1
    return table


@pytest.mark.parametrize("probs", [STANDARD, NO_RANDOM, KNN, NO_RANDOM_PUBLISHED, KNN_PUBLISHED])
def test_replacement_mix_matches_probs(probs):
    table = neighbour_table(k=1)  # one neighbour, so "knn" is recognisable as exactly that id
    counts, N = torch.zeros(4), 0
    for ids, maskable, n, m in run_many(probs, neighbours=table):
        new = m.input_ids.flatten()[m.selected]
        nb = table[m.targets, 0]
        is_mask = new == MASK
        is_keep = new == m.targets
        is_knn = (new == nb) & (nb >= 0)
        is_rand = ~(is_mask | is_keep | is_knn)
        counts += torch.stack([is_mask, is_keep, is_rand, is_knn]).sum(1)
        N += new.numel()
    # expected shares as observed: a random draw equal to the target looks like keep, one equal to the
    # neighbour like knn (1/4086 each); knn on a token without neighbour falls back to random
    R = 2 * (V - N_SPECIAL)
    no_nb = float(((table[:, 0] < 0) & (torch.arange(2 * V) % V >= N_SPECIAL)).sum()) / R
    pm, pk, pr, pn = probs
    pr_total = pr + pn * no_nb
    expect = torch.tensor([pm, pk + pr_total / R, pr_total * (1 - 2 / R), pn * (1 - no_nb) + pr_total / R])
    se = (expect * (1 - expect) / N).sqrt()
    assert ((counts / N - expect).abs() <= 3 * se + 1e-9).all(), (counts / N, expect)


def test_per_language_mask_ids():
    gen = torch.Generator().manual_seed(2)
    lang = torch.arange(64) % 2
    ids, maskable, n = make_batch(gen, lang=lang)
    ids = torch.where(maskable, ids, ids + lang[:, None] * V)                 # shifted specials too
    mask_ids = MASK + lang * V
    m = mask_batch(ids, maskable, mask_ids, random_replacement_ids(V, 2), MaskConfig(probs=(1.0, 0, 0, 0)), gen)
    row = m.selected // ids.shape[1]
    new = m.input_ids.flatten()[m.selected]
    assert torch.equal(new, MASK + lang[row] * V)
    assert (new[lang[row] == 1] == 2052).all() and (lang[row] == 1).any()


def test_knn_replacements_are_listed_neighbours_or_random():
    table = neighbour_table(k=2)
    news, targets = [], []
    for ids, maskable, n, m in run_many((0, 0, 0, 1.0), n_batches=50, neighbours=table):
        news.append(m.input_ids.flatten()[m.selected])
        targets.append(m.targets)
    new, t = torch.cat(news), torch.cat(targets)
    nb = table[t]                                                              # (N, 2)
    full = (nb >= 0).all(1)
    assert ((new[:, None] == nb).any(1) | ~full).all()
    assert abs((new[full] == nb[full, 0]).float().mean() - 0.5) < 0.02        # both neighbours used
    none = (nb < 0).all(1)
    assert (new[none] % V >= N_SPECIAL).all() and new[none].unique().numel() > 0.5 * none.sum()
    half = (nb[:, 0] >= 0) & (nb[:, 1] < 0)                                    # chosen entry -1 -> random
    assert abs((new[half] == nb[half, 0]).float().mean() - 0.5) < 0.05
    assert (new[half] % V >= N_SPECIAL).all()


def test_random_ids_never_special():
    news = torch.cat([m.input_ids.flatten()[m.selected] for *_, m in run_many((0, 0, 1.0, 0), n_batches=50)])
    assert (news % V >= N_SPECIAL).all()
    assert (news >= V).float().mean().sub(0.5).abs() < 0.02                   # both languages drawn
    assert news.unique().numel() > 3000
    r = random_replacement_ids(V, 2)
    assert r.numel() == 2 * (V - N_SPECIAL) and not ((r % V) < N_SPECIAL).any()


def test_seed_determinism():
    ids, maskable, _ = make_batch(torch.Generator().manual_seed(3))
    args = (ids, maskable, torch.full((64,), MASK), random_replacement_ids(V, 2), MaskConfig(probs=KNN))

    def go(seed):
        return mask_batch(*args, torch.Generator().manual_seed(seed), neighbour_table())

    a, b, c = go(5), go(5), go(6)
    assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.selected, b.selected)
    assert not torch.equal(a.selected, c.selected)
    assert not torch.equal(a.input_ids, ids)


def test_bad_config_raises():
    for probs, message in [((0.8, 0.1, 0.1, 0.1), "must sum to 1"), ((0.9, 0.2, -0.1, 0.0), "must be non-negative"),
                           ((0.5, 0.5, 0.0), "need 4 values"), ((float("nan"), 0, 0, 1), "must be non-negative")]:
        with pytest.raises(MinimultError, match=f"mask probabilities {message}"):
            MaskConfig(probs=probs)
    with pytest.raises(MinimultError, match=r"unknown mask.selection 'random'; valid: exact, bernoulli"):
        MaskConfig(selection="random")
    for rate in [0.0, 1.0, -0.1, 1.5]:
        with pytest.raises(MinimultError, match=r"mask rate must be strictly between 0 and 1"):
            MaskConfig(rate=rate)
    ids, maskable, _ = make_batch(torch.Generator().manual_seed(0))
    with pytest.raises(MinimultError, match="neighbour"):
        mask_batch(ids, maskable, torch.full((64,), MASK), random_replacement_ids(V, 2), MaskConfig(probs=KNN),
                   torch.Generator())
    with pytest.raises(MinimultError, match=r"mask_ids must be \(B,\) = \(64,\), got \(3,\)"):
        mask_batch(ids, maskable, torch.full((3,), MASK), random_replacement_ids(V, 2), MaskConfig(), torch.Generator())


def test_parse_probs():
    assert parse_probs("0.9,0.1,0,0") == NO_RANDOM_PUBLISHED
    assert parse_probs(" 0.5, 0.16, 0.1, 0.24 ") == KNN_PUBLISHED
    assert parse_probs("no-random") == NO_RANDOM
    for bad, message in [("0.9,0.1", "need 4 values"), ("a,b,c,d", "--mask-probs wants 4 comma-separated numbers"),
                         ("0.5,0.5,0.5,0", "must sum to 1"), ("", "--mask-probs wants 4 comma-separated numbers")]:
        with pytest.raises(MinimultError, match=message):
            parse_probs(bad)
