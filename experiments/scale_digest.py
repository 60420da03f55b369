"""A digest of every file of a prepared cache, to show two builds identical (docs/corpora.md, "A corpus 1,000×
the Bible's"): `python experiments/scale_digest.py CACHE_A CACHE_B` prints each relative path with its sha256
and, given two folders, every path whose digest or presence differs (exit 1 if any).

A .npz file's digest is over its arrays (name, dtype, shape, bytes), not its bytes: np.savez stamps each
member's zip header with the time it was written, so two builds of the same arrays differ there and only there.
Every other file (stats.json, tokenizer.json, vocab.txt, the words and pairs text) is hashed as it is.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import numpy as np


def digest(path: Path) -> str:
    h = hashlib.sha256()
    if path.suffix != ".npz":
        with open(path, "rb") as f:
            while block := f.read(1 << 24):
                h.update(block)
        return h.hexdigest()
    with np.load(path) as z:
        for name in sorted(z.files):
            a = z[name]
            h.update(f"{name} {a.dtype.str} {a.shape}\n".encode())
            h.update(np.ascontiguousarray(a).tobytes())
    return "npz:" + h.hexdigest()


def digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): digest(p) for p in sorted(root.rglob("*")) if p.is_file()}


def main(argv: list[str]) -> int:
    tables = [digests(Path(a)) for a in argv]
    if len(tables) == 1:
        for path, d in tables[0].items():
            print(d, path)
        return 0
    a, b = tables
    differ = sorted(p for p in set(a) | set(b) if a.get(p) != b.get(p))
    for p in differ:
        print(f"differs: {p}: {a.get(p, 'absent')} {b.get(p, 'absent')}")
    print(f"{len(set(a) | set(b))} files, {len(differ)} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
