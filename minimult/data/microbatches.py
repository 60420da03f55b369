"""A masked batch cut into row groups (one process's share of it, or micro-batches of similar length), or
padded to a fixed shape.

Public entries: `take(batch, rows)`, `by_length(batch, parts)` and `pad(batch, fixed_shape(...))`. A masked
batch is the dict that `train.Member.masked_batch` makes (input_ids, position_ids, token_type_ids,
attention_mask, selected, targets, nsp_labels): its (B, T) and (B,) tensors are cut by row, and its selected
tokens (flat indices into B * T) are renumbered into the cut's rows and width.

With padding masked in attention a row's vectors do not depend on the other rows, so a batch's loss
is the sum over any row groups of their cross-entropy sums, each divided by the whole batch's counts
(`Bert.mlm_loss(totals=...)`; `minimult.train.step_losses` cuts and adds them up for one model or a
stack). `by_length` uses that to train random batches (`train.batching=random`,
rows of mixed length padded to the longest) at close to bucketed batches' cost: the rows sorted by
length, cut into `parts` groups where padding is least, each padded only to its own longest row
(`train.microbatches`). The other way round, `pad` adds padded rows, columns and selected entries (whose
target -100 every cross-entropy ignores) so that a run's batches take a few fixed shapes (`train.pad_multiple`),
what a step captured once and replayed (a CUDA graph) needs: the same loss and gradient, other dropout draws.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

ROW_FIELDS = ("input_ids", "position_ids", "token_type_ids", "attention_mask", "nsp_labels")


def take(batch: dict, rows, width: int | None = None) -> dict:
    """`batch` cut to `rows` (a slice or an index tensor, in that order) and its first `width` columns
    (None: all), with the selected tokens in those rows renumbered. `width` must cover the rows' real
    tokens (the caller's promise: only padding is cut)."""
    B, T = batch["input_ids"].shape
    device = batch["input_ids"].device
    W = T if width is None else width
    out = {}
    for key in ROW_FIELDS:  # a slice of rows cuts views, an index tensor copies
        v = batch.get(key)
        out[key] = None if v is None else (v[rows, :W] if v.dim() == 2 else v[rows])
    index = torch.arange(B, device=device)[rows] if isinstance(rows, slice) else rows
    new_row = torch.full((B,), -1, dtype=torch.long, device=device)
    new_row[index] = torch.arange(len(index), device=device)
    selected = batch["selected"]
    row = new_row[selected // T]
    keep = row >= 0
    out["selected"] = row[keep] * W + selected[keep] % T
    out["targets"] = batch["targets"][keep]
    return out


def by_length(batch: dict, parts: int) -> list[dict]:
    """`batch` as `parts` groups of rows of similar length, each cut to its longest row: the rows sorted by
    length and cut where the padded positions (the sum of each group's rows times its width) are fewest
    (`cuts`); a group without padding gets no attention mask. Only for padding masked in attention (with
    padding attended, a row's vectors depend on the batch's width). One group, `[batch]`, when `parts` is 1
    or the batch has no padding."""
    mask = batch.get("attention_mask")
    if parts <= 1 or mask is None:
        return [batch]
    lengths = mask.sum(1)  # real tokens per row, [CLS]/[SEP] included (a row's real tokens are its prefix)
    order = torch.argsort(lengths, stable=True)
    sorted_lengths = lengths[order].cpu().numpy()  # one host sync
    bounds = cuts(sorted_lengths, parts)
    groups = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        group = take(batch, order[lo:hi], int(sorted_lengths[hi - 1]))
        if sorted_lengths[lo] == sorted_lengths[hi - 1]:
            group["attention_mask"] = None
        groups.append(group)
    return groups


def cuts(lengths: np.ndarray, parts: int) -> list[int]:
    """Boundaries 0 = c_0 < c_1 < ... < c_n = B cutting ascending `lengths` (B,) into n = min(parts, B)
    groups with the fewest padded positions, the sum over groups of (c_g+1 - c_g) * lengths[c_g+1 - 1]
    (dynamic programming over the last cut, vectorised: n products of (B+1, B+1))."""
    B = len(lengths)
    n = min(parts, B)
    i, j = np.arange(B + 1)[:, None], np.arange(B + 1)[None, :]
    width = np.concatenate([[0], lengths]).astype(np.float64)  # width[j]: a group ending at row j
    span = np.where(i < j, (j - i) * width[None, :], np.inf)  # span[i, j]: rows i..j-1 as one group
    best = np.full(B + 1, np.inf)
    best[0] = 0.0
    last = []
    for _ in range(n):
        total = best[:, None] + span
        last.append(total.argmin(0))
        best = total.min(0)
    bounds = [B]
    for k in reversed(range(n)):
        bounds.append(int(last[k][bounds[-1]]))
    return bounds[::-1]


def fixed_shape(width: int, rows: int, multiple: int, max_len: int, rate: float,
                selection: str) -> tuple[int, int, int]:
    """(rows, columns, selected entries) a batch `width` columns wide is padded to under `train.pad_multiple` =
    `multiple`: `rows` (the batch size), the next multiple of `multiple` (at most `max_len`, the widest a batch
    is) and the most tokens `mask_batch` can select in rows of that width (a row holds at most columns - 1
    maskable pieces, [CLS] aside): max(1, round(rate x that)) each when exact, all of them under bernoulli."""
    columns = min(-(-width // multiple) * multiple, max_len)
    per_row = columns - 1 if selection == "bernoulli" else max(1, round(rate * (columns - 1)))
    return rows, columns, rows * per_row


def pad(batch: dict, shape: tuple[int, int, int]) -> dict:
    """`batch` padded to `shape` = (rows, columns, selected entries): new rows and columns are [PAD] id 0 at
    position 0 and segment 0 that no key attends to (token_type_ids None: all 0), new selected entries point
    at token 0 with target -100 and new rows' next-sentence label is -100, so every loss is the batch's own;
    the attention mask is always there."""
    rows, columns, n = shape
    B, T = batch["input_ids"].shape
    N = batch["selected"].numel()
    if B > rows or T > columns or N > n:
        raise ValueError(f"a batch of {(B, T, N)} (rows, columns, selected) does not fit in {shape}")
    ids, mask, types = batch["input_ids"], batch.get("attention_mask"), batch.get("token_type_ids")
    grid = {"input_ids": ids, "position_ids": batch["position_ids"],
            "token_type_ids": torch.zeros_like(ids) if types is None else types,
            "attention_mask": torch.ones_like(ids, dtype=torch.bool) if mask is None else mask.bool()}
    out = {k: F.pad(v, (0, columns - T, 0, rows - B)) for k, v in grid.items()}
    out["selected"] = F.pad((batch["selected"] // T) * columns + batch["selected"] % T, (0, n - N))
    out["targets"] = F.pad(batch["targets"], (0, n - N), value=-100)
    labels = batch.get("nsp_labels")
    out["nsp_labels"] = None if labels is None else F.pad(labels, (0, rows - B), value=-100)
    return out
