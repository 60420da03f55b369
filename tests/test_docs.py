"""The repository stands alone (docs/pipeline.md, Testing): code, tests, grids, CONTRIBUTING.md and the
README cite `docs/` pages and papers by author and year (docs/papers.md). They never cite the product
specification or the style guide that were kept outside the repository, nor a paper by the internal
number it was once stored under; and every `docs/` page they name exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SCANNED = ("minimult", "tests", "experiments", "CONTRIBUTING.md", "README.md")

# Citations that send a reader outside the repository. The words are split so that this file's own
# source does not spell them.
SPEC, STYLE_GUIDE = "DES" + "IGN", "STY" + "LE"
FORBIDDEN = {
    "the outside specification": re.compile(rf"\b{SPEC}(?:\s*§|\.md\b|'s\b)"),
    "the outside style guide": re.compile(rf"\b{STYLE_GUIDE}(?:\s*\d|\.md\b)"),
    "a paper by internal number": re.compile(
        r"\b[Ss]eeds?\s+0{2}\d\b"                                  # the old "seed NNN" names
        r"|\(0{2}[0-4](?=[,;) ])"                                  # "(NNN, App. B.2)"
        r"|\b0{2}[0-4](?:'s)?\s+(?:App\.|§|Fig\.|found|reversed)"  # "NNN App. B.2", "NNN found"
        r"|\bas(?: in)? 0{2}[0-4]\b"),                             # "as in NNN"
}
DOCS_LINK = re.compile(r"\bdocs/([\w.-]+\.md)\b")
RELATIVE_LINK = re.compile(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)")


def _scanned_files() -> list[Path]:
    out = []
    for name in SCANNED:
        path = ROOT / name
        candidates = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        out += [p for p in candidates
                if "__pycache__" not in p.parts and not any(part.startswith(".") for part in p.relative_to(ROOT).parts)
                and p != Path(__file__).resolve()]
    return out


def _texts() -> dict[Path, str]:
    texts = {}
    for path in _scanned_files():
        try:
            texts[path] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:  # figures, checkpoints: not prose
            continue
    return texts


@pytest.fixture(scope="module")
def texts() -> dict[Path, str]:
    found = _texts()
    assert len(found) > 100 and ROOT / "README.md" in found  # the scan really reads the repository
    return found


@pytest.mark.parametrize("kind", list(FORBIDDEN))
def test_nothing_cites_outside_the_repository(texts, kind):
    pattern = FORBIDDEN[kind]
    hits = [f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}"
            for path, text in texts.items() for m in pattern.finditer(text)]
    assert not hits, (f"{kind} cited (cite a docs/ page or the paper by author and year, docs/papers.md):\n"
                      + "\n".join(hits[:30]))


@pytest.mark.parametrize("bad, kind", [
    (SPEC + " §8", "the outside specification"),
    (SPEC + " §4-§5", "the outside specification"),
    (SPEC + "'s note", "the outside specification"),
    (STYLE_GUIDE + " 11", "the outside style guide"),
    ("seed " + "003", "a paper by internal number"),
    ("Seed " + "001 asks", "a paper by internal number"),
    ("(seeds " + "003, 004)", "a paper by internal number"),
    ("(" + "002, App. B.2)", "a paper by internal number"),
    ("as in " + "003)", "a paper by internal number"),
    ("as " + "002 found", "a paper by internal number"),
])
def test_the_patterns_catch_each_old_form(bad, kind):
    assert FORBIDDEN[kind].search(f"text {bad} text")


@pytest.mark.parametrize("good", ["0.002", ".003", "10,000 dev sentences", "1_000_003", "seeds 0, 42",
                                  "rand:1", "Wu & Dredze (2019)", "(docs/metrics.md)", "design", "style"])
def test_the_patterns_leave_ordinary_text_alone(good):
    assert not any(p.search(f"text {good} text") for p in FORBIDDEN.values())


def test_every_cited_docs_page_exists(texts):
    cited = {(path, m.group(1)) for path, text in texts.items() for m in DOCS_LINK.finditer(text)}
    assert {"metrics.md", "pipeline.md", "papers.md"} <= {name for _, name in cited}
    missing = sorted(f"{path.relative_to(ROOT)} cites docs/{name}" for path, name in cited
                     if not (DOCS / name).is_file())
    assert not missing, "cited docs/ pages that do not exist:\n" + "\n".join(missing)


def test_docs_pages_link_to_pages_that_exist_and_the_index_lists_every_page():
    pages = sorted(DOCS.glob("*.md"))
    assert {p.name for p in pages} >= {"README.md", "papers.md", "metrics.md", "pipeline.md", "attention.md"}
    for page in pages:
        for m in RELATIVE_LINK.finditer(page.read_text(encoding="utf-8")):
            if "://" not in m.group(1):
                assert (page.parent / m.group(1)).resolve().is_file(), f"{page.name} links to missing {m.group(1)}"
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    assert all(f"]({p.name})" in index for p in pages if p.name != "README.md")


def test_every_experiments_script_is_in_its_folders_index():
    """experiments/README.md names each script of experiments/ and experiments/gpu/, analyses/README.md each
    of analyses/: a script nobody indexed is one nobody can tell the purpose of."""
    experiments = ROOT / "experiments"
    main, analyses = ((folder / "README.md").read_text(encoding="utf-8")
                      for folder in (experiments, experiments / "analyses"))
    scripts = [(p, main) for p in [*experiments.glob("*"), *(experiments / "gpu").glob("*")]]
    scripts += [(p, analyses) for p in (experiments / "analyses").glob("*")]
    scripts = [(p, index) for p, index in scripts if p.suffix in (".py", ".sh")]
    assert len(scripts) > 15
    missing = sorted(str(p.relative_to(ROOT)) for p, index in scripts if f"`{p.name}`" not in index)
    assert not missing, "scripts no index names:\n" + "\n".join(missing)


def test_every_module_is_in_the_layout_table():
    """docs/pipeline.md's Layout table says what each folder and file of minimult/ holds: a module it does not
    name (as `name`, or in words as "word order") is one a newcomer cannot place."""
    text = (DOCS / "pipeline.md").read_text(encoding="utf-8")
    table = text.split("| folder / file | what it holds |", 1)[1].split("\n\n", 1)[0]
    modules = [p for p in (ROOT / "minimult").rglob("*.py") if p.stem != "__init__"]
    assert len(modules) > 60
    missing = sorted(str(p.relative_to(ROOT)) for p in modules  # as a word: `hf` is in no other word's
                     if not re.search(rf"\b({p.stem}|{p.stem.replace('_', ' ')})\b", table))
    assert not missing, "modules docs/pipeline.md's Layout table does not name: " + ", ".join(missing)


def test_the_grid_file_example_loads_with_every_key(tmp_path):
    """docs/usage.md's "Grid files" example is a grid the sweep loads, and it shows every key a grid takes."""
    from minimult.sweep.grid import SETTING_KEYS, TOP_KEYS, load_grid

    text = (DOCS / "usage.md").read_text(encoding="utf-8").split("### Grid files", 1)[1]
    example = re.search(r"```toml\n(.*?)```", text, re.S).group(1)
    (tmp_path / "example.toml").write_text(example, encoding="utf-8")
    grid = load_grid(tmp_path / "example.toml")
    assert [s.id for s in grid.settings] == ["0", "1lo"] and grid.settings[1].overrides == {"train.lr": 5e-4}
    keys = set(re.findall(r"^\[*([\w]+)[\].]* ?=?", example, re.M)) | set(re.findall(r"^\[+(\w+)", example, re.M))
    assert TOP_KEYS | SETTING_KEYS <= keys, sorted(TOP_KEYS | SETTING_KEYS - keys)


