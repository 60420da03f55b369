"""`minimult prepare`: corpora -> sentences -> vocabulary (data.tokenizer) -> encoded ids, cached by content.

Public entry: `prepare(data_cfg, progress) -> Prepared`. A second call with the same inputs reuses the
cache entry (named by a hash of everything that determines it) and says so.
"""

from __future__ import annotations

import functools
import hashlib
import json
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from minimult.data import corpus as corpus_mod
from minimult.data.cache import cached
from minimult.errors import MinimultError
from minimult.data import sources
from minimult.data.vocab import (WORDPIECE_TRAINER, Encoded, Vocab, cut_to_fit, files_digest, shipped_digests,
                                 vocab_digest, vocab_files)

FORMAT_VERSION = 2  # 2: shipped vocabularies (corpora/vocabularies) replace a fresh, nondeterministic build


@dataclass(frozen=True)
class Prepared:
    """A prepared cache entry, loaded: its folder, vocabulary, encoded English train and dev text (vocabulary
    ids, no language offset), the source's own encoded texts and the corpus statistics (stats.json)."""

    path: Path
    vocab: Vocab
    train: Encoded
    dev: Encoded
    extra: dict[str, Encoded]  # the source's own encoded texts (e.g. unicode's "train_fake")
    stats: dict
    reused: bool

    @property
    def vocab_hash(self) -> str:
        """sha256 (hex) of the entry's vocabulary files (`vocab_digest`)."""
        return self.stats["vocab_sha256"]

    def encoded(self, split: str) -> Encoded:
        """The encoded English text of "train" (or any other split name: dev)."""
        return self.train if split == "train" else self.dev

    @functools.cached_property  # read by train.py's _begin and by a resume's check: hashed once
    def data_hash(self) -> str:
        """A hash of the encoded texts (training, dev and the source's own): what a run trains and evaluates on.
        The cache key names the corpus files by content too, but a run records this (run.json's `data_sha256`)
        so that a resume finds out when its text changed, even where the vocabulary stayed the same."""
        h = hashlib.sha256()
        for enc in (self.train, self.dev, *(self.extra[k] for k in sorted(self.extra))):
            for a in (enc.ids, enc.offsets, enc.word_starts):
                h.update(memoryview(np.ascontiguousarray(a)).cast("B"))  # no copy of the array
        return h.hexdigest()


def cache_key(cfg) -> dict:
    """What names the cache entry of data config `cfg` (corpus files by content, sizes, source, tokenizer)."""
    key = {
        "format": FORMAT_VERSION,
        "train": corpus_mod.source_fingerprint(cfg.train),
        "dev": corpus_mod.source_fingerprint(cfg.dev),
        "train_sentences": cfg.train_sentences,
        "dev_sentences": cfg.dev_sentences,
        "vocab_size": cfg.vocab_size,
        "fake": cfg.source,  # the source's old name: existing entries keep their keys
    }
    if cfg.tokenizer != "wordpiece":  # wordpiece entries keep the key (and so the cache) they always had
        key["tokenizer"] = cfg.tokenizer
    source = sources.get(cfg.source)
    key = source.cache_key(cfg, key)
    if cfg.tokenizer == "wordpiece" and (source.reads_files or key["train"].startswith("file:")):
        # the user's text: HF's trainer built its older entries, which differ between builds
        key["wordpiece"] = WORDPIECE_TRAINER
    return key


def trained_here(path: Path) -> bool:
    """Whether an entry's vocabularies are not all shipped ones: one at least was trained when it was built."""
    shipped = shipped_digests()
    return any(files_digest([f]) not in shipped for f in vocab_files(path))


def corpus_stats(train: corpus_mod.Corpus, dev: corpus_mod.Corpus) -> dict:
    """Sentences, words, types, characters and median words per sentence of each corpus; dev's OOV word rate.
    One pass over each corpus's sentences (the parallel source reads them from its files again at each pass)."""
    def one(c, known=None):
        lengths, types, characters, oov = array("q"), set(), 0, 0
        for s in c.sentences:
            lengths.append(len(s))
            types.update(s)
            characters += sum(map(len, s))
            oov += 0 if known is None else sum(w not in known for w in s)
        words = sum(lengths)
        return {"name": c.name, "sentences": len(c), "words": words, "types": len(types), "characters": characters,
                "median_words": float(np.median(np.frombuffer(lengths, dtype=np.int64)))}, types, oov / max(words, 1)

    train_stats, train_types, _ = one(train)
    dev_stats, _, oov = one(dev, train_types)
    return {"train": train_stats, "dev": dev_stats, "dev_oov_rate": oov}


