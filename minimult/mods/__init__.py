"""The registry of mods: each one small unit with a name, a description, a version and its hooks.

A mod acts only through hooks that the stages call (all optional):
- `configure(cfg, value) -> cfg`: the run configuration (model sizes, masking mix, schedule).
- `layout(layout, cfg, value) -> layout`: how a language's sequences are written (its special ids,
  position offset, segment id; `minimult.data.layout`). The model's tables are sized from layouts.
- `reorder(length, rng, value) -> perm`: the order of a sentence of every language but English (or of
  those `reorders(name, value)` picks by name), as source positions (piece j of the new sentence is
  piece perm[j] of the original). Applies to training and evaluation data alike; the gold alignment
  follows it.
- `resample(sides, rng, value) -> sides`: replaces the training data of the languages ([English,
  language 1, ...]; non-parallel parts, unigram sampling); evaluation data stay parallel.
- `build(data, sides, cfg, value, log) -> dict`: what training needs built for it, passed to the
  masking step by name (knn-replace: `{"neighbours": table}`).

A mod with settings of its own brings them: `settings = (section, frozen dataclass)` becomes that section of
the run config (knn-replace's `knn`: `cfg.knn.dim`, `--set knn.dim=100`).

Each module of this package holds one family of mods and registers them on import; importing
`minimult.mods` imports them all, so there is no second list to keep in sync. `order` fixes the
canonical order of mods in run names and results. Adding a mod = a `register` call in the file of its
family (or a new file: copy `word_order.py`), its test and its rows in `EXPECTED` (tests/test_languages.py)
and the README's Mods table (CONTRIBUTING.md).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from minimult.data.masking import inputs_needed
from minimult.errors import MinimultError
from minimult.registry import Registry

REGISTRY = Registry("mod", unknown="unknown mod {name!r}; valid mods: {valid}")  # in canonical order once loaded


@dataclass(frozen=True)
class Mod:
    name: str
    description: str
    version: int
    order: int  # canonical position in run names and results
    configure: Callable[[Any, Any], Any] | None = None
    layout: Callable | None = None
    reorder: Callable[[int, np.random.Generator, Any], np.ndarray] | None = None
    # (language name, value) -> whether `reorder` acts on that language; None: every language but English
    reorders: Callable[[str, Any], bool] | None = None
    resample: Callable | None = None
    build: Callable | None = None
    provides: tuple[str, ...] = ()  # the names `build` returns (checked against what masking needs)
    parse: Callable[[str], Any] | None = None  # for `name=value`; None = takes no value
    default: Any = None
    group: str | None = None  # mods sharing a group contradict each other
    conflicts: tuple[tuple[str, str], ...] = ()  # (other mod, why): mods this one contradicts or makes redundant
    overridable: tuple[str, ...] = ()  # config keys `configure` sets that an explicit --set replaces
    check: Callable[[Any, Any], None] | None = None  # (final config, value): refuse a config that contradicts the mod
    # (axis, x of the value text): a setting with this mod alone is a point of that series in the report
    # (minimult.report.series: K et al.'s permutation series)
    series: tuple[str, Callable[[str], Any]] | None = None
    # why a run with it wants a GPU ("": it does not): the registry-wide test (tests/test_registries.py) skips
    # it on a CPU with this reason, and the gate (experiments/gate.py) trains it on fewer sentences
    needs_gpu: str = ""
    settings: tuple[str, type] | None = None  # (section, frozen dataclass): its own settings, cfg.<section>

    def spec(self, value) -> str:
        return self.name if self.parse is None or value is None else f"{self.name}={value}"


@dataclass(frozen=True)
class ActiveMod:
    mod: Mod
    value: Any

    @property
    def spec(self) -> str:
        return self.mod.spec(self.value)


register = REGISTRY.register


def registered() -> list[Mod]:
    """Every mod, in canonical order."""
    return sorted(REGISTRY.values(), key=lambda m: m.order)


def parse_mods(text: str | tuple | list | None, judge: bool = True) -> tuple[ActiveMod, ...]:
    """'lang-pos,permute=0.5' -> active mods in registry order; clear errors for bad input. `judge`: refuse
    contradictory mixes (groups, conflicts); off for a run that exists, made before a conflict was declared."""
    if text is None:
        return ()
    items = [t.strip() for t in (text.split(",") if isinstance(text, str) else text) if t.strip()]
    active: dict[str, ActiveMod] = {}
    for item in items:
        name, eq, raw = item.partition("=")
        name, raw = name.strip(), raw.strip()
        mod = REGISTRY[name]
        if eq and not raw:  # 'inv-order=' is not plain inv-order: a value was meant and is missing
            hint = (f"{name} takes no value; write {name}" if mod.parse is None else
                    f"give one (e.g. {mod.spec(mod.default)}) or write {name} alone" if mod.default is not None else
                    f"give one or write {name} alone")
            raise MinimultError(f"mod {item!r} has an empty value: {hint}")
        if name in active:
            raise MinimultError(f"mod {name!r} given twice")
        if raw and mod.parse is None:
            raise MinimultError(f"mod {name!r} takes no value (got {item!r})")
        try:
            value = mod.parse(raw) if (raw and mod.parse) else mod.default
        except (ValueError, MinimultError) as e:
            raise MinimultError(f"bad value for mod {name!r}: {e}") from None
        active[name] = ActiveMod(mod, value)
    given = [a.mod for a in active.values()]
    for i, a in enumerate(given):
        for b in given[i + 1:] if judge else ():
            if why := clash(a, b):
                raise MinimultError(f"contradictory mods: {why}")
    return tuple(sorted(active.values(), key=lambda a: a.mod.order))


def clash(a: Mod, b: Mod) -> str | None:
    """Why mods a and b cannot be combined ('x and y ...'), or None: one group, or a conflict either declares."""
    if a.group and a.group == b.group:
        return f"{a.name} and {b.name} both set the {a.group}; use one of them"
    for x, y in ((a, b), (b, a)):
        if why := dict(x.conflicts).get(y.name):
            return f"{x.name} and {y.name} cannot be combined: {why}"
    return None


def from_canonical(text: str) -> tuple[ActiveMod, ...]:
    """The active mods a resolved config's `mods` names ("original": none); inverse of `canonical`. Not judged:
    the run exists, and a conflict declared since must not lock it out of eval and report."""
    return parse_mods(None if text == "original" else text, judge=False)


def canonical(mods: tuple[ActiveMod, ...]) -> str:
    return ",".join(a.spec for a in mods) or "original"


def versions(mods: tuple[ActiveMod, ...]) -> dict[str, int]:
    return {a.mod.name: a.mod.version for a in mods}


def check_masking(cfg, mods: tuple[ActiveMod, ...]) -> None:
    """The masking mix can be served: whatever it needs (a neighbour table) some active mod builds."""
    missing = inputs_needed(cfg.mask) - {name for a in mods for name in a.mod.provides}
    if missing:
        providers = [m.name for m in registered() if missing & set(m.provides)]
        raise MinimultError(f"the masking mix {cfg.mask.probs} needs {', '.join(sorted(missing))}, which no active "
                            f"mod builds: add --mods {' or '.join(providers)}")


def set_section(cfg, section: str, **changes):
    """cfg with `section`'s fields changed (for `configure` hooks)."""
    return dataclasses.replace(cfg, **{section: dataclasses.replace(getattr(cfg, section), **changes)})


def probability(raw: str) -> float:
    p = float(raw)
    if not 0.0 < p <= 1.0:
        raise ValueError(f"{p} is not in (0, 1]")
    return p


def positive_int(raw: str) -> int:
    k = int(raw)
    if k < 1:
        raise ValueError(f"{k} must be at least 1")
    return k


Registry.load(__name__)  # every family module registers its mods
_ordered = registered()
REGISTRY.clear()
REGISTRY.update((m.name, m) for m in _ordered)  # canonical order for everyone who iterates it
