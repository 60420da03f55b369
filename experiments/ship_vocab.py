"""Ship the WordPiece vocabularies a prepared corpus uses (corpora/vocabularies), so that every machine
builds the same token ids for it: HF's trainer numbers `##` pieces in hash-map order, and a cache rebuilt
elsewhere would otherwise give a run's checkpoint other ids (`minimult eval` refuses such a cache).

    python experiments/ship_vocab.py --fake en-es                                # all NT verses, 2048 each
    python experiments/ship_vocab.py --fake en-es --set data.train_sentences=400 # the tiny preset's text

It prepares the data as `minimult prepare` would (reusing this machine's cache entry, so the shipped lists
are the ones this machine's runs were trained with) and adds each vocabulary with its training text's key.
"""

from __future__ import annotations

import argparse

from minimult.config import parse_overrides, resolve
from minimult.data import sources
from minimult.data.prepare import prepare
from minimult.data.vocab import SHIPPED, ship_vocab, shipped_vocab


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fake", default="shift")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args()
    cfg, _ = resolve("paper", {**parse_overrides(args.set), "data.fake": args.fake})
    data = cfg.data
    source = sources.get(data.fake)
    prepared = prepare(data, progress=print)
    train, _ = source.corpora(data, print)
    texts = [("", prepared.vocab, source.training_text(train, data))]
    if hasattr(source, "spanish_vocab") and not source.shares_vocabulary(data):  # en-es, a vocabulary per language
        texts.append(("es", source.spanish_vocab(prepared, data), train.second))
    n = data.train_sentences or "all"
    for lang, vocab, text in texts:
        if shipped_vocab(text, vocab.stride, source.name)[1] is not None:
            print(f"already shipped: {lang or 'first'} vocabulary of {data.fake}, {n} sentences")
            continue
        shared = " shared" if source.shared_option and data.shared_vocab else ""  # --shared-vocab
        what = f"{data.fake}{' ' + lang if lang else ''}{shared}, {n} training sentences, {vocab.stride}"
        print(f"shipped {ship_vocab(vocab, text, source.name, what)}")
    print(f"index: {SHIPPED / 'index.json'}")


if __name__ == "__main__":
    main()
