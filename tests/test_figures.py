"""Every figure the report draws keeps all its text on the canvas: no label, title, legend or note is cut at an
edge of the PNG. Each figure kind is drawn from the committed run folders (seeds, training, language ID,
transfer word order, segment alternations, the K et al. series) or from synthetic weights (positions, PCA)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT
from minimult.report import figures
from minimult.report.build import build_report
from minimult.report.collect import Group, Run

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
