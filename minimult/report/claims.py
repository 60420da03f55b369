"""The papers' claims, judged from the results folders: holds / does not hold / cannot tell.

The claims are data (`claims.toml` beside this file): each compares side `a` with side `b` (a setting of a
grid's sweep, or a constant) on a metric, expecting a lower, higher or similar value. `judge` reads
the numbers of each side's runs (one per seed) from the sections a report collected and applies the rule
of docs/claims.md:

- a side with fewer than 2 seeds (a constant counts as enough) is *cannot tell*;
- lower / higher: the sides are *separated* when Welch's t-test gives p < 0.05 (a constant: the one-sample
  t-test) or every seed of one side lies beyond every seed of the other; separated in the expected
  direction *holds*, in the other *does not hold*, not separated *cannot tell*;
- similar: with ∆ the difference of the means and se its standard error (√(s²a/na + s²b/nb)), *holds*
  when |∆| + 2·se is within `margin` × |mean of b|, *does not hold* when the sides are separated and |∆|
  is beyond it, otherwise *cannot tell*.

Runs that never trained (`collect.never_trained`) are left out of every side, and the row says so.

A side's `folder` may be a list, in order of preference: the claim is judged at the first place where both
sides have the rule's 2 seeds (the paper-budget Table 1 before the quick-b256 one), else at the last.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from scipy import stats

from minimult.errors import MinimultError
from minimult.report.collect import Group, Section, never_trained, read_object
from minimult.report.parts import Part, register
from minimult.report.tables import aggregate, finite, mean_std, p_value, table_columns, table_lines, welch_p

CLAIMS_FILE = Path(__file__).with_name("claims.toml")
EXPECTATIONS = ("lower", "higher", "similar")
HOLDS, FAILS, UNKNOWN = "holds", "does not hold", "cannot tell"
NOT_TESTED = "not tested here"  # a count, not a verdict: cannot tell, with no run of a side
ALPHA = 0.05
DEFAULT_MARGIN = 0.25


@dataclass(frozen=True)
class Side:
    grid: str = ""
    id: str = ""
    folders: tuple[str, ...] = ()  # results folders in order of preference
    metric: str = ""  # "" = the claim's
    value: float | None = None  # a constant instead of a setting

    @property
    def constant(self) -> bool:
        return self.value is not None

    @property
    def folder(self) -> str:
        return self.folders[0] if self.folders else ""

    def at(self, i: int) -> Side:
        """The side read from its i-th folder of preference (its last when it names fewer)."""
        return replace(self, folders=(self.folders[min(i, len(self.folders) - 1)],)) if self.folders else self


@dataclass(frozen=True)
class Claim:
    id: str
    source: str
    claim: str
    metric: str
    expect: str
    a: Side
    b: Side
    margin: float = DEFAULT_MARGIN
    paper: dict = field(default_factory=dict)


def _side(raw, where: str) -> Side:
    if not isinstance(raw, dict):
        raise MinimultError(f"{where}: a side is a table (grid, id, folder) or {{ value = NUMBER }}")
    unknown = set(raw) - {"grid", "id", "folder", "metric", "value"}
    if unknown:
        raise MinimultError(f"{where}: unknown key(s) {', '.join(sorted(unknown))} (grid, id, folder, metric, value)")
    if "value" in raw:
        return Side(value=float(raw["value"]), metric=str(raw.get("metric", "")))
    if not raw.get("grid") or not raw.get("id"):
        raise MinimultError(f"{where}: a side needs `grid` and `id` (or `value`)")
    folders = raw.get("folder", [])
    folders = [folders] if isinstance(folders, str) else folders
    if not isinstance(folders, list) or not all(isinstance(f, str) and f for f in folders):
        raise MinimultError(f"{where}: `folder` is a results folder's name or a list of them, in order of preference")
    return Side(str(raw["grid"]), str(raw["id"]), tuple(folders), str(raw.get("metric", "")))


def load_claims(path: Path | str = CLAIMS_FILE) -> list[Claim]:
    """The claims of a claims file, checked (an unknown expectation or key is one error line)."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise MinimultError(f"cannot read the claims file {path}: {e}") from None
    claims, seen = [], set()
    for i, raw in enumerate(data.get("claims", [])):
        where = f"{path.name}, claim {raw.get('id', i + 1)}"
        missing = [k for k in ("id", "source", "claim", "metric", "expect", "a", "b") if k not in raw]
        if missing:
            raise MinimultError(f"{where}: missing {', '.join(missing)}")
        if raw["expect"] not in EXPECTATIONS:
            raise MinimultError(f"{where}: expect = {raw['expect']!r}; use one of {', '.join(EXPECTATIONS)}")
        if raw["id"] in seen:
            raise MinimultError(f"{where}: the id is used twice")
        seen.add(raw["id"])
        claims.append(Claim(str(raw["id"]), str(raw["source"]), str(raw["claim"]), str(raw["metric"]), raw["expect"],
                            _side(raw["a"], where), _side(raw["b"], where),
                            float(raw.get("margin", DEFAULT_MARGIN)), dict(raw.get("paper", {}))))
    return claims


