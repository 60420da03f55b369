"""Table 1 under two recipes (minimult/report/recipes.py): the Wilson interval, floor rates of lang-pos settings
and the orderings judged side by side, on sections whose answers are known."""

from __future__ import annotations

from pathlib import Path

import pytest

from minimult.report.claims import FAILS, HOLDS, UNKNOWN
from minimult.report.collect import Group, Run, Section
from minimult.report.recipes import ROBUST, SPLIT, both_markdown, both_recipes, combined, floor_markdown, floor_rates, wilson


@pytest.mark.parametrize("k, n, low, high", [(2, 5, 0.1176, 0.7693), (0, 5, 0.0, 0.4345), (5, 5, 0.5655, 1.0),
                                             (1, 3, 0.0615, 0.7923)])
def test_wilson_interval_matches_the_textbook_values(k, n, low, high):
    got = wilson(k, n)
    assert got == pytest.approx((low, high), abs=1e-4)
    assert wilson(0, 0) == (0.0, 1.0)


def test_wilson_interval_stays_within_0_and_1_exactly():
    """At k = 0 or k = n the interval touches 0 or 1: never a float a hair outside (a "-0%" in the table)."""
    for n in range(1, 40):
        for k in range(n + 1):
            low, high = wilson(k, n)
            assert 0.0 <= low <= high <= 1.0 and low - 1e-12 <= k / n <= high + 1e-12, (k, n)
    assert wilson(0, 5)[0] == 0.0 and wilson(5, 5)[1] == 1.0
    from minimult.report.recipes import floor_text

    assert floor_text({"n": 5, "floor": 0, "share": 0.0, "low": wilson(0, 5)[0], "high": wilson(0, 5)[1]}) == \
        "0 of 5 (0%; 95% CI 0%–43%)"


def test_a_recipe_that_cannot_tell_leaves_the_overall_verdict_open():
    """Either way the other recipe went: held there and unknown here, or failed there and unknown here."""
    assert combined([HOLDS, UNKNOWN]) == UNKNOWN and combined([FAILS, UNKNOWN]) == UNKNOWN
    assert combined([UNKNOWN, FAILS]) == UNKNOWN and combined([]) == UNKNOWN


def section(preset: str, mus: dict[str, list[float]]) -> Section:
    """A Table 1 section of settings 0 (original) and 1 (lang-pos) with the given µ by seed."""
    mods = {"0": "original", "1": "lang-pos"}
    groups = []
    for sid, values in mus.items():
        runs = [Run(Path(f"/nowhere/{preset}/{sid}-s{seed}"), {"mu": mu, "seed": seed, "mods": mods[sid]},
                    {"preset": preset, "train": {"seed": seed, "batch_size": 128}})
                for seed, mu in zip((0, 42, 43, 100, 101), values)]
        groups.append(Group(sid, mods[sid], mods[sid], runs, preset))
    return Section(f"Table 1 ({preset})", groups, preset, manifest=Path(f"/nowhere/{preset}/table1.sweep.json"))


def test_floor_rates_count_the_lang_pos_seeds_below_the_floor():
    lab = section("paper", {"0": [0.60, 0.61, 0.62], "1": [0.004, 0.532, 0.551]})
    (rate,) = floor_rates(lab)  # original is not a lang-pos setting
    assert (rate["id"], rate["n"], rate["floor"]) == ("1", 3, 1)
    assert (rate["low"], rate["high"]) == pytest.approx(wilson(1, 3))
    text = floor_markdown([lab, section("published", {"1": [0.5, 0.52]})])
    assert "1 of 3 (33%; 95% CI 6%–79%): s0 0.004, s42 0.532, s43 0.551" in text
    assert "0 of 2 (0%; 95% CI 0%–66%)" in text


def test_an_ordering_is_robust_only_where_every_recipe_holds_it():
    assert combined([HOLDS, HOLDS]) == ROBUST
    assert combined([HOLDS, FAILS]) == SPLIT
    assert combined([FAILS, FAILS]) == FAILS
    assert combined([HOLDS, UNKNOWN]) == UNKNOWN
    lab = section("paper", {"0": [0.60, 0.61, 0.62], "1": [0.004, 0.632, 0.551]})  # one seed collapsed: noise
    published = section("published", {"0": [0.60, 0.61, 0.62], "1": [0.50, 0.52, 0.54]})
    rows = {r["id"]: r for r in both_recipes([lab, published])}
    row = rows["ds-lang-pos"]  # lang-pos lowers µ: within seed noise in the lab's, every seed below in the code's
    assert [r["verdict"] for r in row["recipes"]] == [UNKNOWN, HOLDS] and row["verdict"] == UNKNOWN
    rows = {r["id"]: r for r in both_recipes([published, published])}
    assert rows["ds-lang-pos"]["verdict"] == ROBUST
    text = both_markdown(list(rows.values()), [published, published])
    assert "published code's recipe: ours (seeds) | verdict" in text and "**robust**" in text


