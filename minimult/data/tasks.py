"""A labelled task built from the training corpus itself: which part of the New Testament a sentence
comes from, read off the verse id (BBCCCVVV) the corpus keeps for every sentence.

Public entry: `nt_parts(verse_ids, corpus) -> LabelledTask`. Five classes by book: the Gospels
(Matthew-John), Acts, the Pauline letters (Romans-Hebrews: Hebrews goes with Paul as in the
traditional fourteen-letter corpus and the canon's order, so every class is one run of books), the
other letters (James-Jude) and Revelation. Every language view and every run of a corpus with verse
ids has it, with no labelled data to ship.

The train/dev/test split is by verse: a hash of the verse id alone puts ~80/10/10% of the verses in
each, so every sentence of one verse lands in one split, and the split is the same in every language,
every run and every version of the code (it never depends on the corpus, the seed or numpy).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from minimult.errors import MinimultError

NAME, VERSION = "nt-part", 1  # bump VERSION when labels or split change
# (class, first book, last book) with pythonbible's book numbers: 40 Matthew ... 66 Revelation
PARTS = (("gospels", 40, 43), ("acts", 44, 44), ("pauline", 45, 58), ("other-letters", 59, 65),
         ("revelation", 66, 66))
CLASSES = tuple(name for name, _, _ in PARTS)
SPLITS = ("train", "dev", "test")
SHARES = (80, 10, 10)  # percent of verses per split


def nt_part(verse_ids: np.ndarray) -> np.ndarray:
    """Class index of each verse id (-1: not a New Testament verse, e.g. a line number)."""
    book = np.asarray(verse_ids, dtype=np.int64) // 1_000_000
    label = np.full(book.shape, -1, dtype=np.int64)
    for k, (_, first, last) in enumerate(PARTS):
        label[(book >= first) & (book <= last)] = k
    return label


def verse_split(verse_ids: np.ndarray) -> np.ndarray:
    """0 train, 1 dev, 2 test for each verse id: a function of the id alone (blake2b of its digits)."""
    unique, inverse = np.unique(np.asarray(verse_ids, dtype=np.int64), return_inverse=True)
    bucket = np.array([int.from_bytes(hashlib.blake2b(f"verse {v}".encode(), digest_size=8).digest(), "big") % 100
                       for v in unique], dtype=np.int64)
    return np.searchsorted(np.cumsum(SHARES), bucket, side="right")[inverse.reshape(-1)]


@dataclass(frozen=True)
class LabelledTask:
    """Labels and split of every sentence of a corpus (index = sentence number in the corpus)."""

    name: str
    version: int
    classes: tuple[str, ...]
    labels: np.ndarray  # (S,) class index
    split: np.ndarray  # (S,) 0 train, 1 dev, 2 test

    def sizes(self) -> dict[str, int]:
        return {s: int((self.split == k).sum()) for k, s in enumerate(SPLITS)}

    def describe(self) -> dict:
        """What results.json records about the task."""
        counts = {s: {c: int(((self.split == k) & (self.labels == j)).sum()) for j, c in enumerate(self.classes)}
                  for k, s in enumerate(SPLITS)}
        return {"name": self.name, "version": self.version, "classes": list(self.classes),
                "sentences": self.sizes(), "class_counts": counts}


def nt_parts(verse_ids: np.ndarray, corpus: str) -> LabelledTask:
    """The New Testament part of every sentence of a corpus with these verse ids; a corpus without New
    Testament verse ids (a plain file numbers its lines) is one clear error naming what the task needs."""
    verse_ids = np.asarray(verse_ids, dtype=np.int64)
    labels = nt_part(verse_ids)
    missing = int((labels < 0).sum())
    if missing:
        first = int(verse_ids[labels < 0][0])
        raise MinimultError(
            f"the New Testament part task needs a verse id (BBCCCVVV, books 40-66, Matthew to Revelation) for every "
            f"training sentence, and {missing:,} of the {len(labels):,} sentences of {corpus} have none (the first "
            f"has id {first}; a plain one-sentence-per-line file numbers its lines): train on bbe-nt, or on a file "
            f"whose every line is 'BBCCCVVV<TAB>sentence'")
    split = verse_split(verse_ids)
    task = LabelledTask(NAME, VERSION, CLASSES, labels, split)
    sizes = task.sizes()
    trained = np.unique(labels[split == 0])
    if min(sizes.values()) == 0 or len(trained) < 2:
        raise MinimultError(f"the New Testament part task needs sentences in every split and at least two parts "
                            f"among the training ones; {corpus} gives {sizes} sentences and "
                            f"{', '.join(CLASSES[k] for k in trained) or 'no part'} to train on")
    return task