# ---------------------------------------------------------------------------------------------
# Metrics: one number per run.


def _column(key: str):
    layer = key.rsplit("_L", 1)[1] if "_L" in key else "8"
    for c, l in table_columns(layer if layer.isdigit() else "8"):
        if c.key(l) == key:
            return c, l
    return None


def _segment_block(results: dict, alternation: str) -> dict | None:
    blocks = [b for b in results.get("evaluations", []) if b.get("evaluation", {}).get("segment") == alternation]
    return blocks[-1] if blocks else None


def metric_value(results: dict, name: str) -> float | None:
    """A run's number for a claim's metric (see claims.toml's header); None when the run lacks it."""
    parts = name.split(".")
    if parts[0] == "transfer" and len(parts) == 3:
        mode = (results.get("transfer") or {}).get("modes", {}).get(parts[1], {})
        return finite(mode.get(parts[2])) if isinstance(mode, dict) else None
    if parts[0] == "probe" and len(parts) == 3 and parts[2] == "min":
        values = (results.get("probe") or {}).get(parts[1])
        return finite(min(values)) if values else None
    if parts[0] == "links" and len(parts) == 2 and parts[1].startswith("f1_L"):
        layer = (results.get("links") or {}).get("layers", {}).get(parts[1][4:], {})
        return finite(layer.get("f1"))
    if parts[0] in ("segment", "segment_change") and len(parts) >= 3:
        alternation, key = parts[1], ".".join(parts[2:])
        block = _segment_block(results, alternation)
        changed = metric_value(block, key) if block else None
        if parts[0] == "segment" or changed is None:
            return changed
        trained = metric_value(results, key)
        return None if not trained else abs(changed - trained) / abs(trained)
    found = _column(name)
    if found is None:
        raise MinimultError(f"unknown claim metric {name!r}: a Table 1 column key (mu, align_f1_L0, ...), "
                            f"transfer.MODE.FIELD, probe.KIND.min, links.f1_LN, segment[_change].ALT.KEY")
    column, layer = found
    return finite(column.value(results, layer))


# ---------------------------------------------------------------------------------------------
# Finding a side's runs.


@dataclass
class Place:
    """A setting as a report found it: its group, the results folder and grid it came from."""

    group: Group
    folder: str
    grid: str


def places(sections_by_folder: dict[str, list[Section]]) -> list[Place]:
    """Every setting of a sweep (runs of no sweep have no grid to name them by)."""
    return [Place(g, folder, s.grid) for folder, sections in sections_by_folder.items() for s in sections
            if s.manifest is not None for g in s.groups]


