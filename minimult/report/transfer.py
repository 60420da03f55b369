"""The report's transfer section (Wu & Dredze 2019; K et al. 2020; Dufter & Schütze 2020, App. B.2): for
every setting whose runs carry a `transfer` result, one row per task, mode and zero-shot language with the
first language's (English's) and the zero-shot accuracy and ∆ (mean ± std over the setting's runs, each
run already a mean over fine-tuning seeds) beside the task's baselines; and a scatter of each run's
word-order distance (layer `top`) against its headline zero-shot accuracy (full fine-tuning where it ran:
`evaluate.transfer.with_headline`), with Pearson's r and the number of runs it rests on."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy.stats import pearsonr

from minimult.report.collect import Section, settings
from minimult.report.figures import pyplot, save_figure, text_inches
from minimult.report.parts import Part, register
from minimult.report.tables import aggregate, mean_std, p_text, table_lines


DPI = 120


def _task(t: dict) -> str:
    name = (t.get("task") or {}).get("name", "nt-part")
    return "New Testament part" if name == "nt-part" else name


def rows(sections: list[Section]) -> list[dict]:
    """One row per setting, task, mode and zero-shot language (language 1 alone in a two-language run)."""
    out = []
    for g in settings(sections):
        done = [r.results["transfer"] for r in g.runs if isinstance(r.results.get("transfer"), dict)]
        for task in dict.fromkeys(_task(t) for t in done):
            mine = [t for t in done if _task(t) == task]
            modes = list(dict.fromkeys(m for t in mine for m in t.get("modes", {})))
            for mode in modes:
                got = [t["modes"][mode] for t in mine if mode in t["modes"]]
                names = mine[0].get("languages") or ["en", None]
                for k, lang in enumerate(names[1:]):
                    per = [m.get("languages", {}).get(lang, m) if k else m for m in got]
                    out.append({"setting": g.label, "task": task, "mode": mode, "n": len(got), "first": names[0],
                                "language": lang, "en": aggregate([m["en"] for m in got]),
                                **{key: aggregate([m[key] for m in per]) for key in ("zero_shot", "delta")},
                                "majority": mine[0]["baselines"]["majority"],
                                "bag_of_words": mine[0]["baselines"]["bag_of_words"]})
    return out


def markdown(transfer_rows: list[dict]) -> str:
    if not transfer_rows:
        return ""
    lines = ["## Zero-shot transfer (Wu & Dredze 2019; K et al. 2020)", "",
             "Test-split accuracy; ∆ = first language (English) − zero-shot; mean ± std over runs (seeds).", ""]
    head = ["setting", "task", "mode", "n", "first-language acc", "zero-shot language", "zero-shot acc", "∆",
            "majority", "bag of words (first language)"]
    lines += table_lines(head, "lllrrlrrrr", (
        [r["setting"], r["task"], r["mode"], r["n"], mean_std(r["en"]), r["language"] or "–", mean_std(r["zero_shot"]),
         mean_std(r["delta"]), f"{r['majority']:.3f}", f"{r['bag_of_words']:.3f}"] for r in transfer_rows))
    return "\n".join(lines) + "\n"


def order_points(sections: list[Section], top: str) -> list[dict]:
    """Per run with both numbers: setting, word-order distance at layer `top`, zero-shot accuracy."""
    out = []
    for g in settings(sections):
        for r in g.runs:
            t, layer = r.results.get("transfer"), r.results.get("layers", {}).get(top, {})
            if (isinstance(t, dict) and layer.get("order_distance") is not None
                    and t.get("zero_shot_acc") is not None):
                out.append({"setting": g.label, "run": r.path.name, "order_distance": layer["order_distance"],
                            "zero_shot": t["zero_shot_acc"]})
    return out


def pearson_test(points: list[dict]) -> tuple[float, float] | None:
    """(r, two-sided p) of word-order distance against zero-shot accuracy (None below 3 points or without spread)."""
    if len(points) < 3:
        return None
    x = np.array([p["order_distance"] for p in points])
    y = np.array([p["zero_shot"] for p in points])
    if x.std() == 0 or y.std() == 0:
        return None
    r, p = pearsonr(x, y)
    return float(r), float(p)


def _r_text(points: list[dict]) -> str:
    got = pearson_test(points)
    return "Pearson r = n/a" if got is None else f"Pearson r = {got[0]:.2f} (p = {p_text(got[1])})"


def order_markdown(points: list[dict], top: str) -> str:
    if not points:
        return ""
    return (f"Word-order distance at layer {top} against zero-shot accuracy: {_r_text(points)} over n = "
            f"{len(points)} runs (`transfer_word_order.png`).\n")


def order_figure(points: list[dict], top: str, out: Path) -> Path | None:
    """One dot per run, a colour per setting (and a shape per ten settings: no two settings look alike), the legend
    beside the plot, never over its dots."""
    if not points:
        return None
    plt = pyplot()
    settings = list(dict.fromkeys(p["setting"] for p in points))
    beside = text_inches(settings, 7, DPI) + 0.6  # the legend's labels, their marks and a margin
    fig, ax = plt.subplots(figsize=(5.5 + beside, 4), layout="constrained")
    for k, setting in enumerate(settings):
        mine = [p for p in points if p["setting"] == setting]
        ax.scatter([p["order_distance"] for p in mine], [p["zero_shot"] for p in mine], color=f"C{k % 10}",
                   marker="o^sDv"[k // 10 % 5], label=setting, s=25)
    ax.set_title(f"{_r_text(points)}, n = {len(points)} runs", fontsize=9)
    ax.set_xlabel(f"word-order distance, layer {top}")
    ax.set_ylabel("zero-shot accuracy")
    ax.grid(alpha=0.3)
    fig.legend(fontsize=7, loc="outside right upper", frameon=False)
    return save_figure(fig, plt, Path(out) / "transfer_word_order.png", DPI)


def _stored(data: dict) -> dict:
    """report.json's `transfer` (the rows) and `transfer_word_order` (the points and Pearson's r with its p)."""
    points = data["points"]
    return {"transfer": data["rows"],
            "transfer_word_order": {"points": points,
                                    **dict(zip(("pearson", "p"), pearson_test(points) or (None, None)))}}


register(Part("transfer", order=30, keys=("transfer", "transfer_word_order"),
              compute=lambda sections, top: {"rows": rows(sections), "points": order_points(sections, top)},
              markdown=lambda data, top: ([markdown(data["rows"]) + "\n" + order_markdown(data["points"], top)]
                                          if data["rows"] else []),
              figure=lambda data, top, out: order_figure(data["points"], top, out),
              figure_file="transfer_word_order.png",
              stored=_stored,
              restore=lambda report: {"rows": report.get("transfer") or [],
                                      "points": (report.get("transfer_word_order") or {}).get("points", [])}))
