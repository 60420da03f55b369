"""The report as a static HTML site: `build_site(roots, site_dir)`.

One page per results folder (each root: its report's tables with their figures beside them, the
settings and their runs, every run in no table with why), one page per run (configuration, mods, budget, training
curves drawn in the browser from the JSON in the page, every results block, why a run is flagged: never trained,
left out of the tables, not evaluated (its run.json status), and its config.json, results.json and metrics.jsonl
copied beside it), the claims page (`claims.judge` over every folder, filterable by verdict), the every-run page
(one table of every run, filterable by folder, mods, preset and seed; ticked runs' training curves overlaid and their
configurations compared, in the browser from the JSON in the page), the glossary (the measures, every registered mod
and preset; the tables' column headings link to it) and an index whose headline is the Table 1 of a declared folder
(`HEADLINE`, or a manifest's `"headline": true`). Pages are Jinja2 templates (`templates/`), plain HTML and CSS with
two small scripts (sort.js: sort a table by the column clicked; runs.js: the curves of the run pages and the every-run
page, and the claims filter); every link is relative and nothing is fetched, so the folder opens from disk. Each
folder's report (`build_report`: table1.md, table1.csv, runs.csv, report.json, the PNG figures) is written into that
folder's directory of the site, and the pages show those files, so the numbers are the markdown report's. No file
names a path of the building machine (run folders are named relative to the folder above their results folder:
`build.portable`). A folder's report whose inputs and code are unchanged is copied from the cache folder
(`site-reports/`), and the probe's figure is kept there too (`site-figures/`), so a second build only renders pages.

Layout: `index.html`, `claims.html`, `runs.html`, `glossary.html`, `style.css`, `sort.js`, `runs.js`, and per folder
`<name>/index.html`, its report files, `<name>/runs/<run>.html` and `<name>/runs/<run>/` (its config.json,
results.json, metrics.jsonl).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import jinja2
import matplotlib
from markdown_it import MarkdownIt
from markupsafe import Markup

from minimult.config import PRESETS, flat
from minimult.data.cache import cache_root
from minimult.errors import MinimultError
from minimult.evaluate.registry import columns
from minimult.runs import write_json
from minimult.mods import registered
from minimult.report import claims as claims_mod, recipes
from minimult.report.build import build_report, load, portable
from minimult.report.collect import (Group, REPOSITORY, Run, Section, eval_rows, log_rows, never_trained,
                                     read_object, run_status, training_losses, training_seconds)
from minimult.report.figures import curve_panels, file_slug, section_figure
from minimult.report.parts import report_parts
from minimult.report.tables import (mu_top, number_cells, number_headings, plural, run_values, section_footer,
                                    section_table, table_columns)

RESULTS = REPOSITORY / "experiments" / "results"
TEMPLATES = Path(__file__).with_name("templates")
STATIC = ("style.css", "sort.js", "runs.js")
# The front page's headline: the results folder whose Table 1 the index shows, declared here by name (or by a sweep
# manifest of a folder with `"headline": true`), never picked by a table's size or a folder name's order.
HEADLINE = "table1-paper"
RUN_FILES = ("config.json", "results.json", "metrics.jsonl")  # copied beside each run page and linked from it


def site_folders(results: Path = RESULTS) -> list[Path]:
    """Every folder directly under `results` that holds run folders (a config.json somewhere below)."""
    if not results.is_dir():
        raise MinimultError(f"no results folder at {results}")
    found = [p for p in sorted(results.iterdir()) if p.is_dir() and next(p.rglob("config.json"), None)]
    if not found:
        raise MinimultError(f"no folder under {results} holds run folders (with config.json)")
    return found


def _env():
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(num=number, md=markdown_html, p=p_shown, plural=plural, term=term_anchor)
    return env


def p_shown(p) -> str:
    """A p-value as the site's tables show it: 2 significant figures, "< 0.001" below 0.001, "" for none."""
    if p is None or p == "":
        return ""
    p = float(p)
    return "nan" if not math.isfinite(p) else "< 0.001" if p < 0.001 else f"{p:.2g}"


