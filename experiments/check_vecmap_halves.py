"""Sanity check of fastText + unsupervised VecMap: two halves of one text as two "languages".

    python experiments/check_vecmap_halves.py TEXT [--split contiguous|alternate] [--maxn 0] ...

Trains skipgram on each half, maps them without a dictionary and prints word-translation P@1 (NN and
CSLS) on the most frequent words shared by both halves, with the identity as gold. VECMAP.md's
reference: ~0.43 NN / 0.47 CSLS without subwords on halves of the BBE Bible.

Measured with this script (lowercased BBE, punctuation as tokens, dim 300, maxn 0, thread 1):
  whole Bible (~490k tokens per half), --split alternate: 0.93 / 0.93 (patience 5), 0.95 / 0.95 (50)
    (these two with fastText's own init, before train_fasttext's full_init)
  New Testament (~114k tokens per half), --split alternate: 0.18 / 0.22 (patience 5 and 50)
  --split contiguous (different books per half): 0.00-0.02 on both; even a supervised Procrustes map
  trained on the shared words scores only 0.09 (NT) / 0.29 (whole Bible, held-out words) there.
"""

import argparse
import time

import numpy as np

from minimult.embeddings import train_fasttext
from minimult.vecmap import VecMapConfig, translation_p1, unsupervised_map


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("text", help="sentences, one per line, space-tokenized")
    p.add_argument("--split", choices=["contiguous", "alternate"], default="contiguous",
                   help="first/second half of the lines, or even/odd lines")
    p.add_argument("--dim", type=int, default=300)
    p.add_argument("--epoch", type=int, default=10)
    p.add_argument("--minn", type=int, default=0)
    p.add_argument("--maxn", type=int, default=0)
    p.add_argument("--thread", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--patience", type=int, default=50)
    p.add_argument("--gold-words", type=int, default=500)
    p.add_argument("--max-lines", type=int, default=0, help="use only the first N lines (0: all)")
    args = p.parse_args()

    with open(args.text, encoding="utf-8") as f:
        sentences = [line.split() for line in f if line.strip()]
    if args.max_lines:
        sentences = sentences[: args.max_lines]
    if args.split == "contiguous":
        halves = sentences[: len(sentences) // 2], sentences[len(sentences) // 2:]
    else:
        halves = sentences[0::2], sentences[1::2]

    embs = []
    for name, half in zip("AB", halves):
        t = time.time()
        e = train_fasttext(half, dim=args.dim, epoch=args.epoch, seed=args.seed, thread=args.thread,
                           minn=args.minn, maxn=args.maxn)
        print(f"half {name}: {len(half)} lines, {e.params['n_tokens']} tokens, {len(e.words)} words; "
              f"fastText {time.time() - t:.1f}s", flush=True)
        embs.append(e)
    a, b = embs

    t = time.time()
    cfg = VecMapConfig(patience=args.patience, seed=args.seed)
    Xm, Zm, info = unsupervised_map(a.vectors, b.vectors, cfg,
                                    progress=lambda s: print(s, flush=True))
    print(f"vecmap {time.time() - t:.1f}s, {info['iterations']} iterations")

    b_row = {w: i for i, w in enumerate(b.words)}
    shared = [(i, b_row[w]) for i, w in enumerate(a.words) if w in b_row][: args.gold_words]
    gold = np.array(shared)
    nn = translation_p1(Xm, Zm, gold, method="nn")
    csls = translation_p1(Xm, Zm, gold, method="csls")
    print(f"{args.split} halves, P@1 on {len(gold)} most frequent shared words: "
          f"NN {nn:.3f}  CSLS {csls:.3f}")


if __name__ == "__main__":
    main()
