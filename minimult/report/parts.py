"""The report's sections beyond Table 1 (orderings, floor, segments, transfer, links, series, probe), one registry that
`build_report` (table1.md, report.json, figures) and the site both read.

A section registers itself in its own module (`register(Part(...))` at its end; the package imports every
module, so there is no list to extend): what it computes from the sections of settings, its markdown, its
keys of report.json and, if it has one, its figure. Copy `report/links.py` (no figure) or `report/series.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from minimult.registry import Registry

PARTS = Registry("report section", unknown="unknown report section {name!r}: valid: {valid}")

# report.json's keys in the order its files have always had them: the report's own, then its sections'
# (a new section's keys follow these, in registry order); a section's figure is drawn in the order of its
# first key here
REPORT_KEYS = ("top_layer", "columns", "sections", "figures", "unevaluated", "markdown", "printed",
               "segment_alternations", "probe", "transfer", "links", "transfer_word_order", "k_et_al", "orderings")


@dataclass(frozen=True)
class Part:
    """One section of the report beyond Table 1.

    `compute(sections, top) -> data`: from the report's sections of settings and its top layer ("8");
    `markdown(data, top) -> text or [text, ...]`: its parts of table1.md (and of the site's page), "" or none when
    it has nothing to show; `keys`: its keys of report.json, by default `{keys[0]: data}` (`stored`) and read back from
    a report.json by `restore` (default: that key, None where an older report.json lacks it);
    `figure(data, top, out) -> path or None`: its PNG, named `figure_file` (which the site shows beside its last
    markdown part); `printed(data, out) -> text`: what `minimult report` prints instead of its markdown."""

    name: str
    order: int  # where it stands in table1.md and on the site, lower first (never renumber: pick between)
    keys: tuple[str, ...]
    compute: Callable[[list, str], Any]
    markdown: Callable[[Any, str], str | list[str]]
    figure: Callable[[Any, str, Path], Path | None] | None = None
    figure_file: str | None = None
    printed: Callable[[Any, Path], str] | None = None
    stored: Callable[[Any], dict] | None = None
    restore: Callable[[dict], Any] | None = None

    def pieces(self, data, top: str) -> list[str]:
        """Its parts of table1.md, each a non-empty text."""
        text = self.markdown(data, top)
        return [piece for piece in ([text] if isinstance(text, str) else text) if piece]

    def report_keys(self, data) -> dict:
        """Its keys of report.json."""
        return self.stored(data) if self.stored else {self.keys[0]: data}

    def from_report(self, report: dict):
        """Its data as a report.json holds it."""
        return self.restore(report) if self.restore else report.get(self.keys[0])


def register(part: Part) -> Part:
    return PARTS.register(part)


def report_parts() -> list[Part]:
    """Every registered section, in the order table1.md and the site show them."""
    return sorted(PARTS.values(), key=lambda p: p.order)


def _key_rank(key: str) -> int:
    return REPORT_KEYS.index(key) if key in REPORT_KEYS else len(REPORT_KEYS)


def figure_order() -> list[Part]:
    """Every registered section, in the order its figure is drawn and listed (`REPORT_KEYS`)."""
    return sorted(PARTS.values(), key=lambda p: _key_rank(p.keys[0]))


def ordered_report(report: dict) -> dict:
    """`report` with its keys in report.json's order (`REPORT_KEYS`, then the others as they came)."""
    return {k: report[k] for k in sorted(report, key=_key_rank)}
