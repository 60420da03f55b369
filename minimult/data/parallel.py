"""Parallel text from the user's own files: N named languages, line-aligned or keyed, read into sentence
pairs for the `parallel` language source (formats and limits: docs/corpora.md).

Public entries: `parse_spec(text) -> Spec` (`en=a.txt,el=b.txt`, or a TOML manifest), `absolute(text)`
(the same spec with absolute paths, as run configs keep it), `read_corpora(spec, ...) -> (train, dev)` and
`read_dictionary(path, ...)`.

Reading is strict, because a pair that is silently shifted by one line ruins every number: a file that is
missing, not UTF-8, binary, holds an empty line, or (keyed) a line without text or an id twice, and files
that do not pair up (unequal line counts; keyed ids missing in another file, unless the manifest says
`missing = "drop"`) are each one error line naming the file and the line. Lines end at "\\n" (a "\\r"
before it is dropped), so line k is what `sed -n kp` and a Pharaoh link file's line k mean. Line-aligned files
are checked one line at a time and read again at each pass (`Lines`), so a corpus of any size holds none of its
text; keyed files are read whole (docs/corpora.md, "A corpus 1,000× the Bible's").
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Callable

from minimult.data.corpus import MAX_LINE_CHARS, Corpus, normalise, read_text, text_lines, words as nltk_words
from minimult.errors import MinimultError

NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,31}")  # a language's name: also its tokenizer's sub-folder
KEYED = re.compile(r"([0-9]{1,18})\t(.*)")  # ID<TAB>text (ASCII digits: BBCCCVVV verse ids, line numbers)
STARTS_KEYED = re.compile(r"([0-9]+)\t")  # a line that begins as a keyed line does (its id may be too long)
WORDS = ("whitespace", "nltk")
FORMATS = ("auto", "lines", "keyed")
MISSING = ("error", "drop")
MANIFEST_KEYS = ("languages", "first", "dev", "dev_share", "words", "lowercase", "format", "missing", "dictionary",
                 "links", "links_base")
MARK = 1 << 16  # `_read` notes where every MARK-th line of a file starts: `Lines` seeks there
DEV_SHARE = 0.1  # without dev files, the last tenth of the pairs is the development set
RECIPE_VERSION = 1  # bump when the pairs a spec yields change (part of the prepared cache key)


@dataclass(frozen=True)
class Spec:
    """What `data.parallel.files` names: the languages (the first language first) and how their files are read."""

    languages: tuple[str, ...]
    train: tuple[Path, ...]  # one file per language
    dev: tuple[Path, ...] | None = None  # dev files per language; None: the last `dev_share` of the pairs
    dev_share: float = DEV_SHARE
    words: str = "whitespace"  # whitespace | nltk (corpus.words after corpus.normalise)
    lowercase: bool = False
    format: str = "auto"  # auto | lines | keyed
    missing: str = "error"  # keyed files: an id missing in another file is an error, or its pair is left out
    dictionary: str | dict[str, Path] | None = None  # "identical", or a word<TAB>word file per other language
    links: dict[str, Path] = field(default_factory=dict)  # a link file of the dev pairs per other language
    links_base: int | None = None  # 0 or 1: where a Pharaoh link file's word indices start
    origin: str = ""  # the manifest's path, or "" for an inline spec

    def describe(self) -> str:
        return self.origin or ",".join(f"{n}={p}" for n, p in zip(self.languages, self.train))

    def key(self) -> dict:
        """What the prepared data depend on: the files' contents and the reading settings (not the paths)."""
        return {"recipe": RECIPE_VERSION, "languages": list(self.languages),
                "train": [_digest(p) for p in self.train], "dev": [_digest(p) for p in self.dev] if self.dev else None,
                "dev_share": None if self.dev else self.dev_share, "words": self.words, "lowercase": self.lowercase,
                "format": self.format, "missing": self.missing,
                "links": {n: _digest(p) for n, p in sorted(self.links.items())},
                "links_base": self.links_base}


def _digest(path: Path) -> str:
    if not path.is_file():
        return f"missing:{path}"
    with open(path, "rb") as f:  # in blocks: a gigabyte file is not read into memory
        return hashlib.file_digest(f, "sha256").hexdigest()


def _name(name: str, where: str) -> str:
    if not NAME.fullmatch(name):
        raise MinimultError(f"{where}: {name!r} is not a language name (a letter, then letters, digits, - or _; "
                            f"at most 32): it names the language's results and its tokenizer's folder")
    return name