def _build(cfg, progress: Callable[[str], None]):
    def build(tmp: Path) -> None:
        source = sources.get(cfg.source)
        train, dev = source.corpora(cfg, progress)
        stats = corpus_stats(train, dev)
        text, size = source.training_text(train, cfg), source.vocab_size(cfg)
        # shipped vocabularies are WordPiece lists; char and word vocabularies are built deterministically
        vocab, where = source.shipped(text, size, cfg) if cfg.tokenizer == "wordpiece" else (None, None)
        if where is not None:
            progress(f"using the shipped vocabulary {where}")
        else:
            progress(f"training a WordPiece vocabulary of {size} (none is shipped for this text) ..."
                     if cfg.tokenizer == "wordpiece" else
                     f"building a {cfg.tokenizer} vocabulary of at most {size} ...")
            vocab = source.train_vocab(train, cfg)
        stats.update(source.write_extra(vocab, train, dev, tmp, cfg) or {})
        entries = max(((stats.get("parallel") or {}).get("vocab_entries") or {"": len(vocab)}).values())
        if entries < size / 2:  # a small text: the model's token table and output layer are mostly unused ids
            progress(f"note: this text gives {entries:,} vocabulary entries for the {size:,} ids a vocabulary has "
                     f"(data.vocab_size); unused ids take probability until training pushes them down, which "
                     f"raises perplexity on short runs: --set data.vocab_size={-(-entries * cfg.vocab_size // size)} "
                     f"fits the model to this text")
        vocab.save(tmp)
        for name, c in (("train", train), ("dev", dev)):  # unless the source encoded it (parallel: its first language)
            if not (tmp / f"{name}.npz").is_file():
                vocab.encode(c.sentences, c.verse_ids).save(tmp / f"{name}.npz")
        enc_train, enc_dev = Encoded.load(tmp / "train.npz"), Encoded.load(tmp / "dev.npz")
        stats["vocab_entries"] = len(vocab)
        if cfg.tokenizer != "wordpiece":  # older entries have no key: they are all wordpiece
            stats["tokenizer"] = cfg.tokenizer
        # every vocabulary the data uses (en-es: Spanish's own under es/), so a rebuilt cache whose ids differ
        # anywhere is refused, not read; a single vocabulary's hash is its file's, as it always was
        stats["vocab_sha256"] = vocab_digest(tmp)
        if cfg.tokenizer == "wordpiece" and trained_here(tmp):  # entries of shipped lists keep the stats they had
            stats["wordpiece_trainer"] = WORDPIECE_TRAINER
        stats["train"].update(pieces=int(len(enc_train.ids)), median_pieces=float(np.median(enc_train.lengths)),
                              max_pieces=int(enc_train.lengths.max()))
        stats["dev"].update(pieces=int(len(enc_dev.ids)),
                            unk_rate=float(np.mean(enc_dev.ids == 1)) if len(enc_dev.ids) else 0.0)
        (tmp / "stats.json").write_text(json.dumps(stats, indent=1))
        for name, c in (("train", train), ("dev", dev)):  # the words, for fastText and for reading
            with open(tmp / f"{name}.words.txt", "w", encoding="utf-8") as f:
                f.writelines(" ".join(s) + "\n" for s in c.sentences)
    return build


def prepare(cfg, progress: Callable[[str], None] = lambda s: None) -> Prepared:
    """The cache entry of data config `cfg`, built now if there is none (`progress` gets its lines)."""
    path, reused = cached("prepared", cache_key(cfg), _build(cfg, progress))
    prepared = load_prepared(path, cfg, reused)
    if (reused and cfg.tokenizer == "wordpiece" and prepared.stats.get("wordpiece_trainer") != WORDPIECE_TRAINER
            and trained_here(path)):  # e.g. a built-in corpus at a size no list is shipped for, built by HF's trainer
        raise MinimultError(f"prepared data at {path} holds a WordPiece vocabulary of another trainer (HF "
                            f"tokenizers', whose builds differ); delete it to rebuild (runs trained on it cannot be "
                            f"evaluated on the rebuilt one)")
    return prepared


def load_prepared(path: Path, cfg, reused: bool = True) -> Prepared:
    """The entry at `path`, read for data config `cfg`; an unreadable one is a one-line MinimultError."""
    path = Path(path)
    try:
        stats = json.loads((path / "stats.json").read_text())
        source = sources.get(cfg.source)
        vocab = Vocab.load(path, source.vocab_size(cfg))
        return Prepared(path, vocab, Encoded.load(path / "train.npz"), Encoded.load(path / "dev.npz"),
                        {name: Encoded.load(path / f"{name}.npz") for name in source.extra_names(cfg)}, stats, reused)
    except (OSError, ValueError, KeyError) as e:
        raise MinimultError(f"prepared data at {path} is unreadable ({e}); delete it to rebuild") from None


