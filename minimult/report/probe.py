"""The report's language-ID probe section (Wu & Dredze 2019, Fig. 2): for every setting whose runs carry a probe
curve (`minimult probe RUN`, or any evaluation since the probe exists), held-out accuracy per layer,
sentence- and token-level, mean over the setting's seeds; one table and one figure overlaying settings."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from minimult.report.collect import Section
from minimult.report.figures import pyplot, save_figure
from minimult.report.parts import Part, register


def curves(sections: list[Section]) -> dict[str, list[dict]]:
    """{setting label: [probe dict of each seed that has one]} (settings without any left out)."""
    out = {}
    for section in sections:
        for g in section.groups:
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
    lines = ["| setting | probe | n | " + " | ".join(f"L{l}" for l in layers) + " |",
             "|---|---|--:|" + "--:|" * len(layers)]
    for label, probes in groups.items():
        for kind in ("sentence", "token"):
            ls, mean = _mean(probes, kind)
            cells = dict(zip(ls, mean))
            lines.append(f"| {label} | {kind} | {len(probes)} | "
                         + " | ".join(f"{cells[l]:.3f}" if l in cells else "" for l in layers) + " |")
    return "\n".join(lines) + "\n"


def markdown(by_label: dict[str, list[dict]]) -> str:
    if not by_label:
        return ""
    return ("## Language identification per layer (Wu & Dredze 2019)\n\nHeld-out accuracy of a logistic-regression "
            "probe (chance 0.5), mean over seeds.\n\n" + probe_table(by_label))


def probe_figure(by_label: dict[str, list[dict]], path: Path) -> Path | None:
    """Accuracy against layer: a solid line per setting for sentences, dashed for word pieces."""
    if not by_label:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for k, (label, probes) in enumerate(by_label.items()):
        color = f"C{k % 10}"
        for kind, style in (("sentence", "-"), ("token", "--")):
            layers, mean = _mean(probes, kind)
            ax.plot(layers, mean, style, color=color, marker="o", ms=3, label=f"{label} ({kind})")
    ax.axhline(0.5, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("layer")
    ax.set_ylabel("language-ID accuracy (held out)")
    ax.set_ylim(0.4, 1.02)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, plt, Path(path), 120)


def _printed(by_label: dict[str, list[dict]], out: Path) -> str:
    """What `minimult report` prints for the probe: one line (its layer-by-layer table stays in the file)."""
    return f"Language identification per layer ({len(by_label)} settings): {out}/table1.md and {out}/language_id.png\n"


register(Part("probe", order=60, keys=("probe",), compute=lambda sections, top: curves(sections),
              markdown=lambda by_label, top: [markdown(by_label)] if by_label else [],
              figure=lambda by_label, top, out: probe_figure(by_label, out / "language_id.png"),
              figure_file="language_id.png", printed=_printed))