def find(side: Side, found: list[Place]) -> tuple[Place | None, str]:
    """(the place of a side's setting, why none): its folder's when the side names one that holds it, else the
    only folder holding that grid's setting."""
    candidates = [p for p in found if p.grid == side.grid and p.group.id == side.id]
    preferred = [p for p in candidates if p.folder == side.folder]
    if preferred:
        return preferred[0], ""
    if len({p.folder for p in candidates}) == 1:
        return candidates[0], ""
    if candidates:
        return None, (f"{side.grid} {side.id} is in several folders "
                      f"({', '.join(sorted({p.folder for p in candidates}))})")
    return None, f"no evaluated run of {side.grid} {side.id}"


# ---------------------------------------------------------------------------------------------
# The rule.


def decide(a: list[float], b: list[float] | float, expect: str, margin: float = DEFAULT_MARGIN) -> dict:
    """The verdict for seed values `a` against seed values `b` (or a constant): verdict, why, p."""
    constant = not isinstance(b, list)
    bs = [float(b)] if constant else b
    if not a or not bs:
        return {"verdict": UNKNOWN, "why": "no numbers on one side", "p": None}
    if len(a) < 2 or (not constant and len(bs) < 2):
        return {"verdict": UNKNOWN, "why": "fewer than 2 seeds on a side", "p": None}
    p = p_value(stats.ttest_1samp, a, bs[0]) if constant else welch_p(a, bs)
    ordered = max(a) < min(bs) or min(a) > max(bs)
    separated = (p is not None and p < ALPHA) or ordered
    diff = float(np.mean(a) - np.mean(bs))
    how = f"p = {p:.2g}" if p is not None else "p n/a"
    if expect == "similar":
        se = math.sqrt(np.var(a, ddof=1) / len(a) + (0.0 if constant else np.var(bs, ddof=1) / len(bs)))
        bound = margin * abs(float(np.mean(bs)))
        if abs(diff) + 2 * se <= bound:
            return {"verdict": HOLDS, "why": f"|difference| + 2 se = {abs(diff) + 2 * se:.3g} ≤ {bound:.3g} "
                                             f"({margin:.0%} of b)", "p": p}
        if separated and abs(diff) > bound:
            return {"verdict": FAILS, "why": f"difference {diff:+.3g} beyond {bound:.3g} ({margin:.0%} of b), "
                                             f"seeds separated ({how})", "p": p}
        return {"verdict": UNKNOWN, "why": f"difference {diff:+.3g} ± {2 * se:.2g} (2 se) against {bound:.3g}",
                "p": p}
    if not separated:
        return {"verdict": UNKNOWN, "why": f"within seed noise ({how}, seeds overlap)", "p": p}
    right = diff < 0 if expect == "lower" else diff > 0
    basis = "every seed ordered" if ordered and not (p is not None and p < ALPHA) else how
    return {"verdict": HOLDS if right else FAILS, "why": f"{'as expected' if right else 'the other way'} ({basis})",
            "p": p}


def _side_values(side: Side, metric: str, found: list[Place]) -> dict:
    """A side's numbers: label, place, per-seed values (runs that never trained left out), preset."""
    if side.constant:
        return {"label": f"{side.value:g}", "values": side.value, "place": None, "left_out": [], "why": ""}
    place, why = find(side, found)
    if place is None:
        return {"label": f"{side.id}", "values": [], "place": None, "left_out": [], "why": why}
    values, left_out = [], []
    for r in place.group.runs:
        reason = never_trained(r)
        if reason:
            left_out.append((r, reason))
            continue
        v = metric_value(r.results, metric)
        if v is not None:
            values.append(v)
    why = "" if values else f"{place.group.label}: no run with {metric}"
    return {"label": place.group.label, "values": values, "place": place, "left_out": left_out, "why": why,
            "preset": _budget(place.group)}


