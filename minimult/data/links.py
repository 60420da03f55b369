"""Word-alignment link files: gold or silver links between the words of verse-aligned sentences.

Two formats are read (`read_links` tells them apart: a native file's links hold tabs, a Pharaoh file's
never do). The lab's native format (UTF-8 text, one link per line):

    verse_id<TAB>index_in_A<TAB>index_in_B[<TAB>S|P]

- `verse_id`: the verse as pythonbible numbers it (BBCCCVVV: `40001001` is Matthew 1:1); the run's
  development sentences are whole verses (a source with `verse_sentences`, such as `en-es`).
- `index_in_A`, `index_in_B`: 0-based word indices in the English (A) and the other language's (B)
  verse, counting the whitespace-separated words of the stripped verse text, which is the sentence
  exactly as the corpus tokenized it (punctuation marks are words; the cache's `verses-*.tsv` shows it).
- `S` (sure) or `P` (possible), default `S`. Precision counts a prediction correct when it is any
  link (S or P), recall counts the S links found, AER = 1 - (|A∩S| + |A∩P|) / (|A| + |S|).
- Numbers are ASCII digits (`٣` or `¹` is a malformed line, never read as 3 or refused with a traceback).
- Blank lines and lines starting with `#` are ignored; a file may say `# silver` in a comment.

The Pharaoh format of the word-alignment shared tasks and aligners (fast_align, awesome-align, SimAlign):
one line per sentence pair, line k addressing the pair whose id is k (a line-aligned corpus's line k, the
`--pair` files' line k), holding space-separated links:

- `i-j` a sure link, `i-j-S` too; `i?j`, `ipj` and `i-j-P` a possible one (the suffix's `S`/`P` in either case);
- `i` indexes the first language's (A's) words, `j` the other's (B's), from 0 or from 1 as declared
  (`--link-base 0|1`, `links_base` in a manifest): Pharaoh files exist in both conventions, so a file
  whose base is not declared is refused rather than guessed;
- an empty line is a pair without links; lines starting with `#` at the top of the file are a header
  (not pairs; `# silver` labels the links silver), anywhere else a malformed line.

Public entries: `read_links(path, words_a, words_b, base) -> Links` (checked against the verses' word
counts: a malformed line, an unknown verse or an index out of range is one error naming the line),
`link_format(path)`, `write_links(path, rows, header)`, `write_pharaoh(path, rows, pairs, base)` and
`word_first_pieces(word_starts, offsets)` (where each word's pieces start, to map word indices onto a
tokenized sentence).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from minimult.data.cache import atomic_write_text
from minimult.data.corpus import read_text, text_lines
from minimult.errors import MinimultError

KINDS = ("S", "P")
# ASCII only (str.isdigit takes '¹', which int() fails on, and '٣', which int() reads as 3), and at most 18 of
# them (int() refuses over 4,300 digits)
DIGITS = re.compile(r"[0-9]{1,18}")


PHARAOH = re.compile(r"([0-9]{1,18})(?:-([0-9]{1,18})(?:-([SsPp]))?|([?p])([0-9]{1,18}))")
FORMATS = ("native", "pharaoh")


@dataclass(frozen=True)
class Links:
    """Links of a file: (verse id, word in A, word in B, sure) rows, and whether the file says silver."""

    verse_ids: np.ndarray  # (K,) int64
    a: np.ndarray  # (K,) int64 word index in the English verse
    b: np.ndarray  # (K,) int64 word index in the other language's verse
    sure: np.ndarray  # (K,) bool
    silver: bool
    path: str
    format: str = "native"  # native | pharaoh
    base: int = 0  # where the file's word indices start
    past: int = 0  # links left out: on pairs past the last the run's cut dev set keeps (`read_links`' `past`)

    def __len__(self) -> int:
        return len(self.a)


def write_links(path: Path, rows, header: str = "") -> None:
    """rows: (verse id, a, b, 'S' | 'P'); `header` lines are written as `# ` comments first."""
    _write(path, header, [f"{v}\t{a}\t{b}\t{k}" for v, a, b, k in rows])


def _write(path: Path, header: str, lines: list[str]) -> None:
    atomic_write_text(Path(path), "\n".join([f"# {h}" for h in header.splitlines()] + lines) + "\n")


def _text(path) -> str:
    return read_text(path, folder="link file {path} is a folder, not a file", missing="link file not found: {path}",
                     not_utf8="link file is not UTF-8 text ({reason} at byte {byte}): {path}")


def says_silver(path) -> bool:
    """Whether a comment line of the file says `silver`."""
    return any(line.lstrip().startswith("#") and "silver" in line.lower() for line in text_lines(_text(path)))


def link_format(path) -> str:
    """"native" when a link line holds a tab (verse<TAB>i<TAB>j), else "pharaoh"."""
    text = _text(path)
    lines = [line for line in text_lines(text) if line.strip() and not line.lstrip().startswith("#")]
    if not lines:  # else read as a Pharaoh file asking for its index base
        raise MinimultError(f"link file {path} holds no links ({'only comments' if text.strip() else 'it is empty'}): "
                            f"one line per link (verse<TAB>i<TAB>j) or per pair (Pharaoh i-j ...)")
    return "native" if any("\t" in line for line in lines) else "pharaoh"


def read_links(path, words_a: dict[int, int], words_b: dict[int, int], base: int | None = None,
               past: int | None = None) -> Links:
    """Parse a link file against the verses (pairs) it may name: {verse id: number of words} of each language.
    A Pharaoh file's line k addresses pair k, its word indices counted from `base` (0 or 1, which must be
    given); the native format's indices count from 0. `past`: the last pair id of a dev set cut to its first
    pairs (data.dev_sentences): links on later pairs are left out and counted (`Links.past`), not refused."""
    text = _text(path)
    path = Path(path)
    if link_format(path) == "pharaoh":
        return _read_pharaoh(path, text, words_a, words_b, base, past)
    if base not in (None, 0):
        raise MinimultError(f"{path} is a native link file (verse<TAB>i<TAB>j), whose word indices count from 0; "
                            f"--link-base {base} applies to Pharaoh files")
    rows, silver, left = [], False, 0
    for number, line in enumerate(text_lines(text), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            silver = silver or "silver" in stripped.lower()
            continue
        fields = line.rstrip("\r\n").split("\t")
        where = f"{path}:{number}: {stripped[:60]!r}"
        if len(fields) not in (3, 4) or not all(DIGITS.fullmatch(f.strip()) for f in fields[:3]) \
                or (len(fields) == 4 and fields[3].strip() not in KINDS):
            raise MinimultError(f"bad link at {where}: use verse_id<TAB>index_in_A<TAB>index_in_B[<TAB>S|P] "
                                f"(0-based word indices, ASCII digits)")
        verse, a, b = (int(f) for f in fields[:3])
        if past is not None and verse > past:
            left += 1
            continue
        if verse not in words_a or verse not in words_b:
            raise MinimultError(f"bad link at {where}: verse {verse} is not among the run's aligned "
                                f"development verses")
        if a >= words_a[verse] or b >= words_b[verse]:
            raise MinimultError(f"bad link at {where}: word index out of range (verse {verse} has "
                                f"{words_a[verse]} words in A and {words_b[verse]} in B, counted from 0)")
        rows.append((verse, a, b, len(fields) == 3 or fields[3].strip() == "S"))
    return _links(rows, silver, path, "native", 0, left)


def _links(rows, silver: bool, path: Path, kind: str, base: int, past: int) -> Links:
    if not rows:
        raise MinimultError(f"link file has no links: {path}")
    v, a, b, s = (np.array(x) for x in zip(*rows))
    return Links(v.astype(np.int64), a.astype(np.int64), b.astype(np.int64), s.astype(bool), silver, str(path),
                 kind, base, past)


def _read_pharaoh(path: Path, text: str, words_a: dict[int, int], words_b: dict[int, int], base, past) -> Links:
    if base not in (0, 1):
        raise MinimultError(f"{path} is a Pharaoh link file (i-j per pair): say whether its word indices count from "
                            f"0 or from 1 (--link-base 0|1; links_base in a manifest)")
    lines = text_lines(text)
    header = next((i for i, line in enumerate(lines) if not line.lstrip().startswith("#")), len(lines))
    silver = any("silver" in line.lower() for line in lines[:header])
    rows, left = [], 0
    for pair, line in enumerate(lines[header:], 1):
        number = header + pair
        tokens = line.split()
        where = f"{path}:{number}"
        if past is not None and pair > past:
            left += len(tokens)
            continue
        if tokens and pair not in words_a:
            raise MinimultError(f"bad link at {where}: the line addresses pair {pair}, which is not among the run's "
                                f"{len(words_a):,} development pairs, ids {min(words_a)} to {max(words_a)} (a Pharaoh "
                                f"file's line k is the pair whose id is k: leave the other pairs' lines empty)")
        for token in tokens:
            m = PHARAOH.fullmatch(token)
            if m is None:
                raise MinimultError(f"bad link at {where}: {token[:30]!r}: use i-j or i-j-S (sure), i?j, ipj or i-j-P "
                                    f"(possible), ASCII digits counted from {base}")
            i, j = (int(m.group(1)), int(m.group(2) if m.group(2) is not None else m.group(5)))
            sure = (m.group(3) or "S").upper() == "S" if m.group(2) is not None else False
            if i < base or j < base:
                raise MinimultError(f"bad link at {where}: {token!r} has index 0 but the file's indices count from 1 "
                                    f"(--link-base 1)")
            a, b = i - base, j - base
            if a >= words_a[pair] or b >= words_b[pair]:
                raise MinimultError(f"bad link at {where}: {token!r}: word index out of range (pair {pair} has "
                                    f"{words_a[pair]} words in A and {words_b[pair]} in B, counted from {base})")
            rows.append((pair, a, b, sure))
    return _links(rows, silver, path, "pharaoh", base, left)


def write_pharaoh(path: Path, rows, pairs: int, base: int = 0, header: str = "") -> None:
    """rows: (pair id 1..pairs, a, b, 'S' | 'P') as a Pharaoh file of `pairs` lines (`i-j` sure, `i?j`
    possible), word indices from `base`; `header` lines first as `# ` comments."""
    per = [[] for _ in range(pairs)]
    for pair, a, b, kind in rows:
        per[int(pair) - 1].append(f"{int(a) + base}{'-' if kind == 'S' else '?'}{int(b) + base}")
    _write(path, header, [" ".join(links) for links in per])


def word_first_pieces(word_starts: np.ndarray, offsets: np.ndarray) -> list[np.ndarray]:
    """For every sentence, the position (within the sentence) of each word's first piece; word w's
    pieces are positions firsts[w] .. firsts[w+1]-1 (the last word's run to the sentence's end)."""
    starts = np.flatnonzero(word_starts)
    cut = np.searchsorted(starts, offsets)
    return [starts[cut[i]:cut[i + 1]] - offsets[i] for i in range(len(offsets) - 1)]
