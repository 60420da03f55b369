"""A preset's optimisation budget, computed from the config and the corpus (no run needed).

`budget(cfg, mods)` counts what one epoch of the run's training views holds (sequences, words, pieces
with [CLS]/[SEP]) and what the batching makes of it: updates per epoch, updates in all, and the mean
sentences, words and pieces per update. `PAPER` is the same for the paper's corpus (docs/pipeline.md: the
Easy-to-Read NT, 17,178 sentences and ~228k words per language, batches of 256, 100 epochs), so a
preset can be set next to it: `minimult budget --preset quick`, or the README's table
(`minimult budget --readme README.md` rewrites it between its markers).
"""

from __future__ import annotations

import math

import numpy as np

from minimult.data.batching import steps_per_epoch
from minimult.data.run_data import RunData

PAPER_SENTENCES, PAPER_WORDS, PAPER_BATCH, PAPER_EPOCHS, PAPER_LANGS = 17_178, 228_000, 256, 100, 2
MARKER = "budget"


def _paper() -> dict:
    sequences = PAPER_SENTENCES * PAPER_LANGS
    spe = math.ceil(sequences / PAPER_BATCH)
    return {"preset": "paper's", "epochs": PAPER_EPOCHS, "batch_size": PAPER_BATCH, "sequences": sequences,
            "updates_per_epoch": spe, "updates": spe * PAPER_EPOCHS, "sentences_per_update": sequences / spe,
            "words_per_update": PAPER_WORDS * PAPER_LANGS / spe, "pieces_per_update": None}


PAPER = _paper()


def budget(cfg, mods, log=None) -> dict:
    """The budget of a resolved config (`config.resolve`) on its training corpus."""
    data = RunData(cfg, mods, log=log)
    sides = data.train_views
    sequences = sum(s.num_sentences for s in sides)
    words = sum(int(np.count_nonzero(s.word_starts)) for s in sides)
    pieces = sum(int(np.minimum(s.lengths, data.layouts[s.lang].max_len - 2).sum()) + 2 * s.num_sentences
                 for s in sides)
    tc = cfg.train
    spe = steps_per_epoch(sequences, tc.batch_size, tc.batching, languages=cfg.data.n_langs)
    return {"preset": cfg.preset, "mods": cfg.mods, "epochs": tc.epochs, "batch_size": tc.batch_size,
            "batching": tc.batching, "sequences": sequences, "updates_per_epoch": spe, "updates": spe * tc.epochs,
            "sentences_per_update": sequences / spe, "words_per_update": words / spe,
            "pieces_per_update": pieces / spe, "tokens": pieces * tc.epochs}


def markdown(rows: list[dict]) -> str:
    """One line per budget, the paper's last, with each preset's updates as a share of the paper's."""
    out = ["| preset | epochs | batch (sentences) | updates per epoch | updates | of the paper's | "
           "words per update | pieces per update |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in [*rows, PAPER]:
        pieces = f"{r['pieces_per_update']:,.0f}" if r["pieces_per_update"] is not None else "–"
        out.append(f"| {r['preset']} | {r['epochs']} | {r['batch_size']} | {r['updates_per_epoch']} | "
                   f"{r['updates']:,} | {r['updates'] / PAPER['updates']:.0%} | {r['words_per_update']:,.0f} | "
                   f"{pieces} |")
    return "\n".join(out)
