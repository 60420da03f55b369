"""Ablation grids as data: `experiments/*.toml` -> a validated `Grid` of settings, seeds and a preset.

Public entry: `load_grid(path) -> Grid`. The file's keys, with an example: docs/usage.md, "Grid files"
(`tests/test_docs.py` loads it). Every mod name is checked with `mods.parse_mods`, every override key and value
with `config.override`, and every setting is resolved under each preset the file names, so a stale or
contradictory grid fails when loaded, not halfway through a sweep.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import minimult.evaluate  # noqa: F401  (registers every evaluator)
from minimult.config import PRESETS, RunConfig, flat, override, resolve
from minimult.errors import MinimultError
from minimult.evaluate.registry import STD, columns
from minimult.mods import parse_mods

@dataclass(frozen=True)
class Setting:
    id: str
    name: str
    mods: str  # comma-separated, as --mods takes them; "" = original
    overrides: dict = field(default_factory=dict)  # dotted keys
    needs_gpu: bool = False  # left out of sweeps on machines without CUDA unless named in --only
    paper: dict = field(default_factory=dict)  # the published numbers by report column key (`mu`, `align_f1_L0`)


@dataclass(frozen=True)
class Grid:
    path: Path
    title: str
    settings: tuple[Setting, ...]
    seeds: tuple[int, ...]
    preset: str
    overrides: dict = field(default_factory=dict)
    preset_overrides: dict = field(default_factory=dict)  # preset -> dotted-key overrides
    paper_source: str = ""  # where the settings' `paper` numbers come from

    @property
    def name(self) -> str:
        return self.path.stem

    def overrides_for(self, setting: Setting, preset: str) -> dict:
        """Grid-wide, then per-preset, then the setting's own overrides (later wins)."""
        return {**self.overrides, **self.preset_overrides.get(preset, {}), **setting.overrides}

    def select(self, ids) -> "Grid":
        """Only the settings with these IDs, in the order given (a sweep runs them in that order, so
        `--only t-char,d6` runs the slow one first); an unknown ID is an error."""
        if not ids:
            return self
        wanted = list(dict.fromkeys(str(i).strip() for i in ids if str(i).strip()))
        known = [s.id for s in self.settings]
        unknown = [i for i in wanted if i not in known]
        if unknown:
            raise MinimultError(f"{self.path}: no setting with ID {', '.join(unknown)}; IDs: {', '.join(known)}")
        by_id = {s.id: s for s in self.settings}
        return dataclasses.replace(self, settings=tuple(by_id[i] for i in wanted))


# A grid file's keys are the fields of `Grid` and `Setting` (`path` is the file's own) and free text that is read
# by no one (a grid's description, a setting's note)
TOP_KEYS = {f.name for f in dataclasses.fields(Grid)} - {"path"} | {"description"}
SETTING_KEYS = {f.name for f in dataclasses.fields(Setting)} | {"note"}


def _known_keys(table: dict, valid: set[str], where: str) -> None:
    unknown = set(table) - valid
    if unknown:
        raise MinimultError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; valid: {', '.join(sorted(valid))}")


def _flatten(table: dict, where: str) -> dict:
    """{"train": {"lr": 1e-3}} or {"train.lr": 1e-3} -> {"train.lr": 1e-3}."""
    if not isinstance(table, dict):
        raise MinimultError(f"{where} must be a table of setting = value")
    return flat(table)


def paper_keys() -> tuple[set[str], set[str]]:
    """(keys of the report's scalar Table 1 columns, names of its per-layer ones): a `paper` key is one
    of the first or `<name>_L<layer>` of the second, as the report's column keys are."""
    cols = [c for c in columns() if c.table]
    return {c.key() for c in cols if not c.per_layer}, {c.name for c in cols if c.per_layer}


