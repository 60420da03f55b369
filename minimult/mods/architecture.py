"""Architectural mods: language-specific positions, shifted special tokens, an over-parameterised model."""

from __future__ import annotations

import dataclasses

from minimult.errors import MinimultError
from minimult.mods import Mod, register, set_section


def _language_positions(layout, cfg, value):
    """Language k: positions k*max_len + i and segment k."""
    return dataclasses.replace(layout, position_offset=layout.lang * layout.max_len, segment=layout.lang)


def _shifted_specials(layout, cfg, value):
    """The specials move into the language's own id block like any other id."""
    if layout.lang > 0 and layout.id_offset == 0:
        raise MinimultError(f"contradictory settings: shift-special needs languages with their own ids, e.g. "
                            f"--source shift (--source {cfg.data.source}"
                            f"{' --shared-vocab' if cfg.data.shared_vocab else ''} shares one vocabulary)")
    o = layout.id_offset
    return dataclasses.replace(layout, pad=layout.pad + o, cls=layout.cls + o, sep=layout.sep + o, mask=layout.mask + o)


register(Mod("lang-pos", "language-specific position and segment embeddings (language k: positions "
             "k*128+i, segment k)", 1, order=10, layout=_language_positions))
register(Mod("shift-special", "special tokens shifted per language like any other id", 1, order=20,
             layout=_shifted_specials))
register(Mod("overparam", "BERT-base sizes: hidden 768, intermediate 3072, 12 heads, 12 layers, lr 1e-4", 1,
             order=50, configure=lambda cfg, v: set_section(set_section(cfg, "model", hidden=768, intermediate=3072,
                                                                        heads=12, layers=12), "train", lr=1e-4),
             needs_gpu="BERT-base sizes whatever the preset: minutes for a few steps on a CPU, a day for a "
                       "quick-preset run"))
