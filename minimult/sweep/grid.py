"""Ablation grids as data: `experiments/*.toml` -> a validated `Grid` of settings, seeds and a preset.

Public entry: `load_grid(path) -> Grid`. A grid file looks like

    title = "Table 1: ..."          # shown as the report's section heading
    preset = "paper"                # default preset (the CLI's --preset wins)
    seeds = [0, 42, 43, 100, 101]   # default seeds (the CLI's --seeds wins)

    [overrides]                     # every setting, every preset; keys as `--set` takes them
    "train.eval_every" = 355

    [preset_overrides.quick]        # only when swept with --preset quick
    "train.eval_every" = 178

    [[settings]]
    id = "5"                        # the paper's ID (a string: "21b" is one)
    name = "lang-pos;shift-special" # the paper's description
    mods = "lang-pos,shift-special" # as `minimult pretrain --mods` takes them; "" = original
    overrides = { "data.fake" = "unicode" }   # optional, this setting only
    needs_gpu = true                # optional: a sweep on a machine without CUDA leaves it out
                                    # unless --only names it (e.g. overparam: days on a CPU)

Override keys may also be written as nested TOML tables (`[overrides.train] epochs = 50`).
Every mod name is checked with `mods.parse_mods`, every override key and value with
`config.override`, and every setting is resolved under each preset the file names, so a stale or
contradictory grid fails when loaded, not halfway through a sweep.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from minimult.errors import MinimultError

TOP_KEYS = {"title", "description", "preset", "seeds", "overrides", "preset_overrides", "settings"}
SETTING_KEYS = {"id", "name", "mods", "overrides", "note", "needs_gpu"}


@dataclass(frozen=True)
class Setting:
    id: str
    name: str
    mods: str  # comma-separated, as --mods takes them; "" = original
    overrides: dict = field(default_factory=dict)  # dotted keys
    needs_gpu: bool = False  # left out of sweeps on machines without CUDA unless named in --only


@dataclass(frozen=True)
class Grid:
    path: Path
    title: str
    settings: tuple[Setting, ...]
    seeds: tuple[int, ...]
    preset: str
    overrides: dict = field(default_factory=dict)
    preset_overrides: dict = field(default_factory=dict)  # preset -> dotted-key overrides

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
        return Grid(self.path, self.title, tuple(by_id[i] for i in wanted), self.seeds,
                    self.preset, self.overrides, self.preset_overrides)


def _flatten(table: dict, where: str, prefix: str = "") -> dict:
    """{"train": {"lr": 1e-3}} or {"train.lr": 1e-3} -> {"train.lr": 1e-3}."""
    if not isinstance(table, dict):
        raise MinimultError(f"{where} must be a table of setting = value")
    out = {}
    for key, value in table.items():
        full = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, where, full + "."))
        else:
            out[full] = value
    return out


def parse_seeds(text) -> tuple[int, ...]:
    """'0,42' or [0, 42] -> (0, 42); clear error otherwise."""
    bad = MinimultError(f"bad seeds {text!r}: use whole numbers, e.g. 0,42,43")
    if not isinstance(text, (str, list, tuple)):
        raise bad
    items = [s.strip() for s in text.split(",")] if isinstance(text, str) else list(text)
    seeds = []
    for s in items:
        if isinstance(s, str) and s.isdigit():
            seeds.append(int(s))
        elif isinstance(s, int) and not isinstance(s, bool) and s >= 0:
            seeds.append(s)
        else:
            raise bad
    seeds = tuple(seeds)
    if not seeds:
        raise bad
    if len(set(seeds)) != len(seeds):
        raise MinimultError(f"seed given twice in {text!r}")
    return seeds


def load_grid(path: str | Path) -> Grid:
    from minimult.config import PRESETS, RunConfig, override, resolve
    from minimult.mods import parse_mods

    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MinimultError(f"grid file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise MinimultError(f"cannot read grid file {path}: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise MinimultError(f"grid file {path} is not valid TOML: {e}") from None

    unknown = set(data) - TOP_KEYS
    if unknown:
        raise MinimultError(f"{path}: unknown key(s) {', '.join(sorted(unknown))}; valid: {', '.join(sorted(TOP_KEYS))}")
    preset = data.get("preset", "paper")
    if preset not in PRESETS:
        raise MinimultError(f"{path}: unknown preset {preset!r}; valid presets: {', '.join(PRESETS)}")
    seeds = parse_seeds(data.get("seeds", [0]))
    overrides = _flatten(data.get("overrides", {}), f"{path}: [overrides]")
    preset_overrides = {}
    for name, table in _flatten_presets(data.get("preset_overrides", {}), path).items():
        if name not in PRESETS:
            raise MinimultError(f"{path}: [preset_overrides.{name}]: unknown preset; valid presets: {', '.join(PRESETS)}")
        preset_overrides[name] = table

    raw_settings = data.get("settings")
    if not isinstance(raw_settings, list) or not raw_settings:
        raise MinimultError(f"{path}: no settings: add [[settings]] tables with id, name and mods")
    settings, seen = [], set()
    for i, raw in enumerate(raw_settings):
        where = f"{path}: setting #{i + 1}"
        if not isinstance(raw, dict):
            raise MinimultError(f"{where} must be a table")
        bad = set(raw) - SETTING_KEYS
        if bad:
            raise MinimultError(f"{where}: unknown key(s) {', '.join(sorted(bad))}; valid: {', '.join(sorted(SETTING_KEYS))}")
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
        setting = Setting(sid, str(raw.get("name", mods or "original")), mods,
                          _flatten(raw.get("overrides", {}), f"{where}: overrides"), needs_gpu)
        settings.append(setting)

    grid = Grid(path, str(data.get("title", path.stem)), tuple(settings), seeds, preset, overrides, preset_overrides)
    for setting in grid.settings:  # keys, values and contradictions, under every preset the file names
        for p in dict.fromkeys([preset, *preset_overrides]):
            values = grid.overrides_for(setting, p)
            try:
                override(RunConfig(), values)
                resolve(p, values, setting.mods)
            except MinimultError as e:
                raise MinimultError(f"{path}: setting {setting.id} (preset {p}): {e}") from None
    return grid


def _flatten_presets(table, path) -> dict:
    if not isinstance(table, dict):
        raise MinimultError(f"{path}: preset_overrides must be tables like [preset_overrides.quick]")
    return {name: _flatten(values, f"{path}: [preset_overrides.{name}]") for name, values in table.items()}
