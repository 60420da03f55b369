"""Vocabularies (HF `tokenizers`) at three granularities and compact encoded corpora.

Public entries: `train_vocab(tokenizer, sentences, size) -> Vocab` (`TOKENIZERS`: wordpiece, char, word),
`Vocab.encode(sentences, verse_ids) -> Encoded`, `Vocab.decode(ids, word_starts) -> words`.
Ids of language k are `id + k * vocab.stride`; they are displayed with a `::` prefix per language
(`He` -> `::He`), and `Vocab.parse` reads that display form back. A vocabulary may hold fewer entries
than `size` (a character set is small): ids `len(vocab)` .. `size - 1` of each block are then unused.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import os
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass
from itertools import islice
from typing import Iterable
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer, models, pre_tokenizers

from minimult.data.corpus import text_lines
from minimult.errors import MinimultError
from minimult.registry import Registry

# The Rust pool single-threaded (set before tokenizers starts it): encoding keeps to a run's CPU budget and is
# safe in a forked process.
os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# `train_wordpiece`'s version, in the cache key of user text and in the stats of an entry it trained: an entry
# trained otherwise (by HF's trainer, before) is never reused as one of its own
WORDPIECE_TRAINER = "minimult-1"
SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
PAD, UNK, CLS, SEP, MASK = range(len(SPECIALS))
N_SPECIAL = len(SPECIALS)
LANG_PREFIX = "::"
ENCODE_CHUNK = 20_000  # sentences per encode_batch call
SORT_CHUNK = 1 << 26  # bytes (estimated) of lines sorted in memory at once by `sorted_digest`


class Ragged:
    """Sentences stored as one flat `ids` array cut by `offsets` (sentence i = ids[o[i]:o[i+1]])."""

    ids: np.ndarray
    offsets: np.ndarray

    @property
    def lengths(self) -> np.ndarray:
        """(S,) int64: pieces per sentence."""
        return np.diff(self.offsets)

    def sentence(self, i: int) -> np.ndarray:
        """Sentence i's ids, (len_i,) (a view)."""
        return self.ids[self.offsets[i] : self.offsets[i + 1]]


def cut_to_fit(texts: Iterable[Ragged], max_len: int) -> int:
    """How many sentences of `texts` have more than `max_len - 2` pieces (the window less [CLS] and [SEP]):
    training and evaluation cut them to fit, and say how many."""
    return sum(int((t.lengths > max_len - 2).sum()) for t in texts)


