"""One registry helper for every kind of component: mods, evaluators, language sources, tokenizers, presets,
masking presets, built-in corpora, report sections.

A `Registry` is a dict from name to component, in registration order, with three additions:

- `register(item)` (by `item.name`) or `add(name, item)`: a second component under one name is an error;
- `reg[name]` of an unknown name is one error line naming the valid ones (`.get(name)` still gives None);
- `load(package)`: imports every module of a package once, so that a component registers itself by being
  a file in its kind's package (mods/, evaluate/, data/sources/): there is no list to extend.

    SOURCES = Registry("language source", unknown="unknown --source {name!r}: use {valid}", sep=" or ")
    SOURCES.register(Source("shift", ...))
    SOURCES["shift"]; SOURCES["nope"]  # -> MinimultError: unknown --source 'nope': use shift or ...
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import TypeVar

from minimult.errors import MinimultError, did_you_mean

T = TypeVar("T")


class Registry(dict):
    """Components of one kind by name (see the module docstring)."""

    def __init__(self, kind: str, unknown: str | None = None, sep: str = ", "):
        super().__init__()
        self.kind = kind
        self.unknown = unknown or f"unknown {kind} {{name!r}}; valid {kind}s: {{valid}}"
        self.sep = sep

    def add(self, name: str, item: T) -> T:
        if name in self:
            raise MinimultError(f"{self.kind} {name!r} is registered twice")
        self[name] = item
        return item

    def register(self, item: T) -> T:
        """Registers `item` under its `name`; returns it (usable as a decorator on a named object)."""
        return self.add(item.name, item)

    def __missing__(self, name):
        raise MinimultError(self.unknown.format(name=name, valid=self.sep.join(self)) + did_you_mean(name, self))

    @staticmethod
    def load(package: str) -> None:
        """Imports every module of `package` (each registers what it defines)."""
        for module in pkgutil.iter_modules(importlib.import_module(package).__path__):
            importlib.import_module(f"{package}.{module.name}")
