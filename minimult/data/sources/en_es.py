"""A real second language: English (King James Version) and Spanish (Reina-Valera 1909), verse-aligned.

Both Bibles come from SWORD modules (Debian `sword-text-kjv`, `sword-text-sparv`, read with PyPI
`pysword`; `minimult.data.sword`). A sentence is a whole verse, so verse ids align the two languages:
only verses with words in both (and not disturbed by a merged verse or a renumbered chapter:
`sword.aligned_verses`) are kept. Training data is the New Testament, development data the first
`data.dev_sentences` aligned Old Testament verses, as the built-in corpora split (NT train, OT dev);
`data.train` and `data.dev` do not apply. Each language has its own WordPiece vocabulary of
`data.vocab_size` entries at its own id offset (Spanish: + vocab_size), or, with `data.shared_vocab`,
one vocabulary of n_langs x vocab_size entries trained over every language's text (one id block: a
piece spelled alike in both languages is one id, K et al.'s word-piece overlap). With data.n_langs=3
the third language is Fake-English: English's ids in block 2 (own vocabularies), or, sharing one
vocabulary, English text shifted to another script (`unicode`'s construction), learned into it.

No gold alignment exists for the text: the Spanish side's gold is the *silver* sure links from shared
Strong's numbers (`sword.silver_links`; a Spanish word's first piece to its English word's first
piece), -1 elsewhere; all silver links (S and P) are written as link files (`data.links` format) into
the cache entry, `silver-train.links` and `silver-dev.links`. The translation dictionary is silver too:
one-piece word pairs that are each other's most frequent sure link partner in the training verses.
"""

from __future__ import annotations

import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from minimult.data import sword
from minimult.data.cache import atomic_write_text
from minimult.data.corpus import DEFAULT_DEV, DEFAULT_TRAIN, Corpus
from minimult.data.languages import Side, english_side
from minimult.data.links import word_first_pieces, write_links, write_pharaoh
from minimult.data.sources import Source, register
from minimult.data.sources.shift import one_piece_sides, shifted_side
from minimult.data.sources.unicode import shift_piece, shift_text, unicode_side
from minimult.data.tasks import verse_split
from minimult.data.vocab import Vocab, shipped_vocab, train_wordpiece
from minimult.errors import MinimultError

LANGUAGES = ("en", "es")
MIN_DICTIONARY_COUNT = 3  # sure links a word pair needs to be a dictionary entry
SILVER = "silver links: shared Strong's numbers between KJV and RV1909 words (minimult.data.sword)"


@dataclass(frozen=True)
class AlignedCorpus(Corpus):
    """English sentences (`sentences`, one per verse) with the Spanish verse of each and their silver links."""

    second: list[list[str]] = field(default_factory=list)
    links: list[list[tuple[int, int, str]]] = field(default_factory=list)  # per verse: (en word, es word, S|P)
    stats: dict = field(default_factory=dict)


def aligned_corpus(name: str, testament: str, limit: int | None) -> AlignedCorpus:
    """The first `limit` aligned verses of one testament ('new' | 'old'), each a sentence in both languages."""
    texts = {lang: sword.language_verses(lang, testament) for lang in LANGUAGES}
    keep, report = sword.aligned_verses(texts["en"], texts["es"])
    keep = keep[:limit] if limit else keep
    en, es = texts["en"], texts["es"]
    stats = {"verses_with_words": {lang: len(texts[lang]) for lang in LANGUAGES}, "aligned": len(keep),
             "left_out": report}
    return AlignedCorpus(name, [en[v][0] for v in keep], keep, [es[v][0] for v in keep],
                         [sword.silver_links(en[v][1], es[v][1]) for v in keep], stats)


def aligned_corpora(train_verses: int | None, dev_verses: int | None, progress) -> tuple[AlignedCorpus, AlignedCorpus]:
    """(the New Testament's first `train_verses` aligned verses, the Old Testament's first `dev_verses`)."""
    progress("reading the KJV and RV1909 New Testaments (SWORD modules) ...")
    train = aligned_corpus("kjv+rv1909-nt", "new", train_verses)
    progress("reading the KJV and RV1909 Old Testaments (SWORD modules) ...")
    return train, aligned_corpus("kjv+rv1909-ot", "old", dev_verses)


def silver_gold(en_enc, es_enc, links: list[list[tuple[int, int, str]]]) -> np.ndarray:
    """(P,) gold of the Spanish pieces: a Spanish word's first piece -> the position of the first piece of
    the English word it has a sure link to (the lowest English index when several), -1 elsewhere."""
    gold = np.full(len(es_enc.ids), -1, dtype=np.int64)
    en_first = word_first_pieces(en_enc.word_starts, en_enc.offsets)
    es_first = word_first_pieces(es_enc.word_starts, es_enc.offsets)
    for s, verse in enumerate(links):
        for a, b, kind in verse:
            where = es_enc.offsets[s] + es_first[s][b]
            if kind == "S" and (gold[where] < 0 or en_first[s][a] < gold[where]):  # whatever the file's order
                gold[where] = en_first[s][a]
    return gold


