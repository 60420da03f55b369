"""`minimult report --html`: the static site of the tiny sweep builds; every page is well-formed HTML
(each element closed, in order), every link and image points at a file that exists (and every #anchor at an
id on its page), every run has a page, and every Table 1 row shows the numbers of table1.csv. The claims:
a planted result against a claim reads "does not hold", one for it "holds", too few seeds or overlapping
seeds "cannot tell"; the claims file names settings that exist in its grids."""

from __future__ import annotations

import csv
import json
import re
import shutil
import tomllib
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from click.testing import CliRunner

from minimult.cli import main
from minimult.report import claims as claims_mod
from minimult.report.claims import FAILS, HOLDS, UNKNOWN, decide, judge, load_claims, metric_value
from minimult.report.tables import table_columns
from minimult.runs import write_json
from test_sweep import RUNS, SETTINGS, swept  # noqa: F401  (the shared tiny sweep)

ROOT = Path(__file__).resolve().parents[1]
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Page(HTMLParser):
    """Checks nesting (every element closed, in order) and collects links, images, ids and table rows."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors, self.links, self.images, self.ids = [], [], [], [], set()
        self.rows, self._row, self._cell = [], None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
        if tag in ("img", "script") and a.get("src"):
            self.images.append(a["src"])
        if tag == "link" and a.get("href"):
            self.links.append(a["href"])
        if tag == "tr":
            self._row = []
        if tag in ("td", "th") and self._row is not None:
            self._cell = ""
        if tag not in VOID:
            self.stack.append((tag, self.getpos()))

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.stack.pop()

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1][0] != tag:
            self.errors.append(f"</{tag}> at {self.getpos()} closes {self.stack[-1] if self.stack else 'nothing'}")
            return
        self.stack.pop()
        if tag in ("td", "th") and self._row is not None:
            self._row.append(" ".join(self._cell.split()))
            self._cell = None
        if tag == "tr":
            self.rows.append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


def curve_data(page: Path) -> list[dict] | None:
    """The training curves a run page embeds for runs.js to draw (None: the page has none)."""
    found = re.search(r'<script type="application/json" id="curve-data">(.*?)</script>', page.read_text(), re.S)
    return json.loads(found.group(1)) if found else None


def parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    assert not page.errors, f"{path}: {page.errors[:5]}"
    assert not page.stack, f"{path}: unclosed {page.stack[:5]}"
    return page


_DONE: dict = {}


@pytest.fixture
def site(swept, tmp_path_factory):  # noqa: F811
    """`minimult report RUNS --out OUT --html SITE` of the shared tiny sweep, made once."""
    assert swept.proc.returncode == 0, swept.proc.stdout + swept.proc.stderr
    if "site" not in _DONE:
        base = tmp_path_factory.mktemp("site")
        result = CliRunner().invoke(main, ["report", str(swept.root), "--out", str(base / "report"),
                                           "--html", str(base / "site")])
        assert result.exit_code == 0, result.output
        _DONE["site"] = (swept, base / "report", base / "site", result.output)
    return _DONE["site"]


def test_every_page_is_well_formed_and_every_link_and_image_exists(site):
    swept, report, root, output = site
    assert f"site: {root / 'index.html'}" in output
    pages = sorted(root.rglob("*.html"))
    parsed = {p: parse(p) for p in pages}
    assert {root / "index.html", root / "claims.html", root / "runs" / "index.html"} <= set(pages)
    for name in RUNS:  # a page per run, with training curves (drawn by runs.js) per run that trained
        page = root / "runs" / "runs" / f"{name}.html"
        assert page in parsed and "../../runs.js" in parsed[page].images
        curves = curve_data(page)
        assert (curves is not None) == ("untrained" not in name), name  # untrained logs nothing
        assert curves is None or ("run-curves" in parsed[page].ids and curves[0]["title"] == "training loss"
                                  and all(len(p) == 2 for c in curves for p in c["points"]))
    n_images = 0
    for page, html in parsed.items():
        for ref in html.links + html.images:
            url = urlparse(ref)
            assert not url.scheme and not url.netloc, f"{page.name}: {ref} leaves the site"
            target = (page.parent / unquote(url.path)).resolve() if url.path else page
            assert target.is_file(), f"{page.relative_to(root)} links to missing {ref}"
            if url.fragment:
                assert url.fragment in parse(target).ids, f"{page.relative_to(root)}: no #{url.fragment} in {target.name}"
        for ref in html.images:
            assert (page.parent / ref).read_bytes()[:8] in (b"\x89PNG\r\n\x1a\n",) or ref.endswith(".js")
            n_images += ref.endswith(".png")
    folder = parsed[root / "runs" / "index.html"]
    # the report's figures (training curves, each seed's numbers, positions and PCA of each setting, the probe)
    assert {"training_Tiny_test_grid.png", "seeds_Tiny_test_grid.png", "language_id.png",
            "positions_0-original-s0.png", "pca_0-original-s0.png"} <= set(folder.images)
    assert n_images >= 5
    assert f"Training: {len(RUNS)} runs, " in (root / "runs" / "index.html").read_text()  # the table's footer


def test_a_run_pages_curves_are_what_its_log_holds(swept, tmp_path):  # noqa: F811
    """A run page's curves are its metrics.jsonl: the loss of every training row, the learning rate, and one panel
    per registry curve column its evaluation rows logged, each point as logged; a run that logged less shows less."""
    import shutil

    from minimult.report.collect import Run, eval_rows, read_object
    from minimult.report.figures import curve_panels
    from minimult.report.site import run_curves
    from minimult.report.tables import mu_top

    d = tmp_path / RUNS[0]
    shutil.copytree(swept.root / RUNS[0], d, ignore=shutil.ignore_patterns("*.pt"))
    load = lambda: Run(d, read_object(d / "results.json"), read_object(d / "config.json"), eval_rows(d))  # noqa: E731
    rows = [json.loads(line) for line in (d / "metrics.jsonl").read_text().splitlines()]
    curves = {c["title"]: c["points"] for c in run_curves(load())}
    assert curves["training loss"] == [[r["step"], pytest.approx(r["loss"], rel=1e-5)] for r in rows if "loss" in r]
    assert curves["learning rate"] and len(curves["learning rate"]) == len(curves["training loss"])
    evals = [r for r in rows if "eval" in r]
    panels = curve_panels(mu_top(read_object(d / "results.json")), [r["eval"] for r in evals])
    assert [t for t in curves if t not in ("training loss", "learning rate")] == [t for t, _, _ in panels] != []
    assert curves["multilinguality µ"] == [[r["step"], pytest.approx(r["eval"]["mu"], rel=1e-5)] for r in evals]
    (d / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows[:-2]) + "\n")  # another log: other curves
    assert sum(len(c["points"]) for c in run_curves(load())) < sum(map(len, curves.values()))


def test_every_table1_row_shows_the_numbers_of_table1_csv(site):
    swept, report, root, output = site
    rows = list(csv.DictReader((report / "table1.csv").open()))
    top = json.loads((report / "report.json").read_text())["top_layer"]
    cols = table_columns(top)
    for page in (root / "runs" / "index.html", root / "index.html"):  # the folder's page and the index's headline
        html = parse(page)
        table = {r[0]: r for r in html.rows if r and r[0] in SETTINGS}
        assert sorted(table) == sorted(r["id"] for r in rows) == sorted(SETTINGS)
        for row in rows:
            cells = table[row["id"]]
            assert cells[1] == row["setting"] and cells[2] == "s0 s42"
            shown = [cells[3]] + cells[5:]  # cells[4]: p of µ
            for (c, l), text in zip(cols, shown):
                key = c.key(l)
                mean, std = row[f"{key}_mean"], row[f"{key}_std"]
                want = "–" if not mean else c.table_text(float(mean)) + (f" ± {c.table_text(float(std))}" if std else "")
                assert text == want, (row["id"], key)
            p = row["mu_p"]
            assert cells[4] == ("" if not p else f"{float(p):.2g}" if float(p) >= 0.001 else "< 0.001")


def test_run_pages_show_config_budget_and_results_and_flag_runs_that_never_trained(site, tmp_path):
    swept, report, root, output = site
    page = (root / "runs" / "runs" / "1-lang-pos-s42.html").read_text()
    for text in ("lang-pos", "seed", "steps", "configuration (config.json)", "latest complete evaluation",
                 "align_f1", 'id="run-curves"'):
        assert text in page
    curves = curve_data(root / "runs" / "runs" / "1-lang-pos-s42.html")
    assert {"training loss", "learning rate", "multilinguality µ", "dev perplexity"} <= {c["title"] for c in curves}
    # a run on the unigram plateau (training perplexity within 0.3 nats of its pieces' unigram entropy,
    # after >= 500 updates) is flagged; one that trained, or a run too short to tell, is not
    from minimult.report.collect import Run, never_trained

    run = tmp_path / "stuck"
    run.mkdir()
    for ppl, steps, flagged in ((541.0, 1775, True), (35.0, 1775, False), (541.0, 26, False)):
        write_json(run / "run.json", {"unigram_entropy": 5.606, "total_steps": steps})
        why = never_trained(Run(run, {"perplexity": {"train": ppl}}, {}))
        assert (why is not None and "the unigram plateau" in why) if flagged else why is None, (ppl, steps, why)


# ---------------------------------------------------------------------------------------------
# Claims.


def fake_run(folder: Path, name: str, mods: str, seed: int, mu: float) -> str:
    d = folder / name
    d.mkdir(parents=True)
    write_json(d / "config.json", {"mods": mods, "preset": "quick", "train": {"seed": seed}})
    write_json(d / "results.json", {"mu": mu, "seed": seed, "mods": mods, "mu_layers": [0, 8], "steps": 10,
                                    "total_steps": 10, "layers": {"0": {}, "8": {}}})
    return name


def fake_table1(folder: Path, values: dict[str, list[float]]) -> None:
    """Run folders of Table 1's settings 0 (original) and 1 (lang-pos) with the given µ per seed, and a manifest."""
    settings = []
    for sid, mus in values.items():
        mods = {"0": "original", "1": "lang-pos"}[sid]
        runs = [fake_run(folder, f"{sid}-{mods}-s{seed}", mods, seed, mu) for seed, mu in zip((0, 42, 43), mus)]
        settings.append({"id": sid, "name": mods, "mods": mods if mods != "original" else "", "runs": runs})
    write_json(folder / "table1.sweep.json", {"title": "Table 1: planted", "preset": "quick", "settings": settings})


