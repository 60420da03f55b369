"""Sentence retrieval ρ (docs/metrics.md): mean-pooled sentence vectors, cosine, precision@1 of finding the
parallel sentence among all dev sentences, averaged over both query directions."""

from minimult.evaluate import metrics
from minimult.evaluate.registry import Column, Evaluator, register
from minimult.evaluate.representations import sentence_vectors


def run(ctx) -> dict:
    """{"layers": {"L": {retrieval, retrieval_forward, retrieval_backward}}}: P@1 in [0, 1] over the S dev
    sentences' (S, H) mean-pooled vectors (`sentence_vectors`) of each layer asked for."""
    (en, l1), (ven, vl1) = ctx.dev, ctx.dev_vectors
    out = {}
    for l in ctx.layers:
        with ctx.phase("retrieval"):
            rho = metrics.retrieval_p1(sentence_vectors(ven[l], en), sentence_vectors(vl1[l], l1))
        out[str(l)] = {"retrieval": rho["mean"], "retrieval_forward": rho["forward"],
                       "retrieval_backward": rho["backward"]}
    return {"layers": out}


register(Evaluator(
    "retrieval", "sentence retrieval P@1 of mean-pooled vectors, both directions", version=1, order=30, run=run,
    pairwise=True,
    columns=(Column("retrieval", "ρ", per_layer=True, table=True, curve=True, summary=True),
             Column("retrieval_forward", "ρ en→L1", per_layer=True),
             Column("retrieval_backward", "ρ L1→en", per_layer=True))))