def _budget(g: Group) -> str:
    """What a setting trained with: its preset, updates × sentences per batch (`quick-b256: 1,775 × 256`), or
    `<preset>: untrained` for a setting of 0 updates (the preset's name alone read as if it were a budget)."""
    run = g.runs[0]
    steps = run.results.get("total_steps") or (read_object(run.path / "run.json") or {}).get("total_steps")
    batch = run.config.get("train", {}).get("batch_size")
    preset = g.preset or run.config.get("preset", "")
    if steps == 0:
        return f"{preset}: untrained"
    return f"{preset}: {steps:,} × {batch}" if isinstance(steps, int) and steps and batch else preset


def _enough(side: dict) -> bool:
    """Whether a side has what the rule needs: a constant, or 2 seeds' numbers."""
    return not isinstance(side["values"], list) or len(side["values"]) >= 2


def _elsewhere(side: Side, values: dict) -> bool:
    """Whether a side's numbers came from another folder than the one it names (`find`'s fallback to the
    only folder holding its setting)."""
    place = values.get("place")
    return bool(side.folders) and place is not None and place.folder != side.folder


def _sides(c: Claim, found: list[Place]) -> tuple[dict, dict]:
    """Both sides' numbers from the first folder of preference where both have 2 seeds, else the last. Before
    the last, a level counts only where both sides are in the folders it names, and in one folder where both
    name one: a side missing from the paper-budget folder must not be taken from the quick one while the other
    side stays at the paper's, nor a side that only the quick folder has (overparam) be set against the other
    side's paper-budget runs."""
    tries = max(len(c.a.folders), len(c.b.folders), 1)
    for i in range(tries):
        a = _side_values(c.a.at(i), c.a.metric or c.metric, found)
        b = _side_values(c.b.at(i), c.b.metric or c.metric, found)
        apart = bool(c.a.folders and c.b.folders) and c.a.at(i).folder != c.b.at(i).folder
        if (_enough(a) and _enough(b) and not apart and not _elsewhere(c.a.at(i), a)
                and not _elsewhere(c.b.at(i), b)):
            break
    return a, b


def judge(claims: list[Claim], sections_by_folder: dict[str, list[Section]]) -> list[dict]:
    """One row per claim: the claim, both sides' numbers and seeds, the paper's numbers and the verdict."""
    found = places(sections_by_folder)
    rows = []
    for c in claims:
        a, b = _sides(c, found)
        if a["why"] or b["why"]:
            decision = {"verdict": UNKNOWN, "why": "; ".join(x for x in (a["why"], b["why"]) if x), "p": None}
        else:
            decision = decide(a["values"], b["values"], c.expect, c.margin)
        left = [f"{r.path.name} ({why})" for side in (a, b) for r, why in side["left_out"]]
        rows.append({"id": c.id, "source": c.source, "claim": c.claim, "expect": c.expect, "margin": c.margin,
                     "metric": c.metric, "metric_a": c.a.metric or c.metric, "metric_b": c.b.metric or c.metric,
                     "paper": c.paper, "a": _summary(a), "b": _summary(b), **decision,
                     "left_out": left})
    return rows


def _summary(side: dict) -> dict:
    values = side["values"]
    constant = not isinstance(values, list)
    place = side["place"]
    return {"label": side["label"], "constant": constant, "value_text": number(values) if constant else "",
            "stats": None if constant else aggregate(values),
            "value": values if constant else None,
            "folder": place.folder if place else "", "setting_id": place.group.id if place else "",
            "preset": side.get("preset", ""), "runs": [str(r.path) for r in place.group.runs] if place else []}


# ---------------------------------------------------------------------------------------------
# Text.


def number(x: float | None) -> str:
    """A claim's number: 3 significant figures, whole above 100 (perplexities), '–' for none."""
    if x is None:
        return "–"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.1f}" if abs(x) >= 10 else f"{x:.3f}"