def judged(folder: Path) -> dict[str, dict]:
    from minimult.report import load

    rows = judge(load_claims(), {folder.name: load([folder], lambda s: None).sections})
    return {r["id"]: r for r in rows}


def test_a_planted_contradiction_does_not_hold_and_agreement_holds(tmp_path):
    # lang-pos *more* multilingual than original, at every seed: Dufter & Schütze's first claim fails here
    fake_table1(tmp_path / "quick", {"0": [0.10, 0.12], "1": [0.50, 0.52]})
    rows = judged(tmp_path / "quick")
    assert rows["ds-lang-pos"]["verdict"] == FAILS and "the other way" in rows["ds-lang-pos"]["why"]
    assert rows["ds-lang-pos"]["a"]["stats"]["mean"] == pytest.approx(0.51)
    assert rows["ds-shift-special"]["verdict"] == UNKNOWN  # no run of setting 2: cannot tell
    assert "no evaluated run of table1 2" in rows["ds-shift-special"]["why"]
    # and the other way round it holds; one seed of lang-pos is too few
    fake_table1(tmp_path / "quick2", {"0": [0.50, 0.52], "1": [0.10, 0.12]})
    assert judged(tmp_path / "quick2")["ds-lang-pos"]["verdict"] == HOLDS
    fake_table1(tmp_path / "quick3", {"0": [0.50, 0.52], "1": [0.10]})
    assert judged(tmp_path / "quick3")["ds-lang-pos"]["verdict"] == UNKNOWN
    # the site's claims page shows the verdict
    result = CliRunner().invoke(main, ["report", str(tmp_path / "quick"), "--html", str(tmp_path / "site")])
    assert result.exit_code == 0, result.output
    page = parse(tmp_path / "site" / "claims.html")
    row = next(r for r in page.rows if r and "(lang-pos) lower multilinguality" in r[1])
    assert "does not hold" in row and row[4] == "0.510 ± 0.014 vs 0.110 ± 0.014"