def silver_word_pairs(train: AlignedCorpus) -> list[tuple[str, str]]:
    """(English word, Spanish word) pairs, sorted, that are each other's most frequent sure-link partner, seen at
    least MIN_DICTIONARY_COUNT times (before any vocabulary decides which are one piece)."""
    pairs = Counter((en[a], es[b]) for en, es, verse in zip(train.sentences, train.second, train.links)
                    for a, b, kind in verse if kind == "S")
    best_en: dict[str, tuple[int, str]] = {}
    best_es: dict[str, tuple[int, str]] = {}
    for (e, s), n in sorted(pairs.items()):
        if n > best_en.get(e, (0, ""))[0]:
            best_en[e] = (n, s)
        if n > best_es.get(s, (0, ""))[0]:
            best_es[s] = (n, e)
    return sorted((e, s) for e, (n, s) in best_en.items() if n >= MIN_DICTIONARY_COUNT and best_es[s][1] == e)


def silver_dictionary(train: AlignedCorpus, en_vocab: Vocab, es_vocab: Vocab) -> tuple[np.ndarray, np.ndarray]:
    """(English ids, Spanish ids) of the silver word pairs (`silver_word_pairs`) that are one piece each; ids
    within each language's block."""
    entries = [(e, s) for e, s in silver_word_pairs(train) if e in en_vocab.index and s in es_vocab.index]
    en_ids = np.array([en_vocab.index[e] for e, _ in entries], dtype=np.int32)
    es_ids = np.array([es_vocab.index[s] for _, s in entries], dtype=np.int32)
    return en_ids, es_ids


