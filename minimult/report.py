"""Report: the paper's Table 1 (mean ± std over seeds, Welch's t-test against `original`) and figures.

Public entry: `build_report(paths, out_dir, log) -> dict`. `paths` are run folders or folders holding
runs (searched recursively). Everything comes from files in the run folders (`results.json`,
`config.json`, `metrics.jsonl`, `checkpoint.pt`); a sweep's `<grid>.sweep.json` next to its runs
only says which runs form which setting (paper ID and name) of which table. Runs no sweep claims
are grouped by mods and configuration in a section of their own.

Writes to `out_dir`: `table1.md` (every section, the first being Table 1), `table1.csv` (one row per
setting, full precision, a `section` column), `report.json` (every aggregated number, the values per
seed and the p-values of every metric) and PNG figures:
- `positions_<run>.png`: cosine similarity of position embeddings (paper Fig. 5/8),
- `pca_<run>.png`: PCA of layer-0 token embeddings of both languages (Fig. 4),
- `training_<section>.png`: multilinguality and dev perplexity over training steps (Fig. 6/7),
  when the runs logged evaluations during training (`--eval-every`).
Standard deviations are sample standard deviations (ddof=1), blank for one seed; p-values are
Welch's unequal-variance t-test over seeds (scipy), blank with fewer than 2 seeds on either side.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from .errors import MinimultError

OTHER_SECTION = "Other runs (not part of a sweep)"


@dataclass
class Run:
    path: Path
    results: dict
    config: dict
    metrics_rows: list = field(default_factory=list)  # rows with an "eval" key

    @property
    def seed(self) -> int:
        return self.results.get("seed", self.config.get("train", {}).get("seed", 0))

    @property
    def mods(self) -> str:
        return self.results.get("mods") or self.config.get("mods", "original")


@dataclass
class Group:
    id: str
    name: str
    mods: str
    runs: list[Run]
    preset: str = ""

    @property
    def label(self) -> str:
        return f"{self.id} {self.name}".strip()


@dataclass
class Section:
    title: str
    groups: list[Group]
    preset: str = ""
    missing: list[dict] = field(default_factory=list)  # manifest settings without an evaluated run: id, setting, why


# ---------------------------------------------------------------------------------------------
# Finding and reading runs.


def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _eval_rows(path: Path) -> list[dict]:
    rows = []
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict) and "eval" in row:
                rows.append(row)
    return rows


def find_run_dirs(paths) -> tuple[list[Path], list[Path]]:
    """(run folders, folders to look for sweep manifests in)."""
    runs, homes = [], []
    for p in map(Path, paths):
        if not p.is_dir():
            raise MinimultError(f"not a folder: {p}")
        if (p / "config.json").is_file():
            runs.append(p)
            homes.append(p.parent)
        else:
            found = sorted(q.parent for q in p.rglob("config.json"))
            if not found:
                raise MinimultError(f"no run folders (with config.json) under {p}")
            runs += found
            homes += [p, *sorted({q.parent for q in found})]
    return list(dict.fromkeys(r.resolve() for r in runs)), list(dict.fromkeys(h.resolve() for h in homes))


def load_runs(run_dirs: list[Path]) -> tuple[list[Run], list[Path]]:
    runs, unevaluated = [], []
    for d in run_dirs:
        results, config = _read(d / "results.json"), _read(d / "config.json")
        if not results or "layers" not in results or config is None:
            unevaluated.append(d)
            continue
        runs.append(Run(d, results, config, _eval_rows(d / "metrics.jsonl")))
    return runs, unevaluated


def _fingerprint(config: dict) -> str:
    c = json.loads(json.dumps(config))
    c.get("train", {}).pop("seed", None)
    c.get("train", {}).pop("device", None)
    return hashlib.sha256(json.dumps(c, sort_keys=True).encode()).hexdigest()[:8]


def build_sections(runs: list[Run], homes: list[Path], log: Callable[[str], None]) -> list[Section]:
    by_path = {r.path: r for r in runs}
    claimed: set[Path] = set()
    sections = []
    manifests = sorted({m for h in homes for m in h.glob("*.sweep.json")})
    for m in manifests:
        data = _read(m)
        if not data or not isinstance(data.get("settings"), list):
            log(f"note: ignoring unreadable sweep manifest {m}")
            continue
        groups, missing = [], []
        for s in data["settings"]:
            members = [by_path[p] for p in ((m.parent / name).resolve() for name in s.get("runs", [])) if p in by_path]
            if members:
                members.sort(key=lambda r: r.seed)
                groups.append(Group(str(s.get("id", "")), s.get("name") or s.get("mods") or "", s.get("mods") or
                                    members[0].mods, members, data.get("preset", "")))
                claimed.update(r.path for r in members)
            else:
                why = s.get("left_out") or ("no evaluated run yet" if s.get("runs") else "not run")
                missing.append({"id": str(s.get("id", "")), "setting": s.get("name") or s.get("mods") or "",
                                "why": why})
        if groups or missing:
            sections.append(Section(data.get("title") or m.stem, groups, data.get("preset", ""), missing))
    sections.sort(key=lambda s: s.title)  # "Table 1 ..." before "Table 2 ..."

    rest: dict[tuple, list[Run]] = {}
    for r in runs:
        if r.path not in claimed:
            rest.setdefault((r.mods, r.config.get("preset", ""), _fingerprint(r.config)), []).append(r)
    if rest:
        names = [k[0] for k in rest]
        groups = []
        for (mods, preset, fp), members in rest.items():
            name = mods if names.count(mods) == 1 else f"{mods} ({preset}, config {fp})"
            groups.append(Group("", name, mods, sorted(members, key=lambda r: r.seed), preset))
        groups.sort(key=lambda g: (g.mods != "original", g.name))
        sections.append(Section(OTHER_SECTION, groups))
    return sections


# ---------------------------------------------------------------------------------------------
# Numbers.


def top_layer(runs: list[Run]) -> str:
    """'8' as in the paper when any run has it; otherwise the deepest layer every run has."""
    if any("8" in r.results["layers"] for r in runs):
        return "8"
    common = set.intersection(*(set(r.results["layers"]) for r in runs))
    return max(common - {"0"}, key=int, default="0") if common else "0"


def metric_columns(top: str) -> list[tuple[str, str]]:
    """(key, column heading) in the paper's Table 1 order."""
    return [("mu", "µ"),
            ("align_f1_L0", "align F1 L0"), ("retrieval_L0", "ρ L0"), ("translation_L0", "τ L0"),
            (f"align_f1_L{top}", f"align F1 L{top}"), (f"retrieval_L{top}", f"ρ L{top}"),
            (f"translation_L{top}", f"τ L{top}"),
            ("ppl_train", "ppl train"), ("ppl_dev", "ppl dev")]


