"""Table 1 under two recipes: the paper's orderings judged under each, and how often lang-pos runs stay on the floor.

The lab's recipe (`paper` preset: length-bucketed batches, padding masked) and the published code's (`published`:
docs/published-recipe.md) each give a Table 1 section. `both_recipes` judges every ordering of the paper's Table 1
(claims.toml) in each section by the rule of docs/claims.md and sets the verdicts side by side: *robust* where
both hold, *split* where one holds and the other does not. `floor_rates` counts, for every lang-pos setting, the
seeds whose µ stays on the floor (µ < `FLOOR`), with a Wilson 95% interval for the share.
"""

from __future__ import annotations

import math

from minimult.report.claims import (FAILS, HOLDS, UNKNOWN, Claim, comparison_text, orderings, ours_text, paper_text,
                                    seeds_text)
from minimult.report.collect import Section
from minimult.report.parts import Part, register
from minimult.report.tables import FLOOR, baseline_for, finite, low_baseline, table_lines

ROBUST, SPLIT = "robust", "split"
RECIPES = {"paper": "lab recipe (bucketed, padding masked)", "published": "published code's recipe"}


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval (95% for z = 1.96) of a share k/n; (0, 1) when n is 0."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def recipe_name(section: Section) -> str:
    """How a section's recipe is named in the tables: by its preset (`RECIPES`), else the preset itself."""
    return RECIPES.get(section.preset, section.preset or section.title)


def floor_rates(section: Section) -> list[dict]:
    """For every setting with lang-pos among its mods: its runs' µ by seed, how many are on the floor (µ < FLOOR)
    and the share with its Wilson 95% interval."""
    out = []
    for g in section.groups:
        if "lang-pos" not in g.mods.split(","):
            continue
        mus = {r.seed: finite(r.results.get("mu")) for r in g.runs}
        mus = {s: m for s, m in mus.items() if m is not None}
        k, n = sum(m < FLOOR for m in mus.values()), len(mus)
        low, high = wilson(k, n)
        out.append({"id": g.id, "label": g.label, "n": n, "floor": k, "share": k / n if n else None,
                    "low": low, "high": high, "mu": mus})
    return out


def floor_text(rate: dict) -> str:
    """`2 of 5 (40%; 95% CI 12–77%)`."""
    if not rate["n"]:
        return "–"
    return (f"{rate['floor']} of {rate['n']} ({rate['share']:.0%}; 95% CI {rate['low']:.0%}–{rate['high']:.0%})")


def floor_markdown(sections: list[Section]) -> str:
    """One row per lang-pos setting, one column per recipe: the seeds on the floor, with each seed's µ."""
    rates = [{r["id"]: r for r in floor_rates(s)} for s in sections]
    ids = list(dict.fromkeys(i for rs in rates for i in rs))
    if not ids:
        return ""
    lines = [f"Seeds on the floor (µ < {FLOOR}) of every lang-pos setting, with a Wilson 95% interval for the share "
             f"and each seed's µ:", ""]
    rows = ([next(rs[i]["label"] for rs in rates if i in rs)]
            + ["–" if i not in rs else f"{floor_text(rs[i])}: {_seeds_mu(rs[i])}" for rs in rates] for i in ids)
    return "\n".join(lines + table_lines(["setting", *map(recipe_name, sections)], "l" * (len(sections) + 1),
                                         rows)) + "\n"


def _seeds_mu(rate: dict) -> str:
    """`s0 0.012, s1 0.431`: each seed's µ (seeds as numbers or, from report.json, as text)."""
    return ", ".join(f"s{seed} {mu:.3f}" for seed, mu in sorted(rate["mu"].items(), key=lambda kv: int(kv[0])))


def _floor_part(sections: list[Section], top: str) -> list[dict]:
    """Each section's lang-pos settings and their seeds on the floor (report.json's `floor`), with the baseline's
    mean µ where it is on the floor itself (`low_baseline`: then a seed on the floor says nothing of lang-pos)."""
    out = []
    for s in sections:
        if rates := floor_rates(s):
            low = low_baseline(baseline_for(s, sections))
            out.append({"section": s.title, "rows": rates, **({"low_baseline": low} if low else {})})
    return out