def test_a_claim_is_judged_at_its_first_folder_of_preference_where_both_sides_have_two_seeds(tmp_path):
    """`folder = ["paper", "quick"]`: at the paper budget once both sides have 2 seeds there, at quick before."""
    from minimult.report import load

    path = tmp_path / "claims.toml"
    path.write_text('[[claims]]\nid = "lp"\nsource = "s"\nclaim = "c"\nmetric = "mu"\nexpect = "lower"\n'
                    'a = { grid = "table1", id = "1", folder = ["paper", "quick"] }\n'
                    'b = { grid = "table1", id = "0", folder = ["paper", "quick"] }\n')
    fake_table1(tmp_path / "quick", {"0": [0.50, 0.52], "1": [0.10, 0.12]})
    fake_table1(tmp_path / "paper", {"0": [0.60, 0.62], "1": [0.70]})  # the other way, but one seed of lang-pos

    def row():
        folders = {f.name: load([f], lambda s: None).sections for f in (tmp_path / "paper", tmp_path / "quick")}
        return judge(load_claims(path), folders)[0]

    first = row()
    assert first["verdict"] == HOLDS and first["a"]["folder"] == first["b"]["folder"] == "quick"
    assert first["a"]["stats"]["mean"] == pytest.approx(0.11)
    # a second lang-pos seed at the paper budget: judged there, where lang-pos is the more multilingual
    shutil.rmtree(tmp_path / "paper")
    fake_table1(tmp_path / "paper", {"0": [0.60, 0.62], "1": [0.70, 0.72]})
    second = row()
    assert second["verdict"] == FAILS and second["a"]["folder"] == second["b"]["folder"] == "paper"
    # original missing at the paper budget: not taken from the quick folder beside the paper's lang-pos (two
    # budgets in one comparison); the claim goes to the next folder, where both sides are
    shutil.rmtree(tmp_path / "paper")
    fake_table1(tmp_path / "paper", {"1": [0.70, 0.72]})
    third = row()
    assert third["a"]["folder"] == third["b"]["folder"] == "quick" and third["verdict"] == HOLDS
    # a side naming one folder reads it as before; a folder that is not a name is one error line
    assert load_claims(path)[0].a.folders == ("paper", "quick")
    path.write_text(path.read_text().replace('folder = ["paper", "quick"] }\nb', 'folder = [3] }\nb'))
    with pytest.raises(claims_mod.MinimultError, match="`folder` is a results folder's name or a list of them"):
        load_claims(path)


