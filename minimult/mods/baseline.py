"""Baselines: a model that is never trained (paper IDs 18, 19)."""

from minimult.mods import Mod, register, set_section

# mods that act only on training (its masking or data): beside untrained they would change nothing but the
# run's name, and knn-replace would build its fastText tables for nothing (nsp is not one: its pair segment and
# head change the initial weights)
TRAINING_ONLY = ("no-random", "knn-replace", "no-parallel", "unigram")

register(Mod("untrained", "randomly initialised and never trained (baseline)", 1, order=100,
             configure=lambda cfg, v: set_section(cfg, "train", epochs=0),
             conflicts=tuple((m, f"{m} acts only on training, which an untrained model never has")
                             for m in TRAINING_ONLY)))