def term_anchor(heading: str) -> str | None:
    """The glossary entry a column heading names ("ρ L8" -> "t-rho"), None when it has none."""
    head = re.sub(r" L\d+$", "", heading.strip())
    head = re.sub(r"^p \((.*)\)$", "p", head)
    return next((anchor for anchor, names in TERM_NAMES.items() if head in names), None)


# Glossary anchors and the column headings that point at them.
TERM_NAMES = {"t-mu": ("µ",), "t-rho": ("ρ",), "t-tau": ("τ",),
              "t-align": ("align F1", "align precision", "align recall"),
              "t-aer": ("AER",), "t-ppl": ("ppl train", "ppl dev", "ppl/word train", "ppl/word dev", "perplexity"),
              "t-p": ("p",), "t-seeds": ("seeds", "n")}


def number(x) -> str:
    """A stored number as the run pages show it: 4 significant figures, integers with thousands commas."""
    if isinstance(x, bool) or x is None:
        return str(x)
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        return "nan" if not math.isfinite(x) else f"{x:,.0f}" if abs(x) >= 10_000 else f"{x:.4g}"
    return str(x)


def markdown_html(text: str):
    """A report section's markdown (headings, tables, lists, code) as HTML; raw HTML in it is escaped."""
    return Markup(MarkdownIt("commonmark", {"html": False}).enable("table").render(text))


# ---------------------------------------------------------------------------------------------
# What one folder's pages show.


@dataclass
class Folder:
    name: str
    root: Path
    loaded: object  # report.Loaded
    report: dict
    out: Path
    shown: Callable = str  # `build.portable`: a value with this machine's paths made relative

    def run_files(self, path: Path) -> str:
        """The folder (relative to the folder's page) holding the run's config.json, results.json, metrics.jsonl."""
        return f"runs/{file_slug(path.name)}"

    def run_page(self, path: Path) -> str:
        return self.run_files(path) + ".html"

    def placed(self) -> dict[Path, tuple[Run, Group, Section]]:
        """Every run in a table: {run folder: (run, its setting, its section)}."""
        return {r.path: (r, g, s) for s in self.loaded.sections for g in s.groups for r in g.runs}

    def lost(self) -> dict[str, str]:
        """Why a run its setting lost is in no row, by the name its section gives it."""
        return {str(x.get("run")): x.get("why") for s in self.loaded.sections for x in s.lost}

    def run_links(self, runs: list[Run]) -> list[dict]:
        return [{"name": r.path.name, "seed": r.seed, "href": self.run_page(r.path), "flag": never_trained(r)}
                for r in runs]


def _figure(out: Path, name: str) -> str | None:
    return name if (out / name).is_file() else None


def _table1(section: Section, agg: dict, top: str, folder: Folder) -> dict:
    """A Table 1 section as the page's table: the markdown table's cells (tables.section_table), each
    setting linking to its runs."""
    head = [(h, term_anchor(h)) for h in number_headings(top)]
    rows = []
    for g, row in zip(section.groups, agg["rows"]):
        cells = number_cells(row, top, paper_std=False)
        cells = [_split(cells[0]), (p_shown(cells[1]), ""), *map(_split, cells[2:])]
        rows.append({"id": row["id"], "setting": row["setting"], "anchor": _anchor(section, g),
                     "runs": folder.run_links(g.runs), "cells": cells})
    notes = [line for line in section_table(agg, top) + section_footer(agg) if line and not line.startswith("|")]
    presets = sorted({r["preset"] for r in agg["rows"] if r["preset"]})
    training, seeds = (_figure(folder.out, section_figure(kind, section.title)) for kind in ("training", "seeds"))
    return {"title": section.title, "presets": presets, "baseline": agg["baseline"], "head": head, "rows": rows,
            "notes": notes, "training": training, "seeds": seeds,
            "anchor": "s-" + file_slug(section.title.split(":")[0])}


