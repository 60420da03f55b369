"""Masking mods: the replacement mix of selected tokens (docs/pipeline.md)."""

from __future__ import annotations

from dataclasses import dataclass

from minimult.data.masking import MIXES, NEIGHBOUR, RANDOM
from minimult.errors import MinimultError
from minimult.mods import Mod, positive_int, register, set_section

SEED_DICTIONARIES = ("unsupervised", "identical", "dictionary")


@dataclass(frozen=True)
class KnnConfig:
    """knn-replace's settings (the `knn` section: `--set knn.dim=...`); k itself is the mod's value
    (`knn-replace=k`)."""

    dim: int = 300  # fastText dimension of the static embeddings
    # where VecMap's self-learning starts: "unsupervised" (the similarity-distribution seed, the paper's),
    # "identical" (pieces spelled alike in both languages) or "dictionary" (the source's translation
    # dictionary: en-es's silver pairs, the identity for Fake-English)
    seed_dictionary: str = "unsupervised"

    def __post_init__(self):
        if self.dim < 1:
            raise MinimultError(f"knn.dim must be >= 1, got {self.dim}")
        if self.seed_dictionary not in SEED_DICTIONARIES:
            raise MinimultError(f"knn.seed_dictionary must be one of {', '.join(SEED_DICTIONARIES)}, got "
                                f"{self.seed_dictionary!r}")


def _neighbours(data, sides, cfg, k, log):
    """knn-replace's neighbour table (fastText + VecMap, cached): row i = the k nearest ids of id i in each
    other language."""
    from minimult.knn.neighbours import neighbour_table  # lazy: torch and fastText, only when a run needs them

    return {"neighbours": neighbour_table(data.prepare(log), data.source, cfg, k, sides, log=log)}


def with_knn_replace(mods: str | None) -> str:
    """`mods` with knn-replace added when missing (for `minimult neighbours`)."""
    return mods if "knn-replace" in (mods or "") else ",".join(m for m in ((mods or ""), "knn-replace") if m)


def _mix(cfg, mod: str):
    """cfg with `mod`'s mix as `mask.mixes` says: the paper's text or its published code (data.masking.MIXES)."""
    return set_section(cfg, "mask", probs=MIXES[cfg.mask.mixes][mod])


def _no_random_share(cfg, _value) -> None:
    if cfg.mask.probs[RANDOM] or cfg.mask.probs[NEIGHBOUR]:
        raise MinimultError(f"no-random with the mix {cfg.mask.probs} contradicts itself: its random and knn "
                            f"shares must be 0 (e.g. --set mask.probs=0.9,0.1,0,0, the published code's)")


def _knn_share(cfg, _value) -> None:
    if not cfg.mask.probs[NEIGHBOUR]:
        raise MinimultError(f"knn-replace with the mix {cfg.mask.probs} never replaces a token by a neighbour: "
                            f"give the knn share (the 4th value) a positive probability")


# Both set the mix of docs/pipeline.md; an explicit `--set mask.probs=...` (or `--mask-probs`) replaces it, within
# the mod's meaning (`check`): e.g. the published code's no-random, 0.9,0.1,0,0.
register(Mod("no-random", "masking without random replacement: (mask, keep, random, knn) = (0.8, 0.2, 0, 0)",
             1, order=30, group="masking mix", configure=lambda cfg, v: _mix(cfg, "no-random"),
             overridable=("mask.probs",), check=_no_random_share))
register(Mod("knn-replace", "30% of selected tokens replaced by one of their k nearest neighbours in "
             "another language (mix 0.5, 0.1, 0.1, 0.3)", 1, order=40, group="masking mix",
             parse=positive_int, default=1, build=_neighbours, provides=("neighbours",),
             configure=lambda cfg, k: _mix(cfg, "knn-replace"),
             overridable=("mask.probs",), check=_knn_share, settings=("knn", KnnConfig)))
