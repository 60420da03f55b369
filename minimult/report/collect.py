"""Finding and reading run folders, and grouping them into the report's sections.

A run folder is any folder with a `config.json`; it enters the tables once it has a `results.json`.
A sweep's `<grid>.sweep.json` beside its runs says which runs form which setting (paper ID and name)
of which table, and which settings have no run (with why); runs that no manifest claims are grouped
by mods, preset and configuration into one last section.

The manifest also carries each setting's published numbers (`paper`, keyed as the report's columns)
and where they come from (`paper_source`). A manifest written before it recorded them falls back to
the grid file it names (its "grid", relative to the current folder or the repository) when that file
still loads; otherwise the section simply has none.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from minimult.config import (EVALUATION_SECTIONS, DataConfig, RunConfig, comparable, flat, resolve,
                             without_execution)
from minimult.errors import MinimultError
from minimult.evaluate.results import headline_problem
from minimult.runs import log_lines, logged_seconds, read_json
from minimult.sweep.grid import load_grid

OTHER_SECTION = "Other runs (not part of a sweep)"
REPOSITORY = Path(__file__).resolve().parents[2]


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
    """One setting: its runs (one per seed, lowest seed first)."""

    id: str
    name: str
    mods: str
    runs: list[Run]
    preset: str = ""
    paper: dict = field(default_factory=dict)  # the published numbers by column key (the grid's `paper`)

    @property
    def label(self) -> str:
        return f"{self.id} {self.name}".strip()


@dataclass
class Section:
    title: str
    groups: list[Group]
    preset: str = ""
    missing: list[dict] = field(default_factory=list)  # manifest settings without an evaluated run: id, setting, why
    paper_source: str = ""  # where the groups' `paper` numbers come from
    # runs of a setting with rows that are left out: id, setting, run, why
    lost: list[dict] = field(default_factory=list)
    # settings whose runs trained differently (beyond seed and execution): id, setting, differ (a sentence)
    mixed: list[dict] = field(default_factory=list)
    manifest: Path | None = None  # the sweep manifest the section comes from (None: runs no sweep claims)
    # runs the manifest plans that are neither rows nor left out: run, status (`run_status` where its folder
    # exists without a results.json; None without a folder)
    pending: list[dict] = field(default_factory=list)

    @property
    def grid(self) -> str | None:
        """The grid its sweep manifest names (`table1` for table1.sweep.json); None for runs of no sweep."""
        return self.manifest.name.removesuffix(".sweep.json") if self.manifest else None


def settings(sections: list[Section]) -> list[Group]:
    """Every setting of `sections`, section by section."""
    return [g for s in sections for g in s.groups]


def read_object(path: Path) -> dict | None:
    """A JSON object from `path`; None when it is missing, unreadable or not an object."""
    try:
        return read_json(path)
    except MinimultError:
        return None


def eval_rows(path: Path) -> list[dict]:
    """The evaluations logged during training (`--eval-every`); other and damaged lines are skipped."""
    return [row for row in log_rows(path) if isinstance(row.get("eval"), dict)]


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
            # not inside hidden folders: a copy half made or half replaced (bring_runs, unpack_call) is no run
            found = sorted(q.parent for q in p.rglob("config.json")
                           if not any(part.startswith(".") for part in q.parent.relative_to(p).parts))
            if not found:
                raise MinimultError(f"no run folders (with config.json) under {p}")
            runs += found
            homes += [p, *sorted({q.parent for q in found})]
    return list(dict.fromkeys(r.resolve() for r in runs)), list(dict.fromkeys(h.resolve() for h in homes))


# A run whose MLM perplexity on training text is within this many nats of the unigram entropy of its
# training pieces never left the unigram plateau (docs/metrics.md): its µ is noise, not a result.
PLATEAU_MARGIN = 0.3
# Judged only for runs of at least this many updates: runs that trained leave the plateau within ~200
# (quick-b256), while the tiny preset's ~30 updates never do, and `untrained` (0) is meant to be untrained.
PLATEAU_MIN_STEPS = 500


def plateau(results: dict, meta: dict) -> str | None:
    """Why a finished run is no result although it trained to the end: its training perplexity sits on
    the unigram plateau (run.json's `unigram_entropy`, recorded since; None without it)."""
    if (meta.get("total_steps") or 0) < PLATEAU_MIN_STEPS:  # too short to tell (tiny), or `untrained` (0 steps)
        return None
    ppl = (results.get("perplexity") or {}).get("train")
    entropy = meta.get("unigram_entropy")
    if not (isinstance(ppl, (int, float)) and isinstance(entropy, (int, float)) and ppl > 0):
        return None
    if math.log(ppl) > entropy - PLATEAU_MARGIN:
        return (f"never trained: training perplexity {ppl:,.0f} against {math.exp(entropy):,.0f} for piece "
                f"frequencies alone (the unigram plateau)")
    return None


def _why_not(d: Path, results: dict | None, config: dict | None) -> str | None:
    """Why an evaluated-looking run folder cannot be a row: unreadable files, or a headline that is no result
    of the run (`results.headline_problem`: unreadable numbers, a failed or unfinished run, an evaluation at
    other than the default settings), or a run that never trained (`plateau`)."""
    if config is None:
        return "config.json is unreadable"
    if results is None:
        return "results.json is unreadable"
    meta = read_object(d / "run.json")
    if meta is None and (d / "run.json").exists():  # its status (failed?) and steps cannot be known
        return "run.json is unreadable"
    meta = meta or {}
    return headline_problem(results, meta, d) or plateau(results, meta)


def load_runs(run_dirs: list[Path], log=lambda s: None, left_out: list | None = None) -> tuple[list[Run], list[Path]]:
    """(evaluated runs, folders without a results.json yet). Runs that cannot be rows (unreadable
    files, a failed run, one that never left the unigram plateau) are left out with one line each, so
    one bad folder never stops a report and a diverged or untrained run is never a row or a baseline;
    `left_out`, when given, collects them as (folder, why)."""
    runs, unevaluated = [], []
    for d in run_dirs:
        results, config = read_object(d / "results.json"), read_object(d / "config.json")
        if not (d / "results.json").is_file():
            status = str((read_object(d / "run.json") or {}).get("status", ""))
            if not status.startswith("failed"):  # a diverged run will never be evaluated: left out, with why
                unevaluated.append(d)
                continue
        why = _why_not(d, results, config) if (d / "results.json").is_file() else f"the run {status}"
        if why:
            log(f"note: left out {d}: {why}")
            if left_out is not None:
                left_out.append((d, why))
            continue
        runs.append(Run(d, results, config, eval_rows(d)))
    return runs, unevaluated


def training_seconds(run_dir: Path) -> tuple[float | None, str]:
    """(seconds of training over every stretch of the run, the devices it trained on in order, "cuda+cpu"
    for a run begun on a GPU and finished on a CPU): `device_seconds` summed."""
    return _summed(device_seconds(run_dir))


def _summed(by_device: dict[str, float] | str) -> tuple[float | None, str]:
    return (None, by_device) if isinstance(by_device, str) else (sum(by_device.values()), "+".join(by_device))


def device_seconds(run_dir: Path) -> dict[str, float] | str:
    """A run's training seconds on each device it trained on ({"cuda": 282.0, "cpu": 1450.3}, in the order of
    its stretches), or the name of its device where nothing says how long it took. From metrics.jsonl
    (`runs.logged_seconds`), cut where run.json's `execution` says the device changed (at the last logged
    step at or before it), else run.json's `train_seconds`; 0 for an untrained run."""
    meta = read_object(run_dir / "run.json") or {}
    device = str(meta.get("device") or "?").split(":")[0]
    if meta.get("total_steps") == 0:  # untrained: nothing to time
        return {device: 0.0}
    log = run_dir / "metrics.jsonl"
    total = logged_seconds(log)
    if total is None:
        seconds = meta.get("train_seconds")
        return {device: float(seconds)} if isinstance(seconds, (int, float)) else device
    stretches = [(int(e.get("from_step", 0)), str(e.get("device") or device).split(":")[0])
                 for e in meta.get("execution") or [] if isinstance(e, dict)]
    if len({d for _, d in stretches}) < 2:
        return {device: total}
    out: dict[str, float] = {}
    for (start, dev), (end, _) in zip(stretches, [*stretches[1:], (None, None)]):
        upto = total if end is None else (logged_seconds(log, up_to_step=end) or 0.0)
        before = (logged_seconds(log, up_to_step=start) or 0.0) if start > 0 else 0.0
        out[dev] = out.get(dev, 0.0) + max(0.0, upto - before)
    return out


def current_config(config: dict) -> dict:
    """A run's stored configuration as this version reads it: keys added since the run was made take
    their defaults (a run from before data.tokenizer is wordpiece); one it cannot read, as it is."""
    return copy.deepcopy(_current_config(json.dumps(config)))


@functools.lru_cache(maxsize=None)  # a report reads each run's configuration several times, a site ~800 times
def _current_config(config_json: str) -> dict:
    config = json.loads(config_json)
    try:
        return RunConfig.from_dict(config).to_dict()
    except (TypeError, ValueError, MinimultError):
        return config


AUTO_PRECISION = {"cpu": "fp32", "cuda": "bf16"}  # what train.precision "auto" trains in on each device
KNN_TABLES = "knn_tables"  # run.json's record of the neighbour tables a knn-replace run trained with
RECORDED = ("mod_versions.", KNN_TABLES)  # what only run.json says (older runs lack it: compared where all have)


def _training(run: Run) -> dict:
    """`_trained` flat ({"train.lr": ...}, the preset's name left out), `train.precision` as run.json says
    it ran ("auto" is fp32 on a CPU, bf16 on CUDA), the mods' versions run.json records
    (`mod_versions.lang-pos`: a mod whose behaviour changed between two seeds' runs) and the content hashes of
    knn-replace's neighbour tables (`knn_tables`: a table built on another machine may hold other
    neighbours under the same cache key)."""
    trained = _flat_trained(run.config)
    meta = read_object(run.path / "run.json") or {}
    # a run.json from before it recorded the precision: what "auto" ran in on its device
    precision = meta.get("precision") or AUTO_PRECISION.get(str(meta.get("device") or "").split(":")[0])
    if precision and trained.get("train.precision") == "auto":
        trained["train.precision"] = precision
    versions = meta.get("mod_versions")
    if isinstance(versions, dict):  # runs from before run.json recorded them: nothing to compare
        trained.update(flat(versions, "mod_versions."))
    tables = meta.get("knn_tables")
    if isinstance(tables, list) and tables:
        trained[KNN_TABLES] = " then ".join(map(str, tables))
    return trained


@functools.lru_cache(maxsize=None)  # one per preset: every row of a report asks
def _plain_training(preset: str) -> dict | None:
    """`_training`'s keys for a plain `original` at `preset` (precision as configured, "auto"); None for a
    preset this version does not know."""
    try:
        return _flat_trained(resolve(preset, None, None)[0].to_dict())
    except (MinimultError, TypeError, ValueError):
        return None


def unlike_baseline(base: Group, group: Group) -> str | None:
    """Why a p of `group` against `base` would compare runs that trained otherwise than by the row's own
    setting, or None: a baseline at another preset, one that ran in another precision, or one with a setting
    of its own (where it differs from a plain `original` at its preset: random batches, a grid override) that
    the row leaves at the preset's value. The row's own settings (its mods, its grid overrides, also where the
    baseline has another value for the same key) are what p is meant to test."""
    if group is base or not base.runs or not group.runs:
        return None
    renamed = group.preset != base.preset
    # baseline and row at presets of different names compare as the row's preset: a preset renamed since the
    # baseline ran (the committed quick runs trained at `quick` when it meant batches of 256, now `quick-b256`)
    # is the same training, and presets that train otherwise show as settings the baseline has and the row not
    preset = group.preset if renamed else str(base.runs[0].config.get("preset") or base.preset)
    other_preset = f"the baseline is at the {base.preset or 'unnamed'} preset, the row at {group.preset or 'unnamed'}"
    plain = _plain_training(preset)
    if plain is None:
        return other_preset if renamed else None
    mine = {k: v for k, v in _training(base.runs[0]).items() if not k.startswith(RECORDED)}
    own = {k: v for k, v in mine.items() if k in plain and _key(plain[k]) != _key(v)
           and not (k == "train.precision" and plain[k] == "auto")}
    if "train.precision" in mine:  # "auto" trains fp32 on a CPU, bf16 on CUDA: compare what they ran in
        own["train.precision"] = mine["train.precision"]
    row = _training(group.runs[0])
    # a key the row sets itself (spread batches against the baseline's random ones) is what its p tests; one
    # it leaves at the preset's value is the baseline's alone; precision is never a setting under test
    differ = [k for k in own if _key(row.get(k)) != _key(own[k])
              and (k == "train.precision" or _key(row.get(k)) == _key(plain.get(k)))]
    if not differ:
        return None
    if renamed and any(k != "train.precision" for k in differ):
        return other_preset
    shown = ", ".join(f"{k} {own[k]} (the row {row.get(k)})" for k in differ[:3])
    return f"the baseline trained with {shown}" + (f" and {len(differ) - 3} more" if len(differ) > 3 else "")


def how_trained(run: Run) -> dict:
    """Where and how one run trained, for its row in runs.csv: the devices of its stretches ("cuda+cpu"), the
    precision run.json says it ran in, the seed its initial weights came from (`init_seed`: the run's seed
    unless `train.init_seed` took them from another), its training seconds over every stretch (None where
    nothing says), and those seconds by device (for the time under a table)."""
    by_device = device_seconds(run.path)
    seconds, device = _summed(by_device)
    init_seed = run.config.get("train", {}).get("init_seed", -1)
    return {"device": device, "precision": _training(run).get("train.precision"),
            "init_seed": run.seed if init_seed in (-1, None) else init_seed, "train_seconds": seconds,
            "device_seconds": by_device if isinstance(by_device, dict) else {}}


def mixed_training(runs: list[Run]) -> str | None:
    """A sentence naming what the runs of one setting trained differently (a sweep's seeds run with other
    `--set` values, runs brought from another machine), or None when they trained alike: their mean would
    average unlike runs."""
    if len(runs) < 2:
        return None
    flats = [_training(r) for r in runs]
    for record in RECORDED:  # a record some runs lack (made before run.json kept it): nothing to compare
        if not all(any(k.startswith(record) for k in f) for f in flats):
            flats = [{k: v for k, v in f.items() if not k.startswith(record)} for f in flats]
    keys = _differing(flats)
    if not keys:
        return None
    parts = []
    for k in keys[:3]:
        seen: dict[str, tuple[object, list[str]]] = {}  # each value (compared by its key): its seeds
        for r, f in zip(runs, flats):
            seen.setdefault(_key(f.get(k)), (f.get(k), []))[1].append(f"seed {r.seed}")
        parts.append(f"{k} " + ", ".join(f"{v} ({', '.join(s)})" for v, s in seen.values()))
    return "; ".join(parts) + (f"; and {len(keys) - 3} more" if len(keys) > 3 else "")


def _differing(flats: list[dict]) -> list[str]:
    """The keys whose values are not the same in every one of the flat configs (a key some lack counts), sorted."""
    return sorted({k for f in flats for k in f if len({_key(g.get(k)) for g in flats}) > 1})


def _trained(config: dict) -> dict:
    """The configuration without seed, transfer settings (how a run is evaluated, not trained;
    runs made before the section existed have none) and execution settings (train.nproc: how many processes
    trained it): what runs of one setting share."""
    # data.source under its old name, without train.nproc: fingerprints from before the rename and the key hold
    c = comparable(without_execution(current_config(config)))
    c.get("train", {}).pop("seed", None)
    for section in EVALUATION_SECTIONS:
        c.pop(section, None)
    return c


def _flat_trained(config: dict) -> dict:
    """`_trained` flat, the preset's name left out, each key under its name now (`data.source`, not the
    `data.fake` that fingerprints read): what names and sentences show of a run's settings."""
    now = {f"data.{old}": f"data.{new}" for old, new in DataConfig.OLD_KEYS.items()}
    return {now.get(k, k): v for k, v in flat(_trained(config)).items() if k != "preset"}


def _fingerprint(config: dict) -> str:
    """A hash of `_trained`: runs that differ only in what it leaves out are one setting."""
    return hashlib.sha256(_key(_trained(config)).encode()).hexdigest()[:8]


def _key(value) -> str:
    return json.dumps(value, sort_keys=True)


def _numbers(table) -> dict:
    """The finite numbers of a manifest's `paper` table (anything else left out: a report never fails on it)."""
    if not isinstance(table, dict):
        return {}
    return {str(k): float(v) for k, v in table.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


def _grid_file(name) -> Path | None:
    """The grid file a manifest names: as written, else relative to the current folder or the repository."""
    if not isinstance(name, str) or not name:
        return None
    path = Path(name)
    candidates = [path] if path.is_absolute() else [Path.cwd() / path, REPOSITORY / path]
    return next((c for c in candidates if c.is_file()), None)


def paper_numbers(data: dict, log: Callable[[str], None] = lambda s: None) -> tuple[str, dict[str, dict]]:
    """(paper_source, {setting id: paper numbers}) of a sweep manifest: those it records, or, when it
    records none (written before manifests did), those of the grid file it names, if that still loads."""
    recorded = {str(s.get("id", "")): _numbers(s.get("paper")) for s in data["settings"] if isinstance(s, dict)}
    source = data.get("paper_source") if isinstance(data.get("paper_source"), str) else ""
    if source or any(recorded.values()):
        return source, {k: v for k, v in recorded.items() if v}
    path = _grid_file(data.get("grid"))
    if path is None:
        return "", {}
    try:
        grid = load_grid(path)
    except (MinimultError, ValueError, TypeError, KeyError) as e:
        log(f"note: no paper numbers from {path}: {e}")
        return "", {}
    return grid.paper_source, {s.id: dict(s.paper) for s in grid.settings if s.id in recorded and s.paper}


def run_status(d: Path) -> str:
    """Where a run without results.json stands, from its run.json (what training last wrote there), never a fixed
    phrase that goes stale once a committed folder stops changing: "run.json status: training, step 7 of 40"."""
    meta = read_object(d / "run.json") or {}
    steps, total = meta.get("steps"), meta.get("total_steps")
    at = f", step {steps:,} of {total:,}" if isinstance(steps, int) and isinstance(total, int) and total else ""
    return f"run.json status: {meta.get('status') or 'unknown (no run.json status)'}{at}"


def _manifest_section(manifest: Path, data: dict, by_path: dict[Path, Run],
                      log: Callable[[str], None] = lambda s: None, left_out: dict | None = None) -> Section | None:
    """One sweep manifest's settings as groups of the runs found (with their paper numbers); settings
    without a run as `missing`, the left-out runs (`load_runs`) of the others as `lost`."""
    source, papers = paper_numbers(data, log)
    left_out = left_out or {}
    groups, missing, lost, mixed, pending = [], [], [], [], []
    for s in data["settings"]:
        paths = [(manifest.parent / name).resolve() for name in s.get("runs", [])]
        pending += [{"run": p.name, "status": run_status(p) if p.is_dir() else None}
                    for p in paths if p not in by_path and p not in left_out]
        members = sorted((by_path[p] for p in paths if p in by_path), key=lambda r: r.seed)
        dropped = [(p.name, left_out[p]) for p in paths if p in left_out]
        name, sid = s.get("name") or s.get("mods") or "", str(s.get("id", ""))
        # a run counts as the setting its own config.json says: a grid whose setting changed its mods and
        # swept into the same root lists the old runs beside the new ones (one row, seeds counted twice)
        other = [r for r in members if not same_mods(own_mods(r), s.get("mods"))]
        if other:
            members = [r for r in members if r not in other]
            dropped += [(r.path.name, f"trained as {own_mods(r)} (its config.json), not as {s.get('mods')}, which "
                                      f"the sweep manifest lists for this setting now; counted as its own mods")
                        for r in other]
            log(f"note: {manifest.name} lists {', '.join(r.path.name for r in other)} under "
                f"{(sid + ' ' + name).strip()} ({s.get('mods')}), but {'it' if len(other) == 1 else 'they'} trained "
                f"as {', '.join(dict.fromkeys(own_mods(r) for r in other))}: counted as "
                f"{'its' if len(other) == 1 else 'their'} own mods, not in that row")
        if members:
            # the preset the runs trained at (the manifest's is the last sweep's into this root: a sweep of
            # another preset into it would relabel every row); the manifest's where runs do not say or differ
            presets = {str(r.config.get("preset") or "") for r in members}
            preset = presets.pop() if len(presets) == 1 and "" not in presets else data.get("preset", "")
            groups.append(Group(sid, name, s.get("mods") or members[0].mods, members, preset, papers.get(sid, {})))
            differ = mixed_training(members)
            if differ:
                mixed.append({"id": sid, "setting": name, "differ": differ})
                log(f"note: the runs of {(sid + ' ' + name).strip()} did not train alike: {differ}")
            lost += [{"id": sid, "setting": name, "run": run, "why": why} for run, why in dropped]
        else:  # no row: its runs left out (each with why), or none evaluated yet, or none planned
            why = ("; ".join(f"{run} left out, {why}" for run, why in dropped) if dropped
                   else s.get("left_out") or ("no evaluated run yet" if s.get("runs") else "not run"))
            missing.append({"id": sid, "setting": name, "why": why})
    if not (groups or missing):
        return None
    return Section(data.get("title") or manifest.stem, groups, data.get("preset", ""), missing,
                   source if any(g.paper for g in groups) else "", lost=lost, manifest=manifest, mixed=mixed,
                   pending=pending)


def own_mods(run: Run) -> str:
    """The mods a run trained with, as its own config.json says (results.json's where the config has none)."""
    return str(run.config.get("mods") or run.results.get("mods") or "original")


def same_mods(a, b) -> bool:
    """Whether two canonical mods strings name the same mods (order aside; "original" is none); a manifest
    setting without mods (an old manifest) matches any run."""
    if not b:
        return True
    parts = lambda m: frozenset(x.strip() for x in str(m).split(",") if x.strip() not in ("", "original"))  # noqa: E731
    return parts(a) == parts(b)


def _other_names(rest: dict[tuple, list[Run]]) -> dict[tuple, str]:
    """A row name for each (mods, preset, fingerprint, precision) of `_other_section`: the mods where they are
    unique, else the mods with the preset and the settings that set the row apart from the others of its mods
    (`original (tiny, data.vocab_size=98)`), or its config hash where they are more than three or too long."""
    out, flats = {}, {k: _training(m[0]) for k, m in rest.items()}  # each row's settings, read once
    for key in rest:
        mods, preset = key[:2]
        if sum(k[0] == mods for k in rest) == 1:
            out[key] = mods
            continue
        peers = {k: f for k, f in flats.items() if k[:2] == key[:2]}  # of one preset: its own keys
        differ = [s for s in _differing(list(peers.values())) if not s.startswith(RECORDED)]
        text = ", ".join(f"{s}={peers[key].get(s, '–')}" for s in differ)
        if len(peers) > 1 and (not differ or len(differ) > 3 or len(text) > 60):
            text = f"config {key[2]}" + (f", {key[3]}" if sum(k[:3] == key[:3] for k in rest) > 1 else "")
        out[key] = f"{mods} ({', '.join(x for x in (preset, text) if x)})"
    return out


def _other_section(runs: list[Run]) -> Section | None:
    """Unclaimed runs grouped by (mods, preset, configuration, the precision they ran in: `auto` is bf16 on CUDA,
    fp32 on a CPU, as run.json says); named by `_other_names`."""
    rest: dict[tuple, list[Run]] = {}
    for r in runs:
        key = (r.mods, r.config.get("preset", ""), _fingerprint(r.config), _training(r).get("train.precision"))
        rest.setdefault(key, []).append(r)
    if not rest:
        return None
    names = _other_names(rest)
    groups, mixed, lost = [], [], []
    for (mods, preset, fp, ran), members in rest.items():
        name = names[mods, preset, fp, ran]
        kept: dict[int, Run] = {}  # one run a seed: the same seed twice is one draw counted twice, not n = 2
        for r in sorted(members, key=lambda r: (r.seed, str(r.path))):
            if r.seed in kept:
                lost.append({"id": "", "setting": name, "run": r.path.name,
                             "why": f"a second run of seed {r.seed} beside {kept[r.seed].path}"})
            else:
                kept[r.seed] = r
        groups.append(Group("", name, mods, list(kept.values()), preset))
        differ = mixed_training(groups[-1].runs)  # what the configuration leaves out: the mods' versions
        if differ:
            mixed.append({"id": "", "setting": name, "differ": differ})
    groups.sort(key=lambda g: (g.mods != "original", g.name))
    return Section(OTHER_SECTION, groups, mixed=mixed, lost=lost)


def log_rows(path: Path) -> list[dict]:
    """Every row of a run folder's `metrics.jsonl` with a step (training and evaluation rows); damaged
    lines are skipped. Read once per version of the file (a site reads each log three times)."""
    file = Path(path) / "metrics.jsonl"
    stat = file.stat() if file.is_file() else None
    return list(_log_rows(file, stat and (stat.st_mtime_ns, stat.st_size)))


@functools.lru_cache(maxsize=64)
def _log_rows(file: Path, version) -> tuple[dict, ...]:
    return tuple(row for _, row in log_lines(file) if isinstance(row.get("step"), int)) if version else ()


def training_losses(path: Path) -> list[tuple[int, float]]:
    """(step, training loss) of every logged training row of a run folder's `metrics.jsonl`."""
    return [(row["step"], float(row["loss"])) for row in log_rows(path)
            if isinstance(row.get("loss"), (int, float)) and math.isfinite(row["loss"])]


# A run whose fine-tuned English accuracy is this close to the majority class learned nothing to transfer
# (pretraining stuck at the unigram plateau): its ∆ is ~0 and would read as perfect transfer, and its µ
# (~0) as a model that is not multilingual, where it is no model of language at all. Both leave it out.
UNLEARNED_MARGIN = 0.02


def full_transfer(results: dict) -> dict:
    t = results.get("transfer")
    if not isinstance(t, dict):
        return {}
    full = t.get("modes", {}).get("full")
    return {**full, "majority": (t.get("baselines") or {}).get("majority")} if isinstance(full, dict) else t


def unlearned(results: dict) -> bool:
    """Full fine-tuning's English accuracy within UNLEARNED_MARGIN of the majority baseline."""
    full = full_transfer(results)
    en, majority = full.get("en"), full.get("majority")
    return en is not None and majority is not None and en <= majority + UNLEARNED_MARGIN


def never_trained(run: Run) -> str | None:
    """Why an evaluated run is no model of language, or None: its training perplexity on the unigram
    plateau (`plateau`; such runs are left out of the tables already) or its fine-tuned English accuracy
    at the majority class (`unlearned`)."""
    why = plateau(run.results, read_object(run.path / "run.json") or {})
    if why:
        return why
    if unlearned(run.results):
        return "fine-tuned English accuracy at the majority class: pretraining learned nothing to transfer"
    return None


def build_sections(runs: list[Run], homes: list[Path], log: Callable[[str], None],
                   left_out: dict | None = None) -> list[Section]:
    """The sweeps' sections by title ("Table 1 ..." before "Table 2 ..."), then the unclaimed runs'
    (`left_out`: path -> why of the runs `load_runs` left out, named under their settings)."""
    by_path = {r.path: r for r in runs}
    sections = []
    for m in sorted({m for h in homes for m in h.glob("*.sweep.json")}):
        data = read_object(m)
        if not data or not isinstance(data.get("settings"), list):
            log(f"note: ignoring unreadable sweep manifest {m}")
            continue
        section = _manifest_section(m, data, by_path, log, left_out)
        if section is not None:
            sections.append(section)
    sections.sort(key=lambda s: s.title)
    claimed = {r.path for g in settings(sections) for r in g.runs}
    other = _other_section([r for r in runs if r.path not in claimed])
    return sections + ([other] if other else [])
