"""The report's segment-alternation section (van der Goot et al. 2022): for every setting whose runs were evaluated
with `minimult eval RUN --segment ...`, the Table 1 columns per alternation (mean ± std over seeds)
and a figure of the layer-`top` scores per alternation.

A run's number for an alternation is its latest evaluation block with that `segment`, layers 0 and
`top` and all of the run's dev sentences; `original` is the run's latest complete evaluation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from minimult.report.collect import Run, Section, settings
from minimult.report.figures import arrange, panel_grid, save_figure
from minimult.report.parts import Part, register
from minimult.report.tables import aggregate, cell_text, table_columns, table_lines

ORDER = ("original", "0s", "1s", "avg", "null")
DPI = 120


def _order(value: str) -> tuple:
    return (ORDER.index(value), "") if value in ORDER else (len(ORDER), value)


def run_alternations(run: Run, top: str) -> dict[str, dict]:
    """{segment: results-like dict} of one run (original included when it has other alternations)."""
    out = {}
    for block in run.results.get("evaluations", []):
        ev = block.get("evaluation", {})
        value = ev.get("segment")
        if value and value != "original" and {"0", top} <= set(map(str, ev.get("layers", []))) and \
                ev.get("dev_sentences") == run.results.get("evaluation", {}).get("dev_sentences"):
            out[value] = block
    return {"original": run.results, **out} if out else {}


def rows(sections: list[Section], top: str) -> list[dict]:
    """One row per (setting, alternation) with every table column aggregated over the setting's seeds."""
    out = []
    for g in settings(sections):
        per_run = [run_alternations(r, top) for r in g.runs]
        values = sorted({v for alt in per_run for v in alt}, key=_order)
        for value in values:
            metrics = {c.key(l): aggregate([c.value(alt[value], l) if value in alt else None for alt in per_run])
                       for c, l in table_columns(top)}
            out.append({"setting": g.label, "segment": value, "n": sum(value in alt for alt in per_run),
                        "metrics": metrics})
    return out


def markdown(alt_rows: list[dict], top: str) -> str:
    if not alt_rows:
        return ""
    cols = [(c, l) for c, l in table_columns(top) if c.group != "perplexity"]
    head = ["setting", "segment", "n"] + [c.heading(l) for c, l in cols]
    rows = ([r["setting"], r["segment"], r["n"], *(cell_text(r["metrics"][c.key(l)], c) for c, l in cols)]
            for r in alt_rows)
    lines = ["## Segment alternations at inference (van der Goot et al. 2022)", ""]
    return "\n".join(lines + table_lines(head, "ll" + "r" * (len(head) - 2), rows)) + "\n"


def figure(alt_rows: list[dict], top: str, out: Path) -> Path | None:
    """Grouped bars: one panel per layer-`top` score (and µ), one row of bars per setting (the first at the top,
    named once per row of panels), one bar per alternation (the first at the top of its row)."""
    if not alt_rows:
        return None
    panels = [(c, l) for c, l in table_columns(top) if c.per_layer and l == top] + \
             [(c, l) for c, l in table_columns(top) if c.name == "mu"]
    settings = list(dict.fromkeys(r["setting"] for r in alt_rows))
    values = sorted({r["segment"] for r in alt_rows}, key=_order)
    ys = np.arange(len(settings))[::-1]
    height = 0.8 / len(values)
    ncols = min(2, len(panels))
    plt, fig, axes = panel_grid(len(panels), share_y=True)
    for ax, (c, l) in zip(axes, panels):
        for j, value in enumerate(values):
            got = {r["setting"]: r["metrics"][c.key(l)] for r in alt_rows if r["segment"] == value}
            means = [got[s]["mean"] if s in got and got[s]["mean"] is not None else np.nan for s in settings]
            stds = [got[s]["std"] if s in got and got[s]["std"] is not None else 0 for s in settings]
            ax.barh(ys + 0.4 - (j + 0.5) * height, means, height, xerr=stds, color=f"C{j % 10}", error_kw={"lw": 0.8},
                    label=value)
        ax.set_yticks(ys, settings, fontsize=8)
        ax.set_title(c.heading(l), fontsize=10)
        ax.grid(alpha=0.3, axis="x")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=len(values), fontsize=8,
               title="segment alternation", title_fontsize=8, frameon=False)
    arrange(fig, axes, ncols, 3.6, 0.15 * len(values) * len(settings) + 0.3, DPI,
            "Segment alternations at inference (van der Goot et al. 2022)", bottom=0.9)
    return save_figure(fig, plt, Path(out) / "segment_alternations.png", DPI)


register(Part("segments", order=20, keys=("segment_alternations",), compute=rows, markdown=markdown, figure=figure,
              figure_file="segment_alternations.png"))
