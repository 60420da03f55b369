"""The report's language-ID probe section (Wu & Dredze 2019, Fig. 2): for every setting whose runs carry a probe
curve (`minimult probe RUN`, or any evaluation since the probe exists), held-out accuracy per layer,
sentence- and token-level, mean over the setting's seeds; one table and one figure overlaying settings."""

from __future__ import annotations

import hashlib
import json
import math
import textwrap
from pathlib import Path

import numpy as np
from matplotlib.ticker import MaxNLocator

from minimult.report.collect import Section, settings
from minimult.report.figures import already_drawn, pyplot, save_figure
from minimult.report.parts import Part, register
from minimult.report.tables import table_lines


def curves(sections: list[Section]) -> dict[str, list[dict]]:
    """{setting label: [probe dict of each seed that has one]} (settings without any left out)."""
    out = {}
    for g in settings(sections):
        got = [r.results["probe"] for r in g.runs if isinstance(r.results.get("probe"), dict)]
        if got:
            out.setdefault(g.label, []).extend(got)
    return out


def _mean(probes: list[dict], kind: str) -> tuple[list[int], np.ndarray]:
    layers = probes[0]["layers"]
    same = [p[kind] for p in probes if p["layers"] == layers]
    return layers, np.mean(np.asarray(same, dtype=float), axis=0)


def probe_table(by_label: dict[str, dict | list[dict]]) -> str:
    """Markdown: one row per (setting, sentence|token), one column per layer (mean over seeds)."""
    if not by_label:
        return ""
    groups = {k: v if isinstance(v, list) else [v] for k, v in by_label.items()}
    layers = max((ps[0]["layers"] for ps in groups.values()), key=len)
    rows = []
    for label, probes in groups.items():
        for kind in ("sentence", "token"):
            cells = dict(zip(*_mean(probes, kind)))
            rows.append([label, kind, len(probes), *(f"{cells[l]:.3f}" if l in cells else "" for l in layers)])
    return "\n".join(table_lines(["setting", "probe", "n", *(f"L{l}" for l in layers)], "llr" + "r" * len(layers),
                                 rows)) + "\n"


def markdown(by_label: dict[str, list[dict]]) -> str:
    if not by_label:
        return ""
    return ("## Language identification per layer (Wu & Dredze 2019)\n\nHeld-out accuracy of a logistic-regression "
            "probe (chance 1/N for N languages), mean over seeds.\n\n" + probe_table(by_label))


PROBE_FIGURE_VERSION = "2"  # bump when the drawing changes: the cached PNG is drawn again
SENTENCE, TOKEN = "tab:blue", "tab:orange"  # one colour per probe kind, the same in every panel


def probe_figure(by_label: dict[str, list[dict]], path: Path) -> Path | None:
    """Accuracy against layer, one small panel per setting (sentences solid, word pieces dashed, chance dotted), all
    on one y axis, the legend above the panels; drawn again only when what it shows changed (the PNG's key)."""
    if not by_label:
        return None
    path = Path(path)
    key = hashlib.sha256(json.dumps([PROBE_FIGURE_VERSION, by_label], sort_keys=True, default=str).encode()).hexdigest()
    if already_drawn(path, key):
        return path
    plt = pyplot()
    n = len(by_label)
    cols = min(n, 4)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(2.6 * cols + 0.8, 2.0 * rows + 0.9), sharex=True, sharey=True,
                             squeeze=False, layout="constrained")
    for ax, (label, probes) in zip(axes.flat, by_label.items()):
        for kind, style, color in (("sentence", "-", SENTENCE), ("token", "--", TOKEN)):
            layers, mean = _mean(probes, kind)
            ax.plot(layers, mean, style, color=color, marker="o", ms=2.5, lw=1.3, label=kind)
        ax.axhline(0.5, color="grey", lw=0.8, ls=":")
        ax.set_ylim(0.4, 1.02)
        ax.set_title("\n".join(textwrap.wrap(f"{label} (n={len(probes)})", 34)), fontsize=8)
        ax.tick_params(labelsize=7)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.25)
    for i, ax in enumerate(axes.flat):
        if i >= n:  # an empty slot of the last row: the panel above it carries the layer axis
            ax.set_visible(False)
            axes.flat[i - cols].tick_params(labelbottom=True)
            axes.flat[i - cols].set_xlabel("layer", fontsize=8)
        elif i >= n - cols:
            ax.set_xlabel("layer", fontsize=8)
    fig.supylabel("language-ID accuracy (held out)", fontsize=9)
    handles, _ = axes.flat[0].get_legend_handles_labels()
    handles.append(axes.flat[0].lines[-1])
    fig.legend(handles, ["sentence probe", "word-piece probe", "chance (0.5)"], loc="outside upper center", ncol=3,
               fontsize=8, frameon=False)
    return save_figure(fig, plt, path, 110, key=key)


def _printed(by_label: dict[str, list[dict]], out: Path) -> str:
    """What `minimult report` prints for the probe: one line (its layer-by-layer table stays in the file)."""
    return f"Language identification per layer ({len(by_label)} settings): {out}/table1.md and {out}/language_id.png\n"


register(Part("probe", order=60, keys=("probe",), compute=lambda sections, top: curves(sections),
              markdown=lambda by_label, top: markdown(by_label),
              figure=lambda by_label, top, out: probe_figure(by_label, out / "language_id.png"),
              figure_file="language_id.png", printed=_printed))