def test_a_tables_orderings_judge_its_own_runs_and_go_where_the_readme_asks(tmp_path):
    """Each table's claims are judged from that table's runs whatever folder claims.toml names (a paper-budget
    Table 1 gets its own orderings); one seed a side is a direction, never a verdict; a claim without runs on
    a side is left out; `--readme` writes the first table's orderings between `<marker>-orderings` markers
    when the README has them, and a README without them is left as it was there."""
    from minimult.report import build_report, load

    fake_table1(tmp_path / "paper", {"0": [0.60], "1": [0.10]})
    section = load([tmp_path / "paper"], lambda s: None).sections[0]
    rows = {r["id"]: r for r in claims_mod.orderings(section)}
    assert rows["ds-lang-pos"]["direction"] == "as the paper's" and rows["ds-lang-pos"]["verdict"] == UNKNOWN
    assert "ds-shift-special" not in rows  # no run of setting 2 here
    fake_table1(tmp_path / "other", {"0": [0.10, 0.12], "1": [0.50, 0.52]})
    row = next(r for r in claims_mod.orderings(load([tmp_path / "other"], lambda s: None).sections[0])
               if r["id"] == "ds-lang-pos")
    assert row["direction"] == "the other way" and row["verdict"] == FAILS and row["b"]["stats"]["n"] == 2

    readme = tmp_path / "README.md"
    blocks = "".join(f"<!-- BEGIN {m} -->\nold\n<!-- END {m} -->\n" for m in ("quick-table1", "quick-table1-orderings"))
    readme.write_text("# intro\n" + blocks + "tail\n")
    report = build_report([tmp_path / "paper"], tmp_path / "out", log=lambda s: None, readme=readme)
    text = readme.read_text()
    block = text.split("<!-- BEGIN quick-table1-orderings -->")[1].split("<!-- END")[0]
    assert "| 1 < 0 (µ) | 0.30 vs 0.70 | 0.100 vs 0.600 | 1 vs 1 | as the paper's | **cannot tell** |" in block
    assert text.startswith("# intro\n") and text.endswith("tail\n") and "old" not in text
    assert report["orderings"][0]["rows"] and "the paper's orderings" in report["markdown"]
    readme.write_text("<!-- BEGIN quick-table1 -->\n<!-- END quick-table1 -->\n")  # no orderings markers: fine
    build_report([tmp_path / "paper"], tmp_path / "out", log=lambda s: None, readme=readme)
    assert "orderings" not in readme.read_text()
    # the folder's page on the site shows them under its table
    result = CliRunner().invoke(main, ["report", str(tmp_path / "paper"), "--html", str(tmp_path / "site")])
    assert result.exit_code == 0, result.output
    page = parse(tmp_path / "site" / "paper" / "index.html")
    row = next(r for r in page.rows if r and r[0].startswith("Language-specific position embeddings"))
    assert row[1:] == ["1 < 0 (µ)", "0.30 vs 0.70", "0.100 vs 0.600", "1 vs 1", "as the paper's", "cannot tell"]


