"""Report: the paper's Table 1 (mean ± std over seeds, Welch's t-test against `original`) and figures.

Public entry: `build_report(paths, out_dir, log, readme=None) -> dict`. `paths` are run folders or
folders holding runs (searched recursively). Everything comes from files in the run folders
(`results.json`, `config.json`, `metrics.jsonl`, `checkpoint.pt`); a sweep's `<grid>.sweep.json` next
to its runs only says which runs form which setting (paper ID and name) of which table. Runs no
sweep claims are grouped by mods and configuration in a section of their own. A setting whose grid
gives the paper's numbers (`paper`, recorded in the manifest) shows them in parentheses beside its own.

Writes to `out_dir`: `table1.md` (every section, the first being Table 1), `table1.csv` (one row per
setting, full precision, a `section` column), `runs.csv` (one row per run behind those rows: seed, run
folder, device, precision, training seconds and every column), `report.json` (every aggregated number,
the values per seed and the p-values of every metric) and PNG figures (see `figures.py`); with `readme`,
the first table also goes between that file's `<preset>-<grid>` markers (see `readme.py`), and its
orderings between `<preset>-<grid>-orderings` markers where the file has them.

The modules, by job: `collect` (run folders, sweep manifests, sections of settings), `tables` (aggregates,
p-values, markdown and CSV; the columns come from the evaluator registry), `figures` (position similarity,
PCA, training curves, each seed's final numbers), `segments` (the segment-alternation table and figure of
runs evaluated with `eval --segment`), `links` (word alignment against link files and retrieval both ways,
for real languages), `probe` (language-ID accuracy per layer, overlaying settings), `transfer` (zero-shot
transfer per mode and its scatter against word-order distance), `series` (µ and ∆ along K et al.'s depth,
heads, parameter, permutation and tokenization series), `readme` (generated tables inside README.md),
`claims` (the papers' claims of `claims.toml`, judged from the sections: docs/claims.md; each table also
gets its own orderings, the claims between two of its rows judged from its runs alone) and `site` (the
static HTML site over results folders: `minimult report --html DIR` / `--site DIR`; Jinja2 templates in
`templates/`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from minimult.data.cache import atomic_write_text
from minimult.errors import MinimultError
from minimult.report.collect import (OTHER_SECTION, Group, Run, Section, build_sections, find_run_dirs,  # noqa: F401
                                     load_runs)
from minimult.report.figures import pca_figure, position_figure, seeds_figure, training_figure
from minimult.report import claims, links, probe, segments, series, transfer
from minimult.report.readme import table_marker, update_readme
from minimult.runs import write_json
from minimult.report.tables import (aggregate, aggregate_sections, column_keys, csv_text, layers_note,  # noqa: F401
                                    markdown, run_values, runs_csv_text, section_table, top_layer, welch_p)


def draw_figures(sections: list[Section], out: Path) -> list[str]:
    """Position and PCA figures of each setting's lowest seed (once per run), one training figure
    per section; the paths written."""
    figures, drawn = [], set()
    for section in sections:
        for g in section.groups:
            run = g.runs[0]
            if run.path in drawn:
                continue
            drawn.add(run.path)
            figures += [str(p) for p in (position_figure(run, g, out), pca_figure(run, g, out)) if p is not None]
        p = training_figure(section, out)
        if p is not None:
            figures.append(str(p))
    return figures


def readme_table(report: dict) -> str:
    """The report's first table as it goes into a README: the table lines and the "No row" lines."""
    return "\n".join(section_table(report["sections"][0], report["top_layer"])).strip("\n") + "\n"


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
    md = markdown(aggregated, top, len(runs), unevaluated, layers_note(runs, top))
    all_claims = claims.load_claims()
    ordered = [claims.orderings(s, all_claims) for s in sections]
    for section, rows in zip(sections, ordered):
        if rows:
            md = md.rstrip("\n") + "\n\n" + claims.orderings_section(section.title, rows)
    alternations = segments.rows(sections, top)
    if alternations:
        md = md.rstrip("\n") + "\n\n" + segments.markdown(alternations, top)
    transfers, points = transfer.rows(sections), transfer.order_points(sections, top)
    if transfers:
        md = md.rstrip("\n") + "\n\n" + transfer.markdown(transfers) + "\n" + transfer.order_markdown(points, top)
    link_rows = links.rows(sections, top)
    if link_rows:
        md = md.rstrip("\n") + "\n\n" + links.markdown(link_rows, top)
    axes = series.series(sections)
    if axes:
        md = md.rstrip("\n") + "\n\n" + series.markdown(axes)
    printed = md  # what `minimult report` prints: the probe's layer-by-layer table stays in the file
    probes = probe.curves(sections)
    if probes:
        md = md.rstrip("\n") + "\n\n" + probe.markdown(probes)
        printed = printed.rstrip("\n") + (f"\n\nLanguage identification per layer ({len(probes)} settings): "
                                          f"{out}/table1.md and {out}/language_id.png\n")
    atomic_write_text(out / "table1.md", md)
    atomic_write_text(out / "table1.csv", csv_text(aggregated, top))
    atomic_write_text(out / "runs.csv", runs_csv_text(aggregated, top))
    figures = draw_figures(sections, out)
    figures += [str(p) for p in (seeds_figure(a, top, out) for a in aggregated) if p is not None]
    if (p := segments.figure(alternations, top, out)) is not None:
        figures.append(str(p))
    if (p := probe.probe_figure(probes, out / "language_id.png")) is not None:
        figures.append(str(p))
    if (p := transfer.order_figure(points, top, out)) is not None:
        figures.append(str(p))
    if (p := series.figure(axes, out)) is not None:
        figures.append(str(p))
    log(f"report: {len(runs)} runs in {sum(len(s.groups) for s in sections)} settings; "
        f"{len(figures)} figures; tables in {out}/table1.md, {out}/table1.csv (per run: {out}/runs.csv)")
    report = {"top_layer": top, "columns": column_keys(top), "sections": aggregated,
              "figures": figures, "unevaluated": [str(p) for p in unevaluated], "markdown": md, "printed": printed,
              "segment_alternations": alternations, "probe": probes,
              "transfer": transfers, "links": link_rows, "transfer_word_order": {"points": points,
                                                         **dict(zip(("pearson", "p"), transfer.pearson_test(points)
                                                                    or (None, None)))},
              "k_et_al": axes, "orderings": [{"section": s.title, "rows": rows} for s, rows in zip(sections, ordered)]}
    write_json(out / "report.json", report)
    if readme is not None:
        marker = table_marker(aggregated[0])
        changed = update_readme(readme, readme_table(report), marker)
        log(f"report: {readme} {'updated' if changed else 'unchanged'} between its {marker} markers")
        # the first table's orderings, where the README has markers for them
        changed = update_readme(readme, claims.orderings_markdown(ordered[0]), f"{marker}-orderings", optional=True)
        if changed is not None:
            log(f"report: {readme} {'updated' if changed else 'unchanged'} between its {marker}-orderings markers")
    return report