def _floor_markdown(data: list[dict], top: str) -> list[str]:
    out = []
    for d in data or []:
        head = f"## {d['section']}: lang-pos seeds on the floor\n\n"
        lines = [f"Seeds whose µ stays below {FLOOR} (kept no multilinguality), with a Wilson 95% interval for "
                 f"the share and each seed's µ:", ""]
        lines += table_lines(["setting", "on the floor", "seeds' µ"], "lll",
                             ([r["label"], floor_text(r), _seeds_mu(r)] for r in d["rows"]))
        if low := d.get("low_baseline"):
            lines += ["", f"The baseline, {low['label']}, is on the floor itself (mean µ {low['mu']:.3f}), so a "
                          f"lang-pos seed on the floor here says nothing of lang-pos."]
        out.append(head + "\n".join(lines) + "\n")
    return out


register(Part("floor", order=15, keys=("floor",), compute=_floor_part, markdown=_floor_markdown))


def table1_sections(sections_by_folder: dict[str, list[Section]]) -> list[Section]:
    """The first Table 1 section of each recipe (`RECIPES`' presets, in that order) among the folders'."""
    table1 = [s for sections in sections_by_folder.values() for s in sections if s.grid == "table1"]
    firsts = (next((s for s in table1 if s.preset == preset), None) for preset in RECIPES)
    return [s for s in firsts if s is not None]


def combined(verdicts: list[str]) -> str:
    """The verdict over the recipes: robust (all hold), does not hold (all fail), split (one holds, another does
    not), else cannot tell (one recipe that cannot tell leaves either verdict open)."""
    if verdicts and all(v == HOLDS for v in verdicts):
        return ROBUST
    if HOLDS in verdicts and FAILS in verdicts:
        return SPLIT
    if verdicts and all(v == FAILS for v in verdicts):
        return FAILS
    return UNKNOWN


def both_recipes(sections: list[Section], claims: list[Claim] | None = None) -> list[dict]:
    """Every ordering of the paper's Table 1 that some section can judge, with each section's row (None where a
    side has no run there) and the combined verdict."""
    per = [{r["id"]: r for r in orderings(s, claims)} for s in sections]
    ids = list(dict.fromkeys(i for rows in per for i in rows))
    out = []
    for i in ids:
        rows = [rows.get(i) for rows in per]
        first = next(r for r in rows if r is not None)
        verdicts = [r["verdict"] if r else UNKNOWN for r in rows]
        out.append({"id": i, "claim": first["claim"], "paper": first["paper"], "compared": comparison_text(first),
                    "recipes": rows, "verdict": combined(verdicts)})
    return out


def both_markdown(rows: list[dict], sections: list[Section]) -> str:
    """The orderings under each recipe side by side: ours (mean ± std, seeds) and the verdict per recipe."""
    if not rows:
        return ""
    names = [recipe_name(s) for s in sections]
    counts = {v: sum(r["verdict"] == v for r in rows) for v in (ROBUST, SPLIT, FAILS, UNKNOWN)}
    lines = [f"{counts[ROBUST]} robust (hold under every recipe), {counts[SPLIT]} split, {counts[FAILS]} do not hold, "
             f"{counts[UNKNOWN]} cannot tell (rule: docs/claims.md; 2 seeds a side at least).", ""]
    head = ["claim", "compared", "paper", *(f"{n}: ours (seeds) | verdict" for n in names), "overall"]
    lines += table_lines(head, "l" * (4 + 2 * len(names)), (
        [r["claim"], r["compared"], paper_text(r["paper"])]
        + [cell for row in r["recipes"] for cell in (["–", "–"] if row is None else
                                                     [f"{ours_text(row)} ({seeds_text(row)})", row["verdict"]])]
        + [f"**{r['verdict']}**"] for r in rows))
    return "\n".join(lines) + "\n"
