"""Word translation τ (docs/metrics.md): every dictionary entry of the run's language source fed alone
(`[CLS] w [SEP]` in each language's ids, specials and positions), the vector at w, P@1 both ways."""

from minimult.evaluate import metrics
from minimult.evaluate.registry import Column, Evaluator, Skipped, register


def run(ctx) -> dict:
    """{"layers": {"L": {translation, translation_forward, translation_backward}}, "dictionary_entries": D}: P@1
    in [0, 1] over the D dictionary entries' (D, H) vectors (`ctx.dictionary_vectors`); None with D <= 1."""
    en, _ = ctx.dictionary_sides
    out = {}
    for l in ctx.layers:
        tau = dict.fromkeys(("mean", "forward", "backward"))
        if en.num_sentences > 1:
            ven, vl1 = ctx.dictionary_vectors
            with ctx.phase("translation"):
                tau = metrics.retrieval_p1(ven[l], vl1[l])
        out[str(l)] = {"translation": tau["mean"], "translation_forward": tau["forward"],
                       "translation_backward": tau["backward"]}
    results = {"layers": out, "dictionary_entries": en.num_sentences}
    return results if en.num_sentences > 1 else Skipped(
        f"the language source's dictionary has {en.num_sentences} entries (the parallel source's: [dictionary] "
        f"files or dictionary = \"identical\" in its manifest)", results)


register(Evaluator(
    "translation", "word translation P@1 over the source's dictionary, both directions", version=1, order=40,
    run=run, pairwise=True, needs=("dictionary",),
    columns=(Column("translation", "τ", per_layer=True, table=True, curve=True, summary=True),
             Column("translation_forward", "τ en→L1", per_layer=True),
             Column("translation_backward", "τ L1→en", per_layer=True)),
    keys=("dictionary_entries",)))
