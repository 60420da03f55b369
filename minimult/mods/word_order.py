"""Linguistic mods on word order: every language but English reversed or partly permuted; the gold
alignment follows the new order (docs/pipeline.md)."""

from __future__ import annotations

import numpy as np

from minimult.data import sources
from minimult.errors import MinimultError
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


def _language_name(raw: str) -> str:
    if not raw.strip():
        raise ValueError("name a language, e.g. inv-order=es")
    return raw.strip()


def _named_language(cfg, name) -> None:
    """inv-order=NAME: NAME is one of the run's languages, and not the first (English: the reference order)."""
    if name is None:
        return
    names = sources.get(cfg.data.source).names(cfg.data)
    if name not in names[1:]:
        why = (f"the first language ({names[0]}) keeps its order (it is what the others align to)"
               if name == names[0] else "no such language in this run")
        raise MinimultError(f"inv-order={name}: {why}; name one of {', '.join(names[1:])} "
                            f"(--source {cfg.data.source}, data.n_langs={cfg.data.n_langs})")


# inv-order alone reverses every language but English; inv-order=NAME only that one (Dufter & Schütze
# 2020 reversed German alone in their English-German-Hindi model)
register(Mod("inv-order", "sentences of every language but English reversed (specials stay in place); "
             "inv-order=NAME: only that language's (e.g. inv-order=es)", 1, order=60,
             group="word order", reorder=_reverse, parse=_language_name, default=None,
             reorders=lambda name, value: value is None or name == value, check=_named_language))
register(Mod("permute", "swap round(p*L/2) random position pairs of each second-language sentence "
             "(K et al.); p in (0, 1]", 2, order=70, group="word order", parse=probability, default=0.5,
             reorder=_swap_pairs, series=("permutation", lambda v: float(v or 0.5))))