def metric_label(name: str) -> str:
    """A claim metric as the tables head it: µ, ρ L8, ∆ (full), zero-shot acc (freeze:6), ..."""
    parts = name.split(".")
    if parts[0] == "transfer" and len(parts) == 3:
        what = {"delta": "∆", "zero_shot": "zero-shot acc", "en": "EN acc"}.get(parts[2], parts[2])
        return f"{what} ({parts[1]})"
    if parts[0] == "probe" and len(parts) == 3:
        return f"lowest {parts[1]} language-ID accuracy"
    if parts[0] == "links" and len(parts) == 2:
        return f"links F1 {parts[1][3:]}"
    if parts[0] in ("segment", "segment_change") and len(parts) >= 3:
        inner = metric_label(".".join(parts[2:]))
        return f"{inner} under {parts[1]}" if parts[0] == "segment" else f"relative change of {inner} under {parts[1]}"
    found = _column(name)
    return found[0].heading(found[1]) if found else name


def _paper_number(x) -> str:
    """As the papers print them: scores below 1 to 2 decimals, others as given."""
    return f"{x:.2f}" if isinstance(x, float) and abs(x) < 1 else f"{x:,}" if isinstance(x, int) else f"{x:g}"


def paper_text(paper: dict) -> str:
    if "text" in paper:
        return str(paper["text"])
    got = [_paper_number(paper[k]) for k in ("a", "b") if k in paper]
    return " vs ".join(got) + (f" ({paper['measure']})" if paper.get("measure") else "")


def seeds_text(row: dict) -> str:
    return " vs ".join(str(s["stats"]["n"]) for s in (row["a"], row["b"]) if not s["constant"])


def budget_text(row: dict) -> str:
    """Each side's budget once (`paper: 14,100 × 128`); two preset names of one budget share it (`quick-b256 /
    quick: 1,775 × 256`: the committed quick runs say `quick`, the name that preset had when they ran)."""
    names: dict[str, list[str]] = {}
    for side in (row["a"], row["b"]):
        name, _, budget = side.get("preset", "").partition(": ")
        if name and name not in names.setdefault(budget, []):
            names[budget].append(name)
    return ", ".join(" / ".join(n) + (f": {b}" if b else "") for b, n in names.items()) or "–"


SIGNS = {"lower": "<", "higher": ">", "similar": "≈"}


def metrics_text(row: dict) -> str:
    a, b = metric_label(row["metric_a"]), metric_label(row["metric_b"])
    return a if a == b else f"{a} vs {b}"


def comparison_text(row: dict) -> str:
    """`d1 < 0 (µ)`: the sides by setting ID (a constant as itself)."""
    a, b = (s["value_text"] if s["constant"] else s["setting_id"] or s["label"] for s in (row["a"], row["b"]))
    return f"{a} {SIGNS[row['expect']]} {b} ({metrics_text(row)})"


def verdict_counts(rows: list[dict]) -> dict[str, int]:
    """How many claims hold, do not hold and cannot tell, the last without those `NOT_TESTED`: a side with no run
    here (a folder of one's own tests none of the papers' settings, and cannot tell them apart)."""
    untested = [any(not r[s]["constant"] and not r[s]["runs"] for s in "ab") for r in rows]
    counts = {v: sum(r["verdict"] == v and not u for r, u in zip(rows, untested)) for v in (HOLDS, FAILS, UNKNOWN)}
    return {**counts, NOT_TESTED: sum(untested)}


def markdown(rows: list[dict]) -> str:
    """The claims table as docs/results.md holds it: one row per claim."""
    counts = verdict_counts(rows)
    untested = f", {counts[NOT_TESTED]} {NOT_TESTED}" if counts[NOT_TESTED] else ""
    lines = [f"{counts[HOLDS]} hold, {counts[FAILS]} do not hold, {counts[UNKNOWN]} cannot tell{untested} (rule: "
             f"docs/claims.md). Ours: mean ± std over seeds (a vs b).", ""]
    lines += table_lines(["source", "claim", "compared", "paper", "ours", "seeds", "budget", "verdict"], "lllllrll",
                         ([r["source"], r["claim"], *compared_cells(r), budget_text(r), f"**{r['verdict']}**"]
                          for r in rows))
    return "\n".join(lines) + "\n"


