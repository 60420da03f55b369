"""knn-replace's neighbour table: fastText per language -> VecMap (unsupervised, or from a seed
dictionary: `knn.seed_dictionary`) -> k nearest ids.

Public entry: `neighbour_table(prepared, source, cfg, k, sides, log) -> LongTensor (V_total, k·(L−1))` for L
languages, cached by content (the training text of the languages, fastText and mapping settings, k). Row i
holds the k nearest ids of id i in each other language (−1: no vector, so masking falls back to a random id).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from minimult.data import sources
from minimult.data.cache import cache_root, cached, key_hash
from minimult.knn.fasttext import neighbour_table as nearest_table, train_fasttext
from minimult.data.languages import Side
from minimult.data.vocab import LANG_PREFIX
from minimult.errors import MinimultError
from minimult.knn.vecmap import VecMapConfig, translation_p1, unsupervised_map

FASTTEXT = {"dim": 300, "epoch": 10, "thread": 1, "minn": 0, "maxn": 0, "min_count": 1}  # no subwords:
# on a corpus this small, spelling would dominate the neighbours (VECMAP.md)
VECMAP = VecMapConfig(patience=5)  # patience 5 matched 50's accuracy in a quarter of the time here


def token_name(i: int, vocab) -> str:
    """An id as fastText's word for it: its display piece (`::` per language block), or `::[idN]` for an id
    past the first vocabulary's entries (a language whose own vocabulary is larger: parallel's char units)."""
    k, j = divmod(int(i), vocab.stride)
    return vocab.display([i])[0] if j < len(vocab) else f"{LANG_PREFIX * k}[id{j}]"


def side_text(side: Side, vocab) -> list[list[str]]:
    """A side's sentences as display pieces (`::` marks the second language's pieces)."""
    names = {int(i): token_name(i, vocab) for i in np.unique(side.ids)}
    pieces = [names[int(i)] for i in side.ids]
    return [pieces[a:b] for a, b in zip(side.offsets[:-1], side.offsets[1:])]


def _fingerprint(sides) -> str:
    h = hashlib.sha256()
    for s in sides:
        h.update(s.ids.astype(np.int32).tobytes())
        h.update(s.offsets.astype(np.int64).tobytes())
    return h.hexdigest()[:16]


def seed_pairs(en_ids, l1_ids, translations: dict[int, set[int]]) -> np.ndarray:
    """(m, 2) rows of the two spaces whose ids translate each other by `translations` (en id -> l1 ids)."""
    where = {int(i): r for r, i in enumerate(l1_ids)}
    return np.array([(r, where[t]) for r, i in enumerate(en_ids) for t in sorted(translations.get(int(i), ()))
                     if t in where], dtype=np.int64).reshape(-1, 2)


def seed_translations(kind: str, prepared, source, data_cfg, ids: tuple, dictionary) -> dict[int, set[int]]:
    """VecMap's starting dictionary as id pairs: "identical" pieces (spelled alike once the display's
    language prefixes are dropped; en-es: shared punctuation, numerals, names, pieces like ##s) or the
    source's translation `dictionary` sides (English and the other language)."""
    out: dict[int, set[int]] = {}
    if kind == "dictionary":
        for a, b in zip(dictionary[0].ids, dictionary[1].ids):
            out.setdefault(int(a), set()).add(int(b))
        return out
    strip = lambda p: re.sub(rf"^(?:{re.escape(LANG_PREFIX)})+", "", p)  # noqa: E731
    spelled = {}
    for i, p in zip(ids[1], source.display(prepared, data_cfg, ids[1])):
        spelled.setdefault(strip(p), set()).add(int(i))
    for i, p in zip(ids[0], source.display(prepared, data_cfg, ids[0])):
        if strip(p) in spelled:
            out[int(i)] = spelled[strip(p)]
    return out