@pytest.mark.parametrize("a, b, expect, verdict", [
    ([0.1, 0.12], [0.5, 0.52], "lower", HOLDS),            # every seed ordered (and p < .05)
    ([0.5, 0.52], [0.1, 0.12], "lower", FAILS),            # separated the other way
    ([0.1, 0.5], [0.2, 0.4], "lower", UNKNOWN),            # overlapping seeds, p large
    ([0.1], [0.5, 0.52], "lower", UNKNOWN),                # one seed
    ([0.30, 0.34, 0.29, 0.41], [0.31, 0.39, 0.45, 0.33], "higher", UNKNOWN),
    ([1.0, 1.0, 0.99], 0.9, "higher", HOLDS),              # a constant side
    ([0.140, 0.142], [0.138, 0.141], "similar", HOLDS),    # within 25% of b, noise included
    ([0.02, 0.03], [0.14, 0.15], "similar", FAILS),        # far beyond the margin, separated
    ([0.05, 0.25], [0.14, 0.15], "similar", UNKNOWN),      # too noisy to say either
    ([0.1, 0.2], [0.2, 0.3], "lower", UNKNOWN),            # seeds that touch are not ordered (and p large)
    ([0.125, 0.155], [0.15, 0.15], "similar", UNKNOWN),    # |∆| .01 + 2 se (sample std) .03 > .0375 = 25% of b
])
def test_the_rule(a, b, expect, verdict):
    assert decide(a, b, expect)["verdict"] == verdict


def test_direction_of_the_means():
    """Where the two means lie: level when equal, else with or against the paper; similar: within margin × |b|."""
    def row(a, b, expect):
        return {"a": {"stats": {"mean": a}}, "b": {"stats": {"mean": b}}, "expect": expect, "margin": 0.25}

    assert claims_mod.direction(row(0.3, 0.3, "lower")) == claims_mod.direction(row(0.3, 0.3, "higher")) == "level"
    assert claims_mod.direction(row(0.2, 0.3, "lower")) == "as the paper's"
    assert claims_mod.direction(row(0.2, 0.3, "higher")) == "the other way"
    assert claims_mod.direction(row(0.1, 0.13, "similar")) == "within 25% of b"  # .03 <= .0325, though > 25% of a
    assert claims_mod.direction(row(0.13, 0.1, "similar")) == "beyond 25% of b"
    assert claims_mod.direction({**row(0.1, 0.1, "lower"), "b": {"stats": None}}) == "–"