def ours_text(row: dict) -> str:
    """Both sides' numbers: `0.140 ± 0.003 vs 0.70`."""
    return " vs ".join(number(s["value"]) if s["constant"] else mean_std(s["stats"], number, "–")
                       for s in (row["a"], row["b"]))


def compared_cells(row: dict) -> list[str]:
    """The cells every claims table has: what is compared, the paper's numbers, ours and the seeds behind them."""
    return [comparison_text(row), paper_text(row["paper"]), ours_text(row), seeds_text(row)]


# ---------------------------------------------------------------------------------------------
# The paper's orderings within one table: the claims whose sides are both settings of a section's grid.


def section_claims(claims: list[Claim], section: Section) -> list[Claim]:
    """The claims comparing two settings of `section`'s grid, whatever folder they name: `orderings` judges
    them from this section alone (a report of the paper-budget Table 1 judges the Table 1 claims at that
    budget)."""
    if section.manifest is None:
        return []
    grid = section.grid
    return [c for c in claims if not c.a.constant and not c.b.constant and c.a.grid == grid and c.b.grid == grid]


def direction(row: dict) -> str:
    """Which way the two means lie, whatever the seeds: what a table of one seed a setting can say."""
    a, b = (s["stats"]["mean"] if s["stats"] else None for s in (row["a"], row["b"]))
    if a is None or b is None:
        return "–"
    if row["expect"] == "similar":
        return f"{'within' if abs(a - b) <= row['margin'] * abs(b) else 'beyond'} {row['margin']:.0%} of b"
    if a == b:
        return "level"
    return "as the paper's" if (a < b) == (row["expect"] == "lower") else "the other way"


def orderings(section: Section, claims: list[Claim] | None = None) -> list[dict]:
    """The section's claims (`section_claims`) judged by the rule from this section's runs alone, each row
    with its `direction`; the claims with a side that has no evaluated run here are left out."""
    rows = judge(section_claims(load_claims() if claims is None else claims, section), {"": [section]})
    return [{**r, "direction": direction(r)} for r in rows if r["a"]["runs"] and r["b"]["runs"]]


def orderings_markdown(rows: list[dict]) -> str:
    """The paper's orderings within one table: the claim, the paper's numbers and ours, the direction of our
    means and the rule's verdict (which needs 2 seeds a side)."""
    if not rows:
        return ""
    tiny = all(r[s].get("preset", "").startswith("tiny") for r in rows for s in "ab")
    note = (". These are tiny-preset models, which check that the machinery runs: a verdict here is no evidence on "
            "the claim") if tiny else ""
    lines = ["The paper's orderings in this table (the claims of minimult/report/claims.toml whose two sides "
             "are rows here; verdict by the rule of docs/claims.md, which needs 2 seeds a side; direction: "
             f"where the means lie, seeds aside){note}:", ""]
    lines += table_lines(["claim", "compared", "paper", "ours", "seeds", "direction", "verdict"], "llllrll",
                         ([r["claim"], *compared_cells(r), r["direction"], f"**{r['verdict']}**"] for r in rows))
    return "\n".join(lines) + "\n"


def orderings_section(title: str, rows: list[dict]) -> str:
    """`orderings_markdown` under a heading naming its table, as the report and the site show it."""
    return f"## {title}: the paper's orderings\n\n" + orderings_markdown(rows)


def _orderings_part(sections: list[Section], top: str) -> list[dict]:
    """Each section's orderings (report.json's `orderings`), judged against claims.toml."""
    every = load_claims()
    return [{"section": s.title, "rows": orderings(s, every)} for s in sections]


register(Part("orderings", order=10, keys=("orderings",), compute=_orderings_part,
              markdown=lambda ordered, top: [orderings_section(o["section"], o["rows"]) for o in ordered or []
                                             if o["rows"]],
              restore=lambda report: report.get("orderings", [])))  # report.json from before: none
