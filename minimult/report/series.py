"""The report's K et al. section (K et al. 2020, Tables 2-6 and 10): µ and the transfer gap ∆ along each
series of settings that differ from the section's `original` in one thing only, next to the paper's
direction of effect.

A series is found from the runs' stored configurations, not from setting names, so any grid (or a
user's own runs) gets one: a setting joins

- `depth` when only `model.layers` differs (the solved hidden and intermediate sizes may follow),
- `heads` when only `model.heads` differs,
- `parameters` when nothing but the solved sizes differs (`model.target_params`),
- `permutation` when only the mods differ and they are `permute=p` (p = 0 is original) or `unigram`
  (shown beside the series, it has no p),
- `tokenization` when only `data.tokenizer` (and the vocabulary size or `max_len` that go with it)
  differs.

The section's baseline (as in Table 1: its ID 0 `original`, else another `original` of the same preset)
is every series' shared point. An `original` setting that is in none of the baseline's series (it differs
in something no axis covers, e.g. `train.lr`) anchors series of its own among the settings left over, so
a grid can repeat a series under another recipe; such a series names what its anchor changes
(`context`, e.g. "train.lr=0.001"). ∆ is the gap of the `full` fine-tuning mode
(English − zero-shot accuracy, K et al.'s measure), else the run's headline transfer mode; "–" without a
transfer result. The direction "here" is Spearman's rank correlation of the setting means with the
series' value (n = number of settings); it is not a test.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from matplotlib.ticker import FuncFormatter, NullFormatter
from scipy import stats

from minimult.config import EXECUTION_SETTINGS, flat
from minimult.mods import REGISTRY
from minimult.registry import Registry
from minimult.report.collect import UNLEARNED_MARGIN, Group, Section, current_config, full_transfer, unlearned
from minimult.report.figures import panel_grid, place, save_figure
from minimult.report.parts import Part, register
from minimult.report.tables import aggregate, baseline_for, mean_std, table_lines

# Fields that a size solver derives (they follow the series' own field) and sections that do not
# change what is trained.
DERIVED = {"model.hidden", "model.intermediate", "model.target_params", "model.vocab_size"}
IGNORED_SECTIONS = {"transfer", "preset", "mods"}
TOKENIZATION_FIELDS = {"data.tokenizer", "data.vocab_size", "data.max_len", "model.max_positions"}


@dataclass(frozen=True)
class Axis:
    name: str
    label: str  # the x axis
    table: str  # K et al.'s table
    claim: str  # their direction of effect
    expect: str  # that direction in the rank correlations' terms (signs, or "flat" / no order)
    log_x: bool = False
    categorical: bool = False


AXES = Registry("series axis")  # a mod's `series` hook names one of these
for _axis in (
    Axis("depth", "layers", "Table 4", "deeper models are more cross-lingual; depth matters more than heads",
         "µ up, ∆ down"),
    Axis("heads", "attention heads", "Table 5", "the number of heads matters little", "flat"),
    Axis("parameters", "parameters", "Table 6", "below a threshold the parameter count matters; above it, little",
         "µ up, ∆ down, then flat", log_x=True),
    Axis("permutation", "share of pairs permuted (p)", "Tables 2-3",
         "more permutation hurts; a unigram-only second language kills it", "µ down, ∆ up"),
    Axis("tokenization", "tokenizer", "Table 10", "word-piece ≈ word > character",
         "no order (categorical): compare the rows", categorical=True),
):
    AXES.register(_axis)


def _flat(config: dict) -> dict:
    """{"model.layers": 12, ...} of a run's configuration as this version reads it."""
    return flat({k: v for k, v in current_config(config).items() if k not in IGNORED_SECTIONS})


def _mod_values(mods: str) -> dict[str, str]:
    """`permute=0.25,lang-pos` -> {"permute": "0.25", "lang-pos": ""}; original -> {}."""
    if mods in ("", "original"):
        return {}
    return dict((m.split("=", 1) + [""])[:2] for m in mods.split(","))


def _parameters(g: Group) -> int | None:
    p = g.runs[0].results.get("train", {}).get("parameters")
    return int(p) if p else None


def _differ(g: Group, base: Group) -> tuple[dict, set[str]]:
    """`g`'s flat configuration and the fields in which it differs from `base`'s (solved sizes and execution
    settings aside)."""
    mine, theirs = _flat(g.runs[0].config), _flat(base.runs[0].config)
    differ = {k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k)}
    return mine, differ - DERIVED - set(EXECUTION_SETTINGS)


def classify(g: Group, base: Group) -> tuple[str, object] | None:
    """(axis name, x) of a setting relative to the original, or None when it is in no series."""
    mine, differ = _differ(g, base)
    mods = _mod_values(g.mods)
    if mods:
        if differ or len(mods) != 1:
            return None
        (name, value), = mods.items()
        mod = REGISTRY.get(name)
        if mod is None or mod.series is None:
            return None
        axis, x = mod.series
        return axis, x(value)
    if not differ:
        if _parameters(g) is not None and _parameters(g) != _parameters(base):
            return "parameters", _parameters(g)
        return None
    if differ == {"model.layers"}:
        return "depth", int(mine["model.layers"])
    if differ == {"model.heads"}:
        return "heads", int(mine["model.heads"])
    if "data.tokenizer" in differ and differ <= TOKENIZATION_FIELDS:
        return "tokenization", str(mine["data.tokenizer"])
    return None