def test_the_report_has_a_floor_section_for_a_table_with_lang_pos_rows():
    """A registered report section (report/parts.py): each section's lang-pos settings with their seeds on the
    floor, in table1.md and on the site; none for a table without lang-pos."""
    from minimult.report.parts import PARTS

    part = PARTS["floor"]
    lab = section("paper", {"0": [0.60, 0.61, 0.62], "1": [0.004, 0.532, 0.551]})
    (text,) = part.markdown(part.compute([lab], "8"), "8")
    assert "## Table 1 (paper): lang-pos seeds on the floor" in text
    assert "| 1 lang-pos | 1 of 3 (33%; 95% CI 6%–79%) | s0 0.004, s42 0.532, s43 0.551 |" in text
    assert part.markdown(part.compute([section("paper", {"0": [0.6, 0.61]})], "8"), "8") == []


def test_a_table_whose_baseline_is_on_the_floor_says_so_under_it():
    """µ and p against an original that itself kept no multilinguality (µ < .05: a quick real-language table,
    the tiny preset) say little: the line under the table says so, and only there."""
    from minimult.report.tables import aggregate_sections, section_footer

    low, fine = (aggregate_sections([section("paper", {"0": mus, "1": [0.01, 0.02]})], "8")[0]
                 for mus in ([0.03, 0.04], [0.60, 0.61]))
    assert low["low_baseline"]["mu"] == pytest.approx(0.035) and "low_baseline" not in fine
    said = [line for line in section_footer(low) if "on the floor itself" in line]
    assert said == ["The baseline, 0 original, is on the floor itself (mean µ 0.035, under 0.05): its runs learned too "
                    "little multilinguality for the rows' µ and p against it to say much."]
    assert not any("on the floor itself" in line for line in section_footer(fine))


def test_claims_with_a_side_that_has_no_run_are_counted_as_not_tested():
    """A folder of one's own tests few of the papers' claims: those with a side that has no run here are counted
    apart from 'cannot tell' (which is for sides whose seeds do not separate)."""
    from minimult.report.claims import NOT_TESTED, judge, load_claims, markdown, verdict_counts

    claims = load_claims()
    rows = judge(claims, {"mine": [section("paper", {"0": [0.60, 0.61, 0.62], "1": [0.10, 0.12, 0.11]})]})
    counts = verdict_counts(rows)
    assert sum(counts.values()) == len(claims) and counts["holds"] >= 1  # ds-lang-pos: 1 < 0
    tested = [r for r in rows if r["a"]["runs"] and (r["b"]["constant"] or r["b"]["runs"])]
    assert counts[NOT_TESTED] == len(claims) - len(tested) > 0
    assert markdown(rows).startswith(f"{counts['holds']} hold, 0 do not hold, {counts['cannot tell']} cannot tell, "
                                     f"{counts[NOT_TESTED]} not tested here (rule")


def test_floor_is_strictly_below_005_and_counts_only_seeds_with_a_mu():
    """µ = 0.05 itself is not on the floor; a run without µ is no seed of the share (nor of a baseline's mean)."""
    from minimult.report.tables import low_baseline

    sec = section("paper", {"0": [0.05, 0.05, None], "1": [0.05, 0.01, None]})
    (rate,) = floor_rates(sec)
    assert (rate["n"], rate["floor"], rate["share"]) == (2, 1, 0.5)
    assert low_baseline(sec.groups[0]) is None  # mean µ 0.05: not under the floor
    low = low_baseline(section("paper", {"0": [0.02, 0.04, None]}).groups[0])
    assert low["mu"] == pytest.approx(0.03)  # over the two runs with a µ


def test_the_baseline_is_the_original_of_id_0_else_one_of_the_same_preset():
    """Within a section ID 0's original comes first, wherever it stands; a section without one borrows an original
    of its own preset only, never another preset's."""
    from minimult.report.tables import baseline_for

    sec = section("paper", {"1": [0.5, 0.5], "0": [0.6, 0.6]})
    other = Group("7", "original", "original", sec.groups[1].runs, "paper")
    sec.groups.insert(0, other)  # a second original, before ID 0's
    assert baseline_for(sec, [sec]).id == "0"
    published = section("published", {"0": [0.6, 0.6]})
    lone = section("tiny", {"1": [0.5, 0.5]})
    assert baseline_for(lone, [published, lone]) is None
    assert baseline_for(section("published", {"1": [0.5, 0.5]}), [lone, published]) is published.groups[0]
