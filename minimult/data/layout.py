"""How each language's sequences are written for the model: its special ids, where its positions
start, its segment id.

A language source gives every language its id offset; mods change the rest through their `layout`
hook (lang-pos: positions k*max_len+i and segment k; shift-special: the specials shifted like any other
id). Batching, masking and evaluation read layouts, never mod names, and the model's position and
segment tables are sized from them.
"""

from __future__ import annotations

from dataclasses import dataclass

from minimult.data.vocab import CLS, MASK, PAD, SEP


@dataclass(frozen=True)
class Layout:
    """How language `lang`'s sequences are written (ids are global: the language's block included)."""

    lang: int
    id_offset: int  # the language's first id (k * vocab_size when every language has its own block)
    pad: int = PAD
    cls: int = CLS
    sep: int = SEP  # -1: sequences end without one (`[CLS] s`)
    mask: int = MASK
    max_len: int = 128  # pieces per sequence, [CLS] and [SEP] included (positions per language)
    position_offset: int = 0  # position id of the language's first piece ([CLS])
    segment: int = 0  # token type id of the language's sequences; -1: the model has no segment table
    pair_segment: int = -1  # token type id of a pair's second sentence (nsp); -1: no pairs


def layouts(cfg, source, mods) -> list[Layout]:
    """Every language's layout: the source's id offsets, then each mod's `layout` hook in order."""
    out = []
    for lang in range(cfg.data.n_langs):
        layout = Layout(lang, source.id_offset(lang, cfg.data), max_len=cfg.data.max_len)
        for a in mods:
            if a.mod.layout is not None:
                layout = a.mod.layout(layout, cfg, a.value)
        out.append(layout)
    return out


def model_sizes(layouts: list[Layout]) -> dict:
    """Rows of the position and segment tables the layouts need (no segment table: 0 rows)."""
    no_table = any(l.segment < 0 for l in layouts)
    return {"max_positions": max(l.position_offset + l.max_len for l in layouts),
            "segments": 0 if no_table else max(max(l.segment, l.pair_segment) for l in layouts) + 1}