def _check_names(names: list[str], where: str) -> None:
    for n in names:
        _name(n, where)
    twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if twice is not None:
        raise MinimultError(f"{where}: language {twice!r} is named twice; every language has one file")
    if len(names) < 2:
        raise MinimultError(f"{where}: names {len(names)} language(s); a run needs at least two")


def is_manifest(text: str) -> bool:
    return "=" not in text and text.strip().lower().endswith(".toml")


def parse_spec(text: str) -> Spec:
    """`NAME=PATH,NAME=PATH,...` (paths relative to the current folder) or a TOML manifest's path."""
    text = text.strip()
    if not text:
        raise MinimultError("--source parallel reads the files named by --files (data.parallel.files): "
                            "NAME=PATH,NAME=PATH,... or a .toml manifest (docs/corpora.md)")
    if is_manifest(text):
        return _manifest(Path(text))
    items = [item.strip() for item in text.split(",") if item.strip()]
    pairs = [item.partition("=") for item in items]
    bad = next((item for item, (n, eq, p) in zip(items, pairs) if not eq or not n.strip() or not p.strip()), None)
    if bad is not None:
        raise MinimultError(f"--files {text!r}: {bad!r} is not NAME=PATH; give NAME=PATH,NAME=PATH,... (the first "
                            f"the first language) or a .toml manifest")
    names = [n.strip() for n, _, _ in pairs]
    _check_names(names, f"--files {text!r}")
    return Spec(tuple(names), tuple(Path(p.strip()) for _, _, p in pairs))


def _manifest(path: Path) -> Spec:
    if not path.is_file():
        raise MinimultError(f"manifest not found: {path}" + ("" if path.is_absolute() else
                                                             f" (a relative path is the working directory's: "
                                                             f"{path.absolute()})"))
    try:
        m = tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise MinimultError(f"cannot read the manifest {path}: {e}") from None
    where = f"manifest {path}"
    unknown = sorted(set(m) - set(MANIFEST_KEYS))
    if unknown:
        raise MinimultError(f"{where}: unknown key {unknown[0]!r}; valid: {', '.join(MANIFEST_KEYS)}")

    def table(key: str, required: bool = False) -> dict[str, Path]:
        value = m.get(key)
        if value is None and not required:
            return {}
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise MinimultError(f"{where}: [{key}] must be a table of NAME = \"file\" lines")
        return {_name(n, where): path.parent / v for n, v in value.items()}

    files = table("languages", required=True)
    names = list(files)
    _check_names(names, where)
    first = m.get("first", names[0])
    if not isinstance(first, str) or first not in files:
        raise MinimultError(f"{where}: first = {first!r} is not one of its languages ({', '.join(names)})")
    names = [first] + [n for n in names if n != first]
    dev = table("dev")
    if dev and set(dev) != set(names):
        raise MinimultError(f"{where}: [dev] names {', '.join(dev)}; it needs a file for every language "
                            f"({', '.join(names)}) or none (dev_share)")
    if dev and "dev_share" in m:
        raise MinimultError(f"{where}: dev files and dev_share contradict each other; give one")
    share = m.get("dev_share", DEV_SHARE)
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share < 1:
        raise MinimultError(f"{where}: dev_share must be a number between 0 and 1, got {share!r}")
    options = {}
    for key, valid in (("words", WORDS), ("format", FORMATS), ("missing", MISSING)):
        if key in m and m[key] not in valid:
            raise MinimultError(f"{where}: {key} = {m[key]!r}; valid: {', '.join(valid)}")
        if key in m:
            options[key] = m[key]
    if "lowercase" in m and not isinstance(m["lowercase"], bool):
        raise MinimultError(f"{where}: lowercase must be true or false")
    dictionary = m.get("dictionary")
    if not isinstance(dictionary, (str, dict, type(None))) or (isinstance(dictionary, str)
                                                               and dictionary != "identical"):
        raise MinimultError(f"{where}: dictionary = {dictionary!r}: give \"identical\" or a [dictionary] table of "
                            f"word<TAB>word files per language")
    if isinstance(dictionary, dict):
        dictionary = table("dictionary")
    others = set(names[1:])
    for key, given in (("dictionary", dictionary if isinstance(dictionary, dict) else {}), ("links", table("links"))):
        if set(given) - others:
            raise MinimultError(f"{where}: [{key}] names {sorted(set(given) - others)[0]!r}; its entries pair the "
                                f"first language ({first}) with another: {', '.join(names[1:])}")
    base = m.get("links_base")
    if base is not None and (isinstance(base, bool) or base not in (0, 1)):
        raise MinimultError(f"{where}: links_base must be 0 or 1 (where a Pharaoh file's word indices start)")
    return Spec(tuple(names), tuple(files[n] for n in names), tuple(dev[n] for n in names) if dev else None,
                float(share), lowercase=bool(m.get("lowercase", False)), dictionary=dictionary or None,
                links=table("links"), links_base=base, origin=str(path), **options)


