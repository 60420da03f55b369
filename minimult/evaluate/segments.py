"""Segment alternations at inference (van der Goot et al. 2022): evaluate a trained model with its segment embedding
replaced, to see how much of its multilinguality rides on that one vector.

    original   as trained: each language's layout segment (0 for both; under lang-pos language k
               reads row k, so English row 0 and the second language row 1)
    0s, 1s     every sequence reads row 0 (or row 1) of the trained table
    avg        every sequence reads the mean of rows 0 and 1
    null       a zero vector: no segment signal at all
    rand:SEED  a vector re-drawn from the model's initialisation, a normal with std `init_std`
               truncated at 2 std, seeded by SEED

`with_segment(model, value)` returns a copy whose every segment row is that vector (so whatever id a
language's layout feeds, it reads it); the original model is never changed.
"""

from __future__ import annotations

import copy
import re

import torch

from minimult.errors import MinimultError

FIXED = ("original", "0s", "1s", "avg", "null")
MAX_SEED = 2**64 - 1  # what torch.Generator.manual_seed takes


def parse_segments(text: str) -> list[str]:
    """'original,avg,rand:1,rand:2' -> the values, checked; one results block is written per value."""
    values = [v.strip() for v in text.split(",") if v.strip()]
    if not values:
        raise MinimultError("--segment needs at least one value: original, 0s, 1s, avg, null or rand:SEED")
    for v in values:
        if v in FIXED:
            continue
        name, _, seed = v.partition(":")
        if name != "rand" or not re.fullmatch(r"[0-9]+", seed):  # ASCII digits: '¹' passes str.isdigit
            raise MinimultError(f"unknown segment alternation {v!r}: use original, 0s, 1s, avg, null or rand:SEED "
                                f"(SEED a whole number, e.g. rand:1)")
        if len(seed) > 20 or int(seed) > MAX_SEED:  # (int() refuses strings of over 4,300 digits)
            raise MinimultError(f"--segment {v}: rand:SEED takes a seed from 0 to {MAX_SEED} (2**64 - 1)")
    if len(set(values)) != len(values):
        raise MinimultError(f"--segment {text!r} names a value twice")
    return values


def truncated_normal(n: int, std: float, seed: int) -> torch.Tensor:
    """n draws of N(0, std²) truncated to [-2 std, 2 std] (redrawn outside), reproducible by seed."""
    gen = torch.Generator().manual_seed(seed)
    out = torch.empty(0)
    while len(out) < n:
        x = torch.randn(2 * n, generator=gen) * std
        out = torch.cat([out, x[x.abs() <= 2 * std]])
    return out[:n]


def segment_vector(model, value: str) -> torch.Tensor | None:
    """The vector every sequence reads under `value` (None for original)."""
    if value == "original":
        return None
    if "segment" not in model.embeddings.lookups:
        raise MinimultError(f"--segment {value}: this model has no segment table (no-segment); only "
                            f"'original' applies")
    rows = model.embeddings.lookups["segment"].weight.detach()
    if value in ("1s", "avg") and len(rows) < 2:
        raise MinimultError(f"--segment {value}: the segment table has {len(rows)} row(s)")
    fixed = {"0s": lambda: rows[0].clone(), "1s": lambda: rows[1].clone(), "avg": lambda: (rows[0] + rows[1]) / 2,
             "null": lambda: torch.zeros_like(rows[0])}
    if value in fixed:
        return fixed[value]()
    seed = int(value.partition(":")[2])
    return truncated_normal(rows.shape[1], model.cfg.init_std, seed).to(rows.device, rows.dtype)


def with_segment(model, value: str):
    """`model` itself for original; otherwise a copy whose segment rows all hold `segment_vector`."""
    vector = segment_vector(model, value)
    if vector is None:
        return model
    altered = copy.deepcopy(model)
    with torch.no_grad():
        table = altered.embeddings.lookups["segment"].weight
        table.copy_(vector.expand_as(table))
    return altered
