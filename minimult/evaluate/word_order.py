"""Word-order distance (Dufter & Schütze 2020, App. B.2): how differently the model orders parallel
sentences. Each dev pair's word pieces are aligned one-to-one by Match (a maximum-similarity assignment)
and the Kendall tau distance of the resulting permutation is averaged over pairs: near 0 when the model
aligns Fake-English piece for piece in the same order, towards 1 for a reversed order (inv-order) if the
model still finds the right partners. Pieces, as in alignment F1; a pair with fewer than two pieces on a
side is left out."""

from minimult.evaluate import metrics
from minimult.evaluate.registry import Column, Evaluator, register


def run(ctx) -> dict:
    """{"layers": {"L": {"order_distance": d}}}: the mean normalised Kendall tau distance in [0, 1] over dev
    pairs, from `ctx.dev_vectors` ((P, H) per side and layer)."""
    (en, l1), (ven, vl1) = ctx.dev, ctx.dev_vectors
    out = {}
    for l in ctx.layers:
        with ctx.phase("word_order"):
            d = metrics.match_order_distance(ven[l], en.offsets, vl1[l], l1.offsets)
        out[str(l)] = {"order_distance": d["distance"]}
    return {"layers": out}


register(Evaluator(
    "word_order", "Kendall tau distance of the Match alignment's permutation, mean over dev pairs", version=1,
    order=45, run=run, pairwise=True,
    columns=(Column("order_distance", "order dist", per_layer=True),)))
