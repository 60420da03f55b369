"""Language sources: where each language's text, vocabulary, ids and gold alignment come from.

A `Source` owns, for its languages (0 = the first language, English in the built-in sources; 1.. the others):
- the vocabulary it trains (`train_vocab`) and any extra encoded text it keeps (`write_extra`, `extra`),
- its languages' names (`languages`: how many it can give, which ones, what they are called) and
  whether all of them share one vocabulary and id block (`shares_vocabulary`),
- each language's id offset (`id_offset`),
- its views of a split with the gold alignment to English (`views`),
- its translation dictionary (`dictionary`) and the ids a random replacement may draw (`random_ids`),
- how text in each language becomes its ids outside the lab (`text_inputs`: which tokenizer, whether
  the text is written in a shifted script), which an HF export records for `eval --hf --langs`,
- optionally its own corpora (`corpora`, with `cache_key` naming what they are read from; `check`
  refuses settings that do not apply) and how its ids are shown (`display`),
- how any text in one of its languages becomes that language's ids (`words`, `encode`: a labelled task's
  sentences for `minimult transfer --task`),
- optionally settings of its own (`settings`: a section of `data`, as parallel's `data.parallel.files`).

Sources register on import of their module; this package imports every module in it, so adding a
source is one file (copy `shift.py`) plus its test. `data.source` in the config (`--source`; its old
name `data.fake` / `--fake` still reads) names the source.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from minimult.data.corpus import absolute_corpus, load_corpus, normalise, words
from minimult.data.languages import Side
from minimult.data.vocab import N_SPECIAL, Vocab, shipped_vocab, train_vocab
from minimult.errors import MinimultError
from minimult.registry import Registry

REGISTRY = Registry("language source", unknown="unknown --source {name!r}: use {valid}", sep=" or ")

UNICODE_SHIFT = 0x2C00  # the unicode source's shift: every character moved to an unused script range


def shift_text(word: str, shift: int = UNICODE_SHIFT) -> str:
    """`word` with every character's code point moved by `shift` (K et al.'s Fake-English by script)."""
    return "".join(chr(ord(c) + shift) for c in word)


class Source:
    name: str = ""
    description: str = ""
    version: int = 1
    shared_vocabulary: bool = False  # one id block for every language (shift-special has nothing to shift)
    extra: tuple[str, ...] = ()  # encoded files it keeps beside train/dev (e.g. "train_fake")
    verse_sentences: bool = False  # every sentence is a whole verse (link files address verses: eval --links)
    alignment_gold: str = "exact"  # "exact" (by construction) | "gold" (given) | "silver" (derived, noisy)

    max_langs: int | None = 2  # the most languages (English included) it gives (data.n_langs); None: any number
    shared_option: bool = False  # whether data.shared_vocab can choose between own and one shared vocabulary
    corpus: str | None = None  # how messages name the training corpus when it is not data.train's (en-es)
    reads_files: bool = False  # whether it reads the user's language files (the parallel source's)
    # (section, frozen dataclass): settings of its own, a section of `data` (config.with_sections); another
    # source's settings away from their defaults are refused
    settings: tuple[str, type] | None = None
    pair_dictionaries: bool = False  # a dictionary per language pair (`pair_dictionary`), not one for all

    def languages(self, n_langs: int) -> tuple[str, ...]:
        """The names of a run's `n_langs` languages (data.n_langs), English ("en") first: what
        `inv-order=NAME` and the per-pair results (`en-es`) call them."""
        return ("en", "fake") + tuple(f"fake{k}" for k in range(2, n_langs))

    def names(self, data_cfg) -> tuple[str, ...]:
        """The names of a run's languages, the first language first (a source whose names come from its
        settings, as parallel's from its files, overrides this; the others name them by number)."""
        return self.languages(data_cfg.n_langs)

    def corpus_name(self, data_cfg) -> str:
        """How messages name the training corpus."""
        return self.corpus or data_cfg.train

    def derive(self, current, changes: dict) -> dict:
        """`changes` (data.* overrides about to be applied to `current`) with what this source derives from
        them added (parallel: data.n_langs from its files when not given); default: the paths of data.train and
        data.dev made absolute, so a run does not depend on the folder it was started from."""
        return {**changes, **{key: absolute_corpus(changes[key]) for key in ("train", "dev") if key in changes}}

    def shares_vocabulary(self, data_cfg) -> bool:
        """One vocabulary and id block for every language (shift-special has nothing to shift)."""
        return self.shared_vocabulary or (self.shared_option and data_cfg.shared_vocab)

    def check_languages(self, data_cfg) -> None:
        """Refuse a number of languages or a vocabulary choice the source cannot give (one line)."""
        if self.max_langs is not None and data_cfg.n_langs > self.max_langs:
            raise MinimultError(f"--source {self.name} gives at most {self.max_langs} languages "
                                f"({', '.join(self.languages(self.max_langs))}); "
                                f"got data.n_langs={data_cfg.n_langs}")
        if data_cfg.shared_vocab and not (self.shared_vocabulary or self.shared_option):
            raise MinimultError(f"--shared-vocab does not apply to --source {self.name}: its languages are one "
                                f"vocabulary's ids moved into blocks of their own (--source unicode learns one "
                                f"vocabulary over English and a shifted script; --source en-es and parallel can "
                                f"share one)")
        for other in REGISTRY.values():
            if other is not self and other.settings and getattr(data_cfg, other.settings[0]) != other.settings[1]():
                raise MinimultError(f"data.{other.settings[0]} holds the {other.name} source's settings; --source "
                                    f"{self.name} does not read them (use --source {other.name}; in a grid or --set, "
                                    f"data.source={other.name})")

    def text_inputs(self, data_cfg) -> dict[str, dict]:
        """Per language name: `tokenizer`, the run folder's sub-folder holding that language's tokenizer.json
        ("" = the run's own), and `unicode_shift`, whether the language is English text written in the
        code-point-shifted script before tokenizing. Default: every language is text for the run's
        tokenizer as it is (Fake-English by id shift reads English text; its offset is the layout's)."""
        return {lang: {"tokenizer": "", "unicode_shift": False} for lang in self.names(data_cfg)}

    def words(self, text: str, data_cfg) -> list[str]:
        """The words of one line of text in this source's languages, as its corpora were split into words
        (the built-in corpora: NLTK's tokenizer after `corpus.normalise`)."""
        return words(normalise(text))

    def encode(self, prepared, data_cfg, lang: int, sentences: list[list[str]]):
        """Word-tokenized `sentences` of language `lang` as that language's Side (its vocabulary, its id
        offset, English text shifted where the language is written in a shifted script), with no gold
        alignment: how a labelled task's text reads as the run trained on that language."""
        if self.text_inputs(data_cfg)[self.names(data_cfg)[lang]]["unicode_shift"]:
            sentences = [[shift_text(w) for w in s] for s in sentences]
        enc = self.language_vocab(prepared, data_cfg, lang).encode(sentences, np.arange(len(sentences)))
        return Side(lang, enc.ids.astype(np.int32) + self.id_offset(lang, data_cfg), enc.offsets, enc.word_starts,
                    np.full(len(sentences), -1), np.full(len(enc.ids), -1))

    def shipped(self, text: list[list[str]], size: int, data_cfg):
        """(the shipped WordPiece vocabulary for this training text, its file) or (None, None)."""
        return shipped_vocab(text, size, self.name)

    def pair_dictionary(self, prepared, data_cfg, k: int) -> list:
        """[first language, language k] dictionary sides (default: those two of `dictionary`)."""
        d = self.dictionary(prepared, data_cfg)
        return [d[0], d[k]]

    def alignment_gold_of(self, lang: int, data_cfg=None) -> str:
        """What language `lang`'s gold alignment to English is (`alignment_gold` unless a language differs)."""
        return self.alignment_gold

    def check(self, data_cfg) -> None:
        """Refuse data settings that do not apply to this source (one MinimultError line)."""

    def cache_key(self, data_cfg, key: dict) -> dict:
        """The prepared cache key: unchanged for sources that read `data.train` / `data.dev` (a changed key
        would rebuild every existing entry), extended by sources that read their own texts."""
        return key

    def corpora(self, data_cfg, progress):
        """(train, dev) `Corpus`es: English, whose sentences the other languages are views of."""
        progress(f"reading training corpus {data_cfg.train} ...")
        train = load_corpus(data_cfg.train, data_cfg.train_sentences or None)
        progress(f"reading development corpus {data_cfg.dev} ...")
        return train, load_corpus(data_cfg.dev, data_cfg.dev_sentences or None)

    def language_vocab(self, prepared, data_cfg, k: int) -> Vocab:
        """Language k's vocabulary: the one in its `text_inputs` tokenizer folder of the cache entry (en-es's
        Spanish, parallel's own), else the prepared one."""
        folder = self.text_inputs(data_cfg)[self.names(data_cfg)[k]]["tokenizer"]
        return _load_vocab(str(prepared.path / folder), prepared.vocab.stride) if folder else prepared.vocab

    def display(self, prepared, data_cfg, ids) -> list[str]:
        """Global ids as their language's pieces (language k's with k `::` prefixes)."""
        vocabs = [self.language_vocab(prepared, data_cfg, k) for k in range(data_cfg.n_langs)]
        return [vocabs[int(i) // prepared.vocab.stride].display([i])[0] for i in ids]

    def vocab_size(self, data_cfg) -> int:
        """Entries of the trained vocabulary (and the stride of `Vocab.display`); one shared (unicode's, or by
        choice: data.shared_vocab) has n_langs x vocab_size, the ids the own vocabularies have together."""
        return data_cfg.vocab_size * (data_cfg.n_langs if self.shares_vocabulary(data_cfg) else 1)

    def id_offset(self, lang: int, data_cfg) -> int:
        return 0 if self.shares_vocabulary(data_cfg) else lang * data_cfg.vocab_size

    def extra_names(self, data_cfg) -> tuple[str, ...]:
        """The encoded files of its own in a cache entry built for `data_cfg` (default: `extra`)."""
        return self.extra

    def training_text(self, train, data_cfg) -> list[list[str]]:
        """The word-tokenized sentences its vocabulary is trained on."""
        return train.sentences

    def train_vocab(self, train, data_cfg):
        """A Vocab of `vocab_size(data_cfg)` entries trained on `training_text` (unless a shipped one
        exists for that text: `minimult.data.vocab.shipped_vocab`)."""
        return train_vocab(data_cfg.tokenizer, self.training_text(train, data_cfg), self.vocab_size(data_cfg))

    def write_extra(self, vocab, train, dev, tmp, data_cfg=None) -> dict | None:
        """Encoded texts of its own (named in `extra`) written into the cache entry `tmp`; a dict it returns
        is added to the entry's statistics."""

    def views(self, prepared, split: str, data_cfg) -> list:
        """[English, language 1, ...] Sides of `split` ('train' | 'dev') with gold alignments."""
        raise NotImplementedError

    def dictionary(self, prepared, data_cfg) -> list:
        """[English, language 1, ...] Sides of one-piece sentences: entry i of each translates entry i of
        every other (word translation τ, which compares English with each language). Its entries are units of the
        run's own vocabulary (data.tokenizer): pieces, characters or words."""
        raise NotImplementedError

    def random_ids(self, prepared, data_cfg):
        """(R,) long: the ids a random replacement draws from, every non-special entry of each language's
        vocabulary in its id block (one shared vocabulary: its own entries; a character set leaves the end of
        its block unused, which is never drawn)."""
        import torch  # lazy: the CLI imports every source to list them, and torch costs seconds

        if self.shares_vocabulary(data_cfg):
            return torch.arange(N_SPECIAL, len(prepared.vocab))
        return torch.cat([torch.arange(N_SPECIAL, len(self.language_vocab(prepared, data_cfg, k)))
                          + k * data_cfg.vocab_size for k in range(data_cfg.n_langs)])


@lru_cache(maxsize=16)
def _load_vocab(path: str, size: int) -> Vocab:
    return Vocab.load(path, size)


register = REGISTRY.register
get = REGISTRY.__getitem__  # an unknown name is one error line naming the valid ones

Registry.load(__name__)  # every source module registers itself
