"""Static word embeddings (fastText skipgram) and the cross-lingual neighbour table built from them.

fastText is trained on a temporary text file, one sentence per line, in a child process (see
`_CHILD`). Only thread=1 is bit-reproducible (Hogwild updates from several threads race).
"""

import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import torch

from minimult.errors import MinimultError
from minimult.knn.vecmap import nearest

EOS = "</s>"  # fastText's end-of-line token: it gets a vector but is no word of ours


@dataclass
class StaticEmbeddings:
    words: list  # most frequent first
    freqs: np.ndarray  # (n,) int64 counts in the training text
    vectors: np.ndarray  # (n, dim) float32
    params: dict = field(default_factory=dict)  # everything that determined the training


# Runs in a fresh interpreter with MALLOC_PERTURB_=255, which makes glibc hand out zeroed memory:
# fasttext-numpy2 0.10.4 reads some buffer it never initialises. On fresh (zeroed) pages it trains
# normally and bit-identically, but on reused heap memory it fails with "Encountered NaN" (a second
# training in one process, small corpora, dim 16) or, with other garbage, returns vectors of 1e12.
# The child imports only fastText and numpy; it also passes `seed`, which train_unsupervised drops
# (and which this build ignores anyway, see `_write_init`).
_CHILD = r"""
import json, sys
import numpy as np
import fasttext.FastText as ft
tmp = sys.argv[1]
params = json.load(open(tmp + "/params.json"))
names = ["input", "model", "lr", "dim", "ws", "epoch", "minCount", "minCountLabel", "minn", "maxn",
         "neg", "wordNgrams", "loss", "bucket", "thread", "lrUpdateRate", "t", "label", "verbose",
         "pretrainedVectors", "seed"]
args, manual = ft.read_args((), params, names, ft.unsupervised_default)
a = ft._build_args(args, manual)
model = ft._FastText(args=a)
ft.fasttext.train(model.f, a)
model.set_args(model.f.getArgs())
words = model.get_words()
np.save(tmp + "/vectors.npy", np.stack([model.get_word_vector(w) for w in words]).astype(np.float32))
used = {"ws": model.ws, "lr": model.lr, "neg": model.neg, "t": model.t,
        "loss": str(model.loss).split(".")[-1]}
json.dump({"words": list(words), "used": used}, open(tmp + "/out.json", "w"))
"""


def _train_isolated(tmp, params):
    """Train skipgram on tmp/sentences.txt in a child process; (words, vectors, used params)."""
    with open(os.path.join(tmp, "params.json"), "w") as f:
        json.dump(dict(params, input=os.path.join(tmp, "sentences.txt")), f)
    env = dict(os.environ, MALLOC_PERTURB_="255")
    proc = subprocess.run([sys.executable, "-c", _CHILD, tmp], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        raise MinimultError(f"fastText training failed: {last}")
    with open(os.path.join(tmp, "out.json")) as f:
        out = json.load(f)
    return out["words"], np.load(os.path.join(tmp, "vectors.npy")), out["used"]


def _write_init(path, words, dim, seed):
    """fastText's own init is broken at thread < 10: it fills only thread/10 of the input matrix with
    uniform(-1/dim, 1/dim) noise and leaves the other rows at zero (measured: 219 of 2184 rows at
    thread=1), and it ignores `seed`. Writing the same distribution for every word as
    `pretrainedVectors` initialises all word rows from our seed (subword n-gram rows, if any, keep
    fastText's init; fastText counts each listed word once more, which shifts subsampling a little)."""
    vecs = np.random.default_rng(seed).uniform(-1.0 / dim, 1.0 / dim, (len(words), dim))
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"{len(words)} {dim}\n")
        for w, v in zip(words, vecs):
            f.write(w + " " + " ".join(f"{x:.6g}" for x in v) + "\n")


def train_fasttext(sentences, dim=300, epoch=10, seed=0, thread=1, minn=0, maxn=0, min_count=1,
                   workdir=None, full_init=True):
    """Skipgram vectors for every word of `sentences` (lists of tokens) seen at least `min_count`
    times, most frequent first (ties by spelling), `</s>` dropped; freqs are exact corpus counts.

    full_init=True initialises every word's input vector from `seed` (see `_write_init`); with
    full_init=False fastText's own init is used, and `seed` has no effect at all (fasttext-numpy2
    0.10.4 gave identical vectors for seeds 0 and 1).
    """
    sentences = [s for s in sentences if len(s) > 0]
    if not sentences:
        raise MinimultError("train_fasttext got no tokens to train on")
    counts = Counter(w for s in sentences for w in s)
    if any(not w or len(w.split()) != 1 or w != w.strip() for w in counts):
        raise MinimultError("train_fasttext tokens must be non-empty and contain no whitespace")
    vocab = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
    if not vocab:
        raise MinimultError(f"train_fasttext: no word occurs min_count={min_count} times")
    params = {"model": "skipgram", "dim": int(dim), "epoch": int(epoch), "seed": int(seed),
              "thread": int(thread), "minn": int(minn), "maxn": int(maxn),
              "min_count": int(min_count), "verbose": 0, "full_init": bool(full_init)}
    with tempfile.TemporaryDirectory(dir=workdir, prefix="fasttext-") as tmp:
        with open(os.path.join(tmp, "sentences.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(" ".join(s) for s in sentences) + "\n")
        ft_params = {k: v for k, v in params.items() if k != "full_init"}
        if full_init:
            ft_params["pretrainedVectors"] = os.path.join(tmp, "init.vec")
            _write_init(ft_params["pretrainedVectors"], [EOS] + vocab, dim, seed)
        words, vectors, used = _train_isolated(tmp, ft_params)
    row = {w: i for i, w in enumerate(words)}
    missing = [w for w in vocab if w not in row]
    if missing:
        raise MinimultError(f"fastText dropped {len(missing)} words, e.g. {missing[0]!r}")
    vectors = vectors[[row[w] for w in vocab]]
    freqs = np.array([counts[w] for w in vocab], dtype=np.int64)
    params.update(used, n_lines=len(sentences), n_tokens=int(sum(counts.values())))
    return StaticEmbeddings(vocab, freqs, vectors, params)


def neighbour_table(src_ids, src_vecs, tgt_ids, tgt_vecs, table_size, k):
    """(table_size, k) LongTensor: row `src_ids[i]` holds the k nearest (cosine) `tgt_ids` to
    `src_vecs[i]`, best first; every other row is -1 (no vector, no neighbours)."""
    src_ids, tgt_ids = np.asarray(src_ids, dtype=np.int64), np.asarray(tgt_ids, dtype=np.int64)
    src_vecs, tgt_vecs = np.asarray(src_vecs), np.asarray(tgt_vecs)
    if len(src_ids) != len(src_vecs) or len(tgt_ids) != len(tgt_vecs):
        raise MinimultError("neighbour_table: ids and vectors differ in length")
    for name, ids in (("source", src_ids), ("target", tgt_ids)):
        if len(ids) and (ids.min() < 0 or ids.max() >= table_size):
            raise MinimultError(f"neighbour_table: {name} ids outside 0..{table_size - 1}")
    if not 1 <= k <= len(tgt_ids):
        raise MinimultError(f"neighbour_table: k={k} neighbours requested from {len(tgt_ids)} targets")
    table = torch.full((table_size, k), -1, dtype=torch.long)
    if len(src_ids):
        table[torch.as_tensor(src_ids)] = torch.as_tensor(tgt_ids[nearest(src_vecs, tgt_vecs, k)])
    return table
