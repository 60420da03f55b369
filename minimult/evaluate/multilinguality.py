"""The multilinguality score µ = (τ0 + τT + ρ0 + ρT) / 4 (docs/metrics.md) at layer 0 and layer T =
round(2/3 x depth), the layer `mu_layers` picks for any depth: 8 of BERT-small's 12, as in the paper's
Table 1. Defined when both layers were evaluated and translation exists; None otherwise. The pair is
recorded next to µ (`mu_layers`), so results of models of different depths say what their µ means."""

from minimult.evaluate import metrics
from minimult.evaluate.registry import Column, Evaluator, register


def mu_layers(depth: int) -> tuple[int, int]:
    """(0, round(2/3 x depth)): the layers µ averages over. 2*depth/3 is never halfway between two
    whole numbers, so rounding is unambiguous: depth 1 -> 1, 2 -> 1, 4 -> 3, 6 -> 4, 8 -> 5, 12 -> 8,
    18 -> 12, 24 -> 16."""
    return 0, (2 * depth + 1) // 3


def run(ctx) -> dict:
    low, top = map(str, mu_layers(ctx.model.cfg.layers))
    L = ctx.results.get("layers", {})
    out = {"mu": None, "mu_layers": [int(low), int(top)]}
    if low in L and top in L and L[low].get("translation") is not None:
        out["mu"] = metrics.multilinguality(L[low]["translation"], L[top]["translation"], L[low]["retrieval"],
                                            L[top]["retrieval"])
    return out


def describe(results: dict) -> list[str]:
    """µ with its layers, or why it is missing (no dictionary, or a layer of its pair not evaluated)."""
    if "mu" not in results:
        return []
    depth = results.get("config", {}).get("model", {}).get("layers")
    mu, layers = results["mu"], results.get("mu_layers") or (mu_layers(depth) if depth else ())  # older results
    pair = " and ".join(map(str, layers))
    no_tau = all(results["layers"].get(str(l), {}).get("translation") is None for l in layers)
    why = ("no dictionary, so no τ" if no_tau and set(map(str, layers)) <= set(results["layers"])
           else f"needs layers {pair}")
    return [f"multilinguality µ (layers {pair}) = {f'n/a ({why})' if mu is None else f'{mu:.3f}'}"]


register(Evaluator(
    "multilinguality", "µ = mean of translation and retrieval at layer 0 and layer round(2/3 x depth) (8 of 12)",
    version=2, order=10, run=run, pairwise=True, derived=True, needs=("gold alignment", "dictionary"),
    columns=(Column("mu", "µ", table=True, curve=True, summary=True),), keys=("mu_layers",), describe=describe))
