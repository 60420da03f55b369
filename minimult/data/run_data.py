"""A run's languages: its source, the prepared (cached) corpus, each language's layout and views.

`RunData(cfg, mods)` is what training and evaluation read: `views(split)` gives [English,
language 1, ...] with the mods' reorder/resample hooks applied, `dictionary()` the translation
dictionary, `task()` the labelled task of the training corpus (from its verse ids), `layouts` how
each language's sequences are written, `random_ids()` what a random replacement draws from.
`prepare()` builds or reuses the cache entry once per RunData.
"""

from __future__ import annotations

from functools import cached_property
from typing import Callable

import numpy as np

from minimult.data import sources
from minimult.data.languages import Side, build_sides
from minimult.data.layout import layouts


class RunData:
    def __init__(self, cfg, mods, log: Callable[[str], None] | None = None):
        self.cfg, self.mods = cfg, mods
        self.source = sources.get(cfg.data.fake)
        self.layouts = layouts(cfg, self.source, mods)
        self._log = log
        self._prepared = None

    def prepare(self, log: Callable[[str], None] | None = None):
        if self._prepared is None:
            from minimult.data.prepare import prepare

            self._prepared = prepare(self.cfg.data, progress=log or self._log or (lambda s: None))
        return self._prepared

    @property
    def prepared(self):
        return self.prepare()

    def views(self, split: str) -> list[Side]:
        return build_sides(self.prepare(), self.source, self.cfg.data, self.mods, split, self.cfg.train.seed)

    @cached_property
    def train_views(self) -> list[Side]:
        return self.views("train")

    @cached_property
    def unigram_entropy(self) -> float:
        """Entropy (nats per piece) of the training pieces' frequencies within each language, averaged
        over all pieces: the MLM loss of a model that reads nothing of the context but its language
        (the unigram plateau a run that never trains sits on; docs/metrics.md)."""
        total, pieces = 0.0, 0
        for side in self.train_views:
            p = np.bincount(side.ids) / max(len(side.ids), 1)
            p = p[p > 0]
            total += float(-(p * np.log(p)).sum()) * len(side.ids)
            pieces += len(side.ids)
        return total / max(pieces, 1)

    def dictionary(self) -> list[Side]:
        return self.source.dictionary(self.prepare(), self.cfg.data)

    def task(self):
        """The training corpus's labelled task (which part of the New Testament each sentence is from);
        a corpus without verse ids is a clear error (`minimult.data.tasks`)."""
        from minimult.data.tasks import nt_parts

        return nt_parts(self.prepare().train.verse_ids, self.source.corpus or self.cfg.data.train)

    def random_ids(self):
        return self.source.random_ids(self.prepare(), self.cfg.data)
