"""Every figure the report draws keeps all its text on the canvas: no label, title, legend or note is cut at an
edge of the PNG. Each figure kind is drawn from the committed run folders (seeds, training: overlaid in a folder of
at most eight settings and as small multiples in K et al.'s 20, language ID, transfer word order, segment
alternations, the K et al. series) or from synthetic weights (positions, PCA)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT
from minimult.report import figures
from minimult.report.build import build_report
from minimult.report.collect import Group, Run, Section

TOLERANCE = 1.0  # pixels


def texts_drawn(fig) -> list:
    """(text, window extent) of every Text artist that a draw of `fig` puts on the canvas (tick labels outside the
    view and hidden artists are not drawn, so they are not counted)."""
    from matplotlib.text import Text

    drawn, draw = [], Text.draw

    def recording(self, renderer):
        draw(self, renderer)
        if self.get_visible() and self.get_text().strip():
            drawn.append((self.get_text(), self.get_window_extent(renderer)))

    Text.draw = recording
    try:
        fig.canvas.draw()
    finally:
        Text.draw = draw
    return drawn


def cut_texts(fig, dpi: float) -> list[str]:
    """The texts of `fig`, drawn at `dpi` (the PNG's: glyphs are hinted to whole pixels, so text does not scale
    with the dpi as the canvas does), that reach past an edge of its canvas, each with where it lies."""
    kept = fig.dpi
    fig.set_dpi(dpi)
    try:
        box, drawn = fig.bbox.frozen(), texts_drawn(fig)
    finally:
        fig.set_dpi(kept)
    return [f"{text!r} at x {ext.x0:.0f}..{ext.x1:.0f}, y {ext.y0:.0f}..{ext.y1:.0f} (canvas {box.width:.0f} x "
            f"{box.height:.0f})" for text, ext in drawn
            if ext.x0 < box.x0 - TOLERANCE or ext.y0 < box.y0 - TOLERANCE or ext.x1 > box.x1 + TOLERANCE
            or ext.y1 > box.y1 + TOLERANCE]


@pytest.fixture
def checked(monkeypatch):
    """{file name: [texts cut]} of every figure saved while the test runs."""
    from matplotlib.figure import Figure

    found, save = {}, Figure.savefig

    def checking(fig, path, *args, **kwargs):
        found[Path(path).name] = cut_texts(fig, kwargs.get("dpi") or fig.dpi)
        return save(fig, path, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", checking)
    return found


@pytest.mark.parametrize("folder, expect", [
    ("k-et-al-quick", {"seeds_K_et_al._2020.png", "training_K_et_al._2020.png", "language_id.png", "k_et_al.png",
                       "transfer_word_order.png", "segment_alternations.png"}),
    ("table1-paper", {"seeds_Table_1.png", "training_Table_1.png", "language_id.png"})])
def test_no_text_of_a_report_figure_is_cut_at_the_canvas_edge(checked, tmp_path, folder, expect):
    build_report([ROOT / "experiments/results" / folder], tmp_path, log=lambda s: None)
    assert set(checked) == expect
    assert {name: cut for name, cut in checked.items() if cut} == {}


def test_no_text_of_a_run_figure_is_cut_at_the_canvas_edge(checked, tmp_path, monkeypatch):
    """The position and PCA figures of a run with two languages of 40 ids and 16 positions each."""
    rng = np.random.default_rng(0)
    weights = {figures.POSITIONS: rng.normal(size=(32, 8)), figures.TOKENS: rng.normal(size=(80, 8))}
    monkeypatch.setattr(figures, "_weight", lambda run, name: weights[name])
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "vocab.txt").write_text("\n".join(f"word{i}" for i in range(40)), encoding="utf-8")
    run = Run(tmp_path / "run", {}, {"data": {"source": "shift", "max_len": 16, "vocab_size": 40}})
    group = Group("1", "lang-pos;shift-special", "lang-pos;shift-special", [run])
    assert figures.position_figure(run, group, tmp_path) and figures.pca_figure(run, group, tmp_path)
    assert set(checked) == {"positions_run.png", "pca_run.png"}
    assert {name: cut for name, cut in checked.items() if cut} == {}


def curves_section(tmp_path, n: int) -> Section:
    """`n` settings of two seeds each, `0 original` first, logging µ and dev perplexity at three steps."""
    def run(name, k):
        rows = [{"step": s, "eval": {"mu": 0.1 * k * s / 300, "perplexity": {"dev": 900 / s}}} for s in (100, 200, 300)]
        return Run(tmp_path / name, {}, {}, metrics_rows=rows)

    names = ["original"] + [f"setting {k} with a rather long name that must wrap" for k in range(1, n)]
    return Section("Table 9: a test", [Group(str(k), name, name.split()[0], [run(f"{k}-s0", k), run(f"{k}-s1", k + 1)])
                                       for k, name in enumerate(names)])


@pytest.mark.parametrize("n", [8, 9, 20])
def test_past_eight_settings_the_training_figure_draws_a_small_panel_per_setting(checked, tmp_path, monkeypatch, n):
    """At most eight settings share each metric's panel; past eight, µ and dev perplexity get a panel per setting,
    titled with its label, the baseline (`0 original`) in grey in every other panel, the axes shared per metric."""
    drawn, save = [], figures.save_figure
    monkeypatch.setattr(figures, "save_figure", lambda fig, *args, **kw: drawn.append(fig) or save(fig, *args, **kw))
    assert figures.training_figure(curves_section(tmp_path, n), tmp_path)
    axes = drawn[0].axes
    assert {name: cut for name, cut in checked.items() if cut} == {}
    if n <= figures.SMALL_MULTIPLES:
        assert [ax.get_title() for ax in axes] == ["multilinguality µ", "dev perplexity"]
        assert len(axes[0].get_lines()) == 3 * n  # each setting's mean and its two seeds
        return
    assert len(axes) == 2 * n
    assert [ax.get_title().replace("\n", " ") for ax in axes[:n]] == [
        f"{k} original (n=2)" if k == 0 else f"{k} setting {k} with a rather long name that must wrap (n=2)"
        for k in range(n)]
    assert all("\n" in ax.get_title() for ax in axes[1:n])  # wrapped to the panel's width
    ncols = min(6, math.ceil(math.sqrt(n)))  # each metric's block begins a row, labelled at its left edge
    assert [ax.get_ylabel() for ax in axes[:n:ncols] + axes[n::ncols]] == (
        ["multilinguality µ"] * len(axes[:n:ncols]) + ["dev perplexity"] * len(axes[n::ncols]))
    grey = [[ln for ln in ax.get_lines() if ln.get_color() == "0.78"] for ax in axes]
    assert [len(g) for g in grey] == ([0] + [1] * (n - 1)) * 2
    assert list(grey[1][0].get_ydata()) == pytest.approx([0.05 / 3, 0.1 / 3, 0.05])  # the baseline's mean over seeds
    assert all(ax.get_shared_y_axes().joined(axes[0], ax) for ax in axes[:n])
    assert not axes[0].get_shared_y_axes().joined(axes[0], axes[n])
    assert drawn[0].get_size_inches()[0] * figures.TRAINING_DPI <= 2200
