"""The numbers: per-setting aggregates over seeds, Welch p-values against `original`, and the tables.

The columns are not listed here: they are the evaluator registry's Table 1 columns
(`minimult.evaluate.registry.table_columns`), each with its key (`mu`, `align_f1_L8`, `ppl_dev`),
heading, how it reads a results dict and how it formats a number. The first column (µ) is the
headline: the markdown table shows its p-value next to it; the CSV and report.json have every
column's. Standard deviations are sample standard deviations (ddof=1), None for one seed; p-values are
Welch's unequal-variance t-test over seeds (scipy), None with fewer than 2 seeds on either side.

A setting with published numbers (the grid's `paper`, by column key) shows each in parentheses after
its own cell (`0.140 ± 0.003 (0.70)`: scores to the paper's 2 decimals, perplexities whole), with a
line under the table naming the section's `paper_source`; report.json rows hold them as `paper` and
the CSV as `<key>_paper` columns (only when some setting has them). Sections without render as before.
"""

from __future__ import annotations

import csv
import io
import math
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
from scipy import stats

import minimult.evaluate  # noqa: F401  (registers every evaluator)
from minimult.evaluate.registry import STD, table_columns  # [(Column, layer or None), ...]: layers 0 and `top`
from minimult.report.collect import Group, Run, Section, how_trained, settings, unlike_baseline


def column_keys(top: str) -> list[str]:
    return [c.key(l) for c, l in table_columns(top)]


def mu_top(results: dict) -> str:
    """µ's upper layer as the results record it (`mu_layers`); '8' for results from before it was recorded
    (µ was then defined at layers 0 and 8 only)."""
    return str((results.get("mu_layers") or (0, 8))[1])


def top_layer(runs: list[Run]) -> str:
    """µ's upper layer when every run has the same one and evaluated it (8 for 12 layers, as in the paper:
    round(2/3 x depth)); with mixed depths '8' when any run has it, else the µ layer most runs evaluated (the
    deeper on a tie: a quickstart run beside a grid of deeper ones takes the grid's)."""
    tops = Counter(t for r in runs if (t := mu_top(r.results)) in r.results["layers"])
    if len(tops) == 1 and sum(tops.values()) == len(runs):
        return next(iter(tops))
    if any("8" in r.results["layers"] for r in runs):
        return "8"
    return max(tops, key=lambda t: (tops[t], int(t)), default="0")


FLOOR = 0.05  # µ below this: the run kept no multilinguality to speak of


def low_baseline(base: Group | None) -> dict | None:
    """{"label", "mu"} of a baseline whose runs' mean µ is on the floor itself (then µ and p against it say
    little), else None."""
    mus = [m for r in (base.runs if base else []) if (m := finite(r.results.get("mu"))) is not None]
    mean = sum(mus) / len(mus) if mus else None
    return {"label": base.label, "mu": mean} if mean is not None and mean < FLOOR else None


def finite(v) -> float | None:
    return float(v) if v is not None and math.isfinite(float(v)) else None


def run_values(run: Run, top: str) -> dict[str, float | None]:
    """{key: the run's number or None (absent or not finite)} for every table column."""
    return {c.key(l): finite(c.value(run.results, l)) for c, l in table_columns(top)}


def aggregate(values: list[float | None]) -> dict:
    xs = [v for v in values if v is not None]
    n = len(xs)
    return {"mean": float(np.mean(xs)) if n else None,
            "std": float(np.std(xs, ddof=1)) if n >= 2 else None,
            "n": n, "values": values}


def welch_p(a: list, b: list) -> float | None:
    a, b = [x for x in a if x is not None], [x for x in b if x is not None]
    return p_value(stats.ttest_ind, a, b, equal_var=False) if len(a) >= 2 and len(b) >= 2 else None


def p_value(test, *args, **kwargs) -> float | None:
    """The p-value of a scipy test, None where it is not finite."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # identical values: scipy warns and returns nan (-> blank)
        p = test(*args, **kwargs).pvalue
    return float(p) if p is not None and math.isfinite(p) else None


def baseline_for(section: Section, sections: list[Section]) -> Group | None:
    """The section's `original` (ID 0 first), else an `original` of the same preset elsewhere."""
    for candidates in (section.groups, [g for g in settings(sections) if g.preset == section.preset]):
        originals = [g for g in candidates if g.mods == "original"]
        if originals:
            return next((g for g in originals if g.id == "0"), originals[0])
    return None


