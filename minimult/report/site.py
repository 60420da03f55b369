"""The report as a static HTML site: `build_site(roots, site_dir)`.

One page per results folder (each root: its report's tables with their figures beside them, the
settings and their runs), one page per run (configuration, mods, budget, training curves, every results
block, and why a run is flagged: never trained, left out of the tables, not evaluated), the claims page
(`claims.judge` over every folder) and an index. Pages are Jinja2 templates (`templates/`), plain HTML and
CSS with one small script that sorts a table by the column clicked; every link is relative, so the folder
opens from disk. Each folder's report (`build_report`: table1.md, table1.csv, report.json, the PNG figures)
is written into that folder's directory of the site, and the pages show those files, so the numbers are
the markdown report's.

Layout: `index.html`, `claims.html`, `style.css`, `sort.js`, and per folder `<name>/index.html`, its report
files, `<name>/runs/<run>.html` and `<name>/runs/<run>.png` (the run's training curves).
"""

from __future__ import annotations

import json
import math
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import jinja2
from markdown_it import MarkdownIt
from markupsafe import Markup

from minimult.errors import MinimultError
from minimult.report import claims as claims_mod, recipes
from minimult.report.build import build_report, load
from minimult.report.collect import Group, REPOSITORY, Run, Section, log_rows, never_trained, training_seconds
from minimult.report.figures import file_slug, run_figure, section_figure
from minimult.report.parts import report_parts
from minimult.report.tables import cell_text, mu_top, p_text, run_values, section_footer, section_table, table_columns

RESULTS = REPOSITORY / "experiments" / "results"
TEMPLATES = Path(__file__).with_name("templates")
STATIC = ("style.css", "sort.js")


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
    env.filters["num"] = number
    env.filters["md"] = markdown_html
    return env


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


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.+_-]+", "_", text).strip("_")[:80] or "x"


# ---------------------------------------------------------------------------------------------
# What one folder's pages show.


@dataclass
class Folder:
    name: str
    root: Path
    loaded: object  # report.Loaded
    report: dict
    out: Path

    def run_page(self, path: Path) -> str:
        return f"runs/{slug(path.name)}.html"


def _figure(out: Path, name: str) -> str | None:
    return name if (out / name).is_file() else None


def _table1(section: Section, agg: dict, top: str, folder: Folder) -> dict:
    """A Table 1 section as the page's table: the markdown table's cells (tables.section_table), each
    setting linking to its runs."""
    cols = table_columns(top)
    (first, first_layer), rest = cols[0], cols[1:]
    head = [first.heading(first_layer), f"p ({first.heading(first_layer)})"] + [c.heading(l) for c, l in rest]
    rows = []
    for g, row in zip(section.groups, agg["rows"]):
        m, paper, k0 = row["metrics"], row.get("paper", {}), first.key(first_layer)
        cells = [_split(cell_text(m[k0], first, paper.get(k0))), (p_text(m[k0]["p_vs_original"]), "")]
        cells += [_split(cell_text(m[c.key(l)], c, paper.get(c.key(l)))) for c, l in rest]
        rows.append({"id": row["id"], "setting": row["setting"], "anchor": _anchor(section, g),
                     "runs": [{"seed": r.seed, "href": folder.run_page(r.path), "flag": never_trained(r)}
                              for r in g.runs], "cells": cells})
    notes = [line for line in section_table(agg, top) if line and not line.startswith("|")] + section_footer(agg)
    presets = sorted({r["preset"] for r in agg["rows"] if r["preset"]})
    training, seeds = (_figure(folder.out, section_figure(kind, section.title)) for kind in ("training", "seeds"))
    return {"title": section.title, "presets": presets, "baseline": agg["baseline"], "head": head, "rows": rows,
            "notes": notes, "training": training, "seeds": seeds,
            "anchor": "s-" + slug(section.title.split(":")[0])}


def _split(cell: str) -> tuple[str, str]:
    """("0.140 ± 0.003", "(0.70)"): our number and the paper's, which the page sets in small type below."""
    ours, _, paper = cell.partition(" (")
    return ours, f"({paper}" if paper else ""


def _anchor(section: Section, g: Group) -> str:
    return "g-" + slug(f"{section.title.split(':')[0]}-{g.id or g.name}")


