"""Sequences on the device and length-bucketed batches.

Public entry: `SequenceSet.from_sides(sides, layouts, device)` then `plan_epoch(...)` and
`set.batch(index)`. All pieces live in one flat tensor on the device; a batch is assembled there
with a few vectorised gathers (`[CLS] s [SEP]` + padding, and each language's specials, positions and
segment from its `Layout`), so no per-token Python runs in the training loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from minimult.data.languages import Side


@dataclass
class Batch:
    input_ids: torch.Tensor  # (B, T)
    position_ids: torch.Tensor  # (B, T)
    token_type_ids: torch.Tensor  # (B, T)
    attention_mask: torch.Tensor | None  # (B, T) bool, True = real token; None = no padding
    maskable: torch.Tensor  # (B, T) bool: ordinary tokens (not [CLS]/[SEP]/[PAD])
    lang: torch.Tensor  # (B,)
    lengths: torch.Tensor  # (B,) pieces without specials


class SequenceSet:
    """Every sentence of every language, ready to be batched as `[CLS] s [SEP]`."""

    def __init__(self, ids, starts, lengths, langs, layouts, device):
        self.device = torch.device(device)
        self.ids = torch.as_tensor(ids, dtype=torch.long, device=self.device)
        self.starts = torch.as_tensor(starts, dtype=torch.long, device=self.device)
        self.lengths_np = np.asarray(lengths, dtype=np.int64)
        self.lengths = torch.as_tensor(self.lengths_np, device=self.device)
        self.langs = torch.as_tensor(langs, dtype=torch.long, device=self.device)
        per_lang = lambda field: torch.tensor([getattr(l, field) for l in layouts], device=self.device)  # noqa: E731
        self.pad, self.cls, self.sep, self.mask_id = (per_lang(k) for k in ("pad", "cls", "sep", "mask"))
        self.position_offset, self.segment = per_lang("position_offset"), per_lang("segment")

    @classmethod
    def from_sides(cls, sides: list[Side], layouts, device) -> "SequenceSet":
        ids, starts, lengths, langs, base = [], [], [], [], 0
        for side in sides:
            limit = layouts[side.lang].max_len - 2  # room for [CLS] and [SEP]
            ids.append(side.ids)
            starts.append(side.offsets[:-1] + base)
            lengths.append(np.minimum(side.lengths, limit))
            langs.append(np.full(side.num_sentences, side.lang))
            base += len(side.ids)
        return cls(np.concatenate(ids), np.concatenate(starts), np.concatenate(lengths),
                   np.concatenate(langs), layouts, device)

    def __len__(self) -> int:
        return len(self.lengths_np)

    def batch(self, index: np.ndarray) -> Batch:
        """Sequences `index` (host array) as one padded batch; no host-device sync."""
        host_lengths = self.lengths_np[index]
        T = int(host_lengths.max()) + 2
        padded = host_lengths.min() != host_lengths.max()
        index = torch.as_tensor(index, dtype=torch.long).to(self.device, non_blocking=True)
        lengths, lang = self.lengths[index], self.langs[index]
        col = torch.arange(T, device=self.device)  # (T,)
        L = lengths[:, None]  # (B, 1)
        inside = (col >= 1) & (col <= L)  # (B, T)
        gather = (self.starts[index, None] + col - 1).clamp(0, len(self.ids) - 1)
        ids = torch.where(inside, self.ids[gather], self.pad[lang][:, None])
        ids = torch.where(col == 0, self.cls[lang][:, None], ids)
        ids = torch.where(col == L + 1, self.sep[lang][:, None], ids)
        real = col <= L + 1
        positions = col + self.position_offset[lang][:, None]
        segments = self.segment[lang][:, None].expand(-1, T)
        return Batch(ids, positions.expand(len(index), T), segments, real if padded else None,
                     inside, lang, lengths)


BATCHINGS = ("bucket", "random")


def plan_epoch(lengths: np.ndarray, batch_size: int, seed: int, epoch: int, batching: str = "bucket",
               pool_batches: int = 50) -> list[np.ndarray]:
    """One epoch's batches (index arrays); depends only on (seed, epoch).

    bucket: length-bucketed with randomness kept: shuffle, sort within pools of `pool_batches` batches
    by length, cut into batches, shuffle the batch order (less padding, faster).
    random: a plain shuffle cut into batches, as the paper's code did."""
    rng = np.random.default_rng([seed, epoch, 7])
    order = rng.permutation(len(lengths))
    if batching == "random":
        return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    pool = batch_size * pool_batches
    batches = []
    for p in range(0, len(order), pool):
        chunk = order[p : p + pool]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches += [chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


def steps_per_epoch(n: int, batch_size: int, batching: str = "bucket", pool_batches: int = 50) -> int:
    if batching == "random":
        return -(-n // batch_size)
    pool = batch_size * pool_batches
    full, rest = divmod(n, pool)
    return full * pool_batches + -(-rest // batch_size)
