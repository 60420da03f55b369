"""A parallel corpus of any size for the `parallel` source: N MB of text per language, two line-aligned files.

    python experiments/scale_corpus.py /work/scale/100mb --mb 100 [--seed 0] [--substitute 0.15] [--dictionary]

Writes DIR/en.txt and DIR/xx.txt (and with --dictionary DIR/en-xx.dict, word<TAB>word). English-like
sentences: each line is a sentence of the built-in BBE New Testament (minimult.data.corpus, NLTK words),
drawn at random, with each word replaced by a random corpus word (drawn by frequency) with probability
--substitute, joined by single spaces (read it with words = "whitespace"). The second language is the first
under a deterministic word mapping: every letter goes through one seeded permutation of the alphabet (lower
and upper case alike), so each English word has exactly one translation and a dictionary exists; lines keep
their byte length. Streaming: lines are written in blocks as they are drawn, so memory stays that of the
Bible's sentences whatever --mb is. Seeded: the same arguments give the same bytes. It stops at the first
line that brings the English file to --mb x 1,000,000 bytes.
"""

from __future__ import annotations

import argparse
import random
import string
import sys
import time
from pathlib import Path


def mapping(seed: int) -> dict[int, int]:
    """str.translate table: a seeded permutation of a-z, applied to upper case alike."""
    letters = list(string.ascii_lowercase)
    shuffled = letters[:]
    random.Random(f"scale-corpus-mapping-{seed}").shuffle(shuffled)
    table = {ord(a): ord(b) for a, b in zip(letters, shuffled)}
    table.update({ord(a.upper()): ord(b.upper()) for a, b in zip(letters, shuffled)})
    return table


def generate(out: Path, mb: float, seed: int = 0, substitute: float = 0.15, dictionary: bool = False,
             block: int = 5000, log=print) -> dict:
    from minimult.data.corpus import load_corpus  # the built-in BBE New Testament, NLTK words

    sentences = [s for s in load_corpus("bbe-nt").sentences if s]
    tokens = [w for s in sentences for w in s]  # drawing from it draws words by frequency
    table = mapping(seed)
    rng = random.Random(seed)
    target = int(mb * 1_000_000)
    out.mkdir(parents=True, exist_ok=True)
    written = lines = 0
    start = time.time()
    with open(out / "en.txt", "w", encoding="utf-8", newline="\n") as en, \
            open(out / "xx.txt", "w", encoding="utf-8", newline="\n") as xx:
        while written < target:
            chunk = []
            for _ in range(block):
                s = sentences[rng.randrange(len(sentences))]
                words = [tokens[rng.randrange(len(tokens))] if rng.random() < substitute else w for w in s]
                line = " ".join(words) + "\n"
                chunk.append(line)
                written += len(line.encode("utf-8"))
                if written >= target:
                    break
            text = "".join(chunk)
            en.write(text)
            xx.write(text.translate(table))
            lines += len(chunk)
    if dictionary:
        words = sorted(set(tokens))
        (out / "en-xx.dict").write_text("".join(f"{w}\t{w.translate(table)}\n" for w in words), encoding="utf-8")
    stats = {"dir": str(out), "mb": mb, "seed": seed, "substitute": substitute, "lines": lines,
             "bytes_en": (out / "en.txt").stat().st_size, "bytes_xx": (out / "xx.txt").stat().st_size,
             "seconds": round(time.time() - start, 1)}
    log(f"wrote {lines:,} lines, {stats['bytes_en']:,} bytes (en) and {stats['bytes_xx']:,} bytes (xx) to {out} "
        f"in {stats['seconds']} s")
    return stats


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path, help="folder for en.txt and xx.txt (put it outside the repository)")
    p.add_argument("--mb", type=float, required=True, help="megabytes (10^6 bytes) of text per language")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--substitute", type=float, default=0.15, help="probability a word is replaced by a random one")
    p.add_argument("--dictionary", action="store_true", help="also write en-xx.dict (word<TAB>word)")
    a = p.parse_args(argv)
    generate(a.out, a.mb, a.seed, a.substitute, a.dictionary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
