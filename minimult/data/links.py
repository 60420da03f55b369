"""Word-alignment link files: gold or silver links between the words of verse-aligned sentences.

Format (UTF-8 text, one link per line):

    verse_id<TAB>index_in_A<TAB>index_in_B[<TAB>S|P]

- `verse_id`: the verse as pythonbible numbers it (BBCCCVVV: `40001001` is Matthew 1:1); the run's
  development sentences are whole verses (a source with `verse_sentences`, such as `en-es`).
- `index_in_A`, `index_in_B`: 0-based word indices in the English (A) and the other language's (B)
  verse, counting the whitespace-separated words of the stripped verse text, which is the sentence
  exactly as the corpus tokenized it (punctuation marks are words; `minimult corpus-stats --words`
  and the cache's `verses-*.tsv` show it).
- `S` (sure) or `P` (possible), default `S`. Precision counts a prediction correct when it is any
  link (S or P), recall counts the S links found, AER = 1 - (|A∩S| + |A∩P|) / (|A| + |S|).
- Numbers are ASCII digits (`٣` or `¹` is a malformed line, never read as 3 or refused with a traceback).
- Blank lines and lines starting with `#` are ignored; a file may say `# silver` in a comment.

Public entries: `read_links(path, words_a, words_b) -> Links` (checked against the verses' word
counts: a malformed line, an unknown verse or an index out of range is one error naming the line),
`write_links(path, rows, header)` and `word_first_pieces(word_starts, offsets)` (where each word's
pieces start, to map word indices onto a tokenized sentence).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from minimult.errors import MinimultError

KINDS = ("S", "P")
# ASCII only (str.isdigit takes '¹', which int() fails on, and '٣', which int() reads as 3), and at most 18 of
# them (int() refuses over 4,300 digits)
DIGITS = re.compile(r"[0-9]{1,18}")


@dataclass(frozen=True)
class Links:
    """Links of a file: (verse id, word in A, word in B, sure) rows, and whether the file says silver."""

    verse_ids: np.ndarray  # (K,) int64
    a: np.ndarray  # (K,) int64 word index in the English verse
    b: np.ndarray  # (K,) int64 word index in the other language's verse
    sure: np.ndarray  # (K,) bool
    silver: bool
    path: str

    def __len__(self) -> int:
        return len(self.a)


def write_links(path: Path, rows, header: str = "") -> None:
    """rows: (verse id, a, b, 'S' | 'P'); `header` lines are written as `# ` comments first."""
    from minimult.data.cache import atomic_write_text

    lines = [f"# {h}" for h in header.splitlines()]
    lines += [f"{v}\t{a}\t{b}\t{k}" for v, a, b, k in rows]
    atomic_write_text(Path(path), "\n".join(lines) + "\n")


def read_links(path, words_a: dict[int, int], words_b: dict[int, int]) -> Links:
    """Parse a link file against the verses it may name: {verse id: number of words} of each language."""
    path = Path(path)
    if not path.is_file():
        raise MinimultError(f"link file not found: {path}")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise MinimultError(f"link file is not UTF-8 text ({e.reason} at byte {e.start}): {path}") from None
    rows, silver = [], False
    for number, line in enumerate(text.splitlines(), 1):
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
        if verse not in words_a or verse not in words_b:
            raise MinimultError(f"bad link at {where}: verse {verse} is not among the run's aligned "
                                f"development verses")
        if a >= words_a[verse] or b >= words_b[verse]:
            raise MinimultError(f"bad link at {where}: word index out of range (verse {verse} has "
                                f"{words_a[verse]} words in A and {words_b[verse]} in B, counted from 0)")
        rows.append((verse, a, b, len(fields) == 3 or fields[3].strip() == "S"))
    if not rows:
        raise MinimultError(f"link file has no links: {path}")
    v, a, b, s = (np.array(x) for x in zip(*rows))
    return Links(v.astype(np.int64), a.astype(np.int64), b.astype(np.int64), s.astype(bool), silver, str(path))


def word_first_pieces(word_starts: np.ndarray, offsets: np.ndarray) -> list[np.ndarray]:
    """For every sentence, the position (within the sentence) of each word's first piece; word w's
    pieces are positions firsts[w] .. firsts[w+1]-1 (the last word's run to the sentence's end)."""
    starts = np.flatnonzero(word_starts)
    cut = np.searchsorted(starts, offsets)
    return [starts[cut[i]:cut[i + 1]] - offsets[i] for i in range(len(offsets) - 1)]
