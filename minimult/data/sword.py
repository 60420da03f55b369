"""Bibles from SWORD modules (Debian `sword-text-*`, read with PyPI `pysword`): verse-aligned real languages.

Public entries: `module_verses(language, testament) -> {verse id: markup}` (every verse of the KJV
versification addressed by book, chapter and verse, empty ones as ""), `verse_words(markup) ->
(words, strongs)` (the words of a verse with the Strong's numbers on each) and `silver_links(en, es)`
(word links between two verses that share a Strong's number).

The modules' text is OSIS markup with Strong's numbers on words (`<w lemma="strong:G2316">God</w>`).
Stripping keeps the text of every element (the KJV's psalm titles and epistle subscriptions are
`<title>`s; RV1909 has both inline in its verse text, so keeping them keeps the two verses parallel)
and drops footnotes (`<note>`) with their text. A run of tags between two letters is a word boundary
when a new element starts in it (RV1909: `allí</w><transChange>también`) and joins the letters when it
only closes elements (KJV: `give</w>n`). Words are `corpus.words` of the stripped text, so a verse is
tokenized like every other corpus; a word carries the Strong's numbers of the `<w>` elements its
characters come from.

Verses are addressed one by one rather than iterated: an iterator over a module skips empty verses,
which would shift every later verse against the other language. Verse ids are pythonbible's
(BBCCCVVV, books in canonical order, `40001001` is Matthew 1:1).
"""

from __future__ import annotations

import functools
import os
import re
import statistics
from pathlib import Path

from minimult.data.corpus import train_punkt, words
from minimult.errors import MinimultError

MODULES = {"en": "engKJV2006eb", "es": "spaRV1909eb"}  # SWORD module names (KJV versification both)
PACKAGES = {"en": "sword-text-kjv", "es": "sword-text-sparv"}  # the Debian packages that install them
RECIPE_VERSION = 1  # bump when the words a verse yields change (part of the prepared cache key)

_NOTE = re.compile(r"<note\b[^>]*?(?:/>|>.*?</note>)", re.S)
_TAG = re.compile(r"<(/?)(\w+)([^>]*?)(/?)>")
_STRONGS = re.compile(r"[GH]\d+")


def sword_paths() -> list[Path]:
    """Where SWORD modules are looked for: $MINIMULT_SWORD_PATH (':'-separated), then the system's."""
    extra = [Path(p) for p in os.environ.get("MINIMULT_SWORD_PATH", "").split(":") if p]
    return extra + [Path("/usr/share/sword"), Path.home() / ".sword"]


def module_fingerprint(language: str) -> str:
    """The module's name and version from its .conf (part of the prepared cache key)."""
    conf = _find_conf(language)
    version = re.search(r"^Version=(.*)$", conf.read_text(encoding="utf-8", errors="replace"), re.M)
    return f"{MODULES[language]}=={version.group(1).strip() if version else '?'}:recipe{RECIPE_VERSION}"


def _find_conf(language: str) -> Path:
    name = MODULES[language]
    for root in sword_paths():
        for conf in (root / "mods.d").glob("*.conf") if (root / "mods.d").is_dir() else ():
            if f"[{name}]" in conf.read_text(encoding="utf-8", errors="replace"):
                return conf
    raise MinimultError(f"the SWORD module {name} is not installed: `apt-get install {PACKAGES[language]}` "
                        f"(set-up tries it; or point MINIMULT_SWORD_PATH at a folder with mods.d/ and modules/)")


def _open(language: str):
    try:
        from pysword.modules import SwordModules
    except ImportError:
        raise MinimultError("pysword is not installed: `pip install pysword==0.2.8` (./test.sh's set-up "
                            "does it)") from None
    conf = _find_conf(language)
    library = SwordModules(str(conf.parent.parent))
    if MODULES[language] not in library.parse_modules():
        raise MinimultError(f"pysword does not read the module {MODULES[language]} under {conf.parent.parent}")
    bible = library.get_bible_from_module(MODULES[language])
    # zText modules compress a whole book per block and pysword decompresses it for every verse read;
    # keeping the last blocks makes reading verse by verse about 30x faster (the text is the same)
    if hasattr(bible, "_decompressed_text"):
        bible._decompressed_text = functools.lru_cache(maxsize=4)(bible._decompressed_text)
    return bible


