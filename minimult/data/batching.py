"""Sequences on the device and length-bucketed batches.

Public entry: `SequenceSet.from_sides(sides, layouts, device)` then `plan_epoch(...)` and
`set.batch(index)`. All pieces live in one flat tensor on the device; a batch is assembled there
with a few vectorised gathers, so no per-token Python runs in the training loop. `SequenceSet.build`
is the one place a batch is written, from one sentence per row (`[CLS] a [SEP]`) or two
(`[CLS] a [SEP] b [SEP]`, the nsp mod's pairs, `data.pairs`), each row in its language's `Layout`:
its specials, its positions (from its position offset) and its segments.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from minimult.data.languages import Side


@dataclass
class Batch:
    """One padded batch of B sequences of T columns, on the device (long tensors unless noted)."""

    input_ids: torch.Tensor  # (B, T)
    position_ids: torch.Tensor  # (B, T)
    token_type_ids: torch.Tensor  # (B, T)
    attention_mask: torch.Tensor | None  # (B, T) bool, True = real token; None = no padding
    maskable: torch.Tensor  # (B, T) bool: ordinary tokens (not [CLS]/[SEP]/[PAD])
    lang: torch.Tensor  # (B,)
    lengths: torch.Tensor  # (B,) pieces without specials
    nsp_labels: torch.Tensor | None = None  # (B,) pairs only (data.pairs): 1 = the second sentence is the next


class SequenceSet:
    """Every sentence of every language, ready to be batched as `[CLS] s [SEP]` (or paired, `build`)."""

    def __init__(self, ids, starts, lengths, langs, layouts, device):
        self.device = torch.device(device)
        # int32 (ids are below n_langs x vocab_size): half the memory of the largest array; on the CPU it is the
        # concatenated sides' array itself, not a copy. A batch's ids are long (`_pieces`), as they always were.
        self.ids = torch.as_tensor(ids, dtype=torch.int32, device=self.device)
        self.starts = torch.as_tensor(starts, dtype=torch.long, device=self.device)
        self.lengths_np = np.asarray(lengths, dtype=np.int64)
        self.langs_np = np.asarray(langs, dtype=np.int64)
        self.langs = torch.as_tensor(self.langs_np, device=self.device)
        per_lang = lambda field: torch.tensor([getattr(l, field) for l in layouts], device=self.device)  # noqa: E731
        self.pad, self.cls, self.sep, self.mask_id = (per_lang(k) for k in ("pad", "cls", "sep", "mask"))
        self.position_offset = per_lang("position_offset")
        # no segment table (-1): any id, the model ignores it; a pair's second sentence (-1: no pairs) likewise
        self.segment, self.pair_segment = per_lang("segment").clamp(min=0), per_lang("pair_segment").clamp(min=0)
        self.sep_len_np = np.array([int(l.sep >= 0) for l in layouts])  # 1: sentences end with [SEP]; 0: no-sep
        self.sep_len = torch.as_tensor(self.sep_len_np, device=self.device)

    @classmethod
    def from_sides(cls, sides: list[Side], layouts, device) -> "SequenceSet":
        """Every sentence of `sides` ([English, language 1, ...]), sequence i of side k after those of sides
        0..k-1, cut to its language's `max_len` - 2 pieces; `layouts` indexed by language."""
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

    def start_epoch(self, epoch: int) -> None:
        """Nothing to redraw: single sentences (pairs redraw their partners, see data.pairs)."""

    def tokens(self, index: np.ndarray) -> int:
        """Pieces of sequences `index` (host array) with their [CLS] and [SEP] (no padding)."""
        return int(self.lengths_np[index].sum()) + 2 * len(index)

    def batch(self, index: np.ndarray) -> Batch:
        """Sequences `index` (host array) as one padded batch `[CLS] s [SEP]`; no host-device sync."""
        return self.build(index, self.lengths_np[index])

    def build(self, first: np.ndarray, first_len: np.ndarray, second: np.ndarray | None = None,
              second_len: np.ndarray | None = None) -> Batch:
        """The batch whose row r is `[CLS] a [SEP]`, or with `second` `[CLS] a [SEP] b [SEP]`: a the first
        `first_len[r]` pieces of sequence `first[r]`, b those of `second[r]` (host arrays). Every row is
        written in the layout of `first[r]`'s language: its specials ([SEP] left out under no-sep), positions
        counted from its position offset, its segment up to a's last column, its pair segment after (a
        single sentence's padding keeps its segment). No host-device sync."""
        pair = second is not None
        sep_host = self.sep_len_np[self.langs_np[first]]
        ends = first_len + sep_host + (second_len + sep_host if pair else 0)  # each row's last real column
        T = int(ends.max()) + 1
        dev = lambda x: torch.as_tensor(x, dtype=torch.long).to(self.device, non_blocking=True)  # noqa: E731
        first_t = dev(first)
        lang = self.langs[first_t]
        col = torch.arange(T, device=self.device)  # (T,)
        a_len, end, sep = dev(first_len)[:, None], dev(ends)[:, None], self.sep_len[lang][:, None]  # (B, 1)
        a_end = a_len + sep  # a's last column: its [SEP], or its last piece under no-sep
        maskable = (col >= 1) & (col <= a_len)  # (B, T)
        ids = torch.where(maskable, self._pieces(first_t, col - 1), self.pad[lang][:, None])
        segments = self.segment[lang][:, None].expand(-1, T)
        if pair:
            in_b = (col > a_end) & (col <= a_end + dev(second_len)[:, None])
            ids = torch.where(in_b, self._pieces(dev(second), col - a_end - 1), ids)
            segments = torch.where(col <= a_end, segments, self.pair_segment[lang][:, None])
            maskable = maskable | in_b
        ids = torch.where(col == 0, self.cls[lang][:, None], ids)
        ids = torch.where((sep > 0) & ((col == a_end) | (col == end)), self.sep[lang][:, None], ids)
        positions = col + self.position_offset[lang][:, None]
        padded = ends.min() != ends.max()
        return Batch(ids, positions, segments, col <= end if padded else None, maskable, lang,
                     dev(first_len + (second_len if pair else 0)))

    def _pieces(self, seqs: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
        """(B, T) pieces of sequences `seqs` (B,) at `offset` (B, T) from their starts (clamped into the set:
        the caller keeps only columns inside the sentence)."""
        return self.ids[(self.starts[seqs, None] + offset).clamp(0, len(self.ids) - 1)].long()


# the choices of train.batching and train.attention: BATCHINGS and ATTENTIONS in minimult.config


def attention_mask(batch: Batch, attention: str) -> torch.Tensor | None:
    """The mask the model gets for `batch` under `attention` (None: every key takes part)."""
    return batch.attention_mask if attention == "masked" else None


def _buckets(order: np.ndarray, lengths: np.ndarray, batch_size: int, pool_batches: int) -> list[np.ndarray]:
    """`order` cut into pools of `pool_batches` batches, each sorted by length and cut into batches."""
    pool = batch_size * pool_batches
    batches = []
    for p in range(0, len(order), pool):
        chunk = order[p : p + pool]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches += [chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size)]
    return batches