def _split(cell: str) -> tuple[str, str]:
    """("0.140 ± 0.003", "(0.70)"): our number and the paper's, which the page sets in small type below."""
    ours, _, paper = cell.partition(" (")
    return ours, f"({paper}" if paper else ""


def _anchor(section: Section, g: Group) -> str:
    return "g-" + file_slug(f"{section.title.split(':')[0]}-{g.id or g.name}")


def _parts(folder: Folder) -> list[dict]:
    """The sections beyond Table 1 (`parts`), each its markdown (as `build_report` writes it, from report.json)
    and its figure beside its last part."""
    r, top, out = folder.report, folder.report["top_layer"], folder.out
    parts = []
    for part in report_parts():
        pieces = part.pieces(part.from_report(r), top)
        figure = _figure(out, part.figure_file) if part.figure_file else None
        parts += [{"markdown": piece, "figure": figure if i == len(pieces) - 1 else None}
                  for i, piece in enumerate(pieces)]
    return parts


def _settings(folder: Folder) -> list[dict]:
    """Each setting with its runs and its lowest seed's position and PCA figures (runs with checkpoints)."""
    out = []
    for section in folder.loaded.sections:
        for g in section.groups:
            name = file_slug(g.runs[0].path.name)
            figures = [f for kind in ("positions", "pca") if (f := _figure(folder.out, f"{kind}_{name}.png"))]
            out.append({"section": section.title, "label": g.label, "mods": g.mods, "preset": g.preset,
                        "anchor": _anchor(section, g), "figures": figures, "runs": folder.run_links(g.runs)})
    return out


def status_text(d: Path) -> str:
    """Where an unevaluated run stands, from its run.json (what training last wrote there), never a fixed phrase."""
    return f"not evaluated (no results.json); {run_status(d)}"


def _other_runs(folder: Folder) -> list[dict]:
    """Every run folder in no table, with why: left out (and why), not evaluated (its run.json status), or evaluated
    but in no section (a run its folder's manifest does not plan)."""
    loaded, placed, lost = folder.loaded, folder.placed(), folder.lost()
    why = {**dict(loaded.left_out), **{d: status_text(d) for d in loaded.unevaluated}}
    why.update({d: folder.shown(lost.get(str(d)) or lost.get(d.name) or "evaluated; in no table of this folder")
                for d in loaded.run_dirs if d not in placed and d not in why})
    return [{"name": d.name, "href": folder.run_page(d), "why": text} for d, text in why.items()]


# ---------------------------------------------------------------------------------------------
# Run pages.


def _layer_table(layers: dict) -> dict | None:
    """Per-layer numbers as a table: a row per layer, a column per number."""
    if not isinstance(layers, dict) or not layers:
        return None
    keys = list(dict.fromkeys(k for v in layers.values() if isinstance(v, dict) for k, x in v.items()
                              if not isinstance(x, (dict, list))))
    rows = [[l] + [number(v.get(k)) if isinstance(v, dict) and k in v else "" for k in keys]
            for l, v in sorted(layers.items(), key=lambda kv: int(kv[0]) if str(kv[0]).isdigit() else 10 ** 6)]
    return {"head": ["layer"] + keys, "rows": rows}


# What the run page shows elsewhere (the run table, the configuration and environment), and results.json's layout
# number (`results.SCHEMA`): not repeated in a block.
SHOWN = ("layers", "evaluation", "evaluations", "config", "environment", "run", "mods", "seed", "preset",
         "mod_versions", "train", "schema")


def _block(block: dict, title: str) -> dict:
    """One results block: its evaluation settings, its per-layer table and everything else as a tree."""
    rest = {k: v for k, v in block.items() if k not in SHOWN}
    return {"title": title, "evaluation": block.get("evaluation", {}), "layers": _layer_table(block.get("layers")),
            "rest": rest}


