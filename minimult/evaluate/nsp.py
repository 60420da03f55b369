"""Next-sentence prediction accuracy on dev pairs (nsp runs only): the NSP head's verdict on
`[CLS] A [SEP] B [SEP]` pairs of the first dev sentences of each language, B the true next sentence for
exactly half of them (a fixed draw). A model without an NSP head gets no number."""

from __future__ import annotations

import numpy as np
import torch

from minimult.data.pairs import PairSet
from minimult.evaluate.registry import Column, Evaluator, register

NSP_SEED = 2024


@torch.inference_mode()
def nsp_accuracy(model, sides, layouts, device, batch_size: int = 256) -> float:
    pairs = PairSet.from_sides(sides, layouts, device, NSP_SEED)
    correct = 0
    for i in range(0, len(pairs), batch_size):
        b = pairs.batch(np.arange(i, min(i + batch_size, len(pairs))))
        h = model(b.input_ids, b.position_ids, b.token_type_ids, b.attention_mask)
        correct += int((model.nsp_head(h[:, 0]).argmax(-1) == b.nsp_labels).sum())
    return correct / len(pairs)


def run(ctx) -> dict:
    if getattr(ctx.model, "nsp_head", None) is None:
        return {}
    with ctx.phase("nsp"):
        return {"nsp_accuracy": nsp_accuracy(ctx.model, ctx.dev, ctx.layouts, ctx.device)}


register(Evaluator(
    "nsp", "next-sentence prediction accuracy on dev pairs (runs trained with nsp)", version=1, order=95, run=run,
    needs=("an NSP head",),
    columns=(Column("nsp_accuracy", "NSP acc", summary=True, curve=True),)))