def _base_x(axis: str, base: Group):
    cfg = base.runs[0].config
    return {"depth": cfg.get("model", {}).get("layers"), "heads": cfg.get("model", {}).get("heads"),
            "parameters": _parameters(base), "permutation": 0.0,
            "tokenization": cfg.get("data", {}).get("tokenizer", "wordpiece")}[axis]


def delta(results: dict) -> float | None:
    """∆ of the full mode (else the headline mode); None without a transfer result or where `unlearned`."""
    value = full_transfer(results).get("delta")
    return None if value is None or unlearned(results) else float(value)


def _point(g: Group, x) -> dict:
    """A setting's µ and ∆ over the seeds that trained; `unlearned_seeds` names the others."""
    mu = aggregate([None if unlearned(r.results) else r.results.get("mu") for r in g.runs])
    d = aggregate([delta(r.results) for r in g.runs])
    return {"setting": g.label, "x": x, "n": len(g.runs), "parameters": _parameters(g), "mu": mu, "delta": d,
            "unlearned_seeds": [r.seed for r in g.runs if unlearned(r.results)]}


def _spearman(points: list[dict], key: str) -> float | None:
    xy = [(p["x"], p[key]["mean"]) for p in points if p[key]["mean"] is not None and not isinstance(p["x"], str)]
    if len(xy) < 3 or len({x for x, _ in xy}) < 2 or len({y for _, y in xy}) < 2:
        return None
    return float(stats.spearmanr([x for x, _ in xy], [y for _, y in xy]).statistic)


def _base(section: Section, sections: list[Section]) -> Group | None:
    """Table 1's baseline when it is ID 0; among unswept runs, the one `original` without a solved size
    or another tokenizer (several such: Table 1's choice)."""
    base = baseline_for(section, sections)
    if base is None or base.id == "0":
        return base
    plain = [g for g in section.groups if g.mods == "original"
             and not (cfg := _flat(g.runs[0].config)).get("model.target_params")
             and cfg.get("data.tokenizer", "wordpiece") == "wordpiece"]
    return plain[0] if len(plain) == 1 else base


def _context(anchor: Group, base: Group) -> str:
    """What an anchor changes against the section's baseline: "train.lr=0.001"; "" for the baseline."""
    mine, differ = _differ(anchor, base)
    return ", ".join(f"{k}={mine.get(k)}" for k in sorted(differ))


def series(sections: list[Section]) -> list[dict]:
    """Per section with an `original` and at least one other point on an axis: one entry per axis with
    its points (original included, sorted by x; unigram last) and the rank correlations. The baseline's
    series come first, then those of every other `original` left in no series (`context` says how it
    differs from the baseline), each over the settings no earlier anchor took."""
    out = []
    for section in sections:
        base = _base(section, sections)
        if base is None:
            continue
        claimed = {id(base)}
        out += _axes(section, base, _found(section, base, claimed), "")
        # each `original` not a point of an earlier anchor's series (`claimed` grows as they are taken)
        for anchor in (g for g in section.groups if g.mods == "original" and id(g) not in claimed):
            out += _axes(section, anchor, _found(section, anchor, claimed), _context(anchor, base))
    return out


def _found(section: Section, anchor: Group, claimed: set[int]) -> dict[str, list]:
    """{axis: [points]} of the settings not yet claimed that differ from `anchor` on one axis; claims them."""
    found: dict[str, list] = {}
    for g in section.groups:
        if id(g) not in claimed and g is not anchor and (c := classify(g, anchor)) is not None:
            found.setdefault(c[0], []).append(_point(g, c[1]))
            claimed.add(id(g))
    if found:
        claimed.add(id(anchor))
    return found


def _axes(section: Section, base: Group, found: dict[str, list], context: str) -> list[dict]:
    """One entry per axis of `found`: its points with `base`'s (sorted by x; unigram last) and the rank
    correlations."""
    out = []
    for axis in AXES.values():
        if axis.name not in found:
            continue
        points = [_point(base, _base_x(axis.name, base))] + found[axis.name]
        if axis.categorical:
            order = ["wordpiece", "word", "char"]
            points.sort(key=lambda p: (order.index(p["x"]) if p["x"] in order else len(order), str(p["x"])))
        else:
            points.sort(key=lambda p: (isinstance(p["x"], str), p["x"] if not isinstance(p["x"], str) else 0))
        out.append({"section": section.title, "axis": axis.name, "table": axis.table, "claim": axis.claim,
                    "context": context, "points": points, "spearman_mu": _spearman(points, "mu"),
                    "spearman_delta": _spearman(points, "delta")})
    return out


def count_tick(v: float) -> str:
    """A parameter count as an axis label, three significant digits: 253k, 1.76M."""
    return f"{v / 1e6:.3g}M" if v >= 1e6 else f"{v / 1e3:.3g}k"


