"""Linguistic mods on word order: every language but English reversed or partly permuted; the gold
alignment follows the new order (DESIGN §5)."""

from __future__ import annotations

import numpy as np

from minimult.mods import Mod, probability, register


def _reverse(length: int, rng: np.random.Generator, value) -> np.ndarray:
    return np.arange(length)[::-1].copy()


def _swap_pairs(length: int, rng: np.random.Generator, p: float) -> np.ndarray:
    """K et al.'s permutation: swap round(p*L/2) random pairs of (two different) positions."""
    perm = np.arange(length)
    if length < 2:
        return perm
    for _ in range(int(round(p * length / 2))):
        i, j = rng.choice(length, size=2, replace=False)
        perm[i], perm[j] = perm[j], perm[i]
    return perm


register(Mod("inv-order", "second-language sentences reversed (specials stay in place)", 1, order=60,
             group="word order", reorder=_reverse))
register(Mod("permute", "swap round(p*L/2) random position pairs of each second-language sentence "
             "(K et al.); p in (0, 1]", 2, order=70, group="word order", parse=probability, default=0.5,
             reorder=_swap_pairs))