def test_a_setting_in_several_folders_is_found_only_in_the_folder_a_side_names():
    from types import SimpleNamespace

    side = claims_mod.Side(grid="table1", id="1")
    quick, paper = (claims_mod.Place(SimpleNamespace(id="1"), f, "table1") for f in ("quick", "paper"))
    other = claims_mod.Place(SimpleNamespace(id="0"), "quick", "table1")
    assert claims_mod.find(side, [quick, other]) == (quick, "")  # the only folder holding it
    assert claims_mod.find(side, [quick, paper]) == (None, "table1 1 is in several folders (paper, quick)")
    assert claims_mod.find(claims_mod.Side(grid="table1", id="1", folders=("paper",)), [quick, paper]) == (paper, "")
    assert claims_mod.find(claims_mod.Side(grid="table2", id="1"), [quick]) == (None, "no evaluated run of table2 1")


def test_every_claim_names_a_setting_of_its_grid_and_a_known_metric():
    claims = load_claims()
    assert len(claims) >= 30 and len({c.id for c in claims}) == len(claims)
    sources = {c.source.split(",")[0].split(" (")[0] for c in claims}
    assert {"Dufter & Schütze", "K et al.", "Wu & Dredze", "van der Goot et al.", "the [SEP] forum thread"} <= sources
    for c in claims:
        for side in (c.a, c.b):
            metric_value({}, side.metric or c.metric)  # a name it cannot read raises
            if side.constant:
                continue
            grid = tomllib.loads((ROOT / "experiments" / f"{side.grid}.toml").read_text())
            assert side.id in {s["id"] for s in grid["settings"]}, (c.id, side)
            for folder in side.folders:
                assert (ROOT / "experiments" / "results" / folder).is_dir(), (c.id, folder)


def test_claims_file_errors_are_one_line(tmp_path):
    bad = tmp_path / "claims.toml"
    bad.write_text('[[claims]]\nid = "x"\nsource = "s"\nclaim = "c"\nmetric = "mu"\nexpect = "smaller"\n'
                   'a = { grid = "table1", id = "1" }\nb = { grid = "table1", id = "0" }\n')
    with pytest.raises(claims_mod.MinimultError, match="expect = 'smaller'; use one of lower, higher, similar"):
        load_claims(bad)
    twice = ('[[claims]]\nid = "x"\nsource = "s"\nclaim = "c"\nmetric = "mu"\nexpect = "lower"\n'
             'a = { grid = "table1", id = "1" }\nb = { grid = "table1", id = "0" }\n')
    bad.write_text(twice + twice)
    with pytest.raises(claims_mod.MinimultError, match="claim x: the id is used twice"):
        load_claims(bad)


def test_claim_numbers_and_a_tables_own_claims():
    """3 significant figures, whole from 100 up; a table's claims are those with both sides in its grid."""
    from types import SimpleNamespace

    assert [claims_mod.number(x) for x in (None, 0.1234, 12.345, 100.0, -150.4, 2345.6)] == [
        "–", "0.123", "12.3", "100", "-150", "2,346"]
    path = Path(claims_mod.__file__).with_name("claims.toml")
    claims = load_claims(path)
    section = SimpleNamespace(manifest={}, grid="table1")
    mine = claims_mod.section_claims(claims, section)
    assert mine and all(c.a.grid == c.b.grid == "table1" and not c.a.constant and not c.b.constant for c in mine)
    mixed = claims[0].__class__("m", "s", "c", "mu", "lower", claims_mod.Side("table1", "1"),
                                claims_mod.Side("table2", "1"))
    assert claims_mod.section_claims([mixed], section) == []
    assert claims_mod.section_claims(claims, SimpleNamespace(manifest=None, grid="table1")) == []


