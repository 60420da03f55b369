"""The report's link-file section (real languages, `eval --links`): for every setting whose runs carry a
`links` result, word-alignment F1 per layer and AER at the top layer (mean ± std over the setting's
runs), the model-free diagonal aligner's F1 beside them, and verse retrieval in both directions, so a
real pair's alignment and retrieval read in one row. Silver links are labelled silver."""

from __future__ import annotations

from minimult.report.collect import Section, settings
from minimult.report.parts import Part, register
from minimult.report.tables import aggregate, mean_std, table_lines


def rows(sections: list[Section], top: str) -> list[dict]:
    out = []
    for g in settings(sections):
        runs = [r.results for r in g.runs if isinstance(r.results.get("links"), dict)]
        if not runs:
            continue
        links = [r["links"] for r in runs]
        f1 = {l: aggregate([k["layers"].get(l, {}).get("f1") for k in links]) for l in dict.fromkeys(["0", top])}
        layer = [r.get("layers", {}).get(top, {}) for r in runs]
        out.append({"setting": g.label, "n": len(runs), "kinds": sorted({k["kind"] for k in links}),
                    "files": sorted({k["file"].rsplit("/", 1)[-1] for k in links}),
                    "f1": f1, "aer": aggregate([k["layers"].get(top, {}).get("aer") for k in links]),
                    "diagonal_f1": aggregate([k.get("diagonal", {}).get("f1") for k in links]),
                    "retrieval_forward": aggregate([x.get("retrieval_forward") for x in layer]),
                    "retrieval_backward": aggregate([x.get("retrieval_backward") for x in layer])})
    return out


def markdown(link_rows: list[dict], top: str) -> str:
    if not link_rows:
        return ""
    kinds = sorted({k for r in link_rows for k in r["kinds"]})
    layers = list(link_rows[0]["f1"])
    lines = [f"## Word alignment against link files ({' and '.join(kinds)}) and retrieval", "",
             "Words pooled from their pieces, mutual argmax of cosine similarity (`eval --links`); the diagonal "
             "aligner uses word order alone; ρ at layer " + top + " in each direction. Mean ± std over runs (seeds).",
             ""]
    head = ["setting", "n", *(f"links F1 L{l}" for l in layers), f"AER L{top}", "diagonal F1", f"ρ en→L1 L{top}",
            f"ρ L1→en L{top}"]
    lines += table_lines(head, "l" + "r" * (len(head) - 1), (
        [r["setting"], r["n"], *(mean_std(r["f1"][l]) for l in layers)]
        + [mean_std(r[k]) for k in ("aer", "diagonal_f1", "retrieval_forward", "retrieval_backward")]
        for r in link_rows))
    return "\n".join(lines) + "\n"


register(Part("links", order=40, keys=("links",), compute=rows, markdown=markdown))
