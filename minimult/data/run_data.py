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
from minimult.data.languages import Side, build_sides, reordered
from minimult.data.layout import layouts
from minimult.data.prepare import prepare
from minimult.data.tasks import FileTask, file_task, nt_parts, task_data


class RunData:
    """One run's data (see the module docstring); nothing is read until a view, dictionary or `prepare` asks."""

    def __init__(self, cfg, mods, log: Callable[[str], None] | None = None):
        self.cfg, self.mods = cfg, mods
        self.source = sources.get(cfg.data.source)
        self.layouts = layouts(cfg, self.source, mods)
        self._log = log
        self._prepared = None

    def prepare(self, log: Callable[[str], None] | None = None):
        """The prepared cache entry (`data.prepare.Prepared`), built or reused on the first call."""
        if self._prepared is None:
            self._prepared = prepare(self.cfg.data, progress=log or self._log or (lambda s: None))
        return self._prepared

    @property
    def prepared(self):
        """`prepare()`, as a property."""
        return self.prepare()

    def views(self, split: str) -> list[Side]:
        """[English, language 1, ...] Sides of "train", "dev" or "train-parallel" (`languages.build_sides`)."""
        return build_sides(self.prepare(), self.source, self.cfg.data, self.mods, split, self.cfg.train.seed)

    @cached_property
    def train_views(self) -> list[Side]:
        """`views("train")`, computed once."""
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
        """The translation dictionary, one Side per language: entry i of each translates entry i of the others."""
        return self.source.dictionary(self.prepare(), self.cfg.data)

    def pair_dictionary(self, k: int) -> list[Side]:
        """[first language, language k] entries of the dictionary (a source may hold one per pair)."""
        return self.source.pair_dictionary(self.prepare(), self.cfg.data, k)

    def task(self, directory: str = ""):
        """The labelled task for transfer: the training corpus's own (which part of the New Testament each
        sentence is from; a corpus without verse ids is a clear error), or a task directory's
        (`minimult.data.tasks`), its texts split into words as the run's corpus was."""
        if directory:
            return file_task(directory, self.source.names(self.cfg.data), lambda t: self.source.words(t, self.cfg.data))
        return nt_parts(self.prepare().train.verse_ids, self.source.corpus_name(self.cfg.data))

    def task_sides(self, task) -> list[dict]:
        """Per language {split: (Side, labels)} of `task`: the New Testament part task over the training corpus
        in every language (`views("train-parallel")`), or a task directory's sentences, each language's written
        with its vocabulary, ids and (the mods' reorder hooks, as for dev data) word order; the first language
        has train, dev and test, the others test."""
        if not isinstance(task, FileTask):
            return task_data(task, self.views("train-parallel"), None)
        names = self.source.names(self.cfg.data)
        prepared, rng = self.prepare(), np.random.default_rng([self.cfg.train.seed, 1])
        encode = lambda k, part: self.source.encode(prepared, self.cfg.data, k, task.texts[part])  # noqa: E731
        first = {split: (encode(0, part), task.labels[part]) for split, part in
                 (("train", "train"), ("dev", "dev"), ("test", f"test.{names[0]}"))}
        others = reordered([encode(k, f"test.{name}") for k, name in enumerate(names[1:], 1)], names, self.mods, rng)
        return [first] + [{"test": (side, task.labels[f"test.{name}"])} for side, name in zip(others, names[1:])]

    def random_ids(self):
        """(R,) long: the global ids a random replacement draws from."""
        return self.source.random_ids(self.prepare(), self.cfg.data)