class EnEs(Source):
    name = "en-es"
    description = ("English (KJV) + Spanish (Reina-Valera 1909), verse-aligned, + Fake-English with data.n_langs=3: "
                   "own vocabularies or one shared (data.shared_vocab), silver Strong's links")
    extra = ("train_es", "dev_es")
    verse_sentences = True
    alignment_gold = "silver"
    max_langs = 3  # en, es and Fake-English (English in a block of its own, or by code-point shift when shared)
    shared_option = True
    corpus = "the KJV New Testament (en-es)"

    def languages(self, n_langs: int) -> tuple[str, ...]:
        return ("en", "es", "fake")[:n_langs]

    def alignment_gold_of(self, lang: int, data_cfg=None) -> str:
        return "silver" if lang == 1 else "exact"  # Fake-English's gold holds by construction

    def with_fake_text(self, data_cfg) -> bool:
        """Fake-English is text of its own (code-point-shifted English, in the shared vocabulary), not ids."""
        return data_cfg.n_langs > 2 and self.shares_vocabulary(data_cfg)

    def text_inputs(self, data_cfg) -> dict[str, dict]:
        own = not self.shares_vocabulary(data_cfg)
        inputs = {"en": {"tokenizer": "", "unicode_shift": False},
                  "es": {"tokenizer": "es" if own else "", "unicode_shift": False},
                  "fake": {"tokenizer": "", "unicode_shift": self.with_fake_text(data_cfg)}}
        return {lang: inputs[lang] for lang in self.names(data_cfg)}

    def extra_names(self, data_cfg) -> tuple[str, ...]:
        return self.extra + (("train_fake", "dev_fake") if self.with_fake_text(data_cfg) else ())

    def check(self, data_cfg) -> None:
        if (data_cfg.train, data_cfg.dev) != (DEFAULT_TRAIN, DEFAULT_DEV):
            raise MinimultError("--source en-es reads its own verse-aligned Bibles (KJV and RV1909 New Testament "
                                "for training, Old Testament for development); --train-file and --dev-file do "
                                "not apply (data.train_sentences and data.dev_sentences do)")
        if data_cfg.tokenizer != "wordpiece":
            raise MinimultError(f"--source en-es builds WordPiece vocabularies only so far (got --tokenizer "
                                f"{data_cfg.tokenizer}): char and word units work with --source shift, unicode or "
                                f"parallel")

    def cache_key(self, data_cfg, key: dict) -> dict:
        key = {**key, "train": "sword:new", "dev": "sword:old", "version": self.version,
               "modules": {lang: sword.module_fingerprint(lang) for lang in LANGUAGES}}
        # own vocabularies: Fake-English is ids (nothing cached), so the entry is the two-language one
        return {**key, "shared_vocab": True, "n_langs": data_cfg.n_langs} if self.shares_vocabulary(data_cfg) else key

    def corpora(self, data_cfg, progress):
        train, dev = aligned_corpora(data_cfg.train_sentences or None, data_cfg.dev_sentences or None, progress)
        for c in (train, dev):
            if len(c) < 2:
                raise MinimultError(f"the {c.name} corpus has {len(c)} aligned verse(s): at least 2 are needed")
        return train, dev

    def training_text(self, train, data_cfg):
        if not self.shares_vocabulary(data_cfg):
            return train.sentences
        fake = [[shift_text(w) for w in s] for s in train.sentences] if self.with_fake_text(data_cfg) else []
        return train.sentences + train.second + fake

    def write_extra(self, vocab, train, dev, tmp, data_cfg=None) -> dict:
        shared = data_cfg is not None and self.shares_vocabulary(data_cfg)
        fake_text = shared and self.with_fake_text(data_cfg)
        if shared:
            es_vocab = vocab
        else:
            es_vocab, _ = shipped_vocab(train.second, vocab.stride, self.name)  # ids the same on every machine
            es_vocab = es_vocab or train_wordpiece(train.second, vocab.stride)
            (tmp / "es").mkdir()
            es_vocab.save(tmp / "es")
        stats = {"languages": {}}
        used = {}
        for split, corpus in (("train", train), ("dev", dev)):
            en_enc = vocab.encode(corpus.sentences, corpus.verse_ids)
            es_enc = es_vocab.encode(corpus.second, corpus.verse_ids)
            es_enc.save(tmp / f"{split}_es.npz")
            if fake_text:
                vocab.encode([[shift_text(w) for w in s] for s in corpus.sentences],
                             corpus.verse_ids).save(tmp / f"{split}_fake.npz")
            if split == "train":
                used = {"en": set(np.unique(en_enc.ids).tolist()), "es": set(np.unique(es_enc.ids).tolist())}
            np.save(tmp / f"{split}_es_gold.npy", silver_gold(en_enc, es_enc, corpus.links))
            write_links(tmp / f"silver-{split}.links",
                        [(v, a, b, k) for v, verse in zip(corpus.verse_ids, corpus.links) for a, b, k in verse],
                        f"{SILVER}\nverse_id<TAB>index_in_A (English)<TAB>index_in_B (Spanish)<TAB>S|P")
            (tmp / f"verses-{split}.tsv").write_text(
                "".join(f"{v}\t{' '.join(e)}\t{' '.join(s)}\n"
                        for v, e, s in zip(corpus.verse_ids, corpus.sentences, corpus.second)), encoding="utf-8")
            stats["languages"][split] = {
                "es": {"sentences": len(corpus.second), "words": sum(map(len, corpus.second)),
                       "types": len({w for s in corpus.second for w in s}), "pieces": int(len(es_enc.ids))},
                "aligned_verses": len(corpus), "silver_links": sum(map(len, corpus.links)),
                "silver_sure": sum(k == "S" for verse in corpus.links for _, _, k in verse),
                **corpus.stats}
        en_ids, es_ids = silver_dictionary(train, vocab, es_vocab)
        arrays = {"en": en_ids, "es": es_ids}
        if fake_text:  # entries whose shifted spelling is one piece too
            fake = np.array([vocab.index.get(shift_piece(vocab.pieces[i]), -1) for i in en_ids], dtype=np.int64)
            keep = fake >= 0
            arrays = {"en": en_ids[keep], "es": es_ids[keep], "fake": fake[keep].astype(np.int32)}
        np.savez(tmp / "dictionary.npz", **arrays)
        stats["es_vocab_entries"] = len(es_vocab)
        stats["dictionary_entries"] = int(len(arrays["en"]))
        if shared:
            # K et al.'s word-piece overlap: vocabulary entries both languages' training text uses
            stats["shared_vocab"] = {"entries_used_by_en": len(used["en"]), "entries_used_by_es": len(used["es"]),
                                     "entries_used_by_both": len(used["en"] & used["es"]),
                                     "dictionary_same_id": int((arrays["en"] == arrays["es"]).sum())}
        return stats

    def spanish_vocab(self, prepared, data_cfg) -> Vocab:
        return self.language_vocab(prepared, data_cfg, 1)

    def views(self, prepared, split, data_cfg):
        es = prepared.extra[f"{split}_es"]
        gold = np.load(prepared.path / f"{split}_es_gold.npy")
        english = english_side(prepared.encoded(split))
        sides = [english, Side(1, es.ids.astype(np.int32) + self.id_offset(1, data_cfg), es.offsets, es.word_starts,
                               np.arange(len(es)), gold)]
        if data_cfg.n_langs > 2:
            sides.append(unicode_side(prepared.encoded(split), prepared.extra[f"{split}_fake"], 2)
                         if self.with_fake_text(data_cfg) else shifted_side(english, 2, data_cfg.vocab_size))
        return sides

    def dictionary(self, prepared, data_cfg):
        """Entry i of every language translates entry i of the others: the silver English-Spanish pairs,
        and Fake-English's twin of the English entry."""
        with np.load(prepared.path / "dictionary.npz") as z:
            en, es, fake = z["en"], z["es"], (z["fake"] if "fake" in z else None)
        V = data_cfg.vocab_size
        if not self.shares_vocabulary(data_cfg):
            es, fake = es + V, en + 2 * V
        return one_piece_sides([en, es, fake][:data_cfg.n_langs])