def _group_row(g: Group, base: Group | None, base_values: dict | None, keys: list[str], top: str) -> dict:
    per_run = [run_values(r, top) for r in g.runs]
    unlike = unlike_baseline(base, g) if base is not None else None  # then no p: it would test more than g's setting
    metrics = {}
    for k in keys:
        agg = aggregate([v[k] for v in per_run])
        agg["p_vs_original"] = (None if base is None or g is base or unlike
                                else welch_p(agg["values"], base_values[k]))
        metrics[k] = agg
    return {"id": g.id, "setting": g.name, "mods": g.mods, "preset": g.preset,
            "seeds": [r.seed for r in g.runs], "runs": [str(r.path) for r in g.runs],
            "trained": [how_trained(r) for r in g.runs],
            "baseline": None if base is None or g is base else base.label, "unlike_baseline": unlike,
            "metrics": metrics, "paper": dict(g.paper)}


def aggregate_sections(sections: list[Section], top: str) -> list[dict]:
    """Per section: its title, preset, baseline label, settings without a run, and one row per setting
    with every column's mean, std, n, per-seed values and p against the baseline."""
    keys = column_keys(top)
    out = []
    for section in sections:
        base = baseline_for(section, sections)
        base_values = {k: [run_values(r, top)[k] for r in base.runs] for k in keys} if base else None
        rows = [_group_row(g, base, base_values, keys, top) for g in section.groups]
        label = base.label if base else None
        if base is not None and not any(g is base for g in section.groups):  # borrowed: it may have trained otherwise
            label += f" (from the section {next(s.title for s in sections if any(g is base for g in s.groups))})"
        out.append({"title": section.title, "preset": section.preset, "grid": section.grid, "rows": rows,
                    "baseline": label, "not_run": section.missing, "training": training_time(rows),
                    "left_out": section.lost, "mixed": section.mixed, "pending": section.pending,
                    "paper_source": section.paper_source,
                    **({"low_baseline": {**low, "label": label}} if (low := low_baseline(base)) else {})})
    return out


def training_time(rows: list[dict]) -> dict:
    """What training a section's rows took: {"runs": n, "seconds": {device: seconds}, "unknown": n}, from
    each run's `trained` (its seconds over all its stretches, each on the device it ran on; `unknown`: runs
    without a log or run.json saying so)."""
    seconds: dict[str, float] = {}
    trained = [t for row in rows for t in row["trained"]]
    for t in trained:
        for device, s in t.get("device_seconds", {}).items():  # a run begun on a GPU and ended here: both
            seconds[device] = seconds.get(device, 0.0) + s
    return {"runs": len(trained), "seconds": seconds, "unknown": sum(t["train_seconds"] is None for t in trained)}


def section_footer(sec: dict) -> list[str]:
    """The lines under a section's table in table1.md and on the site (not in the README's table): what its
    training took, and on a live sweep root the planned runs not in it yet."""
    lines = [training_line(sec["training"])] if sec.get("training") else []
    if low := sec.get("low_baseline"):
        lines.append(f"The baseline, {low['label']}, is on the floor itself (mean µ {low['mu']:.3f}, under {FLOOR}): "
                     f"its runs learned too little multilinguality for the rows' µ and p against it to say much.")
    if sec.get("pending"):
        lines.append(pending_line(sec["pending"]))
    return [line for line in lines if line]