def test_every_results_folder_is_named_in_the_results_index():
    results = ROOT / "experiments" / "results"
    index = (results / "README.md").read_text(encoding="utf-8")
    folders = sorted(p.name for p in results.iterdir() if p.is_dir())
    assert len(folders) > 10
    missing = [name for name in folders if f"`{name}/`" not in index]
    assert not missing, "experiments/results/ folders its README.md does not name: " + ", ".join(missing)


def test_docs_usage_names_every_option_of_every_command():
    """docs/usage.md calls itself the whole reference: each command's every long option is on it."""
    import click

    from minimult.cli import main

    usage = (DOCS / "usage.md").read_text(encoding="utf-8")
    options = {f"{name} {opt}" for name, command in main.commands.items() for p in command.params
               if isinstance(p, click.Option) for opt in p.opts if opt.startswith("--") and opt != "--help"}
    assert len(options) > 50
    missing = sorted(o for o in options if o.split()[1] not in usage)
    assert not missing, "options docs/usage.md does not name: " + ", ".join(missing)


def test_the_readme_tables_list_every_registered_mod_preset_and_source():
    """The README's first table cells name every mod and preset, and its `--source` choices are the sources."""
    from minimult.config import PRESETS
    from minimult.data.sources import REGISTRY as SOURCES
    from minimult.mods import REGISTRY as MODS

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first_cells = " ".join(re.findall(r"^\|([^|\n]+)\|", readme, re.M))
    named = set(re.findall(r"`([\w-]+)", first_cells))
    assert set(MODS) | set(PRESETS) <= named, sorted((set(MODS) | set(PRESETS)) - named)
    source_option = re.search(r"`--source ([\w|-]+)`", readme).group(1).split("|")
    assert sorted(source_option) == sorted(SOURCES)