@dataclass(frozen=True)
class Encoded(Ragged):
    """Sentences as one flat uint16 array of piece ids plus offsets (sentence i = ids[o[i]:o[i+1]])."""

    ids: np.ndarray  # (P,) uint16
    offsets: np.ndarray  # (S+1,) int64
    word_starts: np.ndarray  # (P,) bool: the piece begins a word
    verse_ids: np.ndarray  # (S,) int64

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def save(self, path: Path) -> None:
        """Into one .npz file at `path` (its four arrays)."""
        with open(path, "wb") as f:  # np.savez would append .npz to a temp name
            np.savez(f, ids=self.ids, offsets=self.offsets, word_starts=self.word_starts,
                     verse_ids=self.verse_ids)

    @classmethod
    def load(cls, path: Path) -> "Encoded":
        """What `save` wrote."""
        with np.load(path) as z:
            return cls(z["ids"], z["offsets"], z["word_starts"], z["verse_ids"])

    @classmethod
    def from_lists(cls, pieces: list[list[int]], starts: list[list[bool]], verse_ids) -> "Encoded":
        """S sentences' piece ids and word starts (lists of one list per sentence) and their verse ids (S,)."""
        lengths = np.fromiter((len(p) for p in pieces), dtype=np.int64, count=len(pieces))
        offsets = np.zeros(len(pieces) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        ids = np.fromiter((i for p in pieces for i in p), dtype=np.uint16, count=int(offsets[-1]))
        ws = np.fromiter((s for p in starts for s in p), dtype=bool, count=int(offsets[-1]))
        return cls(ids, offsets, ws, np.asarray(verse_ids, dtype=np.int64))


def _word_starts(word_ids: list) -> list[bool]:
    """Whether each piece begins a word, from the pieces' word indices (linear in the length)."""
    return [w is not None and (j == 0 or word_ids[j - 1] != w) for j, w in enumerate(word_ids)]


class Vocab:
    """A trained tokenizer (WordPiece model for wordpiece and char, WordLevel for word) plus the id
    conventions of the lab."""

    def __init__(self, tokenizer, size: int):
        self.tokenizer = tokenizer
        self.stride = size  # ids per language (the stride of the id shift)
        self.pieces = [tokenizer.id_to_token(i) for i in range(tokenizer.get_vocab_size())]
        self.index = {p: i for i, p in enumerate(self.pieces)}
        # how a piece that continues a word is written ("##" for WordPiece models; words have none)
        self.continuation = getattr(tokenizer.model, "continuing_subword_prefix", "")

    def __len__(self) -> int:
        return len(self.pieces)

    def encode(self, sentences, verse_ids) -> Encoded:
        """Word-tokenized sentences (S lists of words, any re-iterable of them) and their verse ids (S,) -> their
        pieces, ids in this vocabulary (no language offset, no specials added), with each piece's word start.
        Encoded ENCODE_CHUNK sentences at a time (each sentence is encoded on its own: the same ids), so memory
        beyond the arrays stays that of one chunk's Python lists (~175 bytes a piece), whatever the text."""
        if not sentences:
            raise MinimultError("nothing to encode: the corpus has no sentences")
        parts, rest = [], iter(sentences)
        while chunk := list(islice(rest, ENCODE_CHUNK)):
            out = self.tokenizer.encode_batch(chunk, is_pretokenized=True, add_special_tokens=False)
            starts = [_word_starts(e.word_ids) for e in out]  # word_ids builds a new list on every access
            parts.append(Encoded.from_lists([e.ids for e in out], starts, ()))
        offsets = np.zeros(sum(len(p) for p in parts) + 1, dtype=np.int64)
        np.cumsum(np.concatenate([p.lengths for p in parts]), out=offsets[1:])
        return Encoded(np.concatenate([p.ids for p in parts]), offsets,
                       np.concatenate([p.word_starts for p in parts]), np.asarray(verse_ids, dtype=np.int64))

    def decode(self, ids, word_starts) -> list[str]:
        """The words of one sentence from its ids (of any language) and word starts: the inverse of
        `encode` up to [UNK] (a word that could not be encoded comes back as "[UNK]")."""
        words: list[str] = []
        for i, start in zip(ids, word_starts):
            piece = self.pieces[int(i) % self.stride]
            if start or not words:
                words.append(piece)
            else:
                words[-1] += piece[len(self.continuation):] if piece.startswith(self.continuation) else piece
        return words

    def display(self, ids) -> list[str]:
        """Global ids to pieces; language k's pieces get k `::` prefixes."""
        return [LANG_PREFIX * (int(i) // self.stride) + self.pieces[int(i) % self.stride] for i in ids]

    def parse(self, tokens: list[str]) -> list[int]:
        """Inverse of `display`."""
        out = []
        for t in tokens:
            k = 0
            while t.startswith(LANG_PREFIX) and t[len(LANG_PREFIX):] and t not in self.index:
                t, k = t[len(LANG_PREFIX):], k + 1
            if t not in self.index:
                raise MinimultError(f"not in the vocabulary: {t!r}")
            out.append(self.index[t] + k * self.stride)
        return out

    def save(self, directory: Path) -> None:
        """`tokenizer.json` and `vocab.txt` (one piece a line, by id) into `directory`."""
        self.tokenizer.save(str(directory / "tokenizer.json"))
        (directory / "vocab.txt").write_text("\n".join(self.pieces) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, directory: Path, size: int) -> "Vocab":
        """The vocabulary `save` wrote into `directory`, with `size` ids per language (the id stride)."""
        path = Path(directory) / "tokenizer.json"
        if not path.is_file():
            raise MinimultError(f"no vocabulary at {path}")
        return cls(Tokenizer.from_file(str(path)), size)


SHIPPED = Path(__file__).resolve().parents[2] / "corpora" / "vocabularies"


def vocab_key(sentences, size: int, source: str) -> str:
    """What determines a trained vocabulary: the (sorted) training text, the size and the language
    source, as a file name."""
    return f"{source}-{size}-{sorted_digest(' '.join(s) for s in sentences)[:16]}"


def sorted_digest(lines, chunk: int = SORT_CHUNK) -> str:
    """sha256 (hex) of the lines sorted, joined by "\\n", in UTF-8 (lines hold no "\\n"). Memory stays that of
    `chunk` bytes of lines: a larger text is sorted in runs written to temporary files, then merged (UTF-8
    bytes sort as their code points do, so the order, and the digest, are those of sorting the whole)."""
    digest, held, size = hashlib.sha256(), [], 0
    with tempfile.TemporaryDirectory(prefix="minimult-sort-") as tmp:
        runs = []
        for line in lines:
            held.append(line)
            size += len(line) + 64  # a str's own bytes besides its characters
            if size > chunk:
                runs.append(_write_run(Path(tmp) / f"{len(runs)}", held))
                held, size = [], 0
        held.sort()  # the last run, in memory: the whole text when it fits (line by line, never joined)
        files = [open(path, "rb") for path in runs]
        try:
            merged = heapq.merge(*((raw[:-1] for raw in f) for f in files), (line.encode("utf-8") for line in held))
            for i, line in enumerate(merged):
                digest.update(b"\n" + line if i else line)
        finally:
            for f in files:
                f.close()
    return digest.hexdigest()


def _write_run(path: Path, lines: list[str]) -> Path:
    lines.sort()
    with open(path, "wb") as f:
        f.writelines(line.encode("utf-8") + b"\n" for line in lines)
    return path


def from_pieces(pieces: list[str], size: int) -> Vocab:
    """The WordPiece tokenizer of a vocabulary list (a WordPiece model is its vocabulary: this encodes
    exactly as the tokenizer that was trained to it)."""
    tokenizer = Tokenizer(models.WordPiece({p: i for i, p in enumerate(pieces)}, unk_token="[UNK]",
                                           max_input_chars_per_word=100))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return Vocab(tokenizer, size)


def shipped_vocab(sentences: list[list[str]], size: int, source: str) -> tuple[Vocab | None, Path | None]:
    """(the shipped vocabulary for this training text, its file), checked against its recorded sha256;
    (None, None) when none is shipped. Shipped vocabularies make every build on every machine give the
    same token ids; `ship_vocab` adds one. `source` "*": one shipped for this text and size by any source
    (the parallel source reading a built-in source's text from files gets that source's vocabulary)."""
    if not SHIPPED.is_dir() or not any(SHIPPED.glob(f"{source}-{size}-*.txt")):  # ("*": any source's)
        return None, None  # none of this size: the text is not hashed
    if source == "*":
        key = vocab_key(sentences, size, "")  # "-SIZE-HASH"
        found = sorted(SHIPPED.glob(f"*{key}.txt"))
        path = found[0] if found else SHIPPED / f"parallel{key}.txt"
    else:
        path = SHIPPED / f"{vocab_key(sentences, size, source)}.txt"
    if not path.is_file():
        return None, None
    index = json.loads((SHIPPED / "index.json").read_text())
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != index.get(path.name, {}).get("sha256"):
        raise MinimultError(f"the shipped vocabulary {path} does not match its sha256 in {SHIPPED / 'index.json'}")
    return from_pieces(text_lines(data.decode("utf-8")), size), path


def shipped_digests() -> set[str]:
    """The sha256 of every shipped vocabulary list (corpora/vocabularies/index.json)."""
    index = SHIPPED / "index.json"
    return {e["sha256"] for e in json.loads(index.read_text()).values()} if index.is_file() else set()


def ship_vocab(vocab: Vocab, sentences: list[list[str]], source: str, description: str) -> Path:
    """Add `vocab` (trained on `sentences`) to the shipped vocabularies, with its hash and description."""
    SHIPPED.mkdir(parents=True, exist_ok=True)
    path = SHIPPED / f"{vocab_key(sentences, vocab.stride, source)}.txt"
    path.write_text("\n".join(vocab.pieces) + "\n", encoding="utf-8")
    index_path = SHIPPED / "index.json"
    index = json.loads(index_path.read_text()) if index_path.is_file() else {}
    index[path.name] = {"sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "entries": len(vocab),
                        "description": description}
    index_path.write_text(json.dumps(dict(sorted(index.items())), indent=1) + "\n")
    return path


def _check_size(size: int) -> None:
    if size <= N_SPECIAL:
        raise MinimultError(f"vocabulary size {size} leaves no room: it must exceed the {N_SPECIAL} special tokens")


def train_wordpiece(sentences: list[list[str]], size: int = 2048) -> Vocab:
    """A cased WordPiece vocabulary of at most `size` entries, trained deterministically: the same
    training text gives the same vocabulary on every machine and in every build, whatever its order.

    The layout and algorithm of HF `tokenizers`' WordPieceTrainer (BPE over the words' characters):
    specials (ids 0-4), every character of the corpus (code-point order), every character that occurs
    inside a word as a `##` piece (same order), then one entry per merge, most frequent pair first,
    until `size` entries or no pair is left. Ties between equally frequent pairs go to the lower ids (left
    piece, then right), as in HF, whose `##` pieces however get their ids in hash-map order (so its builds
    differ). A merge merges every occurrence at once (HF's may leave some to a later merge of the pair).
    Pair counts are updated incrementally, so a merge costs the words that hold its pair, not the corpus:
    a Bible trains in seconds, memory grows with the word types, not the text (docs/pipeline.md).
    """
    _check_size(size)
    counts = Counter(w for s in sentences for w in s)
    counts.pop("", None)
    words = sorted(counts)
    freq = [counts[w] for w in words]
    pieces = list(SPECIALS) + sorted({c for w in words for c in w}) + sorted({"##" + c for w in words for c in w[1:]})
    if len(pieces) > size:  # every character is kept: ids would overlap the next language's
        raise MinimultError(f"vocabulary size {size} is too small for this corpus: its characters alone "
                            f"need {len(pieces)} entries (specials included)")
    index = {p: i for i, p in enumerate(pieces)}
    symbols = [[index[w[0]]] + [index["##" + c] for c in w[1:]] for w in words]
    pair_count: Counter = Counter()
    where: dict[tuple[int, int], set[int]] = defaultdict(set)  # the words that hold a pair (or once did)
    for i, word in enumerate(symbols):
        for pair in zip(word, word[1:]):
            pair_count[pair] += freq[i]
            where[pair].add(i)
    # max-heap by count, then lower ids (left, then right); entries go stale as counts fall
    heap = [(-n, a, b) for (a, b), n in pair_count.items()]
    heapq.heapify(heap)
    while len(pieces) < size and heap:
        stale, a, b = heapq.heappop(heap)
        n = pair_count[a, b]
        if n != -stale:
            if 0 < n < -stale:  # fell since pushed (a pair that grew was pushed again when it did)
                heapq.heappush(heap, (-n, a, b))
            continue
        merged = pieces[a] + pieces[b].removeprefix("##")
        if merged not in index:  # a piece reached by another pair before is not entered twice
            index[merged] = len(pieces)
            pieces.append(merged)
        new, grown = index[merged], set()
        for i in where.pop((a, b)):
            old, word = symbols[i], _merge(symbols[i], a, b, new)
            if len(word) == len(old):  # no longer holds the pair
                continue
            for pair in zip(old, old[1:]):
                pair_count[pair] -= freq[i]
            for pair in zip(word, word[1:]):
                pair_count[pair] += freq[i]
                if new in pair:  # only pairs with the new piece grow
                    where[pair].add(i)
                    grown.add(pair)
            symbols[i] = word
        for x, y in grown:
            heapq.heappush(heap, (-pair_count[x, y], x, y))
    return from_pieces(pieces, size)


def _merge(word: list[int], a: int, b: int, new: int) -> list[int]:
    """`word` (piece ids) with every occurrence of the pair (a, b) replaced by `new`, left to right."""
    out, j = [], 0
    while j < len(word):
        if j + 1 < len(word) and word[j] == a and word[j + 1] == b:
            out.append(new)
            j += 2
        else:
            out.append(word[j])
            j += 1
    return out


def _by_frequency(counts: dict[str, int]) -> list[str]:
    """Most frequent first, ties in string order: the same list on every machine and every build."""
    return sorted(counts, key=lambda k: (-counts[k], k))


def train_char(sentences: list[list[str]], size: int = 2048) -> Vocab:
    """Every character of the corpus as a unit, plus the specials: a WordPiece model whose entries are
    single characters, each in the form(s) it occurs in, first in a word (`a`) and inside one (`##a`),
    so the model sees word boundaries as it does under wordpiece and word. Deterministic (no
    training): entries by frequency. A vocabulary smaller than that character set is an error; a larger
    one leaves the rest of the id block unused (set data.vocab_size to `len(vocab)` to save the
    model's rows). A word with a character outside the set becomes one [UNK], as under wordpiece."""
    _check_size(size)
    first, inside = Counter(), Counter()
    for s in sentences:
        for w in s:
            first[w[:1]] += 1
            inside.update(w[1:])
    first.pop("", None)
    entries = list(SPECIALS) + _by_frequency(first) + ["##" + c for c in _by_frequency(inside)]
    if len(entries) > size:
        raise MinimultError(f"vocabulary size {size} is smaller than the character set: this corpus's "
                            f"characters need {len(entries)} entries (first-in-word and ## forms, specials "
                            f"included); use --set data.vocab_size={len(entries)} or more")
    return from_pieces(entries, size)


def train_word(sentences: list[list[str]], size: int = 2048) -> Vocab:
    """The `size - 5` most frequent words (ties in string order) plus the specials, [UNK] for the rest:
    a WordLevel model, one unit per word. Deterministic (no training)."""
    _check_size(size)
    counts = Counter(w for s in sentences for w in s)
    entries = list(SPECIALS) + [w for w in _by_frequency(counts) if w not in SPECIALS][: size - N_SPECIAL]
    tokenizer = Tokenizer(models.WordLevel({p: i for i, p in enumerate(entries)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return Vocab(tokenizer, size)


# data.tokenizer -> how its vocabulary is made (sentences, size) -> Vocab
TOKENIZERS = Registry("tokenizer", unknown="unknown tokenizer {name!r}: use {valid}")
TOKENIZERS.update({"wordpiece": train_wordpiece, "char": train_char, "word": train_word})


def train_vocab(tokenizer: str, sentences: list[list[str]], size: int) -> Vocab:
    """A `tokenizer` vocabulary (wordpiece | char | word) of at most `size` entries, specials at ids 0-4."""
    return TOKENIZERS[tokenizer](sentences, size)


def vocab_files(directory: Path) -> list[Path]:
    """Every vocabulary list a prepared cache entry (or a run folder, which copies them) holds: vocab.txt,
    then a language's own under LANG/vocab.txt (en-es: es/), in name order."""
    return [Path(directory) / "vocab.txt", *sorted(Path(directory).glob("*/vocab.txt"))]


def vocab_digest(directory: Path) -> str:
    """sha256 over `vocab_files` in order: a single vocabulary's is its file's own hash."""
    return files_digest(vocab_files(directory))


def files_digest(files) -> str:
    """sha256 (hex) over the bytes of `files`, in the order given."""
    digest = hashlib.sha256()
    for f in files:
        digest.update(Path(f).read_bytes())
    return digest.hexdigest()