def module_verses(language: str, testament: str, limit: int | None = None) -> dict[int, str]:
    """{verse id: raw markup} of one testament ('old' | 'new'), every verse of the versification in
    order (the first `limit` of them), each read by its book, chapter and verse ("" when empty)."""
    bible = _open(language)
    structure = bible.get_structure().get_books()
    first = 0 if testament == "old" else len(structure["ot"])  # books are numbered across both testaments
    chosen = structure["ot"] if testament == "old" else structure["nt"]
    verses: dict[int, str] = {}
    for number, book in enumerate(chosen, first + 1):
        for chapter, length in enumerate(book.chapter_lengths, 1):
            for verse in range(1, length + 1):
                if limit is not None and len(verses) >= limit:
                    return verses
                verses[number * 1_000_000 + chapter * 1000 + verse] = bible.get(
                    books=[book.name], chapters=[chapter], verses=[verse], clean=False)
    return verses


def strip_markup(markup: str) -> tuple[str, list[frozenset[str]]]:
    """(plain text, the Strong's numbers of each character): notes dropped, tags removed without
    gluing words (see the module docstring)."""
    markup = _NOTE.sub(" ", markup)
    text: list[str] = []
    numbers: list[frozenset[str]] = []
    stack: list[frozenset[str]] = []  # Strong's numbers of the open elements
    pos = 0
    pending_start = False  # a tag run since the last character opened an element

    def emit(chunk: str) -> None:
        nonlocal pending_start
        if not chunk:
            return
        if pending_start and text and text[-1].strip() and chunk[0].strip():
            text.append(" ")  # a new element begins right after a letter: a new word
            numbers.append(frozenset())
        pending_start = False
        current = frozenset().union(*stack) if stack else frozenset()
        text.extend(chunk)
        numbers.extend([current] * len(chunk))

    for m in _TAG.finditer(markup):
        emit(markup[pos:m.start()])
        pos = m.end()
        closing, name, attrs, empty = m.group(1), m.group(2), m.group(3), m.group(4)
        if empty:  # milestones (<lb/>, <l sID=.../>, <chapter eID=.../>) separate what they stand between
            pending_start = True
            continue
        if closing:
            if stack:
                stack.pop()
            continue
        lemma = re.search(r'lemma="([^"]*)"', attrs)
        stack.append(frozenset(_STRONGS.findall(lemma.group(1))) if lemma else frozenset())
        pending_start = True
    emit(markup[pos:])
    plain = "".join(text)
    return plain, numbers


def verse_words(markup: str, punkt=None) -> tuple[list[str], list[frozenset[str]]]:
    """(words, Strong's numbers of each word) of a verse: its stripped text cut into sentences by `punkt`
    (one sentence without), each into `corpus.words`; a word carries the numbers of the characters it
    spans (none for words outside `<w>` elements)."""
    plain, numbers = strip_markup(markup)
    plain = plain.replace("\u2019", "'").replace("\u2018", "'")  # as corpus.normalise (same length)
    spans = list(punkt.span_tokenize(plain)) if punkt is not None else [(0, len(plain))]
    tokens, out_numbers = [], []
    for start, end in spans:
        pos = start
        for token in words(plain[start:end]):
            at = plain.find(token, pos, end)
            tokens.append(token)
            if at < 0:  # the tokenizer rewrote it: no numbers, keep the position
                out_numbers.append(frozenset())
                continue
            out_numbers.append(frozenset().union(*numbers[at:at + len(token)]))
            pos = at + len(token)
    return tokens, out_numbers


def language_verses(language: str, testament: str, limit: int | None = None) -> dict[int, tuple[list, list]]:
    """{verse id: (words, Strong's numbers per word)} of the verses with words, in order; sentences
    are found by a Punkt model trained on the testament's stripped verses (as `corpus.split_verses`)."""
    return _read(language, testament, limit)[2]


def _read(language: str, testament: str, limit: int | None = None) -> tuple[dict[int, str], object, dict]:
    """(every verse's stripped text, the Punkt model trained on them, `language_verses`)."""
    raw = module_verses(language, testament, limit)
    plain = {v: strip_markup(t)[0] for v, t in raw.items()}
    punkt = train_punkt([t for t in plain.values() if t.strip()])
    return plain, punkt, {v: w for v, w in ((v, verse_words(t, punkt)) for v, t in raw.items()) if w[0]}


