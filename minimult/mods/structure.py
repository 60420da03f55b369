"""Sequence-structure mods (the [SEP] forum thread, K et al. 2020; docs/papers.md): what separates and
marks a sentence — the [SEP] token and the segment embeddings."""

from __future__ import annotations

import dataclasses

from minimult.errors import MinimultError
from minimult.mods import Mod, register, set_section


def _no_sep(layout, cfg, value):
    return dataclasses.replace(layout, sep=-1)


def _lang_sep(layout, cfg, value):
    """Language k ends its sequences with the [SEP] of its own id block; the other specials stay shared."""
    if layout.lang > 0 and layout.id_offset == 0:
        raise MinimultError(f"contradictory settings: lang-sep needs languages with their own ids, e.g. "
                            f"--source shift (--source {cfg.data.source}"
                            f"{' --shared-vocab' if cfg.data.shared_vocab else ''} shares one vocabulary)")
    return dataclasses.replace(layout, sep=layout.sep + layout.id_offset)


def _pair_segments(layout, cfg, value):
    """A pair's sentences read segments 2s and 2s+1, s the language's own (0/1 as in BERT; under lang-pos
    language k reads 2k and 2k+1). Without a segment table (no-segment) there is nothing to read."""
    if layout.segment < 0:
        return layout
    return dataclasses.replace(layout, segment=2 * layout.segment, pair_segment=2 * layout.segment + 1)


def _no_segment(layout, cfg, value):
    return dataclasses.replace(layout, segment=-1)


register(Mod("no-sep", "sequences without [SEP]: [CLS] sentence", 1, order=22, group="separator",
             layout=_no_sep))
register(Mod("lang-sep", "one [SEP] per language as a language marker (language k: its own block's [SEP]), "
             "other specials shared; shift-special already does this and more", 1, order=24, group="separator",
             layout=_lang_sep,
             conflicts=(("shift-special", "shift-special already gives every language its own [SEP]"),)))
register(Mod("no-segment", "no segment embedding table at all (exported to HF as one frozen zero row, which "
             "HF BERT always has)", 1, order=26, layout=_no_segment))
register(Mod("nsp", "next-sentence prediction: training sequences [CLS] A [SEP] B [SEP] (segments 0/1), B the "
             "next sentence of the same language half the time, else a random one; an NSP head on [CLS] adds its "
             "loss to MLM. Evaluation stays on single sentences", 1, order=28, layout=_pair_segments,
             configure=lambda cfg, v: set_section(cfg, "model", nsp=True),
             conflicts=(("no-sep", "nsp separates its two sentences with [SEP]"),)))