def absolute(text: str) -> str:
    """The spec with absolute paths (a run's config must not depend on the folder it was started from)."""
    if not text.strip() or is_manifest(text):
        return str(Path(text.strip()).resolve()) if text.strip() else text
    spec = parse_spec(text)
    return ",".join(f"{n}={p.resolve()}" for n, p in zip(spec.languages, spec.train))


# ---------------------------------------------------------------------------------------------
# Reading the files.


class Lines(Sequence):
    """Lines `start` .. `stop` - 1 (0-based) of a line-aligned file that `_scan` checked, as lists of words: read
    from the file again at every pass, so a corpus of any size holds none of its text. Compares equal to the list
    of its sentences (tests, small files); indexing reads the file (it is meant for those only)."""

    def __init__(self, path: Path, lang: str, marks: list[int], start: int, stop: int, words: str, lowercase: bool):
        self.path, self.lang, self.marks, self.start, self.stop = path, lang, marks, start, stop  # marks: `_read`'s
        self.words, self.lowercase = words, lowercase

    def __len__(self) -> int:
        return self.stop - self.start

    def __iter__(self):
        mark = self.start // MARK
        lines = _read(self.path, self.lang, mark * MARK, self.marks[mark])
        for line in islice(lines, self.start - mark * MARK, self.stop - mark * MARK):
            yield tokenize(line, self.words, self.lowercase)

    def __getitem__(self, i):
        return list(self)[i]

    def __eq__(self, other) -> bool:
        return list(self) == list(other)

    def take(self, start: int, stop: int) -> "Lines":
        return Lines(self.path, self.lang, self.marks, self.start + start, self.start + min(stop, len(self)),
                     self.words, self.lowercase)


@dataclass(frozen=True)
class ParallelCorpus(Corpus):
    """The first language's sentences (`sentences`) and every other language's (`others`), pair by pair;
    `verse_ids` is each pair's id: its line number (line-aligned) or its key (keyed). Line-aligned files give
    `Lines` (read again at each pass) and a range of line numbers; keyed files, lists read into memory."""

    others: list[list[list[str]]] = field(default_factory=list)  # [language 1.., sentence, word]
    stats: dict = field(default_factory=dict)

    def language(self, k: int) -> list[list[str]]:
        return self.sentences if k == 0 else self.others[k - 1]

    def take(self, start: int, stop: int, name: str) -> "ParallelCorpus":
        """Pairs `start` .. `stop` - 1."""
        cut = lambda xs: xs.take(start, stop) if isinstance(xs, Lines) else xs[start:stop]  # noqa: E731
        return ParallelCorpus(name, cut(self.sentences), cut(self.verse_ids), [cut(o) for o in self.others],
                              self.stats)


def _lines(path: Path, lang: str) -> list[str]:
    """The file's lines (trailing empty lines dropped), or one error line naming the file and the line."""
    return list(_read(path, lang))