def test_readme_claims_table_is_what_the_committed_folders_give(tmp_path):
    """docs/results.md's claims block is exactly what `report --site ... --readme` writes from experiments/results/."""
    from minimult.report import load
    from minimult.report.readme import update_readme
    from minimult.report.site import site_folders

    rows = judge(load_claims(), {f.name: load([f], lambda s: None).sections for f in site_folders()})
    readme = tmp_path / "results.md"
    readme.write_bytes((ROOT / "docs" / "results.md").read_bytes())
    assert not update_readme(readme, claims_mod.markdown(rows), "claims", write=False)
    verdicts = {r["id"]: r["verdict"] for r in rows}
    assert verdicts["ds-lang-pos"] == HOLDS and verdicts["ds-overparam-lang-pos"] == UNKNOWN  # 16 needs a GPU
    # overparam ran at quick-b256 only: set against quick-b256's original, not the paper-budget one
    overparam = next(r for r in rows if r["id"] == "ds-overparam")
    assert {overparam["a"]["folder"], overparam["b"]["folder"]} == {"quick"}, overparam
    assert claims_mod.budget_text(overparam) == "quick-b256 / quick: 1,775 × 256"  # one budget, two names


def test_a_level_whose_sides_name_different_folders_counts_only_as_the_last(tmp_path):
    """A side that names one folder (quick) and a side that prefers table1-paper: both have 2 seeds at the
    first level, but in different folders at different budgets, so the claim is judged at the last level, both
    sides in quick; with table1-paper first on both sides, at the paper's budget."""
    from minimult.report import load

    folders = [ROOT / "experiments" / "results" / f for f in ("table1-paper", "quick")]
    sections = {f.name: load([f], lambda s: None).sections for f in folders}
    text = ('[[claims]]\nid = "x"\nsource = "s"\nclaim = "c"\nmetric = "mu"\nexpect = "lower"\n'
            'a = {{ grid = "table1", id = "1", folder = {a} }}\n'
            'b = {{ grid = "table1", id = "0", folder = ["table1-paper", "quick"] }}\n')
    for a, where in (('"quick"', {"quick"}), ('["table1-paper", "quick"]', {"table1-paper"})):
        (tmp_path / "claims.toml").write_text(text.format(a=a))
        (row,) = judge(load_claims(tmp_path / "claims.toml"), sections)
        assert {row["a"]["folder"], row["b"]["folder"]} == where, (a, row["a"]["folder"], row["b"]["folder"])


def test_the_budget_column_names_an_untrained_side_as_untrained():
    """An untrained setting's budget is `<preset>: untrained`, not its preset's bare name beside the other
    side's `paper: 14,100 × 128` (which read `paper, paper: 14,100 × 128`); the committed paper-budget runs."""
    from minimult.report import load

    folder = ROOT / "experiments" / "results" / "table1-paper"
    rows = {r["id"]: r for r in judge(load_claims(), {folder.name: load([folder], lambda s: None).sections})}
    assert claims_mod.budget_text(rows["ds-untrained"]) == "paper: untrained, paper: 14,100 × 128"
    assert claims_mod.budget_text(rows["ds-untrained-positions"]) == "paper: untrained"
    assert claims_mod.budget_text(rows["ds-lang-pos"]) == "paper: 14,100 × 128"


def test_a_second_report_into_one_site_folder_leaves_no_page_unlinked(tmp_path):
    """`report A --html S` then `report B --html S`: S is B's site; A's folder pages, which B's index would not link,
    are removed (issue 63, minor), and a file of the user's own in S is left alone."""
    site = tmp_path / "site"
    for name in ("first", "second"):
        fake_table1(tmp_path / name, {"0": [0.50, 0.52], "1": [0.10, 0.12]})
        result = CliRunner().invoke(main, ["report", str(tmp_path / name), "--html", str(site)])
        assert result.exit_code == 0, result.output
        if name == "first":
            assert (site / "first" / "index.html").is_file()
            (site / "notes.txt").write_text("mine")
    assert not (site / "first").exists() and (site / "second" / "index.html").is_file()
    assert "removed first/" in result.output and (site / "notes.txt").read_text() == "mine"
    assert "first/" not in (site / "index.html").read_text()