def _budget(d: Path, meta: dict, config: dict, results: dict) -> dict:
    train = config.get("train", {})
    steps, total = results.get("steps", meta.get("steps")), results.get("total_steps", meta.get("total_steps"))
    seconds, devices = training_seconds(d)
    out = {"preset": config.get("preset", meta.get("preset", "")), "steps": f"{number(steps)} of {number(total)}"
           if steps is not None else "–",
           "epochs": train.get("epochs"), "batch (sentences)": train.get("batch_size"),
           "learning rate": train.get("lr"),
           "parameters": meta.get("parameters") or results.get("train", {}).get("parameters"),
           "training seconds": seconds, "tokens/s": meta.get("tokens_per_s"),
           "device": devices if "+" in devices else meta.get("device"),  # cuda+cpu: begun on one, ended on the other
           "precision": meta.get("precision", train.get("precision")),
           "status": meta.get("status")}
    return {k: v for k, v in out.items() if v not in (None, "")}


def _run_context(folder: Folder, d: Path, run: Run | None, group: Group | None, flags: list[str]) -> dict:
    config = run.config if run else read_object(d / "config.json") or {}
    results = run.results if run else {}
    meta = read_object(d / "run.json") or {}
    curves = run_curves(run or Run(d, {}, config, eval_rows(d)))
    headline = None
    if run:
        cols, values = table_columns(mu_top(results)), run_values(run, mu_top(results))
        headline = {"head": [c.heading(l) for c, l in cols],
                    "cells": ["–" if values[c.key(l)] is None else c.table_text(values[c.key(l)]) for c, l in cols]}
    blocks = [_block(results, "latest complete evaluation (what the tables read)")] if results else []
    for i, b in enumerate(results.get("evaluations", [])):
        what = b.get("evaluation", {}).get("segment") or ("transfer" if "transfer" in b else "")
        blocks.append(_block(b, f"evaluation block {i + 1}" + (f" ({what})" if what else "")))
    mods = results.get("mods") or meta.get("mods") or config.get("mods", "original")
    versions = results.get("mod_versions") or meta.get("mod_versions") or {}
    files = _copy_run_files(d, folder.out / folder.run_files(d), folder.shown)
    page = folder.shown({"name": d.name, "folder": folder.name, "setting": group.label if group else "", "flags": flags,
            "files": [f"{file_slug(d.name)}/{f}" for f in files],
            "mods": mods, "mod_versions": versions, "seed": results.get("seed", meta.get("seed")),
            "budget": _budget(d, meta, config, results),
            "headline": headline, "blocks": blocks, "config": config,
            "environment": results.get("environment") or meta.get("environment") or {},
            "vocab": results.get("vocab_sha256") or meta.get("vocab_sha256") or ""})
    return {**page, "curves": _page_json(curves) if curves else None}


def _points(pairs) -> list[list]:
    """[[step, value], ...] with the finite values to 6 significant digits (the page's JSON; metrics.jsonl beside
    the page has them all)."""
    return [[step, float(f"{v:.6g}")] for step, v in pairs
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]


def run_curves(run: Run) -> list[dict]:
    """A run page's training curves, drawn by runs.js: its loss and learning rate per logged step, then one panel
    per Table 1 column marked `curve` that its `--eval-every` rows logged (the section figure's panels, for this run
    alone): [{"title", "log" (a perplexity: a log scale when it spans more than 20x), "points": [[step, value]]}].
    Empty when the run logged nothing."""
    rows = [row["eval"] for row in run.metrics_rows]
    top = mu_top(run.results) if run.results.get("mu_layers") else mu_top(rows[-1]) if rows else "8"
    panels = [{"title": "training loss", "log": False, "points": _points(training_losses(run.path))},
              {"title": "learning rate", "log": False,
               "points": _points((row["step"], row.get("lr")) for row in log_rows(run.path))}]
    panels += [{"title": title, "log": column.kind == "perplexity",
                "points": _points((row["step"], column.value(row["eval"], layer)) for row in run.metrics_rows)}
               for title, column, layer in curve_panels(top, rows)]
    return [p for p in panels if p["points"]]