def build_mapping(prepared, sides: tuple[Side, Side], seed: int, dim: int = 300,
                  log: Callable[[str], None] = print, seed_dictionary: Callable | None = None):
    """Mapped static embeddings of both languages: ((ids, vectors) English, (ids, vectors) second, info).
    `seed_dictionary((en ids, l1 ids)) -> {en id: l1 ids}` starts VecMap from those pairs (default: unsupervised)."""
    vocab = prepared.vocab
    spaces, t0 = [], time.time()
    for side in sides:
        log(f"knn-replace: fastText skipgram on language {side.lang} ({side.num_sentences:,} sentences) ...")
        emb = train_fasttext(side_text(side, vocab), seed=seed, **{**FASTTEXT, "dim": dim})
        ids = {token_name(i, vocab): int(i) for i in np.unique(side.ids)}
        spaces.append((np.array([ids[w] for w in emb.words], dtype=np.int64), emb.vectors, emb.params))
    pairs = None
    if seed_dictionary is not None:
        pairs = seed_pairs(spaces[0][0], spaces[1][0], seed_dictionary((spaces[0][0], spaces[1][0])))
        if len(pairs) == 0:
            raise MinimultError("knn.seed_dictionary: no pair of the seed dictionary has vectors in both languages")
    log("knn-replace: " + ("unsupervised VecMap mapping ..." if pairs is None else
                           f"VecMap mapping from a seed dictionary of {len(pairs):,} pairs ..."))
    cfg = VecMapConfig(**{**asdict(VECMAP), "seed": seed})
    Xm, Zm, info = unsupervised_map(spaces[0][1], spaces[1][1], cfg, seed_pairs=pairs)
    info = {**info, "fasttext": spaces[0][2], "vecmap": asdict(cfg), "seconds_total": time.time() - t0,
            **({"seed_pairs": int(len(pairs))} if pairs is not None else {})}
    return (spaces[0][0], Xm), (spaces[1][0], Zm), info


def dictionary_p1(en, l1, dictionary) -> dict:
    """Translation P@1 of the mapped spaces against the source's dictionary (for Fake-English by
    shift: the identity)."""
    (en_ids, Xm), (l1_ids, Zm) = en, l1
    translation = {int(a): {int(b)} for a, b in zip(dictionary[0].ids, dictionary[1].ids)}  # an id's last entry
    pairs = seed_pairs(en_ids, l1_ids, translation)
    if len(pairs) == 0:
        return {"pairs": 0}
    return {"pairs": int(len(pairs)), "nn": translation_p1(Xm, Zm, pairs, "nn"),
            "csls": translation_p1(Xm, Zm, pairs, "csls")}


def p1_text(info: dict) -> str:
    """'translation P@1 against the silver dictionary (421 pairs): nearest neighbour 0.017, CSLS 0.017'
    from a table's info ("" when it has none)."""
    p1 = info.get("identity_p1", {})
    if "nn" not in p1:
        return ""
    seeded = {"identical": "; mapped from identically spelled pieces",
              "dictionary": "; mapped from this dictionary itself, so not a held-out score"}
    return (f"translation P@1 against the {info.get('dictionary', 'source')} dictionary ({p1['pairs']:,} pairs): "
            f"nearest neighbour {p1['nn']:.3f}, CSLS {p1['csls']:.3f}"
            + seeded.get(info.get("seed_dictionary", "unsupervised"), ""))


def _key(prepared, cfg, k, sides) -> dict:
    key = {"prepared": prepared.path.name, "text": _fingerprint(sides), "k": k,
           "seed": cfg.train.seed, "fasttext": {**FASTTEXT, "dim": cfg.knn.dim}, "vecmap": asdict(VECMAP),
           "version": 2}  # 2: fastText rows all initialised from the seed
    if cfg.knn.seed_dictionary != "unsupervised":  # the default keeps the keys of tables built before the option
        key["seed_dictionary"] = cfg.knn.seed_dictionary
    source = sources.get(cfg.data.source)
    if cfg.knn.seed_dictionary == "dictionary" and source.pair_dictionaries:  # read from files, not the cache entry
        h = hashlib.sha256()
        for j in range(1, cfg.data.n_langs):
            for side in source.pair_dictionary(prepared, cfg.data, j):
                h.update(side.ids.astype(np.int64).tobytes())
        key["dictionary"] = h.hexdigest()[:16]
    return key