def _read(path: Path, lang: str, line: int = 0, byte: int = 0, marks: list[int] | None = None):
    """The lines of a file as `_lines` gives them, one at a time, from line `line` (0-based), which starts at byte
    `byte`; `marks` gets the byte where every MARK-th line starts. The lines stop at the first fault, and the rest of
    the file is read for what reading it whole names first: a NUL byte, then bytes that are not UTF-8 ("\\n" is
    never inside a UTF-8 sequence), then an empty file, an empty line or one over MAX_LINE_CHARS characters."""
    of = f" (language {lang})"
    if path.is_dir():
        raise MinimultError(f"{path} is a folder, not a file{of}")
    if not path.is_file():
        raise MinimultError(f"file not found: {path}{of}")
    blank, n, not_utf8, fault = 0, 0, None, None
    with open(path, "rb") as f:
        f.seek(byte)
        for raw in f:
            if marks is not None and line % MARK == 0:
                marks.append(byte)
            line, byte = line + 1, byte + len(raw)
            if b"\x00" in raw:
                raise MinimultError(f"{path}:{line}: a NUL byte: a binary file, not UTF-8 text{of}")
            if not_utf8:
                continue
            if line == 1:  # the file's first line (line 0 starts at byte 0)
                raw = raw.removeprefix(b"\xef\xbb\xbf")
            try:
                text = raw.decode("utf-8").removesuffix("\n").removesuffix("\r")
            except UnicodeDecodeError as e:
                not_utf8 = (line, byte - len(raw) + e.start, e.reason)  # (raw ends where the line does)
                continue
            if fault:
                continue
            if not text.strip():
                blank += 1  # trailing blank lines are dropped; one before a line is an error
            elif blank:
                fault = (f"{path}:{line - blank}: empty line{of}: every line is one sentence of a pair; leave a pair "
                         f"out of every file, not one")
            elif len(text) > MAX_LINE_CHARS:
                fault = (f"{path}:{line}: {len(text):,} characters: a line holds one sentence (at most "
                         f"{MAX_LINE_CHARS:,} characters){of}")
            else:
                n += 1
                yield text
    if not_utf8:
        line, at, reason = not_utf8
        raise MinimultError(f"{path}:{line}: not UTF-8 ({reason} at byte {at}){of}")
    if fault or not n:
        raise MinimultError(fault or f"{path} is empty{of}")


def _scan(spec: Spec, paths: tuple[Path, ...]) -> tuple[int, list[list[int]]] | None:
    """(the pairs of a set of line-aligned files, `_read`'s marks of each), checked as `_pairs` and `_corpus`
    check them (the same error for the same file) while holding one line at a time; None when the files are
    keyed or may be (a line begins as a keyed one): `_pairs` reads those whole."""
    if spec.format == "keyed":
        return None
    counts, empty, marks = [], [], []
    for path, lang in zip(paths, spec.languages):
        n, first_empty = 0, None
        marks.append([])
        for line in _read(path, lang, marks=marks[-1]):
            if spec.format == "auto" and STARTS_KEYED.match(line):
                return None
            n += 1
            if first_empty is None and spec.words != "whitespace" and not tokenize(line, spec.words, spec.lowercase):
                first_empty = n  # (split at whitespace, a line that is not blank has words)
        counts.append(n)
        empty.append(first_empty)
    if len(set(counts)) > 1:
        short, long = counts.index(min(counts)), counts.index(max(counts))
        raise MinimultError(f"{paths[long]} has {counts[long]:,} lines and {paths[short]} {counts[short]:,}: "
                            f"line-aligned files pair line k of every file, so {paths[long]}:{counts[short] + 1} "
                            f"has no partner (languages {spec.languages[long]}, {spec.languages[short]})"
                            + ("; a file whose lines end in a lone \\r (old Mac files) reads as one line"
                               if counts[short] == 1 else ""))
    for path, lang, number in zip(paths, spec.languages, empty):
        if number is not None:
            raise MinimultError(_no_words(path, number, spec.words, lang))
    return counts[0], marks


def _no_words(path: Path, number: int, words: str, lang: str) -> str:
    return f"{path}:{number}: no words left after {words} tokenization (language {lang})"


def _keyed(path: Path, lang: str, lines: list[str]) -> dict[int, tuple[int, str]]:
    """{id: (line number, text)} of a keyed file; an id twice or a key without text is one error line."""
    out: dict[int, tuple[int, str]] = {}
    for i, line in enumerate(lines, 1):
        m = KEYED.fullmatch(line)
        if m is None:
            raise MinimultError(f"{path}:{i}: no ID<TAB> at the start of the line, while the file is read as keyed "
                                f"(language {lang}): give every line its id, or none (line-aligned)")
        key, text = int(m.group(1)), m.group(2).strip()
        if not text:
            raise MinimultError(f"{path}:{i}: id {key} has no text (language {lang})")
        if key in out:
            raise MinimultError(f"{path}:{i}: id {key} again (first at line {out[key][0]}) (language {lang}): "
                                f"every id is one pair")
        out[key] = (i, text)
    return out


def _check_keyed(paths, names, lines: list[list[str]]) -> None:
    """Files read as `auto`, of which a line begins as a keyed one (`_scan` read the others as lines): keyed when
    every line of every file is ID<TAB>text; anything between (a header line, an id of 19 digits, one file keyed
    and one not) is one error line naming the first line that is not keyed: detection never guesses."""
    for path, name, ls in zip(paths, names, lines):
        for i, line in enumerate(ls, 1):
            if KEYED.fullmatch(line):
                continue
            m = STARTS_KEYED.match(line)
            why = f"id {m.group(1)[:24]} has {len(m.group(1))} digits (at most 18)" if m else "no ID<TAB> at its start"
            raise MinimultError(f"{path}:{i}: {why}, while other lines are keyed (language {name}): give every line of "
                                f"every file its id, or none (a manifest's format = \"lines\" reads them as text)")


