"""Two-sentence sequences for next-sentence prediction (the nsp mod; K et al. 2020, BERT's NSP).

`PairSet.from_sides(sides, layouts, device, seed)` pairs every sentence A of every language with a
sentence B of the same language: its true successor (label 1) for exactly half the sentences, rounded,
at most those that have one; otherwise a random other sentence that is not the successor (label 0). The draw depends
only on (seed, epoch) (`start_epoch`), so a resumed run sees the same pairs. A pair longer than `max_len` is
cut to fit, each sentence keeping at least half of the room; the batch is then written by the one batch builder
(`SequenceSet.build`) as

    [CLS] A [SEP] B [SEP]      segments: A's ([CLS], A, first [SEP]) then B's (B, second [SEP])

with each language's layout (specials, position offset, `segment` for A and `pair_segment` for B).
"""

from __future__ import annotations

import numpy as np
import torch

from minimult.data.batching import Batch, SequenceSet
from minimult.data.languages import Side
from minimult.errors import MinimultError


class PairSet:
    """Every sentence as the first of a pair, its partner drawn per epoch (see the module docstring); batches as
    `SequenceSet`'s, plus `nsp_labels` (B,) long."""

    def __init__(self, seqs: SequenceSet, langs: np.ndarray, side_start: np.ndarray, side_end: np.ndarray, layouts,
                 seed: int):
        self.seqs, self.langs_np, self.seed, self.device = seqs, langs, seed, seqs.device
        self.lengths_np, self.mask_id = seqs.lengths_np, seqs.mask_id
        idx = np.arange(len(seqs))
        self.side_start, self.side_size = side_start, side_end - side_start
        if (self.side_size < 3).any():
            raise MinimultError("nsp needs at least 3 sentences per language (a successor and a random other one)")
        self.next_of = np.where(idx + 1 < side_end, idx + 1, -1)
        self.room = np.array([l.max_len - 3 for l in layouts])  # pieces of A and B together
        self.start_epoch(0)

    @classmethod
    def from_sides(cls, sides: list[Side], layouts, device, seed: int) -> "PairSet":
        """The pairs of `sides` ([English, language 1, ...]; partners within a language), drawn from `seed`."""
        seqs = SequenceSet.from_sides(sides, layouts, device)
        sizes = [s.num_sentences for s in sides]
        ends = np.cumsum(sizes)
        start, end = np.repeat(ends - sizes, sizes), np.repeat(ends, sizes)
        return cls(seqs, np.repeat([s.lang for s in sides], sizes), start, end, layouts, seed)

    def __len__(self) -> int:
        return len(self.seqs)

    def draw(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        """(partner, label) of every sentence for `epoch`: label 1 for exactly half the sentences
        (rounded, at most those with a successor), whose partner is then the successor."""
        rng = np.random.default_rng([self.seed, epoch, 11])
        n, idx = len(self), np.arange(len(self))
        eligible = np.flatnonzero(self.next_of >= 0)
        label = np.zeros(n, dtype=np.int64)
        label[rng.choice(eligible, min(len(eligible), round(n / 2)), replace=False)] = 1
        other = self.side_start + rng.integers(0, self.side_size)
        while (bad := (other == self.next_of) | (other == idx)).any():
            other[bad] = self.side_start[bad] + rng.integers(0, self.side_size[bad])
        return np.where(label == 1, self.next_of, other), label

    def start_epoch(self, epoch: int) -> None:
        """Draw `epoch`'s partners and labels (`draw`)."""
        self.partner, self.labels = self.draw(epoch)

    def tokens(self, index: np.ndarray) -> int:
        """Pieces of pairs `index` (host array) with their [CLS] and two [SEP]s, before cutting to fit."""
        return int(self.lengths_np[index].sum() + self.lengths_np[self.partner[index]].sum()) + 3 * len(index)

    def batch(self, index: np.ndarray) -> Batch:
        """Sentences `index` each followed by its partner, cut to fit; with their NSP labels."""
        la_full, lb_full = self.lengths_np[index], self.lengths_np[self.partner[index]]
        room = self.room[self.langs_np[index]]
        la = np.minimum(la_full, np.maximum(room - lb_full, room // 2))
        lb = np.minimum(lb_full, room - la)
        b = self.seqs.build(index, la, self.partner[index], lb)
        b.nsp_labels = torch.as_tensor(self.labels[index], dtype=torch.long).to(self.device)
        return b