def test_the_readme_names_every_pair_of_mods_the_parser_refuses_and_pipeline_every_mods_family():
    """The README's paragraph under the Mods table spells out the refused pairs by hand (`a,b`, and `untrained`
    beside the mods that act only on training): exactly the pairs of registered mods parse_mods refuses. And
    docs/pipeline.md's "By family" list names every registered mod. A new mod with a group or a conflict, or
    none, fails here until both say so."""
    from itertools import combinations

    from minimult.errors import MinimultError
    from minimult.mods import REGISTRY as MODS, parse_mods

    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    text = re.search(r"Mods in one group contradict each other (.*?)\. `minimult mods` lists", readme).group(1)
    said = {frozenset(pair) for pair in re.findall(r"`([\w-]+),([\w-]+)`", text)}
    untrained = re.search(r"`untrained` beside a mod that acts only on training: ([\w, -]+)\)", text).group(1)
    said |= {frozenset(("untrained", m)) for m in untrained.split(", ")}

    def refused(a, b):
        try:
            parse_mods([a, b])
        except MinimultError as e:
            return "contradictory" in str(e)
        return False
    assert said == {frozenset(pair) for pair in combinations(MODS, 2) if refused(*pair)}
    families = (DOCS / "pipeline.md").read_text(encoding="utf-8").split("By family:", 1)[1].split("\n\n", 2)[1]
    assert set(MODS) <= set(re.findall(r"`([\w-]+)", families)), sorted(set(MODS) - set(re.findall(r"`([\w-]+)", families)))


def test_fidelity_published_cells_are_the_committed_runs():
    """docs/fidelity.md's lang-pos table gives, per row, `published` µ and F1/ρ/τ at layer 0 as mean ± sample
    std over the seeds it names: each number is what the committed results.json of those seeds give (to 3
    decimals), so a landed seed cannot leave a cell computed by hand behind."""
    import json
    import statistics

    runs = ROOT / "experiments" / "results" / "table1-published"
    lines = (DOCS / "fidelity.md").read_text(encoding="utf-8").split("### Every lang-pos row", 1)[1].splitlines()
    checked, setting = 0, None
    for line in lines:
        if m := re.match(r"\| (\w+) ", line):
            setting = m.group(1)
        m = re.match(r"\| \| `published`, seeds ([\d, ]+?)(?: \(.*?\))? \|(.*)\|$", line)
        if not m:
            continue
        seeds = [int(s) for s in m.group(1).split(",")]
        found = [sorted(runs.glob(f"{setting}-*-s{seed}/results.json")) for seed in seeds]
        assert all(len(f) == 1 for f in found), f"row {setting}: seeds {seeds} are not each one committed run"
        results = [json.loads(f[0].read_text()) for f in found]
        columns = [[r["mu"] for r in results]]
        columns += [[r["layers"]["0"][key] for r in results] for key in ("align_f1", "retrieval", "translation")]
        cells = [[float(x) for x in cell.split("±")] for cell in m.group(2).split("|")]
        for cell, values in zip(cells, columns, strict=True):
            expected = [statistics.mean(values), statistics.stdev(values)]
            assert cell == pytest.approx(expected, abs=5e-4), f"row {setting}, seeds {seeds}"
        checked += 1
    assert checked >= 7


def test_the_readme_says_of_both_recipes_what_results_md_generated():
    """The README's paragraph on the published recipe repeats, by hand, from docs/results.md's generated block:
    how many orderings are robust and how many cannot be told, lang-pos's µ per seed, and which rows of the
    newest seed are in. Each must be what the block and the committed run folders say."""
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    block = (DOCS / "results.md").read_text(encoding="utf-8").split("<!-- BEGIN recipes -->", 1)[1]
    robust, unknown = re.search(r"(\d+) robust .*?, (\d+) cannot tell", block).groups()
    assert re.search(rf"\b{robust} of the 14 orderings hold under both recipes and {unknown} cannot be told", readme)
    floor_row = re.search(r"^\| 1 lang-pos \|.*\| \d+ of \d+ [^|]*?: ([^|]*?) \|$", block, re.M).group(1)
    said = re.search(r"lang-pos splits by seed under the published recipe too \(µ ([.\d, ]+):", readme).group(1)
    assert [float(x) for x in said.split(",")] == [float(x) for x in re.findall(r"s\d+ ([.\d]+)", floor_row)]
    _seeds_are_the_committed_runs(readme.split("the published code's recipe", 1)[1], "table1-published")