def run_values(run: Run, top: str) -> dict[str, float | None]:
    r = run.results
    out = {"mu": r.get("mu")}
    for l in ("0", top):
        layer = r["layers"].get(l, {})
        for m in ("align_f1", "retrieval", "translation"):
            out[f"{m}_L{l}"] = layer.get(m)
    ppl = r.get("perplexity", {})
    out["ppl_train"], out["ppl_dev"] = ppl.get("train"), ppl.get("dev")
    return {k: (float(v) if v is not None and math.isfinite(float(v)) else None) for k, v in out.items()}


def aggregate(values: list[float | None]) -> dict:
    xs = [v for v in values if v is not None]
    n = len(xs)
    return {"mean": float(np.mean(xs)) if n else None,
            "std": float(np.std(xs, ddof=1)) if n >= 2 else None,
            "n": n, "values": values}


def welch_p(a: list, b: list) -> float | None:
    from scipy import stats

    a, b = [x for x in a if x is not None], [x for x in b if x is not None]
    if len(a) < 2 or len(b) < 2:
        return None
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # identical values: scipy warns and returns nan (-> blank)
        p = stats.ttest_ind(a, b, equal_var=False).pvalue
    return float(p) if p is not None and math.isfinite(p) else None


def baseline_for(section: Section, sections: list[Section]) -> Group | None:
    """The section's `original` (ID 0 first), else an `original` of the same preset elsewhere."""
    for candidates in (section.groups, [g for s in sections for g in s.groups if g.preset == section.preset]):
        originals = [g for g in candidates if g.mods == "original"]
        if originals:
            return next((g for g in originals if g.id == "0"), originals[0])
    return None


def aggregate_sections(sections: list[Section], top: str) -> list[dict]:
    keys = [k for k, _ in metric_columns(top)]
    out = []
    for section in sections:
        base = baseline_for(section, sections)
        base_values = {k: [run_values(r, top)[k] for r in base.runs] for k in keys} if base else None
        rows = []
        for g in section.groups:
            per_run = [run_values(r, top) for r in g.runs]
            metrics = {}
            for k in keys:
                agg = aggregate([v[k] for v in per_run])
                agg["p_vs_original"] = (None if base is None or g is base
                                        else welch_p(agg["values"], base_values[k]))
                metrics[k] = agg
            rows.append({"id": g.id, "setting": g.name, "mods": g.mods, "preset": g.preset,
                         "seeds": [r.seed for r in g.runs], "runs": [str(r.path) for r in g.runs],
                         "baseline": None if base is None or g is base else base.label, "metrics": metrics})
        out.append({"title": section.title, "preset": section.preset, "rows": rows,
                    "baseline": base.label if base else None, "not_run": section.missing})
    return out


