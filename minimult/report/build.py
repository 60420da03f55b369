"""Building the report (see the package's doc): `load` finds, reads and groups the runs, `build_report` writes
the tables, figures and report.json, with every registered section beyond Table 1 (`parts`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from minimult.data.cache import atomic_write_text
from minimult.errors import MinimultError
from minimult.report.claims import orderings_markdown
from minimult.report.collect import REPOSITORY, Run, Section, build_sections, find_run_dirs, load_runs
from minimult.report.figures import pca_figure, position_figure, seeds_figure, training_figure
from minimult.report.parts import figure_order, ordered_report, report_parts
from minimult.report.readme import table_marker, update_readme
from minimult.report.tables import (aggregate_sections, column_keys, csv_text, layers_note, markdown, runs_csv_text,
                                    section_table, top_layer)
from minimult.runs import write_json


def draw_figures(sections: list[Section], out: Path) -> list[str]:
    """Position and PCA figures of each setting's lowest seed (once per run), one training figure
    per section; the paths written."""
    figures, drawn = [], set()
    for section in sections:
        for g in section.groups:
            if g.runs[0].path not in drawn:
                drawn.add(g.runs[0].path)
                figures += [position_figure(g.runs[0], g, out), pca_figure(g.runs[0], g, out)]
        figures.append(training_figure(section, out))
    return [str(p) for p in figures if p is not None]


def readme_table(report: dict) -> str:
    """The report's first table as it goes into a README: the table lines and the "No row" lines."""
    return "\n".join(section_table(report["sections"][0], report["top_layer"])).strip("\n") + "\n"


def portable(paths, out=None) -> Callable[[object], object]:
    """What the report's files say in place of this machine's paths: a run folder relative to the folder above its
    results folder (`table1-paper/0-original-s0`), anything else in the repository relative to it and, with `out`,
    a file of the report by its name (the site; `minimult report --out` names its figures as --out was given).
    Applied to every string of a JSON-like value (the notes name run folders too)."""
    bases = [*((Path(out).absolute(), Path(out).resolve()) if out is not None else ()),
             *(r.parent for root in map(Path, paths) for r in (root.absolute(), root.resolve())),
             REPOSITORY.absolute(), REPOSITORY.resolve()]
    prefixes = sorted(dict.fromkeys(str(b) for b in bases if str(b) != "/"), key=len, reverse=True)

    def text(s: str) -> str:
        if "/" not in s:
            return s
        for p in prefixes:
            s = s.replace(p + "/", "")
            if s == p:
                s = "."
        return s

    def scrub(value):
        if isinstance(value, str):
            return text(value)
        if isinstance(value, dict):
            return {scrub(k) if isinstance(k, str) else k: scrub(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [scrub(v) for v in value]
        return value

    return scrub


@dataclass
class Loaded:
    """What a report reads from its folders: every run folder found, the evaluated runs, the folders not
    evaluated yet, those left out (folder, why) and the sections of settings."""

    run_dirs: list[Path]
    runs: list[Run]
    unevaluated: list[Path]
    left_out: list[tuple[Path, str]]
    sections: list[Section]


def load(paths, log: Callable[[str], None] = print) -> Loaded:
    """Find, read and group the runs under `paths` (an error when none is evaluated)."""
    run_dirs, homes = find_run_dirs(paths)
    left_out: list[tuple[Path, str]] = []
    runs, unevaluated = load_runs(run_dirs, log, left_out)
    if not runs and left_out:  # each named in a note above, with why
        raise MinimultError(f"none of the {len(run_dirs)} run folder(s) can be a row: {len(left_out)} left out (the "
                            f"notes above say why), {len(unevaluated)} without a results.json")
    if not runs:
        raise MinimultError(f"none of the {len(run_dirs)} run folder(s) has a results.json yet: evaluate them with "
                            f"`minimult eval RUN` or run `minimult sweep`")
    return Loaded(run_dirs, runs, unevaluated, left_out, build_sections(runs, homes, log, dict(left_out)))


def build_report(paths, out_dir, log: Callable[[str], None] = print, readme=None, loaded: Loaded | None = None) -> dict:
    """Tables, figures and report.json into `out_dir` (see the module doc); with `readme` (a path), the
    first table also replaces the one between its markers. Returns report.json's contents. `loaded`:
    what `load(paths)` returned, when the caller has it already."""
    loaded = loaded or load(paths, log)
    runs, unevaluated, sections = loaded.runs, loaded.unevaluated, loaded.sections
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    top = top_layer(runs)
    aggregated = aggregate_sections(sections, top)
    md = markdown(aggregated, top, len(runs), unevaluated, layers_note(runs, top), loaded.left_out)
    printed = md  # what `minimult report` prints: a section may print a line instead of its markdown (the probe)
    computed = {part.name: part.compute(sections, top) for part in report_parts()}
    for part in report_parts():
        pieces = part.pieces(computed[part.name], top)
        for piece in pieces:
            md = md.rstrip("\n") + "\n\n" + piece
        for piece in ([part.printed(computed[part.name], out)] if part.printed and pieces else pieces):
            printed = printed.rstrip("\n") + "\n\n" + piece
    shown = portable(paths)  # no run folder by this machine's path in the files written
    atomic_write_text(out / "table1.md", shown(md))
    atomic_write_text(out / "table1.csv", shown(csv_text(aggregated, top)))
    atomic_write_text(out / "runs.csv", runs_csv_text(aggregated, top, path=shown))
    figures = draw_figures(sections, out)
    drawn = [*(seeds_figure(a, top, out) for a in aggregated),
             *(part.figure(computed[part.name], top, out) for part in figure_order() if part.figure)]
    figures += [str(p) for p in drawn if p is not None]
    log(f"report: {len(runs)} runs in {sum(len(s.groups) for s in sections)} settings; "
        f"{len(figures)} figures; tables in {out}/table1.md, {out}/table1.csv (per run: {out}/runs.csv)")
    report = {"top_layer": top, "columns": column_keys(top), "sections": aggregated,
              "figures": figures, "unevaluated": [str(p) for p in unevaluated], "markdown": md, "printed": printed}
    for part in report_parts():
        report.update(part.report_keys(computed[part.name]))
    report = ordered_report(report)
    write_json(out / "report.json", shown(report))
    if readme is not None:
        marker = table_marker(aggregated[0])
        changed = update_readme(readme, readme_table(report), marker)
        log(f"report: {readme} {'updated' if changed else 'unchanged'} between its {marker} markers")
        # the first table's orderings, where the README has markers for them
        orderings = computed["orderings"][0]["rows"] if computed["orderings"] else []
        changed = update_readme(readme, orderings_markdown(orderings), f"{marker}-orderings", optional=True)
        if changed is not None:
            log(f"report: {readme} {'updated' if changed else 'unchanged'} between its {marker}-orderings markers")
    return report