def test_the_readme_names_the_lab_tables_seeds():
    """The README's headline paragraph names the lab recipe's seeds by hand while seeds are being added ("seeds 0,
    42 and 43 of every row and seed 100 of rows 0 and 2"): each named seed must be in the committed run folders for
    exactly the rows named."""
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    _seeds_are_the_committed_runs(readme.split("the lab's recipe", 1)[1].split("generated by", 1)[0], "table1-paper")


def test_the_readme_quotes_the_lab_tables_lang_pos_seeds_and_original():
    """The README's headline paragraph quotes, by hand, original's mean µ (2 decimals), lang-pos's µ seed by seed
    under the lab recipe and how many of them are on the floor: each must be what the committed run folders give,
    and every committed seed named."""
    import json
    import statistics

    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    root = ROOT / "experiments" / "results" / "table1-paper"
    mu = lambda run: json.loads((run / "results.json").read_text())["mu"]  # noqa: E731
    original = float(re.search(r"original's µ is (\.\d\d) against the paper's", readme).group(1))
    assert original == round(statistics.mean(mu(r) for r in root.glob("0-original-s*") if r.is_dir()), 2)
    values, seeds = re.search(r"\*\*lang-pos splits by seed\*\* \(µ ([.\d, ]+) at seeds ([\d, ]+):", readme).groups()
    said = dict(zip(seeds.split(", "), values.split(", ")))
    assert said == {r.name.rsplit("-s", 1)[1]: f"{mu(r):.3f}".lstrip("0") for r in root.glob("1-lang-pos-s*")}
    k, n = map(int, re.search(r"; (\d+) of (\d+) under the lab recipe\)", readme).groups())
    assert (k, n) == (sum(float(v) < 0.05 for v in said.values()), len(said))  # its seeds on the floor


def _seeds_are_the_committed_runs(text, folder):
    """Each clause "seed(s) S of rows A and B", "... of every row but A and B" or "... of every row" in text (the
    first sentence that has one) names exactly the rows whose run folders at seed S are committed under folder."""
    clauses = re.findall(r"seeds? ([\d, ]+?(?: and \d+)?) of (rows|every row but|every row)"
                         r"((?: \d+[bp]?)(?:(?:,| and) \d+[bp]?\b(?! of))*)?", text.split(". ", 1)[0])

    def done(s):
        return {p.parent.name.split("-", 1)[0]
                for p in (ROOT / "experiments" / "results" / folder).glob(f"*-s{s}/results.json")}
    assert clauses, text[:200]
    for seeds, which, rows in clauses:
        named = set(re.findall(r"\d+[bp]?", rows))
        for s in re.findall(r"\d+", seeds):
            assert done(s) == (named if which == "rows" else done("0") - named), (folder, s)


def test_published_recipe_costs_are_the_committed_runs():
    """docs/published-recipe.md's cost table gives training seconds a run (run.json's `train_seconds`) by hand:
    each number in it is a committed run's, rounded, every trained run's seconds fall within one of its rows, and
    the total it quotes is the committed runs'. A landed run the table does not cover fails here."""
    import json

    text = (DOCS / "published-recipe.md").read_text(encoding="utf-8")
    records = [json.loads(p.read_text()) for p in
               sorted((ROOT / "experiments" / "results" / "table1-published").glob("*/run.json"))]
    seconds = [r["train_seconds"] for r in records if r.get("train_seconds")]
    table = text.split("| machine | runs | seconds a run |", 1)[1].split("\n\n", 1)[0]
    spans = []
    for row in table.splitlines()[2:]:
        said = [int(n.replace(",", "")) for n in re.findall(r"\d{1,2},\d{3}", row.split("|")[3])]
        assert said and all(any(round(s) == n for s in seconds) for n in said), row
        spans.append((min(said), max(said)))
    assert all(any(lo <= round(s) <= hi for lo, hi in spans) for s in seconds)
    n, untrained, hours = re.search(r"with the (\d+) runs committed by [\d-]+, (\d+) of them untrained: ([\d.]+) h",
                                    " ".join(text.split())).groups()
    assert (int(n), int(untrained), float(hours)) == (len(records), len(records) - len(seconds),
                                                      round(sum(seconds) / 3600, 1))