# ---------------------------------------------------------------------------------------------
# Tables.


def _num(x: float | None, key: str) -> str:
    if x is None:
        return ""
    if key.startswith("ppl"):
        return f"{x:.0f}" if abs(x) >= 100 else f"{x:.1f}"
    return f"{x:.3f}"


def _cell(agg: dict, key: str) -> str:
    if agg["mean"] is None:
        return "–"
    return _num(agg["mean"], key) + (f" ± {_num(agg['std'], key)}" if agg["std"] is not None else "")


def _p(p: float | None) -> str:
    return "" if p is None else f"{p:.2g}" if p >= 0.001 else f"{p:.1e}"


def markdown(aggregated: list[dict], top: str, n_runs: int, unevaluated: list[Path]) -> str:
    cols = metric_columns(top)
    lines = ["# minimult report", "",
             f"{n_runs} evaluated runs. Mean ± sample standard deviation over seeds (n seeds); "
             f"p (µ): Welch's t-test of µ against the table's `original` (blank: fewer than 2 seeds, or the baseline "
             f"itself). Layers 0 and {top}."]
    if top != "8":
        lines[-1] += f" (These models are shallower than 8 layers, so L{top} stands in for L8 and µ is not defined.)"
    if unevaluated:
        lines.append(f"Not evaluated yet (no results.json), left out: {', '.join(p.name for p in unevaluated)}.")
    for sec in aggregated:
        lines += ["", f"## {sec['title']}", ""]
        presets = sorted({r['preset'] for r in sec["rows"] if r["preset"]})
        if presets:
            lines += [f"Preset {', '.join(presets)}; baseline for p: {sec['baseline'] or 'none'}.", ""]
        head = ["ID", "setting", "n", cols[0][1], "p (µ)"] + [c for _, c in cols[1:]]
        if sec["rows"]:
            lines.append("| " + " | ".join(head) + " |")
            lines.append("|" + "|".join(["---"] * 2 + ["--:"] * (len(head) - 2)) + "|")
        for row in sec["rows"]:
            m = row["metrics"]
            cells = [row["id"], row["setting"], str(len(row["seeds"])), _cell(m["mu"], "mu"), _p(m["mu"]["p_vs_original"])]
            cells += [_cell(m[k], k) for k, _ in cols[1:]]
            lines.append("| " + " | ".join(cells) + " |")
        for why in dict.fromkeys(m["why"] for m in sec["not_run"]):  # e.g. "needs a GPU"
            names = ", ".join(f"{m['id']} {m['setting']}".strip() for m in sec["not_run"] if m["why"] == why)
            lines += ["", f"No row: {names} ({why})."]
    return "\n".join(lines) + "\n"


def csv_text(aggregated: list[dict], top: str) -> str:
    keys = [k for k, _ in metric_columns(top)]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["section", "id", "setting", "mods", "preset", "n_seeds", "seeds"]
               + [f"{k}_{s}" for k in keys for s in ("mean", "std", "p")])
    for sec in aggregated:
        for row in sec["rows"]:
            cells = [sec["title"], row["id"], row["setting"], row["mods"], row["preset"], len(row["seeds"]),
                     " ".join(map(str, row["seeds"]))]
            for k in keys:
                m = row["metrics"][k]
                cells += ["" if v is None else repr(v) for v in (m["mean"], m["std"], m["p_vs_original"])]
            w.writerow(cells)
    return buf.getvalue()


# ---------------------------------------------------------------------------------------------
# Figures (matplotlib, Agg).


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.+_-]+", "_", text).strip("_")[:80] or "x"


def _embeddings(run: Run) -> dict | None:
    import torch

    path = run.path / "checkpoint.pt"
    if not path.is_file():
        return None
    try:
        try:
            ckpt = torch.load(path, map_location="cpu", weights_only=False, mmap=True)
        except RuntimeError:  # an old-style (non-zip) file cannot be memory-mapped
            ckpt = torch.load(path, map_location="cpu", weights_only=False)
        state = ckpt["model"]
        return {k: state[k].float().numpy() for k in ("embeddings.lookups.position.weight",
                                                       "embeddings.lookups.token.weight") if k in state}
    except Exception:
        return None


