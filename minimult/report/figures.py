"""The report's figures (matplotlib, Agg backend), each a PNG in the output folder:

- `positions_<run>.png`: cosine similarity of position embeddings (paper Fig. 5/8),
- `pca_<run>.png`: PCA of layer-0 token embeddings of both languages (Fig. 4), for language sources
  with one id block per language,
- `training_<section>.png`: the evaluations logged during training, the mean over seeds with each seed's
  own curve dashed beside it (Fig. 6/7; a setting whose seeds split shows two curves, not a wide band),
  one panel per Table 1 column marked `curve` (µ, ρ and τ at layers 0 and the top layer, dev ppl),
- `seeds_<section>.png`: each seed's final number of every table column, row by row, beside the mean and
  the paper's number (a table with two seeds in some row).

Weights come from `minimult.runs.read_weights`; a run without a readable checkpoint gets no figure.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.font_manager import FontProperties
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator, NullFormatter
from PIL import Image

from minimult.data import sources
from minimult.errors import MinimultError
from minimult.evaluate.registry import STD, evaluators
from minimult.report.collect import Group, Run, Section
from minimult.report.recipes import wilson
from minimult.report.tables import FLOOR, baseline_for, mu_top, table_columns
from minimult.runs import read_weights

POSITIONS = "embeddings.lookups.position.weight"
TOKENS = "embeddings.lookups.token.weight"
N_SPECIAL = 5  # [PAD] [UNK] [CLS] [SEP] [MASK]: the first ids of each language's block, left out of the PCA
FIGURE_KEY = "minimult-key"  # the PNG text field holding what a keyed figure (the probe's) was drawn from


def pyplot():
    """matplotlib.pyplot on the Agg backend (files only, no display): chosen before pyplot is first imported."""
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: its backend must be chosen first

    return plt


def file_slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.+_-]+", "_", text).strip("_")[:80] or "x"


def section_figure(kind: str, title: str) -> str:
    """The file name of a section's figure: `training_Table_1.png`, `seeds_Table_1.png` (the title's
    part before its colon)."""
    return f"{kind}_{file_slug(title.split(':')[0])}.png"


def _weight(run: Run, name: str) -> np.ndarray | None:
    return (read_weights(run.path, [name]) or {}).get(name)


LABEL_PAD = 0.12  # inches between a y tick label and its panel (a tick of 3.5 pt and a pad of 3.5 pt, rounded up)
MARGIN = 0.1  # inches between a figure's text and its edge
GAP = 0.35  # inches after a column of panels: the half of an x tick label that overhangs the panel's edge
ROW_GAP = 0.7  # inches between rows of panels: the x tick labels of one and the title of the next
TITLE = 11  # points, a figure's title


def text_inches(texts, size: float, dpi: float) -> float:
    """The width in inches of the widest of `texts` at font size `size` (points) in a PNG of `dpi`: Agg fits
    glyphs to whole pixels, so the width of a text does not scale exactly with the dpi."""
    renderer, font = RendererAgg(1, 1, dpi), FontProperties(size=size)
    return max((renderer.get_text_width_height_descent(t, font, ismath=False)[0] for t in texts), default=0) / dpi


def panel_grid(n: int, share_y: bool = False):
    """(pyplot, figure, axes) for `n` panels, sharing one y axis with `share_y`; `place` (or `arrange`) sizes the
    figure and puts them once they are drawn. Only the panels drawn are made (an empty axes costs as much as a
    full one)."""
    plt = pyplot()
    fig = plt.figure()
    axes = [fig.add_axes((0, 0, 1, 1))]
    axes += [fig.add_axes((0, 0, 1, 1), sharey=axes[0] if share_y else None) for _ in range(n - 1)]
    return plt, fig, axes


def place(fig, axes, ncols: int, width: float, height: float, dpi: float, title: str, left: float, gaps: list[float],
          bottom: float, row_gap: float = ROW_GAP, top: float = 0.45 + TITLE / 72) -> None:
    """Sizes `fig` and puts its `axes` in rows of `ncols`, each `width` x `height` inches: `left` inches before the
    first column, `gaps[c]` after column c, `row_gap` between rows, `bottom` below the last for its x tick labels and
    a legend, `top` above the first for `title` (0.12 inches below the top edge) and the panels' own titles. Laid out
    in inches, not measured by drawing: `tight_layout` would draw the figure once more to measure it."""
    nrows = -(-len(axes) // ncols)
    w = max(left + ncols * width + sum(gaps), text_inches([title], TITLE, dpi) + 0.4)
    h = top + nrows * height + (nrows - 1) * row_gap + bottom
    fig.set_size_inches(w, h)
    fig.suptitle(title, fontsize=TITLE, y=1 - 0.12 / h, va="top")
    for i, ax in enumerate(axes):
        row, col = divmod(i, ncols)
        x = left + col * width + sum(gaps[:col])
        ax.set_position((x / w, (h - top - row * (height + row_gap) - height) / h, width / w, height / h))


def arrange(fig, axes, ncols: int, width: float, height: float, dpi: float, title: str, bottom: float) -> None:
    """`place` for panels that share one y axis (`panel_grid(n, share_y=True)`): its tick labels show at the left
    of each row of panels only, in a margin as wide as the longest of them at `dpi`; each column of panels is
    followed by GAP or by its widest note beside a panel (an annotation at the panel's right)."""
    ticks = axes[0].get_yticklabels()
    left = MARGIN + (text_inches([t.get_text() for t in ticks], ticks[0].get_fontsize(), dpi) + LABEL_PAD if ticks
                     else GAP)
    gaps = [GAP + max((text_inches([t.get_text()], t.get_fontsize(), dpi) for ax in axes[c::ncols] for t in ax.texts),
                      default=0) for c in range(ncols)]
    for i, ax in enumerate(axes):
        if i % ncols:
            ax.tick_params(labelleft=False)
    place(fig, axes, ncols, width, height, dpi, title, left, gaps, bottom)


def save_figure(fig, plt, path: Path, dpi: int, key: str | None = None) -> Path:
    """The figure as a PNG; `key` (what it was drawn from) goes into its metadata, for `already_drawn`."""
    fig.savefig(path, dpi=dpi, metadata={FIGURE_KEY: key} if key else None)
    plt.close(fig)
    return path


def already_drawn(path: Path, key: str) -> bool:
    """True when the PNG at `path` was drawn from `key` (a site built again skips the keyed figures whose
    inputs and drawing code did not change)."""
    if not path.is_file():
        return False
    try:
        with Image.open(path) as im:  # the key's chunk precedes the pixels: `info` has it without decoding them
            return (im.info.get(FIGURE_KEY) or im.text.get(FIGURE_KEY)) == key
    except Exception:  # a damaged or foreign file: draw it again
        return False


def position_figure(run: Run, group: Group, out: Path) -> Path | None:
    W = _weight(run, POSITIONS)
    if W is None:
        return None
    unit = W / np.maximum(np.linalg.norm(W, axis=1, keepdims=True), 1e-12)
    sim = unit @ unit.T
    per_lang = int(run.config.get("data", {}).get("max_len", W.shape[0]))
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 5.6))
    im = ax.imshow(sim, cmap="viridis", vmin=-1, vmax=1, interpolation="nearest")
    if W.shape[0] > per_lang:  # lang-pos: one block of positions per language
        for b in range(per_lang, W.shape[0], per_lang):
            ax.axhline(b - 0.5, color="white", lw=0.8)
            ax.axvline(b - 0.5, color="white", lw=0.8)
        ax.set_xlabel(f"position id (0–{per_lang - 1} English, {per_lang}–{W.shape[0] - 1} second language)")
    else:
        ax.set_xlabel("position id (shared by both languages)")
    ax.set_ylabel("position id")
    ax.set_title(f"Cosine similarity of position embeddings\n{group.label} (seed {run.seed})")
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="cosine similarity")
    fig.tight_layout()
    return save_figure(fig, plt, out / f"positions_{file_slug(run.path.name)}.png", 120)