def _copy_run_files(d: Path, dest: Path, shown) -> list[str]:
    """The run's config.json, results.json and metrics.jsonl into `dest` (JSON with this machine's paths made
    relative, as everywhere on the site); the names copied."""
    dest.mkdir(parents=True, exist_ok=True)
    copied = [name for name in RUN_FILES if (d / name).is_file()]
    for name in copied:
        _copy_shown(d / name, dest / name, shown)
    return copied


def _copy_shown(src: Path, dest: Path, shown) -> None:
    """A file into the site: a report's text files with this machine's paths made relative (`shown`), anything else
    as it is, unless the site has it already (the same time and size)."""
    if src.suffix in (".md", ".csv", ".json"):
        dest.write_text(shown(src.read_text(encoding="utf-8")), encoding="utf-8")
    elif not dest.is_file() or (dest.stat().st_mtime_ns, dest.stat().st_size) != (src.stat().st_mtime_ns,
                                                                                    src.stat().st_size):
        shutil.copy2(src, dest)


# ---------------------------------------------------------------------------------------------
# The site.


@contextmanager
def figure_cache(source: Path, target: Path):
    """A keyed figure (the probe's: its PNG carries what it was drawn from, and a figure whose key still matches is
    not drawn again) kept in the cache folder between sites: seeded from the cache before drawing when the site lacks
    it, and back to the cache after when drawn anew."""
    kept = cache_root() / "site-figures" / hashlib.sha256(str(source.resolve()).encode()).hexdigest()[:16] / target.name
    if not target.is_file() and kept.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(kept, target)
    yield
    try:
        if target.is_file() and (not kept.is_file() or kept.read_bytes() != target.read_bytes()):
            kept.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(target, kept)
    except OSError:  # a cache that cannot be written: the site is built anyway
        pass


REPORT_FILES = (".png", ".md", ".csv", ".json")  # a report's files, which the site shows