def write_files(out, train_verses: int | None = None, dev_verses: int | None = 10_000,
                progress=lambda s: None) -> dict:
    """The verses `--source en-es` reads, as files the parallel source reads (the worked example in
    docs/corpora.md): `en.train.txt` and `es.train.txt` keyed by verse id (the aligned New Testament verses,
    the first `train_verses`), `en.dev.txt` and `es.dev.txt` line-aligned (the first `dev_verses` aligned Old
    Testament verses), each verse its words joined by spaces; `en-es.dict`, the silver dictionary's word
    pairs; `silver-dev.pharaoh`, the silver links of the dev verses (0-based, `i?j` possible); and
    `corpus.toml`, the manifest that names them; and `gospels/`, a task directory for `minimult transfer
    --task`: which Gospel a verse of the training files is from (Matthew, Mark, Luke, John), split by verse
    as the New Testament part task is (`tasks.verse_split`), the test verses in both languages. Returns
    counts of what was written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    train, dev = aligned_corpora(train_verses, dev_verses, progress)
    for corpus in (train, dev):
        for words in (*corpus.sentences, *corpus.second):
            if " ".join(words).split() != words:  # a word holding whitespace would not read back as one
                raise MinimultError(f"a verse of {corpus.name} has a word with whitespace in it: {words[:8]}")
    for lang, texts in (("en", "sentences"), ("es", "second")):
        atomic_write_text(out / f"{lang}.train.txt", "".join(f"{v}\t{' '.join(w)}\n" for v, w in
                                                           zip(train.verse_ids, getattr(train, texts))))
        atomic_write_text(out / f"{lang}.dev.txt", "".join(f"{' '.join(w)}\n" for w in getattr(dev, texts)))
    gospels = {40: "matthew", 41: "mark", 42: "luke", 43: "john"}
    rows = [(gospels[v // 1_000_000], en, es) for v, en, es in zip(train.verse_ids, train.sentences, train.second)
            if v // 1_000_000 in gospels]
    split = verse_split(np.array([v for v in train.verse_ids if v // 1_000_000 in gospels], dtype=np.int64))
    labels = sorted({r[0] for r, s in zip(rows, split) if s == 0})  # the training split's: a task needs two
    shutil.rmtree(out / "gospels", ignore_errors=True)  # --force: never a task of another call's verses
    if len(labels) > 1:
        (out / "gospels").mkdir()
        # (file, split: tasks.SPLITS' index, the text: 1 English, 2 Spanish)
        for name, part, text in (("train.tsv", 0, 1), ("dev.tsv", 1, 1), ("test.en.tsv", 2, 1), ("test.es.tsv", 2, 2)):
            atomic_write_text(out / "gospels" / name,
                              "".join(f"{r[0]}\t{' '.join(r[text])}\n" for r, s in zip(rows, split) if s == part))
    pairs = silver_word_pairs(train)
    atomic_write_text(out / "en-es.dict", "".join(f"{e}\t{s}\n" for e, s in pairs))
    write_pharaoh(out / "silver-dev.pharaoh", [(k, a, b, kind) for k, verse in enumerate(dev.links, 1)
                                               for a, b, kind in verse], len(dev), 0, SILVER)
    atomic_write_text(out / "corpus.toml", """# English (KJV) and Spanish (RV1909) verses from the SWORD modules, as
# --source en-es reads them (written by `minimult verses`): training verses keyed by verse id, dev verses
# line by line
links_base = 0

[languages]
en = "en.train.txt"
es = "es.train.txt"

[dev]
en = "en.dev.txt"
es = "es.dev.txt"

[dictionary]
es = "en-es.dict"

[links]
es = "silver-dev.pharaoh"
""")
    return {"train_verses": len(train), "dev_verses": len(dev), "dictionary_pairs": len(pairs),
            "silver_dev_links": sum(map(len, dev.links)), "gospel_verses": len(rows) if len(labels) > 1 else 0,
            "gospel_labels": labels}


register(EnEs())