def position_figure(run: Run, group: Group, out: Path) -> Path | None:
    emb = _embeddings(run)
    if not emb or "embeddings.lookups.position.weight" not in emb:
        return None
    W = emb["embeddings.lookups.position.weight"]
    unit = W / np.maximum(np.linalg.norm(W, axis=1, keepdims=True), 1e-12)
    sim = unit @ unit.T
    data = run.config.get("data", {})
    per_lang = int(data.get("max_len", W.shape[0]))
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 5.6))
    im = ax.imshow(sim, cmap="viridis", vmin=-1, vmax=1, interpolation="nearest")
    if W.shape[0] > per_lang:
        for b in range(per_lang, W.shape[0], per_lang):
            ax.axhline(b - 0.5, color="white", lw=0.8)
            ax.axvline(b - 0.5, color="white", lw=0.8)
        ax.set_xlabel(f"position id (0–{per_lang - 1} English, {per_lang}–{W.shape[0] - 1} second language)")
    else:
        ax.set_xlabel("position id (shared by both languages)")
    ax.set_ylabel("position id")
    ax.set_title(f"Cosine similarity of position embeddings\n{group.label} (seed {run.seed})")
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="cosine similarity")
    fig.tight_layout()
    path = out / f"positions_{_slug(run.path.name)}.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def pca_figure(run: Run, group: Group, out: Path) -> Path | None:
    data = run.config.get("data", {})
    if data.get("fake", "shift") != "shift":  # unicode Fake-English shares one vocabulary: no id blocks
        return None
    emb = _embeddings(run)
    if not emb or "embeddings.lookups.token.weight" not in emb:
        return None
    W = emb["embeddings.lookups.token.weight"]
    V = int(data.get("vocab_size", W.shape[0] // 2))
    if W.shape[0] < 2 * V:
        return None
    n_special = 5
    ids = np.arange(n_special, V)
    X = np.concatenate([W[ids], W[ids + V]])
    X = X - X.mean(0)
    _, S, Vt = np.linalg.svd(X, full_matrices=False)
    P = X @ Vt[:2].T
    share = S[:2] ** 2 / max(float((S ** 2).sum()), 1e-12)
    en, l1 = P[: len(ids)], P[len(ids):]
    vocab_file = run.path / "vocab.txt"
    words = vocab_file.read_text(encoding="utf-8").splitlines() if vocab_file.is_file() else []
    plt = _plt()
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 5.4))
    a.scatter(en[:, 0], en[:, 1], s=4, alpha=0.5, color="tab:blue", label="English")
    a.scatter(l1[:, 0], l1[:, 1], s=4, alpha=0.5, color="tab:orange", label="Fake-English")
    a.set_title("all vocabulary entries")
    a.legend(markerscale=4, loc="best")
    # a sample of whole words, each joined to its Fake-English copy (paper Fig. 4, bottom)
    candidates = [i for i, idx in enumerate(ids) if idx < len(words) and words[idx].isalpha() and len(words[idx]) > 2]
    rng = np.random.default_rng(0)
    sample = rng.choice(candidates, size=min(20, len(candidates)), replace=False) if candidates else []
    for i in sample:
        b.plot([en[i, 0], l1[i, 0]], [en[i, 1], l1[i, 1]], color="0.75", lw=0.8, zorder=1)
        b.scatter(*en[i], s=18, color="tab:blue", zorder=2)
        b.scatter(*l1[i], s=18, color="tab:orange", zorder=2)
        b.annotate(words[ids[i]], en[i], fontsize=8, color="tab:blue", xytext=(3, 3), textcoords="offset points")
        b.annotate("::" + words[ids[i]], l1[i], fontsize=8, color="tab:orange", xytext=(3, -9), textcoords="offset points")
    b.set_title("a sample of words and their Fake-English copies")
    for ax in (a, b):
        ax.set_xlabel(f"PC 1 ({share[0]:.0%} of variance)")
        ax.set_ylabel(f"PC 2 ({share[1]:.0%} of variance)")
    fig.suptitle(f"PCA of layer-0 token embeddings — {group.label} (seed {run.seed})")
    fig.tight_layout()
    path = out / f"pca_{_slug(run.path.name)}.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _curve(group: Group, extract) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Mean and std over seeds at the steps every seed logged."""
    per_run = []
    for r in group.runs:
        pts = {row["step"]: extract(row["eval"]) for row in r.metrics_rows}
        pts = {s: v for s, v in pts.items() if v is not None}
        if pts:
            per_run.append(pts)
    if not per_run:
        return None
    steps = sorted(set.intersection(*(set(p) for p in per_run)))
    if not steps:
        return None
    Y = np.array([[p[s] for s in steps] for p in per_run], dtype=float)
    std = Y.std(0, ddof=1) if len(Y) > 1 else np.zeros(len(steps))
    return np.array(steps), Y.mean(0), std