def plan_epoch(lengths: np.ndarray, batch_size: int, seed: int, epoch: int, batching: str = "bucket",
               pool_batches: int = 50, languages: int = 2) -> list[np.ndarray]:
    """One epoch's batches (index arrays); depends only on (seed, epoch).

    bucket: length-bucketed with randomness kept: shuffle, sort within pools of `pool_batches` batches
    by length, cut into batches, shuffle the batch order (less padding, faster). A sentence and its
    translation have similar lengths, so many parallel pairs share a batch (38% on BBE in batches of 256).
    random: a plain shuffle cut into batches, as the paper's code did (~batch/n pairs share one).
    spread: bucketed, but the copies of sentence i in the `languages` languages (sequences i, i + n, ...,
    as `SequenceSet.from_sides` lays them out) go to different groups, each bucketed on its own: no
    pair shares a batch, at bucketing's speed.
    paired: random batches of whole translation groups: the copies of sentence i always share a batch,
    lengths mixed as in random (a control: co-batched pairs without bucketing's uniform lengths)."""
    rng = np.random.default_rng([seed, epoch, 7])
    if batching == "spread":
        return _spread(lengths, batch_size, rng, pool_batches, languages)
    if batching == "paired":
        return _paired(len(lengths), batch_size, rng, languages)
    order = rng.permutation(len(lengths))
    if batching == "random":
        return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    batches = _buckets(order, lengths, batch_size, pool_batches)
    return [batches[i] for i in rng.permutation(len(batches))]


def _spread(lengths, batch_size, rng, pool_batches, languages) -> list[np.ndarray]:
    n = len(lengths) // languages
    group = np.empty(len(lengths), dtype=np.int64)
    group[: n * languages] = rng.permuted(np.tile(np.arange(languages), (n, 1)), axis=1).T.reshape(-1)
    group[n * languages :] = np.arange(len(lengths) - n * languages)  # unequal halves: fixed group sizes
    batches = []
    for g in range(languages):
        members = np.flatnonzero(group == g)
        batches += _buckets(members[rng.permutation(len(members))], lengths, batch_size, pool_batches)
    return [batches[i] for i in rng.permutation(len(batches))]


def _paired(n_seq, batch_size, rng, languages) -> list[np.ndarray]:
    n = n_seq // languages
    groups = rng.permutation(n)[:, None] + n * np.arange(languages)  # (n, languages): sentence i's copies
    order = np.concatenate([groups.reshape(-1), n * languages + rng.permutation(n_seq - n * languages)])
    return [order[i : i + batch_size] for i in range(0, n_seq, batch_size)]


# batchings whose batches mix lengths, each padded to its longest row (`train.microbatches` pays off there)
PADDED_BATCHINGS = ("random", "paired")


def steps_per_epoch(n: int, batch_size: int, batching: str = "bucket", pool_batches: int = 50,
                    languages: int = 2) -> int:
    """How many batches `plan_epoch` cuts `n` sequences into (without drawing them)."""
    if batching in PADDED_BATCHINGS:
        return -(-n // batch_size)
    if batching == "spread":
        per, rest = divmod(n, languages)
        return sum(steps_per_epoch(per + (g < rest), batch_size, "bucket", pool_batches) for g in range(languages))
    pool = batch_size * pool_batches
    full, rest = divmod(n, pool)
    return full * pool_batches + -(-rest // batch_size)