def _parts(folder: Folder) -> list[dict]:
    """The sections beyond Table 1 (`parts`), each its markdown (as `build_report` writes it, from report.json)
    and its figure beside its last part."""
    r, top, out = folder.report, folder.report["top_layer"], folder.out
    parts = []
    for part in report_parts():
        pieces = part.markdown(part.from_report(r), top)
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
            figures = [f for f in (_figure(folder.out, f"positions_{name}.png"), _figure(folder.out, f"pca_{name}.png"))
                       if f]
            out.append({"section": section.title, "label": g.label, "mods": g.mods, "preset": g.preset,
                        "anchor": _anchor(section, g), "figures": figures,
                        "runs": [{"name": r.path.name, "seed": r.seed, "href": folder.run_page(r.path),
                                  "flag": never_trained(r)} for r in g.runs]})
    return out


def _other_runs(folder: Folder) -> list[dict]:
    loaded = folder.loaded
    rows = [{"name": d.name, "href": folder.run_page(d), "why": why} for d, why in loaded.left_out]
    rows += [{"name": d.name, "href": folder.run_page(d), "why": "not evaluated (no results.json)"}
             for d in loaded.unevaluated]
    return rows


# ---------------------------------------------------------------------------------------------
# Run pages.


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


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
SHOWN = ("layers", "evaluation", "evaluations", "config", "environment", "run", "mods", "seed", "preset", "mod_versions",
         "train", "schema")


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
           "learning rate": train.get("lr"), "parameters": meta.get("parameters") or results.get("train", {}).get("parameters"),
           "training seconds": seconds, "tokens/s": meta.get("tokens_per_s"),
           "device": devices if "+" in devices else meta.get("device"),  # cuda+cpu: begun on one, ended on the other
           "precision": meta.get("precision", train.get("precision")),
           "status": meta.get("status")}
    return {k: v for k, v in out.items() if v not in (None, "")}


def _run_context(folder: Folder, d: Path, run: Run | None, group: Group | None, flags: list[str]) -> dict:
    config = run.config if run else _read(d / "config.json")
    results = run.results if run else {}
    meta = _read(d / "run.json")
    pseudo = run or Run(d, {}, config, [row for row in _log_rows(d) if isinstance(row.get("eval"), dict)])
    (folder.out / "runs").mkdir(exist_ok=True)
    figure = run_figure(pseudo, folder.out / "runs" / f"{slug(d.name)}.png")
    headline = None
    if run:
        top = mu_top(results)
        values = run_values(run, top)
        headline = {"head": [c.heading(l) for c, l in table_columns(top)],
                    "cells": [c.table_text(values[c.key(l)]) if values[c.key(l)] is not None else "–"
                              for c, l in table_columns(top)]}
    blocks = []
    if results:
        blocks.append(_block(results, "latest complete evaluation (what the tables read)"))
        for i, b in enumerate(results.get("evaluations", [])):
            what = b.get("evaluation", {}).get("segment") or ("transfer" if "transfer" in b else "")
            blocks.append(_block(b, f"evaluation block {i + 1}" + (f" ({what})" if what else "")))
    mods = results.get("mods") or meta.get("mods") or config.get("mods", "original")
    versions = results.get("mod_versions") or meta.get("mod_versions") or {}
    return {"name": d.name, "folder": folder.name, "setting": group.label if group else "", "flags": flags,
            "mods": mods, "mod_versions": versions, "seed": results.get("seed", meta.get("seed")),
            "budget": _budget(d, meta, config, results), "figure": figure.name if figure else None,
            "headline": headline, "blocks": blocks, "config": config,
            "environment": results.get("environment") or meta.get("environment") or {},
            "vocab": results.get("vocab_sha256") or meta.get("vocab_sha256") or ""}


def _log_rows(d: Path) -> list[dict]:
    return log_rows(d)


# ---------------------------------------------------------------------------------------------
# The site.


def _folder(root: Path, name: str, site: Path, log, prebuilt: Path | None) -> Folder:
    loaded = load([root], log)
    out = site / name
    out.mkdir(parents=True, exist_ok=True)
    if prebuilt is not None:  # the same root's report, made already: its files, not a second rendering
        for f in prebuilt.iterdir():
            if f.is_file() and f.suffix in (".png", ".md", ".csv", ".json"):
                shutil.copy2(f, out / f.name)
        report = json.loads((out / "report.json").read_text())
    else:
        report = build_report([root], out, lambda s: None, loaded=loaded)
    return Folder(name, root, loaded, report, out)