def _trained(points: list[dict]) -> int:
    return sum(p["mu"]["mean"] is not None for p in points)


def _rho(v: float | None) -> str:
    return "n/a" if v is None else f"{v:+.2f}"


def _x_text(x) -> str:
    return x if isinstance(x, str) else f"{x:,}" if isinstance(x, int) else f"{x:g}"


def markdown(found: list[dict]) -> str:
    if not found:
        return ""
    lines = ["## K et al.'s series (K et al. 2020): µ and ∆ per axis", "",
             "∆ = English − zero-shot accuracy of full fine-tuning (`minimult transfer`); mean ± std over seeds; "
             "a smaller ∆ is better transfer; 'here' is Spearman's rank correlation of the setting means with the axis "
             "(not a test), beside the signs K et al.'s direction predicts.", ""]
    for s in found:
        axis = AXES[s["axis"]]
        at = f"; at {s['context']}" if s.get("context") else ""
        lines += [f"### {axis.name} ({s['table']}; {s['section']}{at})", "",
                  f"K et al.: {s['claim']}. Here: µ rank correlation {_rho(s['spearman_mu'])}, "
                  f"∆ {_rho(s['spearman_delta'])} over the {_trained(s['points'])} settings with a trained run "
                  f"(their direction: {axis.expect}).", ""]
        lines += table_lines([axis.label, "setting", "n", "parameters", "µ", "∆"], "rlrrrr", (
            [_x_text(p["x"]), p["setting"], p["n"], f"{p['parameters']:,}" if p["parameters"] else "–",
             *(mean_std(p[k], missing="–") for k in ("mu", "delta"))] for p in s["points"]))
        lines += [f"\nµ and ∆ of {p['setting']} leave out seed(s) {', '.join(map(str, p['unlearned_seeds']))}"
                  f"{' (every seed: no point)' if len(p['unlearned_seeds']) == p['n'] else ''}: fine-tuned English "
                  f"accuracy at the majority baseline (+{UNLEARNED_MARGIN}), so pretraining learned nothing (stuck "
                  f"at the unigram plateau)." for p in s["points"] if p["unlearned_seeds"]]
        lines.append("")
    return "\n".join(lines)


PANELS_A_ROW = 3  # a row of 2.4-inch panels and their labels: ~1,300 px at 120 dpi, legible on a 1,400 px page


def figure(found: list[dict], out: Path) -> Path | None:
    """k_et_al.png: one panel per series (rows of `PANELS_A_ROW`), µ (left axis) and ∆ (right axis) with seed std
    as error bars."""
    if not found:
        return None
    plt, fig, axes = panel_grid(len(found))
    for ax, s in zip(axes, found):
        axis = AXES[s["axis"]]
        if axis.categorical:  # each value at its own place, by name
            xs = {p["x"]: i for i, p in enumerate(s["points"])}
            ax.set_xticks(range(len(xs)), list(xs))
            numeric, labels = [{**p, "x": xs[p["x"]]} for p in s["points"]], []
        else:
            numeric = [p for p in s["points"] if not isinstance(p["x"], str)]
            labels = [p for p in s["points"] if isinstance(p["x"], str)]
        twin = ax.twinx()
        for a, key, colour, name in ((ax, "mu", "C0", "µ"), (twin, "delta", "C3", "∆ (lower: better transfer)")):
            pts = [p for p in numeric if p[key]["mean"] is not None]
            if pts:
                a.errorbar([p["x"] for p in pts], [p[key]["mean"] for p in pts],
                           yerr=[p[key]["std"] or 0 for p in pts], color=colour, marker="o", ms=4, capsize=3,
                           label=name)
            for p in labels:  # unigram: a dashed level beside the series
                if p[key]["mean"] is not None:
                    a.axhline(p[key]["mean"], color=colour, ls="--", lw=0.8)
                    a.annotate(p["x"], (1.0, p[key]["mean"]), xycoords=("axes fraction", "data"), fontsize=7,
                               color=colour, ha="right", va="bottom")
            a.set_ylabel(name, color=colour)
        ax.set_ylim(bottom=0)  # µ from 0: a flat series (heads) should not look steep
        if axis.log_x:
            ax.set_xscale("log")
            ax.set_xticks([p["x"] for p in numeric])
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: count_tick(v)))
            ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(axis.label)
        ax.set_title(f"{axis.name} ({s['table']})" + (f"\nat {s['context']}" if s.get("context") else ""), fontsize=9)
    cols = min(len(found), PANELS_A_ROW)  # each panel's left labels before it, its right axis's labels after it
    place(fig, axes, cols, 2.4, 2.4, 120, "", left=0.8, gaps=[1.35] * (cols - 1) + [0.7], bottom=0.55,
          row_gap=1.0, top=0.5)
    return save_figure(fig, plt, Path(out) / "k_et_al.png", 120)


register(Part("series", order=50, keys=("k_et_al",), compute=lambda sections, top: series(sections),
              markdown=lambda found, top: markdown(found),
              figure=lambda found, top, out: figure(found, out), figure_file="k_et_al.png"))