def silver_links(en: list[frozenset[str]], es: list[frozenset[str]]) -> list[tuple[int, int, str]]:
    """Word links (English index, Spanish index, 'S' | 'P') between two verses from shared Strong's numbers.

    A link is S (sure) when the number it shares occurs on exactly one word on each side (one word in
    one language, one in the other: an unambiguous pair), P (possible) otherwise: a number on several
    words of a side (RV1909 tags `de la generación` as one element; articles and `and` recur).
    """
    def where(numbers):
        out: dict[str, list[int]] = {}
        for i, ns in enumerate(numbers):
            for n in ns:
                out.setdefault(n, []).append(i)
        return out

    en_at, es_at = where(en), where(es)
    links: dict[tuple[int, int], str] = {}
    for n in en_at.keys() & es_at.keys():
        sure = len(en_at[n]) == 1 and len(es_at[n]) == 1
        for i in en_at[n]:
            for j in es_at[n]:
                if sure or (i, j) not in links:
                    links[(i, j)] = "S" if sure else links.get((i, j), "P")
    return [(i, j, kind) for (i, j), kind in sorted(links.items())]


def jaccard(a: list[frozenset[str]], b: list[frozenset[str]]) -> float | None:
    """Share of the Strong's numbers of two verses that both carry (None when either has none)."""
    x, y = frozenset().union(*a), frozenset().union(*b)
    return len(x & y) / len(x | y) if x and y else None


def aligned_verses(first: dict[int, tuple], second: dict[int, tuple], near_empty: int = 2,
                   min_chapter_overlap: float = 0.45) -> tuple[list[int], dict]:
    """Verse ids to pair, in order, and what was left out and why.

    A verse pairs when both languages have words for it, except
    - near a verse that is empty in one language (within `near_empty` verses of it in its chapter):
      the other translation merged it into a neighbour (RV1909 Acts 19:40 holds 19:40-41), so the
      neighbours' texts differ in extent;
    - in a chapter numbered differently: the median Strong's overlap (`jaccard`) of its verse pairs is
      below `min_chapter_overlap` (RV1909 Numbers 13 starts with what the KJV calls 12:16, and every
      verse after is one off). Correctly numbered chapters have medians above 0.6, shifted ones below
      0.3 (measured on both testaments).
    """
    every = sorted(first.keys() | second.keys())
    both = [v for v in every if v in first and v in second]
    empty = [v for v in every if (v in first) != (v in second)]
    near = {v for v in both for e in empty if v // 1000 == e // 1000 and abs(v - e) <= near_empty}
    overlaps: dict[int, list[float]] = {}
    for v in both:
        j = jaccard(first[v][1], second[v][1])
        if j is not None:
            overlaps.setdefault(v // 1000, []).append(j)
    shifted = sorted(c for c, js in overlaps.items() if statistics.median(js) < min_chapter_overlap)
    keep = [v for v in both if v not in near and v // 1000 not in shifted]
    report = {"both": len(both), "empty_in_one": len(empty), "near_empty": len(near),
              "shifted_chapters": [f"{c // 1000}:{c % 1000}" for c in shifted],
              "in_shifted_chapters": sum(v // 1000 in shifted for v in both if v not in near)}
    return keep, report


def corpus_stats(testaments=("new", "old")) -> list[dict]:
    """Per testament: each language's verses with words, sentences (Punkt, as `corpus.split_verses`),
    words and word types, and the verses aligned between them (`aligned_verses`)."""
    rows = []
    for testament in testaments:
        texts = {}
        row = {"testament": testament, "languages": {}}
        for lang in MODULES:
            plain, punkt, texts[lang] = _read(lang, testament)
            words = [w for ws, _ in texts[lang].values() for w in ws]
            row["languages"][lang] = {
                "module": MODULES[lang], "verses": len(texts[lang]),
                "sentences": sum(len(punkt.tokenize(plain[v])) for v in texts[lang]),
                "words": len(words), "types": len(set(words))}
        keep, report = aligned_verses(texts["en"], texts["es"])
        row["aligned"] = len(keep)
        row["left_out"] = report
        rows.append(row)
    return rows