def build_site(roots, site_dir, log: Callable[[str], None] = print, prebuilt: dict | None = None,
               claims_file=None) -> dict:
    """The site for `roots` (results folders) in `site_dir`; returns {pages, claims, index}. `prebuilt`:
    {root: folder where its report was already built}."""
    site = Path(site_dir)
    site.mkdir(parents=True, exist_ok=True)
    env = _env()
    folders: list[Folder] = []
    names: set[str] = set()
    for root in map(Path, roots):
        name = slug(root.resolve().name)
        while name in names:
            name += "-2"
        names.add(name)
        folders.append(_folder(root, name, site, log, (prebuilt or {}).get(root)))
    for f in STATIC:
        shutil.copyfile(TEMPLATES / f, site / f)
    pages = []

    def write(path: Path, template: str, **context) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(env.get_template(template).render(**context), encoding="utf-8")
        pages.append(path)

    claim_rows = claims_mod.judge(claims_mod.load_claims(claims_file or claims_mod.CLAIMS_FILE),
                                  {f.name: f.loaded.sections for f in folders})
    for row in claim_rows:
        for side in (row["a"], row["b"]):
            side["href"] = _setting_href(folders, side)
    summaries = []
    for folder in folders:
        top = folder.report["top_layer"]
        tables = [_table1(s, a, top, folder) for s, a in zip(folder.loaded.sections, folder.report["sections"])]
        summaries.append({"name": folder.name, "href": f"{folder.name}/index.html", "root": str(folder.root),
                          "titles": [s.title for s in folder.loaded.sections],
                          "runs": len(folder.loaded.runs), "settings": sum(len(s.groups) for s in folder.loaded.sections),
                          "tables": tables})
        write(folder.out / "index.html", "folder.html", up="../", folder=folder.name, root=_shown(folder.root),
              tables=tables, parts=_parts(folder), settings=_settings(folder), others=_other_runs(folder),
              n_runs=len(folder.loaded.runs), files=[n for n in ("table1.md", "table1.csv", "runs.csv", "report.json")
                                                       if (folder.out / n).is_file()],
              claims=[r for r in claim_rows if folder.name in (r["a"]["folder"], r["b"]["folder"])],
              claims_mod=claims_mod)
        _run_pages(folder, write)
    headline = _headline(summaries)
    by_recipe = recipes.table1_sections({f.name: f.loaded.sections for f in folders})
    recipe_md = recipes.both_markdown(recipes.both_recipes(by_recipe), by_recipe) + "\n" + recipes.floor_markdown(
        by_recipe) if len(by_recipe) > 1 else ""
    write(site / "claims.html", "claims.html", up="", rows=claim_rows, claims_mod=claims_mod,
          recipes=markdown_html(recipe_md) if recipe_md else "")
    counts = {v: sum(r["verdict"] == v for r in claim_rows) for v in (claims_mod.HOLDS, claims_mod.FAILS,
                                                                        claims_mod.UNKNOWN)}
    write(site / "index.html", "index.html", up="", folders=summaries, headline=headline, counts=counts)
    log(f"site: {len(pages)} pages in {site} ({len(folders)} results folders, {len(claim_rows)} claims); "
        f"open {site / 'index.html'}")
    return {"pages": [str(p) for p in pages], "claims": claim_rows, "recipes": recipe_md, "index": str(site / "index.html"),
            "folders": [f.name for f in folders]}


def _shown(path: Path) -> str:
    """A folder as the page names it: relative to the current folder when below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _setting_href(folders: list[Folder], side: dict) -> str | None:
    for f in folders:
        if f.name != side["folder"]:
            continue
        for s in f.loaded.sections:
            for g in s.groups:
                if g.id == side["setting_id"] and str(g.runs[0].path) in side["runs"]:
                    return f"{f.name}/index.html#{_anchor(s, g)}"
    return None


def _headline(summaries: list[dict]) -> dict | None:
    """The index's Table 1: the "Table 1" section with the most settings (else the largest section)."""
    tables = [(s, t) for s in summaries for t in s["tables"]]
    if not tables:
        return None
    first = [x for x in tables if x[1]["title"].startswith("Table 1")] or tables
    summary, table = max(first, key=lambda x: len(x[1]["rows"]))
    return {"folder": summary["name"], "href": summary["href"], "table": table}


def _run_pages(folder: Folder, write) -> None:
    by_path = {r.path: (r, g) for s in folder.loaded.sections for g in s.groups for r in g.runs}
    left = dict(folder.loaded.left_out)
    for d in folder.loaded.run_dirs:
        run, group = by_path.get(d, (None, None))
        flags = []
        if run is not None and (why := never_trained(run)):
            flags.append(f"never trained: {why}")
        if d in left:
            flags.append(f"left out of the tables: {left[d]}")
        if d in folder.loaded.unevaluated:
            flags.append("not evaluated yet (no results.json): in no table")
        context = _run_context(folder, d, run, group, flags)
        anchor = None
        if group is not None:
            section = next(s for s in folder.loaded.sections if group in s.groups)
            anchor = f"../index.html#{_anchor(section, group)}"
        write(folder.out / folder.run_page(d), "run.html", up="../../", run=context, back=anchor)