def training_figure(section: Section, out: Path) -> Path | None:
    groups = [g for g in section.groups if any(r.metrics_rows for r in g.runs)]
    if not groups:
        return None
    layers = sorted({l for g in groups for r in g.runs for row in r.metrics_rows for l in row["eval"].get("layers", {})},
                    key=int)
    top = "8" if "8" in layers else (layers[-1] if layers else "0")
    panels = []
    if any(row["eval"].get("mu") is not None for g in groups for r in g.runs for row in r.metrics_rows):
        panels.append(("multilinguality µ", lambda e: e.get("mu")))
    for l in dict.fromkeys(["0", top]):
        panels.append((f"retrieval ρ, layer {l}", lambda e, l=l: e.get("layers", {}).get(l, {}).get("retrieval")))
        panels.append((f"translation τ, layer {l}", lambda e, l=l: e.get("layers", {}).get(l, {}).get("translation")))
    panels.append(("dev perplexity", lambda e: e.get("perplexity", {}).get("dev")))
    plt = _plt()
    ncols = 3
    nrows = -(-len(panels) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5 * ncols, 3.6 * nrows + 0.8), squeeze=False)
    colors = plt.get_cmap("tab20" if len(groups) > 10 else "tab10")
    for i, (title, extract) in enumerate(panels):
        ax = axes.flat[i]
        for j, g in enumerate(groups):
            c = _curve(g, extract)
            if c is None:
                continue
            steps, mean, std = c
            ax.plot(steps, mean, marker="o", ms=3, color=colors(j % colors.N), label=f"{g.label} (n={len(g.runs)})")
            if len(g.runs) > 1:
                ax.fill_between(steps, mean - std, mean + std, color=colors(j % colors.N), alpha=0.15, lw=0)
        ax.set_title(title)
        ax.set_xlabel("training step")
        ax.set_ylabel("perplexity" if "perplexity" in title else "score")
        lows = [ln.get_ydata().min() for ln in ax.get_lines()]
        highs = [ln.get_ydata().max() for ln in ax.get_lines()]
        if "perplexity" in title and lows and min(lows) > 0 and max(highs) / min(lows) > 20:
            ax.set_yscale("log")  # early-training perplexities dwarf the later ones
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if not handles:
        for ax in axes.flat:
            handles, labels = ax.get_legend_handles_labels()
            if handles:
                break
    fig.legend(handles, labels, loc="lower center", ncol=min(4, max(1, len(labels))), fontsize=8, frameon=False)
    fig.suptitle(f"Multilinguality during training (mean ± std over seeds) — {section.title}", fontsize=11)
    fig.tight_layout(rect=(0, 0.04 + 0.025 * math.ceil(len(labels) / 4), 1, 0.97))
    path = out / f"training_{_slug(section.title.split(':')[0])}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ---------------------------------------------------------------------------------------------


def build_report(paths, out_dir, log: Callable[[str], None] = print) -> dict:
    from .cache import atomic_write_text
    from .runs import write_json

    run_dirs, homes = find_run_dirs(paths)
    runs, unevaluated = load_runs(run_dirs)
    if not runs:
        raise MinimultError(f"none of the {len(run_dirs)} run folder(s) has a results.json yet: evaluate them with "
                            f"`minimult eval RUN` or run `minimult sweep`")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    sections = build_sections(runs, homes, log)
    top = top_layer(runs)
    aggregated = aggregate_sections(sections, top)
    md = markdown(aggregated, top, len(runs), unevaluated)
    atomic_write_text(out / "table1.md", md)
    atomic_write_text(out / "table1.csv", csv_text(aggregated, top))

    figures, drawn = [], set()
    for section in sections:
        for g in section.groups:
            run = g.runs[0]  # the lowest seed
            if run.path in drawn:
                continue
            drawn.add(run.path)
            for make in (position_figure, pca_figure):
                p = make(run, g, out)
                if p is not None:
                    figures.append(str(p))
        p = training_figure(section, out)
        if p is not None:
            figures.append(str(p))
    log(f"report: {len(runs)} runs in {sum(len(s.groups) for s in sections)} settings; "
        f"{len(figures)} figures; tables in {out}/table1.md, {out}/table1.csv")
    report = {"top_layer": top, "columns": [k for k, _ in metric_columns(top)], "sections": aggregated,
              "figures": figures, "unevaluated": [str(p) for p in unevaluated], "markdown": md}
    write_json(out / "report.json", report)
    return report
