"""Word alignment F1 (docs/metrics.md): mutual-argmax links between the pieces of each parallel dev pair,
scored against the gold alignment of the run's language views, pooled over all pairs."""

from minimult.evaluate import metrics
from minimult.evaluate.registry import Column, Evaluator, Skipped, register


def run(ctx) -> dict:
    """{"layers": {"L": {align_precision, align_recall, align_f1}}} (fractions in [0, 1]) for every layer asked
    for, from `ctx.dev_vectors` ((P, H) per side and layer) and `ctx.links` ((K, 3) gold links)."""
    en, l1 = ctx.dev
    if len(ctx.links) == 0:  # a source without gold for these sentences: nothing to score
        return Skipped("the language source gives no gold links for the dev sentences (the parallel source's come "
                       "from a link file of the dev pairs: [links] in its manifest)",
                       {"layers": {str(l): {"align_precision": None, "align_recall": None, "align_f1": None}
                                   for l in ctx.layers}, "dev_sentences": en.num_sentences,
                        "dev_sentences_cut": ctx.dev_sentences_cut, "alignment_gold": ctx.alignment_gold,
                        "gold_links": 0})
    ven, vl1 = ctx.dev_vectors
    out = {}
    for l in ctx.layers:
        with ctx.phase("alignment"):
            prf = metrics.alignment_prf(ven[l], en.offsets, vl1[l], l1.offsets, ctx.links)
        out[str(l)] = {"align_precision": prf["precision"], "align_recall": prf["recall"], "align_f1": prf["f1"]}
    gold = {} if ctx.alignment_gold == "exact" else {"alignment_gold": ctx.alignment_gold,
                                                     "gold_links": int(len(ctx.links))}
    return {"layers": out, "dev_sentences": en.num_sentences, "dev_sentences_cut": ctx.dev_sentences_cut, **gold}


def describe(results: dict) -> list[str]:
    """What the alignment was scored against, when it is not an exact gold (en-es's silver links)."""
    if results.get("alignment_gold", "exact") == "exact" or not results.get("gold_links"):
        return []
    return [f"alignment scored against {results['alignment_gold']} links ({results['gold_links']:,} sure links in "
            f"the dev sentences)"]


register(Evaluator(
    "alignment", "word alignment precision, recall and F1 against the gold links (intersection of argmaxes)",
    version=1, order=20, run=run, pairwise=True, needs=("gold alignment",),
    columns=(Column("align_precision", "align P", per_layer=True),
             Column("align_recall", "align R", per_layer=True),
             Column("align_f1", "align F1", per_layer=True, table=True, summary=True, short="F1")),
    keys=("dev_sentences", "dev_sentences_cut"), describe=describe))