def table_info(prepared, cfg, k, sides) -> dict:
    """What the cached table's build recorded (mapping iterations, dictionary P@1, timings)."""
    path = cache_root() / f"neighbours-{key_hash(_key(prepared, cfg, k, sides))}"
    return json.loads((path / "info.json").read_text()) if (path / "info.json").is_file() else {}


def table_sha256(table: torch.Tensor) -> str:
    """The content hash of a neighbour table (its int64 ids): run.json records it, because a table built
    under the same cache key on another machine may differ (docs/pipeline.md, knn-replace)."""
    return hashlib.sha256(table.to("cpu", torch.int64).contiguous().numpy().tobytes()).hexdigest()[:16]


def _fill_columns(table: torch.Tensor) -> torch.Tensor:
    """Each row's missing entries (-1) replaced by its present ones in turn, so a uniformly drawn column
    is a uniformly drawn neighbour among those the row has (rows with none stay -1)."""
    valid = table >= 0
    order = torch.argsort((~valid).to(torch.int8), dim=1, stable=True)  # present columns first
    count = valid.sum(1, keepdim=True).clamp(min=1)
    col = torch.arange(table.shape[1]).expand_as(table) % count
    return torch.gather(table, 1, torch.gather(order, 1, col))


def neighbour_table(prepared, source, cfg, k: int, sides: list[Side],
                    log: Callable[[str], None] = print) -> torch.Tensor:
    """With more than two languages, English is mapped to each of the others: an English id's row holds
    k neighbours in every other language (a drawn column picks the language at random, docs/pipeline.md), the
    row of another language's id its k English neighbours."""
    total = cfg.model.vocab_size
    key = _key(prepared, cfg, k, sides)

    def build(tmp: Path) -> None:
        tables, infos = [], []
        names = source.names(cfg.data)
        for j in range(1, len(sides)):
            pair_dictionary = source.pair_dictionary(prepared, cfg.data, j)
            if cfg.knn.seed_dictionary == "dictionary" and pair_dictionary[0].num_sentences == 0:
                raise MinimultError(f"knn.seed_dictionary=dictionary: the source has no dictionary for {names[0]}-"
                                    f"{names[j]} (the parallel source's: [dictionary] in its manifest); use "
                                    f"identical or unsupervised")
            seeding = None if cfg.knn.seed_dictionary == "unsupervised" else (
                lambda ids, d=pair_dictionary: seed_translations(cfg.knn.seed_dictionary, prepared, source, cfg.data,
                                                                 ids, d))
            en, l1, info = build_mapping(prepared, (sides[0], sides[j]), cfg.train.seed, cfg.knn.dim, log, seeding)
            tables.append(torch.maximum(nearest_table(en[0], en[1], l1[0], l1[1], total, k),
                                        nearest_table(l1[0], l1[1], en[0], en[1], total, k)))
            info["identity_p1"] = dictionary_p1(en, l1, pair_dictionary)  # any dictionary's
            info["seed_dictionary"] = cfg.knn.seed_dictionary
            # en-es: silver
            info["dictionary"] = "identity" if source.alignment_gold == "exact" else source.alignment_gold
            infos.append(info)
        table = tables[0] if len(tables) == 1 else _fill_columns(torch.cat(tables, dim=1))
        info = infos[0] if len(infos) == 1 else {
            "identity_p1": infos[0]["identity_p1"], "dictionary": infos[0]["dictionary"],
            "pairs": {f"0-{j}": i for j, i in enumerate(infos, 1)}}
        torch.save(table, tmp / "neighbours.pt")
        (tmp / "info.json").write_text(json.dumps(info, indent=1, default=str))

    path, reused = cached("neighbours", key, build)
    info = json.loads((path / "info.json").read_text())
    p1 = p1_text(info)
    table = torch.load(path / "neighbours.pt")
    log(f"knn-replace: neighbour table {table_sha256(table)} {'reused' if reused else 'built'} at {path}"
        + (f" ({p1})" if p1 else ""))
    return table