def _paper(table, where: str) -> dict:
    """A setting's `paper` table -> {column key: number}, with `<key>_std` the paper's standard deviation of
    that column where it gives one; an unknown key or a value that is not a finite number is an error naming
    both."""
    if not isinstance(table, dict):
        raise MinimultError(f"{where}: paper must be a table like {{ mu = 0.70, ppl_dev = 217 }}")
    scalar, layered = paper_keys()
    out = {}
    for key, value in table.items():
        name, _, layer = key.removesuffix(STD).rpartition("_L")
        per_layer = name in layered and layer.isascii() and layer.isdigit() and str(int(layer)) == layer
        if key.removesuffix(STD) not in scalar and not per_layer:
            valid = sorted(scalar) + [f"{n}_L<layer>" for n in sorted(layered)] + [f"any of these + {STD}"]
            raise MinimultError(f"{where}: unknown paper key {key!r}; valid: {', '.join(valid)}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise MinimultError(f"{where}: paper key {key!r} must be a number, not {value!r}")
        out[key] = float(value)
    return out


def parse_seeds(text, grid: Path | None = None) -> tuple[int, ...]:
    """'0,42' (--seeds) or [0, 42] (a `grid`'s seeds) -> (0, 42); clear error otherwise."""
    bad = MinimultError(f"{grid}: bad seeds {text!r}: use a list of whole numbers, e.g. seeds = [0, 42, 43]" if grid
                        else f"bad seeds {text!r}: use whole numbers, e.g. 0,42,43")
    if not isinstance(text, (str, list, tuple)):
        raise bad
    items = [s.strip() for s in text.split(",")] if isinstance(text, str) else list(text)
    if not items or not all(s.isdigit() if isinstance(s, str) else type(s) is int and s >= 0 for s in items):
        raise bad
    seeds = tuple(int(s) for s in items)
    if len(set(seeds)) != len(seeds):
        raise MinimultError(f"{grid}: " * bool(grid) + f"seed given twice in {text!r}")
    return seeds


def load_grid(path: str | Path) -> Grid:
    path = Path(path)
    data = _read_toml(path)
    _known_keys(data, TOP_KEYS, str(path))
    preset = data.get("preset", "paper")
    if preset not in PRESETS:
        raise MinimultError(f"{path}: unknown preset {preset!r}; valid presets: {', '.join(PRESETS)}")
    seeds = parse_seeds(data.get("seeds", [0]), path)
    overrides = _flatten(data.get("overrides", {}), f"{path}: [overrides]")
    table = data.get("preset_overrides", {})
    if not isinstance(table, dict):
        raise MinimultError(f"{path}: preset_overrides must be tables like [preset_overrides.quick]")
    preset_overrides = {name: _flatten(values, f"{path}: [preset_overrides.{name}]") for name, values in table.items()}
    unknown = [name for name in preset_overrides if name not in PRESETS]
    if unknown:
        raise MinimultError(f"{path}: [preset_overrides.{unknown[0]}]: unknown preset; valid presets: "
                            f"{', '.join(PRESETS)}")

    raw_settings = data.get("settings")
    if not isinstance(raw_settings, list) or not raw_settings:
        raise MinimultError(f"{path}: no settings: add [[settings]] tables with id, name and mods")
    seen: set[str] = set()
    settings = [_setting(raw, f"{path}: setting #{i + 1}", path, seen) for i, raw in enumerate(raw_settings)]

    paper_source = data.get("paper_source", "")
    if not isinstance(paper_source, str):
        raise MinimultError(f"{path}: paper_source must be a string naming where the paper numbers come from")
    grid = Grid(path, str(data.get("title", path.stem)), tuple(settings), seeds, preset, overrides, preset_overrides,
                paper_source.strip())
    _check_every_preset(grid)
    return grid


def _read_toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise MinimultError(f"grid file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise MinimultError(f"cannot read grid file {path}: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise MinimultError(f"grid file {path} is not valid TOML: {e}") from None


def _setting(raw, where: str, path: Path, seen: set[str]) -> Setting:
    """One [[settings]] table, checked (its id new to `seen`, which it joins)."""
    if not isinstance(raw, dict):
        raise MinimultError(f"{where} must be a table")
    _known_keys(raw, SETTING_KEYS, where)
    if "id" not in raw:
        raise MinimultError(f"{where} has no id")
    sid = str(raw["id"]).strip()
    where = f"{path}: setting {sid}"
    if not sid or any(c in sid for c in "/\\ ,"):
        raise MinimultError(f"{where}: an id must be non-empty without spaces, commas or slashes")
    if sid in seen:
        raise MinimultError(f"{where}: id given twice")
    seen.add(sid)
    mods = raw.get("mods", "")
    if not isinstance(mods, str):
        raise MinimultError(f"{where}: mods must be a string like \"lang-pos,shift-special\"")
    try:
        parse_mods(mods)
    except MinimultError as e:
        raise MinimultError(f"{where}: {e}") from None
    needs_gpu = raw.get("needs_gpu", False)
    if not isinstance(needs_gpu, bool):
        raise MinimultError(f"{where}: needs_gpu must be true or false")
    return Setting(sid, str(raw.get("name", mods or "original")), mods,
                   _flatten(raw.get("overrides", {}), f"{where}: overrides"), needs_gpu,
                   _paper(raw["paper"], where) if "paper" in raw else {})


def _check_every_preset(grid: Grid) -> None:
    """Every setting's keys, values and contradictions, under every preset the file names."""
    for setting in grid.settings:
        for p in dict.fromkeys([grid.preset, *grid.preset_overrides]):
            values = grid.overrides_for(setting, p)
            try:
                override(RunConfig(), values)
                resolve(p, values, setting.mods)
            except MinimultError as e:
                raise MinimultError(f"{grid.path}: setting {setting.id} (preset {p}): {e}") from None