def plural(n: int, word: str) -> str:
    """"1 run", "2 runs"."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def pending_line(pending: list[dict]) -> str:
    """The sweep's planned runs not in the table yet, as a sentence (a live sweep root's report): those with a
    folder as their run.json says they stand (`collect.run_status`), then those without one."""
    started = [f"{p['run']} ({p['status']})" for p in pending if p["status"]]
    waiting = [p["run"] for p in pending if not p["status"]]
    parts = ([f"{plural(len(started), 'run')} with a folder but no results.json: {', '.join(started)}"]
             if started else [])
    parts += [f"{plural(len(waiting), 'run')} without a folder: {', '.join(waiting)}"] if waiting else []
    return f"Planned by the sweep and not in the table yet: {'; '.join(parts)}."


def _duration(seconds: float) -> str:
    """"39.0 h", "12 min", "45 s"."""
    return (f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min" if seconds >= 60
            else f"{seconds:.0f} s")


def training_line(training: dict) -> str:
    """The training time as a sentence: "Training: 19 runs, 35.2 h on cpu and 0.6 h on cuda ..."."""
    parts = [f"{_duration(s)} on {d}" for d, s in sorted(training["seconds"].items(), key=lambda x: -x[1])]
    if not parts:
        return ""
    unknown = f"; {training['unknown']} without a record of it" if training["unknown"] else ""
    n = training["runs"]
    return (f"Training: {n} run{'' if n == 1 else 's'}, {' and '.join(parts)} (the sum of each run's training and "
            f"periodic evaluation over all its stretches; runs side by side overlap in time){unknown}.")


# ---------------------------------------------------------------------------------------------
# Markdown and CSV.


def paper_text(column, x: float, std: float | None = None) -> str:
    """A published number as the paper prints it: perplexities whole, scores to 2 decimals; with its standard
    deviation over the paper's seeds after ± (a perplexity's to 1 decimal, as the paper prints it)."""
    mean = f"{x:.0f}" if column.kind == "perplexity" else f"{x:.2f}"
    if std is None:
        return mean
    return mean + (f" ± {std:.1f}" if column.kind == "perplexity" else f" ± {std:.2f}")


def cell_text(agg: dict, column, paper: float | None = None, paper_std: float | None = None) -> str:
    """"mean ± std", with the published number (± its std over the paper's seeds, where it gives one) in
    parentheses after it when there is one."""
    beside = "" if paper is None else f" ({paper_text(column, paper, paper_std)})"
    return mean_std(agg, column.table_text, "–") + beside


def _shows_paper(sec: dict, keys: list[str]) -> bool:
    return any(k in row.get("paper", {}) for row in sec["rows"] for k in keys)


def mean_std(a: dict | None, text=lambda x: f"{x:.3f}", missing: str = "") -> str:
    """An aggregate as "0.123 ± 0.045", each number through `text` (the mean alone for one value, `missing`
    for none)."""
    if a is None or a["mean"] is None:
        return missing
    return text(a["mean"]) + (f" ± {text(a['std'])}" if a.get("std") is not None else "")


def p_text(p: float | None) -> str:
    return "" if p is None else f"{p:.2g}" if p >= 0.001 else f"{p:.1e}"


def table_lines(head: list[str], align: str, rows) -> list[str]:
    """A markdown table: the heading, the alignment row (`align`, a letter per column: "l" left, "r" right), then
    one line per row of cells."""
    return (["| " + " | ".join(head) + " |", "|" + "".join("--:|" if a == "r" else "---|" for a in align)]
            + ["| " + " | ".join(map(str, cells)) + " |" for cells in rows])


def number_headings(top: str) -> list[str]:
    """The headings of a section table's numbers: the first column (µ), its p against the baseline, the others."""
    head = [c.heading(l) for c, l in table_columns(top)]
    return [head[0], f"p ({head[0]})", *head[1:]]


def number_cells(row: dict, top: str, paper_std: bool = True) -> list:
    """A row's cells under `number_headings` (the p a number or None); `paper_std`: the paper's std beside its
    number where it gives one."""
    m, paper = row["metrics"], row.get("paper", {})
    cells = [cell_text(m[c.key(l)], c, paper.get(c.key(l)), paper.get(c.key(l) + STD) if paper_std else None)
             for c, l in table_columns(top)]
    return [cells[0], m[column_keys(top)[0]]["p_vs_original"], *cells[1:]]


def left_out_text(lost: dict) -> str:
    """'Left out of ID SETTING: RUN, WHY.' for a run a row lost (a section's `lost`)."""
    return f"Left out of {(lost['id'] + ' ' + lost['setting']).strip()}: {lost['run']}, {lost['why']}."


def section_table(sec: dict, top: str) -> list[str]:
    """One aggregated section as markdown lines: the table (when it has rows), what its parenthesised
    published numbers are (when it has some), then one "No row: ..." line per reason settings were left
    out. This is what the README's table markers hold."""
    head, rows = ["ID", "setting", "n", *number_headings(top)], []
    for row in sec["rows"]:
        cells = number_cells(row, top)  # n: the row's seeds (table1.csv's n_seeds), µ or not
        rows.append([row["id"], row["setting"], str(len(row["seeds"])), cells[0], p_text(cells[1]), *cells[2:]])
    lines = table_lines(head, "ll" + "r" * (len(head) - 2), rows) if rows else []
    shown = [c.key(l) for c, l in table_columns(top)]
    if _shows_paper(sec, shown):
        source = (sec.get("paper_source") or "").rstrip(". ")
        stds = " (± its standard deviation over seeds, where it gives one)" if _shows_paper(
            sec, [k + STD for k in shown]) else ""
        lines += ["", f"In parentheses, the paper's numbers{stds}: {source}." if source
                  else f"In parentheses, the paper's numbers{stds} (as the grid file gives them)."]
    unshown = {k.removesuffix(STD) for row in sec["rows"] for k in row.get("paper", {})} - set(shown)
    hidden = sorted(filter(str.isdigit, {k.rpartition("_L")[2] for k in unshown}), key=int)  # 8 beside a tiny 5
    if hidden:
        lines += ["", f"Not shown: the paper's numbers at layer {' and '.join(hidden)}, which this table's columns "
                      f"do not have (its upper layer is {top})."]
    for m in sec.get("left_out", []):  # seeds a row lost: never trained, failed, evaluated unfinished
        lines += ["", left_out_text(m)]
    for m in sec.get("mixed", []):  # a row that averages runs trained differently
        lines += ["", f"Not trained alike in {(m['id'] + ' ' + m['setting']).strip()}: {m['differ']}."]
    unlike = [r for r in sec["rows"] if r.get("unlike_baseline")]  # the baseline differs by more than their setting
    for why in dict.fromkeys(r["unlike_baseline"] for r in unlike):
        names = ", ".join(r["id"] or r["setting"] for r in unlike if r["unlike_baseline"] == why)  # IDs: no commas
        lines += ["", f"No p for {names}: {why}."]
    for why in dict.fromkeys(m["why"] for m in sec["not_run"]):  # e.g. "needs a GPU"
        names = ", ".join(f"{m['id']} {m['setting']}".strip() for m in sec["not_run"] if m["why"] == why)
        lines += ["", f"No row: {names} ({why})."]
    return lines


def layers_note(runs: list[Run], top: str) -> str:
    """What the table's layers and µ are, in a sentence; and which pair a run of more than two languages shows."""
    tops = {mu_top(r.results) for r in runs}
    if tops == {top}:
        note = f"Layers 0 and {top}; µ averages τ and ρ over both ({top} = round(2/3 × depth), as 8 of 12)."
    else:
        note = (f"Layers 0 and {top}; µ averages τ and ρ over layer 0 and each model's own layer round(2/3 × depth) "
                f"({', '.join(sorted(tops, key=int))} here), so its column may use layers the table does not show.")
    first = sorted({next(iter(r.results["pairs"])) for r in runs if len(r.results.get("pairs") or ()) > 1})
    if first:  # evaluate_model: the top level of results.json is the first pair's
        note += (f" A run of more than two languages shows its first pair ({', '.join(first)}); every pair's numbers "
                 f"are in its results.json (\"pairs\").")
    return note


def markdown(aggregated: list[dict], top: str, n_runs: int, unevaluated: list[Path], note: str = "",
             left_out: list[tuple[Path, str]] = ()) -> str:
    """table1.md: a header paragraph (with the runs not evaluated yet and the failed ones among `left_out`), then
    every section (title, preset and baseline, table)."""
    lines = ["# minimult report", "",
             f"{plural(n_runs, 'evaluated run')}. Mean ± sample standard deviation over seeds (n seeds); "
             f"p (µ): Welch's t-test of µ against the table's `original` (blank: fewer than 2 seeds, the baseline "
             f"itself, or a baseline that trained otherwise than by the row's own setting: a line under the table "
             f"says how). " + (note or f"Layers 0 and {top}.")]
    if unevaluated:
        lines.append(f"Not evaluated yet (no results.json), left out: {', '.join(p.name for p in unevaluated)}.")
    failed = [f"{p.name} ({why.removeprefix('the run ')})" for p, why in left_out if why.startswith("the run failed")]
    if failed:
        lines.append(f"Failed in training, left out: {', '.join(failed)}.")
    for sec in aggregated:
        lines += ["", f"## {sec['title']}", ""]
        presets = sorted({r['preset'] for r in sec["rows"] if r["preset"]})
        if presets:
            lines += [f"Preset {', '.join(presets)}; baseline for p: {sec['baseline'] or 'none'}.", ""]
        lines += section_table(sec, top)
        for line in section_footer(sec):
            lines += ["", line]
    return "\n".join(lines) + "\n"


def csv_text(aggregated: list[dict], top: str) -> str:
    """table1.csv: one row per setting, full precision (repr), mean, std and p of every column, then
    every column's published number (`<key>_paper`) when some setting has one."""
    keys = column_keys(top)
    papers = any(_shows_paper(sec, keys) for sec in aggregated)
    lines = [["section", "id", "setting", "mods", "preset", "n_seeds", "seeds"]
             + [f"{k}_{s}" for k in keys for s in ("mean", "std", "p")] + [f"{k}_paper" for k in keys if papers]]
    for sec in aggregated:
        for row in sec["rows"]:
            cells = [sec["title"], row["id"], row["setting"], row["mods"], row["preset"], len(row["seeds"]),
                     " ".join(map(str, row["seeds"]))]
            for k in keys:
                m = row["metrics"][k]
                cells += ["" if v is None else repr(v) for v in (m["mean"], m["std"], m["p_vs_original"])]
            if papers:
                cells += [repr(row["paper"][k]) if k in row.get("paper", {}) else "" for k in keys]
            lines.append(cells)
    return _csv(lines)


def _csv(lines: list[list]) -> str:
    buf = io.StringIO()
    csv.writer(buf).writerows(lines)
    return buf.getvalue()


RUN_FIELDS = ("section", "id", "setting", "mods", "preset", "seed", "run")
HOW_TRAINED = ("device", "precision", "init_seed", "train_seconds")


def run_rows(aggregated: list[dict], top: str) -> list[dict]:
    """One dict per run of a table row (seed by seed, as the row's mean and std count them): RUN_FIELDS, where
    and how it trained (HOW_TRAINED: device, precision, the seed of its initial weights, seconds), then every
    column (`column_keys`) at full precision, None where a run lacks it; runs a row left out (never trained,
    failed) are not among them, as they are not in its mean. runs.csv and `api.results` are these rows."""
    keys = column_keys(top)
    out = []
    for sec in aggregated:
        for row in sec["rows"]:
            for i, (seed, run, trained) in enumerate(zip(row["seeds"], row["runs"], row["trained"])):
                fields = (sec["title"], row["id"], row["setting"], row["mods"], row["preset"], seed, run)
                out.append({**dict(zip(RUN_FIELDS, fields)), **{k: trained[k] for k in HOW_TRAINED},
                            **{k: row["metrics"][k]["values"][i] for k in keys}})
    return out


def runs_csv_text(aggregated: list[dict], top: str, path=lambda p: p) -> str:
    """runs.csv: `run_rows` as CSV (an empty cell for None, numbers at full precision); `path`: how the `run`
    column names a run folder (`build.portable`: relative, never this machine's absolute path)."""
    header = list(RUN_FIELDS + HOW_TRAINED) + column_keys(top)
    rows = [{**r, "run": path(r["run"])} for r in run_rows(aggregated, top)]
    return _csv([header] + [["" if r[k] is None else r[k] if isinstance(r[k], str) else repr(r[k]) for k in header]
                            for r in rows])
