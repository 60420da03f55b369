"""The multilinguality score µ = (τ0 + τ8 + ρ0 + ρ8) / 4 (DESIGN §8): defined when layers 0 and 8
were evaluated and translation exists; None otherwise."""

from minimult.evaluate import metrics
from minimult.evaluate.registry import Column, Evaluator, register

LAYERS = ("0", "8")


def run(ctx) -> dict:
    L = ctx.results.get("layers", {})
    if all(l in L for l in LAYERS) and L["0"].get("translation") is not None:
        return {"mu": metrics.multilinguality(L["0"]["translation"], L["8"]["translation"], L["0"]["retrieval"],
                                              L["8"]["retrieval"])}
    return {"mu": None}


register(Evaluator(
    "multilinguality", "µ = mean of translation and retrieval at layers 0 and 8", version=1, order=10, run=run,
    derived=True, columns=(Column("mu", "µ", table=True, curve=True, summary=True),)))