# ---------------------------------------------------------------------------------------------
# PCA of the token embeddings.


def shares_vocabulary(data_cfg: dict) -> bool:
    """Whether the run's language source (`data.source`) puts every language in one id block, so the token
    table has no English and second-language blocks to compare. An unknown source counts as shared:
    no figure rather than a wrong one."""
    name = data_cfg.get("source", data_cfg.get("fake"))  # runs made before the rename say `fake`
    if name is None:
        return False
    try:
        return bool(sources.get(name).shared_vocabulary or data_cfg.get("shared_vocab"))
    except MinimultError:
        return True


def _language_blocks(run: Run) -> tuple[np.ndarray, int] | None:
    """(the token table, V) when the table holds one block of V = `vocab_size` ids per language;
    None otherwise (no checkpoint, one shared vocabulary, too few rows)."""
    data = run.config.get("data", {})
    if shares_vocabulary(data):
        return None
    W = _weight(run, TOKENS)
    if W is None:
        return None
    V = int(data.get("vocab_size", W.shape[0] // 2))
    if W.shape[0] < 2 * V:
        return None
    return W, V


def _project(W: np.ndarray, ids: np.ndarray, V: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """English rows and their second-language copies (id + V) on the first two principal components:
    (English points, second-language points, share of variance of PC 1 and 2)."""
    X = np.concatenate([W[ids], W[ids + V]])
    X = X - X.mean(0)
    _, S, Vt = np.linalg.svd(X, full_matrices=False)
    P = X @ Vt[:2].T
    share = S[:2] ** 2 / max(float((S ** 2).sum()), 1e-12)
    return P[: len(ids)], P[len(ids):], share


def _word_pairs(ax, en, l1, ids, words) -> None:
    """A sample of whole words, each joined to its Fake-English copy (paper Fig. 4, bottom)."""
    candidates = [i for i, idx in enumerate(ids) if idx < len(words) and words[idx].isalpha() and len(words[idx]) > 2]
    rng = np.random.default_rng(0)
    sample = rng.choice(candidates, size=min(20, len(candidates)), replace=False) if candidates else []
    for i in sample:
        ax.plot([en[i, 0], l1[i, 0]], [en[i, 1], l1[i, 1]], color="0.75", lw=0.8, zorder=1)
        ax.scatter(*en[i], s=18, color="tab:blue", zorder=2)
        ax.scatter(*l1[i], s=18, color="tab:orange", zorder=2)
        ax.annotate(words[ids[i]], en[i], fontsize=8, color="tab:blue", xytext=(3, 3), textcoords="offset points")
        ax.annotate("::" + words[ids[i]], l1[i], fontsize=8, color="tab:orange", xytext=(3, -9),
                    textcoords="offset points")
    ax.set_title("a sample of words and their Fake-English copies")


def pca_figure(run: Run, group: Group, out: Path) -> Path | None:
    blocks = _language_blocks(run)
    if blocks is None:
        return None
    W, V = blocks
    ids = np.arange(N_SPECIAL, V)
    en, l1, share = _project(W, ids, V)
    vocab_file = run.path / "vocab.txt"
    words = vocab_file.read_text(encoding="utf-8").splitlines() if vocab_file.is_file() else []
    plt = pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 5.4))
    a.scatter(en[:, 0], en[:, 1], s=4, alpha=0.5, color="tab:blue", label="English")
    a.scatter(l1[:, 0], l1[:, 1], s=4, alpha=0.5, color="tab:orange", label="Fake-English")
    a.set_title("all vocabulary entries")
    a.legend(markerscale=4, loc="best")
    _word_pairs(b, en, l1, ids, words)
    for ax in (a, b):
        ax.set_xlabel(f"PC 1 ({share[0]:.0%} of variance)")
        ax.set_ylabel(f"PC 2 ({share[1]:.0%} of variance)")
    fig.suptitle(f"PCA of layer-0 token embeddings — {group.label} (seed {run.seed})")
    fig.tight_layout()
    return save_figure(fig, plt, out / f"pca_{file_slug(run.path.name)}.png", 120)


# ---------------------------------------------------------------------------------------------
# Training curves.


def panel_title(column, layer: str | None, evaluator: str) -> str:
    """'multilinguality µ', 'retrieval ρ, layer 0', 'dev perplexity': from the evaluator's name and the
    column's label (a grouped column: its name and group)."""
    title = f"{column.name} {column.group}" if column.group else f"{evaluator} {column.label}"
    return f"{title}, layer {layer}" if column.per_layer else title


def curve_panels(top: str, rows: list[dict] | None = None) -> list[tuple[str, object, str | None]]:
    """(title, Column, layer) for every Table 1 column marked `curve`, in Table 1 order; with `rows` (logged
    evaluations), only the columns some row has (a column nobody logged gets no panel)."""
    owner = {c: e.name for e in evaluators() for c in e.columns}
    return [(panel_title(c, l, owner[c]), c, l) for c, l in table_columns(top)
            if c.curve and (rows is None or any(c.value(e, l) is not None for e in rows))]


def _curve(group: Group, extract) -> tuple[np.ndarray, np.ndarray] | None:
    """(steps, values: a row per seed) at the steps every seed logged."""
    per_run = []
    for r in group.runs:
        pts = {row["step"]: extract(row["eval"]) for row in r.metrics_rows}
        pts = {s: v for s, v in pts.items() if v is not None}
        if pts:
            per_run.append(pts)
    if not per_run:
        return None
    steps = sorted(set.intersection(*(set(p) for p in per_run)))
    if not steps:
        return None
    return np.array(steps), np.array([[p[s] for s in steps] for p in per_run], dtype=float)


def _draw_setting(ax, group: Group, column, layer, color, marker: str = "o", label: str | None = None) -> None:
    """A setting's mean over seeds, marked, and (with two seeds or more) each seed's own curve dashed beside it."""
    c = _curve(group, lambda e: column.value(e, layer))
    if c is None:
        return
    steps, per_seed = c
    ax.plot(steps, per_seed.mean(0), marker=marker, ms=3, color=color, label=label)
    if len(per_seed) > 1:
        for y in per_seed:
            ax.plot(steps, y, color=color, lw=0.9, alpha=0.7, ls="--", label="_seed")


def _perplexity_scale(ax, column, axes) -> None:
    """A log y axis for a perplexity whose curves on `axes` span more than a factor of 20 (early-training
    perplexities dwarf the later ones)."""
    lines = [ln for a in axes for ln in a.get_lines()]
    low, high = (min((ln.get_ydata().min() for ln in lines), default=0),
                 max((ln.get_ydata().max() for ln in lines), default=0))
    if column.kind == "perplexity" and low > 0 and high / low > 20:
        ax.set_yscale("log")


def _draw_panel(ax, title: str, column, layer, groups: list[Group], colors) -> None:
    for j, g in enumerate(groups):
        marker = "o^sDv"[j // colors.N % 5]  # past ten settings, a colour comes again with another mark
        _draw_setting(ax, g, column, layer, colors(j % colors.N), marker, f"{g.label} (n={len(g.runs)})")
    ax.set_title(title)
    ax.set_xlabel("training step")
    ax.set_ylabel("perplexity" if column.kind == "perplexity" else "score")
    _perplexity_scale(ax, column, [ax])
    ax.grid(alpha=0.3)


TRAINING_DPI = 110
SMALL_MULTIPLES = 8  # past this many settings, a panel per setting: overlaid, their curves cannot be told apart
HEADLINE = ("mu", "ppl_dev")  # the columns the small multiples show, a block of panels each (six would be too tall)
SMALL = 8  # points: a small multiple's title and axis label
LINE = 1.2 * SMALL / 72  # inches, a line of SMALL text


def wrap(text: str, size: float, dpi: float, width: float) -> str:
    """`text` broken at its spaces into lines at most `width` inches wide at `size` points (a longer word alone)."""
    lines: list[str] = []
    for word in text.split():
        if lines and text_inches([f"{lines[-1]} {word}"], size, dpi) <= width:
            lines[-1] += f" {word}"
        else:
            lines.append(word)
    return "\n".join(lines)


def legend_columns(labels: list[str], width: float, most: int = 4) -> int:
    """The most columns, up to `most`, in which a legend of `labels` at 8 points fits `width` inches: matplotlib fills
    it column by column, each column as wide as its widest label and ~0.6 inches of mark and spacing."""
    for ncol in range(min(most, len(labels)), 1, -1):
        rows = -(-len(labels) // ncol)
        if sum(text_inches(labels[i:i + rows], 8, TRAINING_DPI) + 0.6 for i in range(0, len(labels), rows)) <= width:
            return ncol
    return 1


def _overlaid(fig, axes, panels, groups: list[Group], colors, title: str) -> None:
    """Every setting in each panel of `panels` (a colour and mark each), their legend below."""
    for ax, (name, column, layer) in zip(axes, panels):
        _draw_panel(ax, name, column, layer, groups, colors)
    handles, labels = next(((h, lab) for h, lab in (ax.get_legend_handles_labels() for ax in axes) if h),
                           axes[0].get_legend_handles_labels())
    ncols = min(3, len(panels))  # each panel's y tick labels and axis label in the 0.85 inches before it
    gaps = [1.1] * (ncols - 1) + [0.25]
    legend_cols = legend_columns(labels, 0.85 + 4 * ncols + sum(gaps))
    fig.legend(handles, labels, loc="lower center", ncol=legend_cols, fontsize=8, frameon=False)
    place(fig, axes, ncols, 4, 2.8, TRAINING_DPI, title, left=0.85, gaps=gaps,
          bottom=0.75 + 0.17 * math.ceil(len(labels) / legend_cols), row_gap=0.95)


def _small_multiples(fig, axes, ncols: int, metrics, groups: list[Group], base: Group | None, title: str) -> None:
    """A block of panels per metric of `metrics`, a panel per setting in rows of `ncols` (each block begins a row;
    `axes` has a slot for every place of every block): the setting's mean and seeds in colour, the baseline's
    mean in light grey behind them; the axes shared within a block, tick labels at its left and bottom edges only."""
    width, n = 2.6, len(groups)
    per = len(axes) // len(metrics)
    titles = [wrap(f"{g.label} (n={len(g.runs)})", SMALL, TRAINING_DPI, width) for g in groups]
    lines = max(t.count("\n") + 1 for t in titles)
    for b, (name, column, layer) in enumerate(metrics):
        block = axes[b * per: b * per + n]
        reference = _curve(base, lambda e: column.value(e, layer)) if base is not None else None
        for i, (ax, g) in enumerate(zip(block, groups)):
            if ax is not axes[0]:
                ax.sharex(axes[0])
            if i:
                ax.sharey(block[0])
            if reference is not None and g is not base:
                ax.plot(reference[0], reference[1].mean(0), color="0.78", lw=1.4, zorder=1)
            _draw_setting(ax, g, column, layer, "tab:blue")
            ax.set_title(titles[i], fontsize=SMALL)
            ax.tick_params(labelsize=7, labelleft=i % ncols == 0, labelbottom=i + ncols >= n)
            ax.grid(alpha=0.3)
            if i % ncols == 0:
                ax.set_ylabel(name, fontsize=SMALL)
        _perplexity_scale(block[0], column, block)
    block[(n - 1) // ncols * ncols].set_xlabel("training step", fontsize=SMALL)  # the last block's: no room between
    axes[0].xaxis.set_major_locator(MaxNLocator(4))  # one locator for the shared x axes: 9 steps crowd 2.6 inches
    keys = [Line2D([], [], color="tab:blue", marker="o", ms=3), Line2D([], [], color="tab:blue", lw=0.9, alpha=0.7,
                                                                        ls="--")]
    labels = ["the setting (mean over seeds)", "each seed"]
    if base is not None:
        keys.append(Line2D([], [], color="0.78", lw=1.4))
        labels.append(f"in every panel: {base.label} (mean over seeds)")
    fig.legend(keys, labels, loc="lower center", ncol=len(keys), fontsize=SMALL, frameon=False)
    place(fig, axes, ncols, width, 1.35, TRAINING_DPI, title, left=0.85, gaps=[0.3] * (ncols - 1) + [0.25],
          bottom=0.8, row_gap=0.4 + LINE * lines, top=0.3 + TITLE / 72 + LINE * lines)
    for b in range(len(metrics)):
        for ax in axes[b * per + n: (b + 1) * per]:  # a block's places after its last setting
            fig.delaxes(ax)


def training_figure(section: Section, out: Path) -> Path | None:
    """`training_<section>.png`: each curve panel with every setting overlaid; past SMALL_MULTIPLES settings, the
    HEADLINE columns only, a small panel per setting beside the section's baseline (`tables.baseline_for`)."""
    groups = [g for g in section.groups if any(r.metrics_rows for r in g.runs)]
    if not groups:
        return None
    rows = [row["eval"] for g in groups for r in g.runs for row in r.metrics_rows]
    layers = sorted({l for e in rows for l in e.get("layers", {})}, key=int)
    tops = {mu_top(e) for e in rows if "mu_layers" in e}  # µ's upper layer, when every row logged one and the same
    top = next(iter(tops)) if len(tops) == 1 and tops <= set(layers) else (
        "8" if "8" in layers else (layers[-1] if layers else "0"))
    panels = curve_panels(top, rows)
    title = f"Multilinguality during training (mean over seeds; dashed: each seed) — {section.title}"
    if len(groups) <= SMALL_MULTIPLES:
        plt, fig, axes = panel_grid(len(panels))
        _overlaid(fig, axes, panels, groups, plt.get_cmap("tab10"), title)
    else:
        metrics = [p for p in panels if p[1].key(p[2]) in HEADLINE] or panels[:1]
        ncols = min(6, math.ceil(math.sqrt(len(groups))))
        plt, fig, axes = panel_grid(len(metrics) * ncols * math.ceil(len(groups) / ncols))
        base = baseline_for(section, [section])
        _small_multiples(fig, axes, ncols, metrics, groups, base if any(g is base for g in groups) else None, title)
    return save_figure(fig, plt, out / section_figure("training", section.title), TRAINING_DPI)


# Each seed's final numbers, row by row.


SEEDS_DPI = 110
SEED_MARKS = {"cpu": ("o", "tab:blue"), "cuda": ("^", "tab:orange")}  # another device or a mix: a square


def _devices(row: dict) -> list[str | None]:
    """The device each of a row's seeds trained on ("cuda+cpu" for a run begun on one, ended on the other),
    in the order of its metrics' values; None where the row does not say."""
    trained = row.get("trained") or []
    return [t.get("device") for t in trained] if len(trained) == len(row.get("seeds", [])) else \
        [None] * len(row.get("seeds", []))


def seeds_panel(ax, column, layer, rows: list[dict]) -> None:
    """One column of a table: each row's seeds as dots on its line, their mean as a bar, the paper's
    number as a hollow diamond with its standard deviation as a line; in the µ panel each lang-pos row says how
    many of its seeds stay on the floor (tables.FLOOR) with the share's Wilson 95% interval. The first row at
    the top, as in the table. Where the table's runs trained on more than one device, each dot's shape and
    colour say which (a circle on a CPU, a triangle on a GPU)."""
    key = column.key(layer)
    ys = np.arange(len(rows))[::-1]
    labelled, xs = set(), []
    several = len({d for r in rows for d in _devices(r) if d}) > 1

    def label(text: str) -> str:  # each kind of mark once in the legend, wherever it first appears
        first = text not in labelled
        labelled.add(text)
        return text if first else "_" + text

    for y, row in zip(ys, rows):
        m = row["metrics"].get(key) or {}
        pairs = [(v, d if several else None) for v, d in zip(m.get("values", []), _devices(row)) if v is not None]
        values = [v for v, _ in pairs]
        xs += values
        for device in dict.fromkeys(d for _, d in pairs):
            mine = [v for v, d in pairs if d == device]
            marker, colour = SEED_MARKS.get(device or "cpu", ("s", "tab:purple"))
            ax.scatter(mine, [y] * len(mine), s=22, marker=marker, color=colour, alpha=0.75, zorder=3,
                       label=label(f"a seed on {device}" if several else "each seed"))
        if values:
            ax.plot([m["mean"]] * 2, [y - 0.3, y + 0.3], color="black", lw=1.4, zorder=2, label=label("mean"))
        paper, spread = row.get("paper", {}).get(key), row.get("paper", {}).get(key + STD)
        if paper is not None:
            xs.append(paper)
            ax.scatter([paper], [y], s=40, marker="D", facecolors="none", edgecolors="tab:red", zorder=4,
                       label=label("paper"))
            if spread:  # the paper's standard deviation over its seeds
                ax.plot([paper - spread, paper + spread], [y, y], color="tab:red", lw=1, alpha=0.6, zorder=4)
        if key == "mu" and values and "lang-pos" in row.get("mods", "").split(","):
            k = sum(v < FLOOR for v in values)  # seeds on the floor, with the share's Wilson 95% interval
            low, high = wilson(k, len(values))
            ax.annotate(f"floor {k}/{len(values)} ({low:.0%}–{high:.0%})", xy=(1.01, y),
                        xycoords=("axes fraction", "data"), fontsize=7, va="center", color="tab:gray",
                        annotation_clip=False)
    ax.set_yticks(ys, [f"{r['id']} {r['setting']}" for r in rows], fontsize=7)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_title(column.heading(layer), fontsize=10)
    if column.kind == "perplexity" and xs and min(xs) > 0 and max(xs) / min(xs) > 20:
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())  # labelled minor ticks overlap on a short axis
    ax.grid(alpha=0.3, axis="x")


def seeds_figure(agg: dict, top: str, out: Path) -> Path | None:
    """`seeds_<section>.png`: every column of an aggregated section (`tables.aggregate`), one dot per seed
    and row beside the mean and the paper's number, so that a row whose seeds split (one collapses, one
    trains) shows as two clusters rather than as a wide std. None when no row has two seeds."""
    rows = agg["rows"]
    if not any(len(r["seeds"]) > 1 for r in rows):
        return None
    panels = [(c, l) for c, l in table_columns(top) if any((r["metrics"].get(c.key(l)) or {}).get("values")
                                                          for r in rows)]
    ncols = min(3, len(panels))
    plt, fig, axes = panel_grid(len(panels), share_y=True)
    for ax, (column, layer) in zip(axes, panels):
        seeds_panel(ax, column, layer, rows)
    handles, labels = axes[0].get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda i: (labels[i] in ("mean", "paper"), labels[i] == "paper"))
    fig.legend([handles[i] for i in order], [labels[i] for i in order], loc="lower center", ncol=len(labels),
               fontsize=8, frameon=False)
    arrange(fig, axes, ncols, 3.2, 0.26 * len(rows) + 0.2, SEEDS_DPI, f"Each seed's final numbers — {agg['title']}",
            bottom=0.8)
    return save_figure(fig, plt, out / section_figure("seeds", agg["title"]), SEEDS_DPI)
