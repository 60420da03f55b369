"""The user's own languages: N >= 2 named files of parallel text (`--source parallel --files en=a.txt,el=b.txt`
or a TOML manifest; reading: `minimult.data.parallel`, formats and limits: docs/corpora.md). Its settings are
the `data.parallel` section (`ParallelConfig`: `data.parallel.files`; `data.files` still reads).

The first language's sentences are the prepared corpus's (`train.npz`, `dev.npz`, the root vocabulary);
every other language keeps its encoded text (`train_NAME.npz`, `dev_NAME.npz`) and, with a vocabulary of
its own (the default: `data.tokenizer` units, `data.vocab_size` entries, at id offset k x vocab_size), its
tokenizer in the cache entry's `NAME/` folder, which runs and exports copy. `data.shared_vocab` trains one
vocabulary of n_langs x vocab_size entries over every language's text instead (one id block). A WordPiece
vocabulary shipped for exactly a language's training text (by any source: `corpora/vocabularies`) is used
rather than trained again, so the same verses read from files get the ids `--source en-es` gives them.

What the evaluators get: retrieval, word order, perplexity and the language-ID probe on the dev pairs;
alignment F1 only where the manifest gives a link file of the dev pairs for that language (`[links]`: its
sure links become the gold of each word's first piece, as en-es's silver links); τ only with a dictionary
(`[dictionary]` files of word<TAB>word, or `dictionary = "identical"`: entries spelled alike in both
vocabularies), one per language pair. Each pair's id is its line number (line-aligned) or its key
(keyed), which is what link files address (`eval --links`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from pathlib import Path

import numpy as np
from tokenizers import normalizers

from minimult.data.corpus import DEFAULT_DEV, DEFAULT_TRAIN
from minimult.data.languages import Side, english_side
from minimult.data.links import read_links, says_silver, write_links
from minimult.data.parallel import (Spec, absolute, check_dictionaries, check_memory, is_manifest, parse_spec,
                                     read_corpora, read_dictionary, tokenize)
from minimult.data.sources import Source, register
from minimult.data.sources.en_es import silver_gold
from minimult.data.sources.shift import one_piece_sides
from minimult.data.vocab import N_SPECIAL, shipped_vocab, train_vocab
from minimult.errors import MinimultError


@dataclass(frozen=True)
class ParallelConfig:
    """The parallel source's settings: the section `data.parallel` of a run's config."""

    # the languages' files (--files): `NAME=PATH,NAME=PATH,...` (line-aligned or keyed, the first name the first
    # language) or a TOML manifest (docs/corpora.md). Its old key `data.files` still reads (DataConfig.legacy)
    files: str = ""


@lru_cache(maxsize=32)
def _spec(files: str, stamp: float) -> Spec:
    return parse_spec(files)


def spec_of(data_cfg) -> Spec:
    """The parsed data.parallel.files (a manifest is read again when it changes)."""
    files = data_cfg.parallel.files
    path = Path(files.strip())
    return _spec(files, path.stat().st_mtime if is_manifest(files) and path.is_file() else 0.0)


class Parallel(Source):
    name = "parallel"
    version = 2  # prepared-cache key; 2: a word's gold is its lowest sure link in any file order (1: the first)
    description = "your own parallel files: N named languages, line-aligned or keyed (--files, data.parallel.files)"
    verse_sentences = True  # a sentence is one pair's line: link files address pairs by id
    alignment_gold = "gold"
    max_langs = None
    shared_option = True
    reads_files = True
    settings = ("parallel", ParallelConfig)
    pair_dictionaries = True  # a dictionary per language pair (Context.pair_dictionary)

    def languages(self, n_langs: int) -> tuple[str, ...]:
        return tuple(f"lang{k}" for k in range(n_langs))  # only when no files are named (messages)

    def names(self, data_cfg) -> tuple[str, ...]:
        return spec_of(data_cfg).languages

    def derive(self, current, changes: dict) -> dict:
        """The files' paths made absolute, however they were given (--files, --set data.parallel.files or its
        old key, a grid), so a run does not depend on the folder it was started from; --files alone sets
        data.n_langs to the number of languages it names."""
        files = (changes.get("parallel") or {}).get("files")
        if not files or not isinstance(files, str):
            return changes
        changes = {**changes, "parallel": {**changes["parallel"], "files": absolute(files)}}
        return changes if "n_langs" in changes else {**changes, "n_langs": len(parse_spec(files).languages)}

    def corpus_name(self, data_cfg) -> str:
        return spec_of(data_cfg).describe()

    def check(self, data_cfg) -> None:
        spec = spec_of(data_cfg)
        if (data_cfg.train, data_cfg.dev) != (DEFAULT_TRAIN, DEFAULT_DEV):
            raise MinimultError("--source parallel reads the files named by --files (data.parallel.files); "
                                "--train-file and --dev-file do not apply (dev files or dev_share go into a manifest)")
        if data_cfg.n_langs != len(spec.languages):
            raise MinimultError(f"data.parallel.files names {len(spec.languages)} languages "
                                f"({', '.join(spec.languages)}); got data.n_langs={data_cfg.n_langs} (leave --langs "
                                f"out: the files set it)")

    def cache_key(self, data_cfg, key: dict) -> dict:
        check_dictionaries(spec_of(data_cfg))  # every time the entry is looked up, not only when it is built
        key = {**key, "train": "parallel", "dev": "parallel", "version": self.version,
               "parallel": spec_of(data_cfg).key(), "n_langs": data_cfg.n_langs}
        return {**key, "shared_vocab": True} if self.shares_vocabulary(data_cfg) else key

    def corpora(self, data_cfg, progress):
        spec = spec_of(data_cfg)
        check_memory(spec)  # a text too large for this machine is one line, before it is read
        progress(f"reading {len(spec.languages)} languages' files ({spec.describe()}) ...")
        return read_corpora(spec, data_cfg.train_sentences or None, data_cfg.dev_sentences or None, progress)

    def words(self, text: str, data_cfg) -> list[str]:
        spec = spec_of(data_cfg)
        return tokenize(text, spec.words, spec.lowercase)

    # --- vocabularies and ids ---

    def training_text(self, train, data_cfg):
        if not self.shares_vocabulary(data_cfg):
            return train.sentences
        return Concatenated([train.language(k) for k in range(data_cfg.n_langs)])

    def shipped(self, text, size, data_cfg):
        return shipped_vocab(text, size, "*")  # shipped for this text by any source (en-es's verses from files)

    def text_inputs(self, data_cfg) -> dict[str, dict]:
        own = not self.shares_vocabulary(data_cfg)
        return {lang: {"tokenizer": lang if own and k else "", "unicode_shift": False}
                for k, lang in enumerate(self.names(data_cfg))}

    def extra_names(self, data_cfg) -> tuple[str, ...]:
        return tuple(f"{split}_{lang}" for lang in self.names(data_cfg)[1:] for split in ("train", "dev"))

    def write_extra(self, vocab, train, dev, tmp, data_cfg=None) -> dict:
        spec = spec_of(data_cfg)
        names = spec.languages
        shared = self.shares_vocabulary(data_cfg)
        vocabs, shipped = [vocab], {}
        for k, lang in enumerate(names[1:], 1):
            if shared:
                vocabs.append(vocab)
                continue
            text = train.language(k)
            mine, where = shipped_vocab(text, vocab.stride, "*") if data_cfg.tokenizer == "wordpiece" else (None, None)
            if where is not None:
                shipped[lang] = where.name
            vocabs.append(mine or train_vocab(data_cfg.tokenizer, text, vocab.stride))
        for k, v in enumerate(vocabs):
            if spec.lowercase:  # the tokenizers lowercase raw text too, as the corpus was (an export reads raw text)
                v.tokenizer.normalizer = normalizers.Lowercase()
            if k and not shared:
                (tmp / names[k]).mkdir()
                v.save(tmp / names[k])
        stats = {"parallel": {"languages": list(names), "files": spec.describe(), "words": spec.words,
                              "lowercase": spec.lowercase, "splits": {}}}
        encoded = []  # the dev pairs' encoded languages
        for split, corpus in (("train", train), ("dev", dev)):
            languages = {}
            for k, (lang, v) in enumerate(zip(names, vocabs)):  # one language's arrays at a time (dev's kept)
                text = corpus.language(k)
                enc = v.encode(text, corpus.verse_ids)
                enc.save(tmp / (f"{split}.npz" if k == 0 else f"{split}_{lang}.npz"))  # the first: prepare's
                types, words = set(), 0
                for sentence in text:
                    types.update(sentence)
                    words += len(sentence)
                languages[lang] = {"words": words, "types": len(types), "pieces": int(len(enc.ids)),
                                   "unk_rate": float(np.mean(enc.ids == 1))}
                if split == "dev":
                    encoded.append(enc)
                del enc  # before the next language is encoded
            with open(tmp / f"pairs-{split}.tsv", "w", encoding="utf-8") as f:
                f.writelines("\t".join([str(i)] + [" ".join(s) for s in pair]) + "\n"
                             for i, *pair in zip(corpus.verse_ids, *(corpus.language(k) for k in range(len(names)))))
            stats["parallel"]["splits"][split] = {"pairs": len(corpus), **corpus.stats, "languages": languages}
            if split == "dev":
                for k, lang in enumerate(names[1:], 1):
                    if lang in spec.links:
                        cut = len(corpus) == data_cfg.dev_sentences  # the files' first pairs: later links left out
                        links = self._dev_links(spec, lang, corpus, k, max(corpus.verse_ids) if cut else None)
                        np.save(tmp / f"dev_{lang}_gold.npy",
                                _sure_gold(encoded[0], encoded[k], corpus.verse_ids, links))
                        write_links(tmp / f"links-dev-{lang}.links",
                                    [(int(v), int(a), int(b), "S" if s else "P")
                                     for v, a, b, s in zip(links.verse_ids, links.a, links.b, links.sure)],
                                    f"{'silver' if links.silver else 'gold'} links of {spec.links[lang]} in the native "
                                    f"format\npair id<TAB>index_in_A ({names[0]})<TAB>index_in_B ({lang})<TAB>S|P")
                        stats["parallel"].setdefault("links", {})[lang] = {
                            "file": str(spec.links[lang]), "links": len(links), "sure": int(links.sure.sum()),
                            "kind": "silver" if links.silver else "gold", "past_the_cut": links.past}
        stats["parallel"]["vocab_entries"] = {lang: len(v) for lang, v in zip(names, vocabs)}
        stats["parallel"]["shipped_vocabularies"] = shipped  # beside the first language's (prepare says that one)
        return stats

    @staticmethod
    def _dev_links(spec: Spec, lang: str, dev, k: int, past: int | None):
        """Language k's links of the dev pairs (those past pair `past` left out: `read_links`)."""
        counts = [{int(i): len(s) for i, s in zip(dev.verse_ids, dev.language(j))} for j in (0, k)]
        return read_links(spec.links[lang], counts[0], counts[1], spec.links_base, past)

    def alignment_gold_of(self, lang: int, data_cfg=None) -> str:
        """Language `lang`'s gold: its link file's kind (silver when a comment says so), "none" without one."""
        if data_cfg is None or lang == 0:
            return self.alignment_gold
        spec = spec_of(data_cfg)
        path = spec.links.get(spec.languages[lang])
        return "none" if path is None else "silver" if says_silver(path) else "gold"

    # --- views ---

    def views(self, prepared, split, data_cfg):
        sides = [english_side(prepared.encoded(split))]
        for k, lang in enumerate(self.names(data_cfg)[1:], 1):
            enc = prepared.extra[f"{split}_{lang}"]
            gold_file = prepared.path / f"dev_{lang}_gold.npy"
            if split == "dev" and gold_file.is_file():
                gold = np.load(gold_file)
            else:  # -1 for every piece: a read-only view of one value, not 8 bytes a piece
                gold = np.broadcast_to(np.int64(-1), len(enc.ids))
            sides.append(Side(k, enc.ids.astype(np.int32) + self.id_offset(k, data_cfg), enc.offsets, enc.word_starts,
                              np.arange(len(enc)), gold))
        return sides

    def pair_dictionary(self, prepared, data_cfg, k: int) -> list:
        """The first language's and language k's dictionary: word pairs of the dictionary file whose words are
        one unit each in their vocabularies, or (identical) every non-special unit spelled alike in both,
        word-initial forms only; no dictionary: no entries (τ is then not measured)."""
        spec = spec_of(data_cfg)
        lang = spec.languages[k]
        first, mine = self.language_vocab(prepared, data_cfg, 0), self.language_vocab(prepared, data_cfg, k)
        if spec.dictionary == "identical":
            entries = [(first.index[p], mine.index[p]) for p in first.pieces[N_SPECIAL:]
                       if p in mine.index and not (first.continuation and p.startswith(first.continuation))]
        elif isinstance(spec.dictionary, dict) and lang in spec.dictionary:
            entries = []
            for a, b in read_dictionary(spec.dictionary[lang], lang, spec):
                ia, ib = first.index.get(a), mine.index.get(b)
                continued = any(v.continuation and w.startswith(v.continuation) for v, w in ((first, a), (mine, b)))
                if ia is not None and ib is not None and ia >= N_SPECIAL and ib >= N_SPECIAL and not continued:
                    entries.append((ia, ib))
            entries = list(dict.fromkeys(entries))
        else:
            entries = []
        en = np.array([a for a, _ in entries], dtype=np.int32)
        other = np.array([b for _, b in entries], dtype=np.int32) + self.id_offset(k, data_cfg)
        return one_piece_sides([en, other])

    def dictionary(self, prepared, data_cfg):
        """Entries of the first language that every other language's pair dictionary translates (entry i
        of each side translates entry i of every other); pairwise evaluators read `pair_dictionary`."""
        pairs = [self.pair_dictionary(prepared, data_cfg, k) for k in range(1, data_cfg.n_langs)]
        if len(pairs) == 1:
            return pairs[0]
        maps = [dict(zip(p[0].ids.tolist(), p[1].ids.tolist())) for p in pairs]
        common = [i for i in dict.fromkeys(pairs[0][0].ids.tolist()) if all(i in m for m in maps)]
        return one_piece_sides([np.array(common, dtype=np.int32)]
                               + [np.array([m[i] for i in common], dtype=np.int32) for m in maps])

    def display(self, prepared, data_cfg, ids) -> list[str]:
        """Each id as its language's piece (one shared vocabulary: that vocabulary's)."""
        if self.shares_vocabulary(data_cfg):
            return prepared.vocab.display(ids)
        V = data_cfg.vocab_size
        return [self.language_vocab(prepared, data_cfg, int(i) // V).pieces[int(i) % V] for i in ids]


class Concatenated:
    """Sequences one after another, iterated again at each pass (a shared vocabulary's text: every language's
    sentences, which line-aligned files give as `Lines`, read from the files each time)."""

    def __init__(self, parts: list):
        self.parts = parts

    def __len__(self) -> int:
        return sum(map(len, self.parts))

    def __iter__(self):
        return chain.from_iterable(self.parts)


def _sure_gold(first, other, pair_ids, links) -> np.ndarray:
    """(P,) gold of the other language's pieces from a link file's sure links (`en_es.silver_gold`'s rule: a
    word's first piece to the first piece of the word it links to, the lowest index when several)."""
    row = {int(v): s for s, v in enumerate(pair_ids)}
    per = [[] for _ in pair_ids]
    for v, a, b, s in zip(links.verse_ids, links.a, links.b, links.sure):
        per[row[int(v)]].append((int(a), int(b), "S" if s else "P"))
    return silver_gold(first, other, per)


register(Parallel())

__all__ = ["Parallel", "ParallelConfig", "absolute", "spec_of"]