def report_key(root: Path) -> str:
    """What a results folder's report is made from: every JSON, JSONL and TOML file below it (run folders, manifests)
    and minimult's code (any change to it may change a table or a figure) with matplotlib's version."""
    h = hashlib.sha256(matplotlib.__version__.encode() + b"\0")
    code = Path(__file__).resolve().parents[1]
    for base, pattern in ((code, "*.py"), (code, "*.toml"), (root, "*.json"), (root, "*.jsonl"), (root, "*.toml")):
        for f in sorted(base.rglob(pattern)):
            if "__pycache__" not in f.parts:
                h.update(str(f.relative_to(base)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:24]


def _keep_report(out: Path, home: Path) -> None:
    """A report just built into the cache folder (`home`), whole or not at all."""
    try:
        tmp = home.with_name(home.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for f in out.iterdir():
            if f.is_file() and f.suffix in REPORT_FILES:
                shutil.copy2(f, tmp / f.name)
        shutil.rmtree(home, ignore_errors=True)
        tmp.rename(home)
    except OSError:  # a cache that cannot be written: the site is built anyway
        pass


def _folder(root: Path, name: str, site: Path, log, prebuilt: Path | None) -> Folder:
    loaded = load([root], log)
    out = site / name
    out.mkdir(parents=True, exist_ok=True)
    home = None
    if prebuilt is None:  # the same inputs' report, built for an earlier site: its files, not drawn again
        home = cache_root() / "site-reports" / f"{file_slug(root.resolve().name)}-{report_key(root)}"
        if (home / "report.json").is_file():
            prebuilt, home = home, None
    if prebuilt is not None:  # the same root's report, made already: its files, not a second rendering
        shown = portable([root], prebuilt)
        for f in prebuilt.iterdir():
            if f.is_file() and f.suffix in REPORT_FILES:  # text rewritten: a report from before paths were relative
                _copy_shown(f, out / f.name, shown)
        report = json.loads((out / "report.json").read_text())
    else:
        with figure_cache(root, out / "language_id.png"):
            report = build_report([root], out, lambda s: None, loaded=loaded)
    shown = portable([root], out)
    if home is not None:
        write_json(out / "report.json", shown(json.loads((out / "report.json").read_text())))  # its figures by name
        _keep_report(out, home)
    return Folder(name, root, loaded, shown(report), out, shown)


def _declared_headline(folders: list[Folder], headline: str | None) -> Folder | None:
    """The folder a manifest declares (`"headline": true`), else the one named `headline`, else the only one."""
    for f in folders:
        for manifest in sorted(f.root.glob("*.sweep.json")):
            if (read_object(manifest) or {}).get("headline") is True:
                return f
    return next((f for f in folders if f.root.resolve().name == headline), folders[0] if len(folders) == 1 else None)


def _shown_root(root: Path) -> str:
    """A results folder as the pages name it: relative to the repository when in it, else by its name."""
    try:
        return str(root.resolve().relative_to(REPOSITORY.resolve()))
    except ValueError:
        return root.resolve().name


def build_site(roots, site_dir, log: Callable[[str], None] = print, prebuilt: dict | None = None,
               headline: str | None = HEADLINE) -> dict:
    """The site for `roots` (results folders) in `site_dir`; returns {pages, claims, index}. `prebuilt`:
    {root: folder where its report was already built}; `headline`: the name of the results folder whose Table 1
    the index shows (a manifest's `"headline": true` wins; with one folder, that one)."""
    start = time.perf_counter()
    site = Path(site_dir)
    site.mkdir(parents=True, exist_ok=True)
    env = _env()
    folders: list[Folder] = []
    roots = list(map(Path, roots))
    for k, root in enumerate(roots):
        name = file_slug(root.resolve().name)
        while name in {f.name for f in folders}:
            name += "-2"
        t0 = time.perf_counter()
        folders.append(_folder(root, name, site, log, (prebuilt or {}).get(root)))
        log(f"site: [{k + 1}/{len(roots)}] {name}: {plural(len(folders[-1].loaded.run_dirs), 'run folder')}, report "
            f"in {time.perf_counter() - t0:.1f} s ({time.perf_counter() - start:.0f} s in all)")
    for f in STATIC:
        shutil.copyfile(TEMPLATES / f, site / f)
    pages = []

    def write(path: Path, template: str, **context) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(env.get_template(template).render(**context), encoding="utf-8")
        pages.append(path)

    claim_rows = claims_mod.judge(claims_mod.load_claims(),
                                  {f.name: f.loaded.sections for f in folders})
    for row in claim_rows:
        for side in (row["a"], row["b"]):
            side["href"] = _setting_href(folders, side)
    summaries = []
    every_run = []
    for folder in folders:
        t0 = time.perf_counter()
        top = folder.report["top_layer"]
        tables = [_table1(s, a, top, folder) for s, a in zip(folder.loaded.sections, folder.report["sections"])]
        summaries.append({"name": folder.name, "href": f"{folder.name}/index.html",
                          "titles": [s.title for s in folder.loaded.sections],
                          "runs": len(folder.loaded.runs),
                          "settings": sum(len(s.groups) for s in folder.loaded.sections),
                          "tables": tables})
        write(folder.out / "index.html", "folder.html", up="../", folder=folder.name, root=_shown_root(folder.root),
              tables=tables, parts=_parts(folder), settings=_settings(folder), others=_other_runs(folder),
              n_runs=len(folder.loaded.runs), files=[n for n in ("table1.md", "table1.csv", "runs.csv", "report.json")
                                                       if (folder.out / n).is_file()],
              claims=[r for r in claim_rows if folder.name in (r["a"]["folder"], r["b"]["folder"])],
              claims_mod=claims_mod)
        every_run += _run_pages(folder, write)
        log(f"site: pages of {folder.name} in {time.perf_counter() - t0:.1f} s "
            f"({time.perf_counter() - start:.0f} s in all)")
    chosen = _declared_headline(folders, headline)
    summary = summaries[folders.index(chosen)] if chosen is not None else None
    head = None
    if summary is not None and summary["tables"]:
        table = next((t for t in summary["tables"] if t["title"].startswith("Table 1")), summary["tables"][0])
        head = {"folder": summary["name"], "href": summary["href"], "table": table}
    by_recipe = recipes.table1_sections({f.name: f.loaded.sections for f in folders})
    recipe_md = recipes.both_markdown(recipes.both_recipes(by_recipe), by_recipe) + "\n" + recipes.floor_markdown(
        by_recipe) if len(by_recipe) > 1 else ""
    verdicts = [claims_mod.HOLDS, claims_mod.FAILS, claims_mod.UNKNOWN]
    write(site / "claims.html", "claims.html", up="", rows=claim_rows, claims_mod=claims_mod,
          recipes=markdown_html(recipe_md) if recipe_md else "", verdicts=verdicts)
    counts = claims_mod.verdict_counts(claim_rows)
    write(site / "runs.html", "runs.html", up="", runs=every_run, data=_runs_json(every_run),
          filters={k: sorted({str(r[k]) for r in every_run}, key=_natural)
                   for k in ("folder", "mods", "preset", "seed")})
    write(site / "glossary.html", "glossary.html", up="", mods=_mods(), presets=_presets())
    write(site / "index.html", "index.html", up="", folders=summaries, headline=head, counts=counts,
          n_runs=len(every_run))
    _drop_stale_folders(site, [f.name for f in folders], log)
    log(f"site: {len(pages)} pages in {site} ({len(folders)} results folders, {len(claim_rows)} claims, "
        f"{time.perf_counter() - start:.0f} s); open {site / 'index.html'}")
    return {"pages": [str(p) for p in pages], "claims": claim_rows, "recipes": recipe_md,
            "index": str(site / "index.html"), "folders": [f.name for f in folders],
            "headline": head["folder"] if head else None}


def _drop_stale_folders(site: Path, names: list[str], log: Callable[[str], None]) -> None:
    """A site folder is the site of the RUNS it was last built from: the folders an earlier build wrote there
    (its `site.json`) that this one does not are removed, so no page is left that nothing links to."""
    record = site / "site.json"
    before = (read_object(record) or {}).get("folders", [])
    for name in (n for n in before if isinstance(n, str) and n not in names and (site / n).is_dir()):
        shutil.rmtree(site / name)
        log(f"site: removed {name}/, which an earlier report wrote here and these RUNS do not include")
    write_json(record, {"folders": names})


def _natural(text: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def _setting_href(folders: list[Folder], side: dict) -> str | None:
    for f in (f for f in folders if f.name == side["folder"]):
        for s in f.loaded.sections:
            for g in s.groups:
                if g.id == side["setting_id"] and str(g.runs[0].path) in side["runs"]:
                    return f"{f.name}/index.html#{_anchor(s, g)}"
    return None


def _run_pages(folder: Folder, write) -> list[dict]:
    """A page per run folder; returns each run's row of the every-run page (runs.html)."""
    placed, left, lost, rows = folder.placed(), dict(folder.loaded.left_out), folder.lost(), []
    for d in folder.loaded.run_dirs:
        run, group, section = placed.get(d, (None, None, None))
        flags = []
        if run is not None and (why := never_trained(run)):
            flags.append(f"never trained: {why}")
        if d in left:
            flags.append(f"left out of the tables: {left[d]}")
        if d in folder.loaded.unevaluated:
            flags.append(status_text(d) + ": in no table")
        if run is None and d.name in lost:
            flags.append(f"in no table: {lost[d.name]}")
        context = _run_context(folder, d, run, group, flags)
        anchor = f"../index.html#{_anchor(section, group)}" if group is not None else None
        write(folder.out / folder.run_page(d), "run.html", up="../../", run=context, back=anchor)
        rows.append(_run_row(folder, d, run, context))
    return rows


# ---------------------------------------------------------------------------------------------
# The every-run page (runs.html): one table, filters, curves overlaid and configs compared in the browser (runs.js).

CURVES = (("mu", "µ"), ("ppl_dev", "ppl dev"), ("ppl_train", "ppl train"), ("retrieval_top", "ρ (top layer)"),
          ("translation_top", "τ (top layer)"))


def _curve_columns() -> dict:
    """{curve key: the registry Column it reads}: a per-layer column's key is its name + "_top" (the row's µ layer)."""
    return {**{c.key(None): c for c in columns() if not c.per_layer},
            **{f"{c.name}_top": c for c in columns() if c.per_layer}}


def _curve_points(rows: list[dict]) -> dict[str, list]:
    """Each logged evaluation's numbers by step (`collect.eval_rows`): {curve key: [[step, value], ...]}."""
    by_key = _curve_columns()
    curves = {key: _points((row["step"], by_key[key].value(row["eval"], mu_top(row["eval"]))) for row in rows)
              for key, _ in CURVES}
    return {key: points for key, points in curves.items() if points}


def _flat(config: dict) -> dict:
    """`config.flat` with every value the page's JSON can compare as it is: lists (mask.probs) as their JSON text."""
    return {k: v if isinstance(v, (int, float, str, bool)) or v is None else json.dumps(v)
            for k, v in flat(config).items()}


def _run_row(folder: Folder, d: Path, run: Run | None, context: dict) -> dict:
    rows = run.metrics_rows if run else eval_rows(d)
    results = run.results if run else {}
    mu = results.get("mu")
    ppl = results.get("perplexity", {}).get("dev") if isinstance(results.get("perplexity"), dict) else None
    return {"id": f"{folder.name}/{d.name}", "folder": folder.name, "name": d.name,
            "href": f"{folder.name}/{folder.run_page(d)}",
            "mods": str(context["mods"] or "original"), "preset": str(context["budget"].get("preset", "")),
            "seed": "" if context["seed"] is None else context["seed"], "setting": context["setting"],
            "status": str((read_object(d / "run.json") or {}).get("status", "")) if not results else "evaluated",
            "mu": mu if isinstance(mu, (int, float)) else None,
            "ppl_dev": ppl if isinstance(ppl, (int, float)) else None,
            "flag": "; ".join(context["flags"]), "curves": _curve_points(rows), "config": context["config"] and
            _flat(context["config"])}


def _runs_json(rows: list[dict]):
    """The runs' curves and configs as the page's embedded JSON."""
    return _page_json({"curves": dict(CURVES), "runs": {r["id"]: {"curves": r["curves"], "config": r["config"] or {},
                                                                 "name": r["name"], "folder": r["folder"]}
                                                       for r in rows}})


def _page_json(data) -> Markup:
    """`data` as JSON to embed in a page's <script type="application/json"> (`</` escaped)."""
    return Markup(json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/"))


# ---------------------------------------------------------------------------------------------
# The glossary page: the measures (written here, so the site stands alone), every mod (its registry description)
# and every preset (its overrides).


def _mods() -> list[dict]:
    return [{"name": m.name, "description": m.description, "version": m.version,
             "value": m.parse is not None, "gpu": m.needs_gpu} for m in registered()]


PRESET_NOTES = {
    "paper": "the paper's budget: BERT-small, about 14,100 updates of 128 sentences (the lab's recipe: length-bucketed "
             "batches, padding masked in attention, exactly 15% of each sentence's pieces masked)",
    "quick": "a quarter of the paper's epochs in batches of 128: meaningful on a 2-core CPU in under an hour",
    "paper-b256": "the paper's budget in batches of 256 sentences (the defaults)",
    "quick-b256": "a quarter of the paper's epochs in batches of 256 (the committed quick Table 1 runs)",
    "published": "the paper's budget trained as the paper's published code trained it: random batches, padding "
                 "attended in training and evaluation, each piece selected with probability 0.15, the code's "
                 "masking mixes",
    "tiny": "a 2-layer model of hidden size 16 on a few hundred sentences: exercises the whole pipeline in seconds "
            "(tests and dry runs); its numbers mean nothing",
}


def _presets() -> list[dict]:
    return [{"name": name, "note": PRESET_NOTES.get(name, ""),
             "overrides": ", ".join(f"{k} = {v}" for k, v in values.items()) or "none (the defaults)"}
            for name, values in PRESETS.items()]