def _pairs(spec: Spec, paths: tuple[Path, ...], log: Callable[[str], None]) -> tuple[list, list, list, dict]:
    """(pair ids, per language its texts, per language the line numbers, stats) of a set of keyed files, read
    whole (`_scan` reads line-aligned ones)."""
    names = spec.languages
    lines = [_lines(p, n) for p, n in zip(paths, names)]
    if spec.format == "auto":
        _check_keyed(paths, names, lines)
    tables = [_keyed(p, n, ls) for p, n, ls in zip(paths, names, lines)]
    everywhere = set(tables[0]).intersection(*tables[1:])
    dropped = {}
    for k, (table, path, name) in enumerate(zip(tables, paths, names)):
        alone = [key for key in table if key not in everywhere]
        if not alone:
            continue
        if spec.missing == "error":
            key = alone[0]
            lacking = next(j for j, t in enumerate(tables) if key not in t)
            raise MinimultError(f"{path}:{table[key][0]}: id {key} (language {name}) has no line in {paths[lacking]} "
                                f"(language {names[lacking]}): keyed files hold the same ids (missing = \"drop\" in a "
                                f"manifest keeps the ids every file has)")
        dropped[name] = len(alone)
        log(f"note: {path}: {len(alone):,} id(s) (the first {alone[0]} at line {table[alone[0]][0]}) are missing in "
            f"another language's file: their pairs are left out (missing = \"drop\")")
    ids = [key for key in tables[0] if key in everywhere]  # the first language's order
    return (ids, [[t[key][1] for key in ids] for t in tables], [[t[key][0] for key in ids] for t in tables],
            {"format": "keyed", **({"dropped": dropped} if dropped else {})})


def tokenize(text: str, words: str, lowercase: bool) -> list[str]:
    """A line's words: split at whitespace, or NLTK's tokenizer after `corpus.normalise` (as the built-in
    corpora); lowercased first when asked."""
    text = text.lower() if lowercase else text
    return text.split() if words == "whitespace" else nltk_words(normalise(text))


def _corpus(spec: Spec, paths, name: str, log) -> ParallelCorpus:
    scanned = _scan(spec, paths)
    if scanned is not None:  # line-aligned: read again at each pass
        n, marks = scanned
        lines = [Lines(path, lang, m, 0, n, spec.words, spec.lowercase)
                 for path, lang, m in zip(paths, spec.languages, marks)]
        return ParallelCorpus(name, lines[0], range(1, n + 1), lines[1:], {"format": "lines"})
    ids, texts, numbers, stats = _pairs(spec, paths, log)
    sentences = [[tokenize(text, spec.words, spec.lowercase) for text in ts] for ts in texts]
    for path, lang, mine, ns in zip(paths, spec.languages, sentences, numbers):
        empty = next((number for words, number in zip(mine, ns) if not words), None)
        if empty is not None:
            raise MinimultError(_no_words(path, empty, spec.words, lang))
    return ParallelCorpus(name, sentences[0], ids, sentences[1:], stats)


def read_corpora(spec: Spec, train_limit: int | None = None, dev_limit: int | None = None,
                 log: Callable[[str], None] = lambda s: None) -> tuple[ParallelCorpus, ParallelCorpus]:
    """(training pairs, development pairs): the dev files', or the last `dev_share` of the training files'
    pairs; each cut to its first `limit` pairs when given (data.train_sentences, data.dev_sentences).
    Line-aligned files are checked line by line and then read again at each pass (`Lines`); keyed files are
    read into memory (their ids pair lines across the files)."""
    everything = _corpus(spec, spec.train, "train", log)
    if spec.dev:
        train, dev = everything, _corpus(spec, spec.dev, "dev", log)
    else:
        n = len(everything)
        n_dev = round(spec.dev_share * n)
        if n_dev < 2 or n - n_dev < 2:
            raise MinimultError(f"{spec.describe()}: {n:,} pairs at dev_share {spec.dev_share:g} leave {n - n_dev:,} "
                                f"for training and {n_dev:,} for development; each needs at least 2 (give dev files)")
        train, dev = everything.take(0, n - n_dev, "train"), everything.take(n - n_dev, n, "dev")
    names = "+".join(spec.languages)
    train = train.take(0, train_limit or len(train), f"{names} train")
    dev = dev.take(0, dev_limit or len(dev), f"{names} dev")
    for c in (train, dev):
        if len(c) < 2:
            raise MinimultError(f"{spec.describe()}: the {c.name} set has {len(c)} pair(s); at least 2 are needed")
    check_dictionaries(spec)
    return train, dev