def summary(p: Prepared, max_len: int | None = None) -> str:
    """`minimult prepare`'s printout: the corpus table and vocabulary line (with `max_len`: what is cut)."""
    s = p.stats
    rows = [("", "sentences", "words", "types", "characters", "median words", "pieces")]
    first = ", the first language's" if s.get("parallel") else ""  # each language's numbers: the lines below
    for name in ("train", "dev"):
        d = s[name]
        rows.append((f"{name} ({d['name']}{first})", f"{d['sentences']:,}", f"{d['words']:,}", f"{d['types']:,}",
                     f"{d['characters']:,}", f"{d['median_words']:g}", f"{d['pieces']:,}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    tokenizer = {"wordpiece": "WordPiece", "char": "character", "word": "word"}[s.get("tokenizer", "wordpiece")]
    lines.append(f"vocabulary: {s['vocab_entries']} {tokenizer} entries (sha256 {s['vocab_sha256'][:12]}); "
                 f"dev OOV words {s['dev_oov_rate']:.1%}, dev [UNK] pieces {s['dev']['unk_rate']:.2%}")
    if max_len is not None:
        # sentences with more than max_len - 2 pieces, in any language's text ("train", "train_xx", ...): what
        # training and evaluation cut to fit
        texts = {name: [p.encoded(name), *(e for k, e in p.extra.items() if k.startswith(f"{name}_"))]
                 for name in ("train", "dev")}
        cut = {name: cut_to_fit(es, max_len) for name, es in texts.items()}
        longest = max(int(e.lengths.max()) for e in texts["train"])
        lines.append(f"longest training sentence: {longest} pieces; data.max_len - 2 = "
                     f"{max_len - 2}: {cut['train']:,} training and {cut['dev']:,} dev sentences are cut to fit"
                     + ("" if any(cut.values()) else " (none)"))
    for split, d in s.get("languages", {}).items():  # a source with a second language of its own text
        es = d["es"]
        lines.append(f"{split} second language: {es['sentences']:,} sentences, {es['words']:,} words, "
                     f"{es['types']:,} types, {es['pieces']:,} pieces; {d['aligned_verses']:,} aligned verses, "
                     f"{d['silver_links']:,} silver links ({d['silver_sure']:,} sure)")
    par = s.get("parallel")
    if par:  # the parallel source: every language's text of its own
        for split, d in par["splits"].items():
            dropped = d.get("dropped")
            lines.append(f"{split}: {d['pairs']:,} pairs ({d['format']}"
                         + (f"; left out, missing in another file: "
                            + ", ".join(f"{n:,} of {lang}'s ids" for lang, n in dropped.items()) if dropped else "")
                         + "): "
                         + "; ".join(f"{lang} {x['words']:,} words, {x['types']:,} types, {x['pieces']:,} pieces"
                                     + (f", {x['unk_rate']:.2%} [UNK]" if x["unk_rate"] else "")
                                     for lang, x in d["languages"].items()))
        lines.append(f"vocabularies: " + ", ".join(f"{lang} {n:,} entries" for lang, n in par["vocab_entries"].items())
                     + f" ({par['words']} words{', lowercased' if par['lowercase'] else ''})"
                     + "".join(f"; {lang}'s shipped ({name})"
                               for lang, name in par.get("shipped_vocabularies", {}).items()))
        for lang, d in par.get("links", {}).items():
            lines.append(f"{d['kind']} links of the dev pairs for {lang}: {d['links']:,} ({d['sure']:,} sure) "
                         f"from {d['file']}" + (f"; {d['past_the_cut']:,} on pairs past the run's dev pairs (cut to "
                                                f"data.dev_sentences) left out" if d.get("past_the_cut") else ""))
    if "shared_vocab" in s:  # one vocabulary for every language (data.shared_vocab)
        o = s["shared_vocab"]
        lines.append(f"one shared vocabulary: the English training text uses {o['entries_used_by_en']:,} of its "
                     f"entries, the Spanish {o['entries_used_by_es']:,}, both {o['entries_used_by_both']:,}; silver "
                     f"dictionary: {s['dictionary_entries']} one-piece word pairs ({o['dictionary_same_id']} spelled "
                     f"alike: one id)")
    elif "dictionary_entries" in s:
        lines.append(f"second vocabulary: {s['es_vocab_entries']} entries; silver dictionary: "
                     f"{s['dictionary_entries']} one-piece word pairs")
    lines.append(f"cache: {p.path} ({'reused' if p.reused else 'built'})")
    return "\n".join(lines)
