"""Baselines: a model that is never trained (paper IDs 18, 19)."""

from minimult.mods import Mod, register, set_section

register(Mod("untrained", "randomly initialised and never trained (baseline)", 1, order=100,
             configure=lambda cfg, v: set_section(cfg, "train", epochs=0)))