def check_dictionaries(spec: Spec) -> None:
    """Read every `[dictionary]` file: one that is missing or malformed fails now, before any training, not at
    `eval` (which reads it again; the prepared data do not depend on it, so it is not in their key)."""
    for lang, path in spec.dictionary.items() if isinstance(spec.dictionary, dict) else ():
        read_dictionary(path, lang, spec)


# Resident memory per byte of text, every file together, that `minimult prepare` (which shows examples from views
# of the whole training text) and `pretrain` on its entry need (experiments/scale_measure.py; docs/corpora.md, "A
# corpus 1,000× the Bible's": 2.9 and 4.3 at 1 GB per language of two, the build alone ~1): line-aligned files are
# read line by line, so what grows with the text is the token arrays (~0.2 pieces a byte: 3 bytes a piece in the
# cache entry, ~15 in pretrain's views and training set); keyed files are read whole, as lists of words (35)
MEMORY_PER_BYTE = 4
KEYED_MEMORY_PER_BYTE = 35
MEMINFO = Path("/proc/meminfo")


def check_memory(spec: Spec) -> None:
    """Refuse, in one line and before the text is read, text whose preparation and training would not fit in
    the memory available now (MEMINFO's MemAvailable; no check where it says nothing): MEMORY_PER_BYTE (keyed
    files, as their first line or the manifest says: KEYED_MEMORY_PER_BYTE) x the bytes of the training and dev
    files."""
    files = [p for p in (*spec.train, *(spec.dev or ())) if p.is_file()]
    total = sum(p.stat().st_size for p in files)
    try:
        available = next((int(line.split()[1]) * 1024 for line in MEMINFO.read_text().splitlines()
                          if line.startswith("MemAvailable:")), None)
    except (OSError, ValueError, IndexError):
        available = None
    if available is None or KEYED_MEMORY_PER_BYTE * total <= available:  # fits however the files are read
        return
    keyed = spec.format == "keyed" or spec.format == "auto" and any(_first_line_keyed(p) for p in files)
    per_byte = KEYED_MEMORY_PER_BYTE if keyed else MEMORY_PER_BYTE
    need = per_byte * total
    if need <= available:
        return
    gib = 1024**3
    held = "keyed files are read whole, as words" if keyed else "every language's token arrays, as training holds them"
    raise MinimultError(f"{spec.describe()}: {total / 1e6:,.1f} MB of text need ~{need / gib:.1f} GiB of memory to "
                        f"prepare and train on (~{per_byte} bytes a byte: {held}) and {available / gib:.1f} GiB is "
                        f"available: cut every file to its first N lines (the same N, head -n N) or sample lines, to "
                        f"at most ~{available / per_byte / 1e6:,.1f} MB in all (data.train_sentences does not lower "
                        f"this check, which counts the files' bytes); docs/corpora.md, \"A corpus 1,000× the Bible's\"")


def _first_line_keyed(path: Path) -> bool:
    with open(path, "rb") as f:
        return STARTS_KEYED.match(f.readline().removeprefix(b"\xef\xbb\xbf").decode("utf-8", "replace")) is not None


def read_dictionary(path: Path, lang: str, spec: Spec) -> list[tuple[str, str]]:
    """(first-language word, language-`lang` word) pairs of a `word<TAB>word` file (lines starting with #
    and blank lines skipped), lowercased with the corpus; a malformed line is one error naming it."""
    text = read_text(path, folder=f"dictionary {{path}} is a folder, not a file (language {lang})",
                     missing=f"dictionary file not found: {{path}} (language {lang})",
                     not_utf8="dictionary {path} is not UTF-8 ({reason} at byte {byte})")
    out = []
    for i, line in enumerate(text_lines(text), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 2 or not all(f.strip() and len(f.split()) == 1 for f in fields):
            raise MinimultError(f"{path}:{i}: {line[:60]!r} is not word<TAB>word (one word each: the first "
                                f"language's, then {lang}'s)")
        a, b = (f.strip().lower() if spec.lowercase else f.strip() for f in fields)
        out.append((a, b))
    if not out:
        raise MinimultError(f"dictionary {path} has no word pairs (language {lang})")
    return out
