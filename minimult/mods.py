"""The registry of mods: each one small unit with a name, a description, a version and its hooks.

A mod acts through any of three hooks:
- `configure(cfg, value) -> cfg`: changes the run configuration (model sizes, masking mix, data
  switches such as language-specific positions); most mods are only this.
- `reorder(length, rng, value) -> perm`: the order of a second-language sentence, as source
  positions (piece j of the new sentence is piece perm[j] of the original). Applies to training and
  evaluation data alike; the gold alignment follows it.
- `resample(english, second, rng, value) -> (english, second)`: replaces the training data of the
  two languages (non-parallel halves, unigram sampling); evaluation data stay parallel.

Mods are registered on import of this module: there is no second list to keep in sync.
Adding a mod = one `register(Mod(...))` here plus its test.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .errors import MinimultError

REGISTRY: dict[str, "Mod"] = {}


@dataclass(frozen=True)
class Mod:
    name: str
    description: str
    version: int
    configure: Callable[[Any, Any], Any] | None = None
    reorder: Callable[[int, np.random.Generator, Any], np.ndarray] | None = None
    resample: Callable | None = None
    parse: Callable[[str], Any] | None = None  # for `name=value`; None = takes no value
    default: Any = None
    group: str | None = None  # mods sharing a group contradict each other

    def spec(self, value) -> str:
        return self.name if self.parse is None else f"{self.name}={value}"


@dataclass(frozen=True)
class ActiveMod:
    mod: Mod
    value: Any

    @property
    def spec(self) -> str:
        return self.mod.spec(self.value)


def register(mod: Mod) -> Mod:
    if mod.name in REGISTRY:
        raise ValueError(f"mod {mod.name!r} registered twice")
    REGISTRY[mod.name] = mod
    return mod


def valid_names() -> str:
    return ", ".join(REGISTRY)


def parse_mods(text: str | tuple | list | None) -> tuple[ActiveMod, ...]:
    """'lang-pos,permute=0.5' -> active mods in registry order; clear errors for bad input."""
    if text is None:
        return ()
    items = [t.strip() for t in (text.split(",") if isinstance(text, str) else text) if t.strip()]
    active: dict[str, ActiveMod] = {}
    for item in items:
        name, _, raw = item.partition("=")
        mod = REGISTRY.get(name)
        if mod is None:
            raise MinimultError(f"unknown mod {name!r}; valid mods: {valid_names()}")
        if name in active:
            raise MinimultError(f"mod {name!r} given twice")
        if raw and mod.parse is None:
            raise MinimultError(f"mod {name!r} takes no value (got {item!r})")
        try:
            value = mod.parse(raw) if (raw and mod.parse) else mod.default
        except (ValueError, MinimultError) as e:
            raise MinimultError(f"bad value for mod {name!r}: {e}") from None
        active[name] = ActiveMod(mod, value)
    groups: dict[str, str] = {}
    for a in active.values():
        if a.mod.group and a.mod.group in groups:
            raise MinimultError(f"contradictory mods: {groups[a.mod.group]} and {a.mod.name} both set "
                                f"the {a.mod.group}; use one of them")
        if a.mod.group:
            groups[a.mod.group] = a.mod.name
    order = list(REGISTRY)
    return tuple(sorted(active.values(), key=lambda a: order.index(a.mod.name)))


def canonical(mods: tuple[ActiveMod, ...]) -> str:
    return ",".join(a.spec for a in mods) or "original"


def versions(mods: tuple[ActiveMod, ...]) -> dict[str, int]:
    return {a.mod.name: a.mod.version for a in mods}


def apply_config(cfg, mods: tuple[ActiveMod, ...]):
    for a in mods:
        if a.mod.configure is not None:
            cfg = a.mod.configure(cfg, a.value)
    return cfg


# ---------------------------------------------------------------------------------------------
# Helpers for hooks.


def _set(cfg, section: str, **changes):
    return dataclasses.replace(cfg, **{section: dataclasses.replace(getattr(cfg, section), **changes)})


def _probability(raw: str) -> float:
    p = float(raw)
    if not 0.0 < p <= 1.0:
        raise ValueError(f"{p} is not in (0, 1]")
    return p


def _positive_int(raw: str) -> int:
    k = int(raw)
    if k < 1:
        raise ValueError(f"{k} must be at least 1")
    return k


def _swap_pairs(length: int, rng: np.random.Generator, p: float) -> np.ndarray:
    """K et al.'s permutation: swap round(p*L/2) random pairs of (two different) positions."""
    perm = np.arange(length)
    if length < 2:
        return perm
    for _ in range(int(round(p * length / 2))):
        i, j = rng.choice(length, size=2, replace=False)
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def _split_halves(english, second, rng, value):
    """English keeps the first half of the sentences, the second language the other half."""
    n = english.num_sentences
    return english.subset(np.arange(n // 2)), second.subset(np.arange(n // 2, n))


def _unigram(english, second, rng, value):
    """Second-language sentences sampled word by word from its unigram distribution, same lengths."""
    return english, second.unigram_resample(rng)


# ---------------------------------------------------------------------------------------------
# The mods. Registry order = the canonical order in run names and results.

register(Mod("lang-pos", "language-specific position and segment embeddings (language k: positions "
             "k*128+i, segment k)", 1,
             configure=lambda cfg, v: _set(cfg, "data", lang_positions=True)))
register(Mod("shift-special", "special tokens shifted per language like any other id", 1,
             configure=lambda cfg, v: _set(cfg, "data", shift_special=True)))
register(Mod("no-random", "masking without random replacement: (mask, keep, random, knn) = "
             "(0.8, 0.2, 0, 0)", 1, group="masking mix",
             configure=lambda cfg, v: _set(cfg, "mask", probs=(0.8, 0.2, 0.0, 0.0))))
register(Mod("knn-replace", "30% of selected tokens replaced by one of their k nearest neighbours in "
             "another language (mix 0.5, 0.1, 0.1, 0.3)", 1, group="masking mix",
             parse=_positive_int, default=1,
             configure=lambda cfg, k: _set(_set(cfg, "mask", probs=(0.5, 0.1, 0.1, 0.3)), "data", knn_k=k)))
register(Mod("overparam", "BERT-base sizes: hidden 768, intermediate 3072, 12 heads, 12 layers, lr 1e-4", 1,
             configure=lambda cfg, v: _set(_set(cfg, "model", hidden=768, intermediate=3072, heads=12,
                                                layers=12), "train", lr=1e-4)))
register(Mod("inv-order", "second-language sentences reversed (specials stay in place)", 1,
             group="word order", reorder=lambda n, rng, v: np.arange(n)[::-1].copy()))
register(Mod("permute", "swap round(p*L/2) random position pairs of each second-language sentence "
             "(K et al.); p in (0, 1]", 2, group="word order", parse=_probability, default=0.5,
             reorder=_swap_pairs))
register(Mod("no-parallel", "English trains on the first half of the sentences, the second language on "
             "the other half; epochs doubled", 1, group="training data", resample=_split_halves,
             configure=lambda cfg, v: _set(cfg, "train", epochs=cfg.train.epochs * 2)))
register(Mod("unigram", "second-language training sentences sampled word by word from its unigram "
             "distribution (K et al.)", 2, group="training data", resample=_unigram))
register(Mod("untrained", "randomly initialised and never trained (baseline)", 1,
             configure=lambda cfg, v: _set(cfg, "train", epochs=0)))
