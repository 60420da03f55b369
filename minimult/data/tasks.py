"""Labelled tasks for zero-shot transfer.

The default is built from the training corpus itself: which part of the New Testament a sentence comes
from, read off the verse id (BBCCCVVV) the corpus keeps for every sentence. Public entry:
`nt_parts(verse_ids, corpus) -> LabelledTask`. Five classes by book: the Gospels (Matthew-John), Acts,
the Pauline letters (Romans-Hebrews: Hebrews goes with Paul as in the traditional fourteen-letter corpus
and the canon's order, so every class is one run of books), the other letters (James-Jude) and
Revelation. Every language view and every run of a corpus with verse ids has it, with no labelled data
to ship.

The train/dev/test split is by verse: a hash of the verse id alone puts ~80/10/10% of the verses in
each, so every sentence of one verse lands in one split, and the split is the same in every language,
every run and every version of the code (it never depends on the corpus, the seed or numpy).

A task of the user's own is a directory (`file_task(directory, languages, words) -> FileTask`, `minimult
transfer RUN --task DIR`): train.tsv and dev.tsv in the first language, test.<lang>.tsv per language,
each line `label<TAB>text`, any number of labels (docs/corpora.md).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from minimult.data.corpus import read_text, text_lines
from minimult.data.languages import Side, truncate
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
                            f"among the training ones; {corpus} gives "
                            f"{', '.join(f'{n:,} {s}' for s, n in sizes.items())} sentences, and only "
                            f"{', '.join(CLASSES[k] for k in trained) or 'no part'} among the training ones (a run "
                            f"trained on the corpus's first sentences, as the tiny preset's: give --task DIR, a task "
                            f"of your own, or pretrain on corpora/tiny/nt-parts.txt, every part of the New Testament)")
    return task


# ---------------------------------------------------------------------------------------------
# A labelled task of the user's own (`minimult transfer RUN --task DIR`).

TASK_VERSION = 1  # bump when how a task directory is read changes


@dataclass(frozen=True)
class FileTask:
    """A task directory's sentences and labels: `train` and `dev` in the first language, `test` per language
    (texts as words, labels as indices into `classes`, the training labels in sorted order)."""

    name: str
    version: int
    classes: tuple[str, ...]
    directory: str
    sha256: str
    texts: dict[str, list[list[str]]]  # "train", "dev", "test.<lang>"
    labels: dict[str, np.ndarray]

    def describe(self) -> dict:
        counts = {part: {c: int((y == j).sum()) for j, c in enumerate(self.classes)} for part, y in self.labels.items()}
        return {"name": self.name, "version": self.version, "directory": self.directory, "sha256": self.sha256,
                "classes": list(self.classes), "sentences": {part: len(y) for part, y in self.labels.items()},
                "class_counts": counts}

    def sizes(self) -> dict[str, int]:
        return {part: len(y) for part, y in self.labels.items()}


# characters of a task line beyond which it is no sentence (the model reads ~128 pieces of it): a file whose
# line ends were lost, refused rather than cut silently
MAX_LINE_CHARS = 10_000


def _task_lines(path, words) -> tuple[list[str], list[list[str]]]:
    """(labels, word lists) of a `label<TAB>text` file; blank lines are skipped, anything else malformed (a NUL
    byte, a line of more than MAX_LINE_CHARS characters) is one error line naming the file and the line."""
    labels, sentences = [], []
    text = read_text(path, not_utf8="{path}: not UTF-8 ({reason} at byte {byte})",
                     nul="{path}:{line}: a NUL byte: a task file holds label<TAB>text lines of UTF-8 text")
    for i, line in enumerate(text_lines(text), 1):
        if not line.strip():
            continue
        if len(line) > MAX_LINE_CHARS:
            raise MinimultError(f"{path}:{i}: {len(line):,} characters on one line (at most {MAX_LINE_CHARS:,}): a "
                                f"task file holds one labelled sentence per line; were its line ends lost?")
        label, tab, rest = line.partition("\t")
        if not tab or not label.strip() or not rest.strip():
            raise MinimultError(f"{path}:{i}: {line[:60]!r} is not label<TAB>text")
        w = words(rest)
        if not w:
            raise MinimultError(f"{path}:{i}: the text has no words once tokenized as the run's corpus")
        labels.append(label.strip())
        sentences.append(w)
    if not labels:
        raise MinimultError(f"{path} holds no labelled sentences")
    return labels, sentences


def file_task(directory, languages: tuple[str, ...], words) -> FileTask:
    """The task in `directory`: train.tsv and dev.tsv in the first language, test.<lang>.tsv for every one of
    `languages` (the run's, the first included), each line `label<TAB>text`; `words(text)` splits a text as
    the run's corpus was split. The classes are train.tsv's labels; a label that only dev or a test file
    has, a missing file, or a test file for a language the run does not have is one error line."""
    d = Path(directory)
    if not d.is_dir():
        raise MinimultError(f"task directory {'is a file, not a folder' if d.is_file() else 'not found'}: {d}")
    first = languages[0]
    tests = {p.name[len("test."):-len(".tsv")]: p for p in sorted(d.glob("test.*.tsv"))}
    extra = sorted(set(tests) - set(languages))
    if extra:
        raise MinimultError(f"{d}/test.{extra[0]}.tsv: the run has no language {extra[0]!r} (its languages: "
                            f"{', '.join(languages)})")
    needed = ([("train", d / "train.tsv"), ("dev", d / "dev.tsv")]
              + [(f"test.{l}", d / f"test.{l}.tsv") for l in languages])
    folder = next((p for _, p in needed if p.is_dir()), None)
    if folder is not None:
        raise MinimultError(f"{folder} is a folder, not a file: a task directory holds label<TAB>text files")
    missing = next(((part, p) for part, p in needed if not p.is_file()), None)
    if missing is not None:
        part, p = missing
        what = (f"the test sentences of language {part[5:]!r}" if part.startswith("test.")
                else f"the {part} sentences in the first language ({first})")
        raise MinimultError(f"{d} has no {p.name}: a task directory holds {what} (train.tsv and dev.tsv in {first}, "
                            f"test.<lang>.tsv for each of {', '.join(languages)}; label<TAB>text per line)")
    read = {part: _task_lines(p, words) for part, p in needed}
    classes = tuple(sorted(set(read["train"][0])))
    if len(classes) < 2:
        raise MinimultError(f"{d / 'train.tsv'} has {len(classes)} label ({', '.join(classes)}): classification needs "
                            f"at least two")
    index = {c: j for j, c in enumerate(classes)}
    for part, p in needed[1:]:
        for i, label in enumerate(read[part][0]):
            if label not in index:
                lines = text_lines(read_text(p, not_utf8=""))  # read above: UTF-8
                line = [n for n, text in enumerate(lines, 1) if text.strip()][i]
                raise MinimultError(f"{p}:{line}: label {label!r} is not among train.tsv's labels "
                                    f"({', '.join(classes)})")
    digest = hashlib.sha256()
    for _, p in needed:
        digest.update(p.name.encode() + b"\0" + p.read_bytes())
    return FileTask(f"task {d.name}", TASK_VERSION, classes, str(d.resolve()), digest.hexdigest(),
                    {part: s for part, (_, s) in read.items()},
                    {part: np.array([index[y] for y in ys], dtype=np.int64) for part, (ys, _) in read.items()})


def task_data(task, sides: list[Side], limit: int | None) -> list[dict[str, tuple[Side, np.ndarray]]]:
    """For each language, {split: (its sentences of that split cut to `limit` pieces (None: whole), their
    labels)}: the New Testament part task, whose labels and split follow each sentence's English source."""
    out = []
    for side in sides:
        known = side.english_index >= 0
        parts = {}
        for k, name in enumerate(SPLITS):
            index = np.flatnonzero(known & (task.split[np.maximum(side.english_index, 0)] == k))
            mine = side.subset(index)
            parts[name] = (mine if limit is None else truncate(mine, limit), task.labels[side.english_index[index]])
        out.append(parts)
    return out
