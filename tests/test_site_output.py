"""The HTML site's output (issue 62): the front page's headline is the declared folder's Table 1 (never the one
that sorts first); no path of the building machine in any file; p below 0.001 as "< 0.001" and "1 run"; every
run page linked from a page, linking its config.json, results.json and metrics.jsonl; a glossary the column
headings link to (every mod and preset); the every-run page with its curves' data and the claims' verdicts."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote, urlparse

from click.testing import CliRunner
from markupsafe import escape

from minimult.cli import main
from minimult.report.site import HEADLINE, build_site, p_shown, plural, term_anchor
from minimult.runs import write_json
from test_report_site import fake_table1, parse
from test_sweep import RUNS, swept  # noqa: F401  (the shared tiny sweep)

ROOT = Path(__file__).resolve().parents[1]


def test_p_and_counts_as_the_site_writes_them():
    assert [p_shown(p) for p in (None, 2.3e-4, 3.2e-06, 0.001, 0.0065, 0.3)] == ["", "< 0.001", "< 0.001", "0.001",
                                                                                  "0.0065", "0.3"]
    assert plural(1, "run") == "1 run" and plural(2, "run") == "2 runs" and plural(1200, "run") == "1,200 runs"
    assert [term_anchor(h) for h in ("µ", "p (µ)", "ρ L8", "τ L0", "align F1 L5", "ppl dev", "ID")] == [
        "t-mu", "t-p", "t-rho", "t-tau", "t-align", "t-ppl", None]


def _two_tables(tmp_path: Path) -> list[Path]:
    """Two folders of the same Table 1 size; `aaa-quick` sorts first, `table1-paper` is the declared headline."""
    fake_table1(tmp_path / "aaa-quick", {"0": [0.10, 0.12], "1": [0.50, 0.52]})
    fake_table1(tmp_path / HEADLINE, {"0": [0.60, 0.62], "1": [0.20, 0.22]})
    return [tmp_path / "aaa-quick", tmp_path / HEADLINE]


def test_the_headline_is_declared_not_the_first_by_name(tmp_path):
    roots = _two_tables(tmp_path)
    built = build_site(roots, tmp_path / "site", log=lambda s: None)
    assert built["headline"] == HEADLINE
    page = parse(tmp_path / "site" / "index.html")
    row = next(r for r in page.rows if r and r[0] == "0")
    assert row[3] == "0.610 ± 0.014"  # table1-paper's original, not aaa-quick's 0.110
    # a manifest saying `"headline": true` wins over the name; with two folders and neither, no headline
    manifest = roots[0] / "table1.sweep.json"
    write_json(manifest, {**json.loads(manifest.read_text()), "headline": True})
    assert build_site(roots, tmp_path / "site2", log=lambda s: None)["headline"] == "aaa-quick"
    write_json(manifest, {k: v for k, v in json.loads(manifest.read_text()).items() if k != "headline"})
    assert build_site(roots, tmp_path / "site3", log=lambda s: None, headline=None)["headline"] is None
    assert "Headline" not in (tmp_path / "site3" / "index.html").read_text()


def test_the_committed_site_headline_is_table1_paper():
    from minimult.report.site import _declared_headline, Folder, site_folders

    folders = [Folder(p.name, p, None, {}, p) for p in site_folders()]
    assert _declared_headline(folders, HEADLINE).name == "table1-paper"


def _site_files(site: Path) -> list[Path]:
    return [p for p in site.rglob("*") if p.is_file()]


def test_no_path_of_the_building_machine_in_any_file(swept, tmp_path):  # noqa: F811
    """Built with and without `--out` (the site then copies the report's files): neither the repository's, the
    runs' nor the site's absolute path is in any file; runs.csv names each run relative to its results folder."""
    for args in (["--html", str(tmp_path / "site")], ["--out", str(tmp_path / "report"), "--html", str(tmp_path / "s2")]):
        result = CliRunner().invoke(main, ["report", str(swept.root), *args])
        assert result.exit_code == 0, result.output
    machine = {str(ROOT), str(ROOT.resolve()), str(swept.root.parent), str(swept.root.parent.resolve())}
    site = machine | {str(tmp_path), str(tmp_path.resolve())}  # the --out report names its figures as --out was given
    files = [(f, site) for f in _site_files(tmp_path / "site") + _site_files(tmp_path / "s2")]
    files += [(f, machine) for f in _site_files(tmp_path / "report")]
    assert len(files) > 30
    for f, needles in files:
        data = f.read_bytes()
        for needle in needles:
            assert needle.encode() not in data, f"{f.relative_to(tmp_path)} holds {needle}"
    runs = (tmp_path / "report" / "runs.csv").read_text().splitlines()
    header = runs[0].split(",")
    assert header[:7] == ["section", "id", "setting", "mods", "preset", "seed", "run"]
    assert {line.split(",")[6] for line in runs[1:]} <= {f"{swept.root.name}/{r}" for r in RUNS}


def test_every_run_page_is_linked_and_links_its_files(swept, tmp_path):  # noqa: F811
    result = CliRunner().invoke(main, ["report", str(swept.root), "--html", str(tmp_path / "site")])
    assert result.exit_code == 0, result.output
    assert re.search(r"site: \[1/1\] runs: 6 run folders, report in [\d.]+ s", result.output)
    site = tmp_path / "site"
    linked = set()
    for page in site.rglob("*.html"):
        for ref in parse(page).links:
            url = urlparse(ref)
            if url.path:
                linked.add((page.parent / unquote(url.path)).resolve())
    run_pages = sorted((site / "runs" / "runs").glob("*.html"))
    assert len(run_pages) == len(RUNS)
    for page in run_pages:
        assert page.resolve() in linked, page.name
        links = parse(page).links
        for name in ("config.json", "results.json", "metrics.jsonl"):
            if (swept.root / page.stem / name).is_file():
                assert f"{page.stem}/{name}" in links
                assert (page.parent / page.stem / name).read_bytes()[:1] in (b"{", b"")
    # the every-run page: a row per run, the curves' data embedded, filters by mod, preset, seed and folder
    html = (site / "runs.html").read_text()
    data = json.loads(re.search(r'<script type="application/json" id="run-data">(.*?)</script>', html, re.S).group(1))
    assert sorted(r["name"] for r in data["runs"].values()) == sorted(RUNS)
    trained = data["runs"][f"runs/{RUNS[0]}"]
    assert trained["curves"]["mu"] and all(len(p) == 2 for p in trained["curves"]["ppl_dev"])
    assert trained["config"]["mods"] in ("", "original") or "original" in str(trained["config"]["mods"])
    for key in ("folder", "mods", "preset", "seed"):
        assert f'data-key="{key}"' in html
    assert (site / "runs.js").is_file() and "runs.js" in parse(site / "runs.html").images
    assert 'data-verdict="' in (site / "claims.html").read_text()


def test_the_glossary_names_every_mod_and_preset_and_the_headings_link_to_it(swept, tmp_path):  # noqa: F811
    from minimult.config import PRESETS
    from minimult.mods import registered

    result = CliRunner().invoke(main, ["report", str(swept.root), "--html", str(tmp_path / "site")])
    assert result.exit_code == 0, result.output
    glossary = parse(tmp_path / "site" / "glossary.html")
    assert {"t-mu", "t-rho", "t-tau", "t-align", "t-aer", "t-ppl"} <= glossary.ids
    assert {f"mod-{m.name}" for m in registered()} <= glossary.ids
    assert {f"preset-{p}" for p in PRESETS} <= glossary.ids
    text = (tmp_path / "site" / "glossary.html").read_text()
    assert all(str(escape(m.description)) in text for m in registered())
    folder = (tmp_path / "site" / "runs" / "index.html").read_text()
    for anchor in ("t-mu", "t-rho", "t-tau", "t-align", "t-ppl", "t-p"):
        assert f'href="../glossary.html#{anchor}"' in folder, anchor


def test_runs_not_in_the_table_say_what_their_run_json_says(swept, tmp_path):  # noqa: F811
    """A planned run with a folder but no results.json: the site says its run.json status and step, never a
    phrase that goes stale ("under way") once the folder is committed and stops changing."""
    import shutil

    root = tmp_path / "root"
    shutil.copytree(swept.root, root, ignore=shutil.ignore_patterns("*.pt"))
    (root / "1-lang-pos-s42" / "results.json").unlink()
    meta = json.loads((root / "1-lang-pos-s42" / "run.json").read_text())
    write_json(root / "1-lang-pos-s42" / "run.json", {**meta, "status": "training", "steps": 7})
    result = CliRunner().invoke(main, ["report", str(root), "--html", str(tmp_path / "site")])
    assert result.exit_code == 0, result.output
    page = (tmp_path / "site" / "root" / "index.html").read_text()
    assert "under way" not in page
    assert "1-lang-pos-s42 (run.json status: training, step 7 of " in page
    run = (tmp_path / "site" / "root" / "runs" / "1-lang-pos-s42.html").read_text()
    assert "run.json status: training, step 7 of " in run
