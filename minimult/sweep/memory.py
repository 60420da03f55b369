"""How much memory a CPU run needs at its peak, and how many fit side by side on this machine.

Public entry: `budget(groups, workers) -> (limit, lines)` and `admit(waiting, running, workers, limit)`,
used by the local backend on CPU: when the largest runs would not fit side by side in the memory
available now, it says so and starts a run only while the running ones' peaks and its own fit; a
single run larger than that gets a warning line (it may be killed for memory; the sweep goes on with
the others, and `sweep` resumes it from its last checkpoint).

Why: two character-unit runs (`data.tokenizer = "char"`, max_len 349) at batch 256 each need ~13 GiB for
their longest batch; side by side on a 24 GiB machine the kernel killed one 33 minutes in, and the
process pool with it. Nothing else in a run comes close to the training step's activations.

`peak_bytes(config)` is a model of a training step's peak resident memory, fitted on this project's
2-core CPU by measuring the peak RSS of one forward and backward pass (`Bert.mlm_loss`) at batch 16–64
at seven shapes (T 128 or 349, hidden 64 to 256, 1 or 4 heads, 6 or 12 layers): per sequence and
layer and token, `ACT_PER_HIDDEN` floats per hidden unit and `ACT_PER_INTERMEDIATE` per intermediate
unit (the linear layers' inputs and outputs, GELU, dropout masks, layer norms) plus `ACT_PER_HEAD_KEY`
per head and query-key pair (scores, softmax, dropout); the MLM head's logits on the selected tokens;
a worker's fixed share (`BASE`: interpreter, torch, the prepared data); and what the allocator keeps
(`SLACK`). The activation fit is within ~12% of every measured point and rounded up (what a forward
pass keeps for backward, counted exactly, is 80-84% of it: tests/test_sweep_memory.py). Against real
sweep workers' peak RSS (VmHWM): ~1.75M parameters 4.5 GiB after 18 min (estimate 4.9 at T = 92),
characters at least 12.8 GiB (when the kernel killed it; estimate 14.7). nsp runs grow beyond their
activations (`NSP_SLACK`). T is `data.max_len`, the longest a length-bucketed batch can pad to, or the
longest training sentence when the data are prepared (the sweep prepares them first: BBE NT's longest
is 90 word-pieces, so T = 92 of max_len 128).
"""

from __future__ import annotations

import json
from pathlib import Path

GIB = 1024**3
# float32 values kept for backward per token and layer: per hidden unit, per intermediate unit, and per
# head and key; fitted as above (at intermediate = 4 x hidden the first two give 22 per hidden unit)
ACT_PER_HIDDEN, ACT_PER_INTERMEDIATE, ACT_PER_HEAD_KEY = 9.0, 3.25, 3.5
MLM_COPIES = 3  # logits, their softmax and its gradient, per selected token and vocabulary entry
BASE = 1.5 * GIB  # a worker's fixed share: interpreter, torch, the prepared data, evaluation
SLACK = 1.25  # what the allocator keeps beyond the live activations (a character run was killed ~30% above them)
# nsp's sentence pairs change length from batch to batch and glibc keeps the freed activation memory it cannot
# reuse: an nsp run at quick-b256 held 10.3 GB after ~1,500 of 1,775 updates and still growing (docs/findings.md,
# structure grid), its live activations ~2.9 GB; two of them side by side were killed on a 24 GiB machine.
NSP_SLACK = 3.5  # 10.3 GB at 85% of training is BASE + 3.0x that, and still growing
HEADROOM = 0.9  # use at most this share of the available memory


def peak_bytes(config: dict, longest: int | None = None) -> int:
    """A CPU training run's peak resident memory, from its config dict (`RunConfig.to_dict()`) and, when
    known, the `longest` training sequence of its prepared data (else `data.max_len`)."""
    m, d, t = config["model"], config["data"], config["train"]
    batch = t["batch_size"]
    # nsp packs two sentences into a sequence: up to max_len
    length = d["max_len"] if longest is None or m.get("nsp") else min(d["max_len"], longest)
    per_layer = length * (ACT_PER_HIDDEN * m["hidden"] + ACT_PER_INTERMEDIATE * m["intermediate"]
                          + ACT_PER_HEAD_KEY * m["heads"] * length)
    selected = config.get("mask", {}).get("rate", 0.15) * batch * length
    floats = batch * m["layers"] * per_layer + MLM_COPIES * selected * m["vocab_size"]
    # train.nproc processes share the batch's activations, but each holds its own interpreter, torch and data
    return int(t.get("nproc", 1) * BASE + (NSP_SLACK if m.get("nsp") else SLACK) * 4 * floats)


def available_bytes(meminfo: str | Path = "/proc/meminfo") -> int | None:
    """Memory the kernel can give now (MemAvailable), or None where it does not say (not Linux)."""
    try:
        for line in Path(meminfo).read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def longest_sequence(prepared) -> int:
    """The longest training sequence a prepared data set gives: its longest sentence in any language's
    encoding, with [CLS] and [SEP]."""
    return 2 + max((int(e.lengths.max()) for e in (prepared.train, *prepared.extra.values()) if len(e.lengths)),
                   default=0)


def need(group: list, longest: dict | None = None) -> int:
    """A group's peak: a stacked group trains its runs as one model, so their sum. `longest` maps a
    data config (`data_key`) to its longest training sequence."""
    return sum(peak_bytes(t.config, (longest or {}).get(data_key(t.config))) for t in group)


def data_key(config: dict) -> str:
    return json.dumps(config["data"], sort_keys=True)


def budget(groups: list[list], workers: int, available: int | None = None,
           longest: dict | None = None) -> tuple[int | None, list[str]]:
    """(bytes the running groups may need together, lines to log): `HEADROOM` of the memory `available`
    (default: now), or None where it is unknown (not Linux) or where the `workers` largest fit anyway.
    The local backend starts a group only while the running ones' needs and its own fit in it (one
    group always runs, however large: with a warning line)."""
    available = available_bytes() if available is None else available
    if available is None or not groups:
        return None, []
    needs = sorted((need(g, longest) for g in groups), reverse=True)
    limit, lines = int(HEADROOM * available), []
    if sum(needs[:workers]) <= limit:
        return None, []
    lines.append(f"  memory: runs side by side only while their peaks fit in {limit / GIB:.1f} GiB "
                 f"({HEADROOM:.0%} of what is available); the largest need ~{needs[0] / GIB:.1f} GiB at their "
                 f"longest batch (minimult.sweep.memory)")
    if needs[0] > limit:
        lines.append(f"  memory: WARNING: a run needs ~{needs[0] / GIB:.1f} GiB at its longest batch, more than the "
                     f"{available / GIB:.1f} GiB available; it may be killed for memory (a smaller train.batch_size "
                     f"or data.max_len needs less); the sweep resumes it from its last checkpoint when run again")
    return limit, lines


def admit(waiting: list, running: list, workers: int, limit: int | None, longest: dict | None = None) -> list:
    """Which of `waiting` (groups, in order) to start now beside `running`: the first ones that fit in
    `limit` together with what runs, at most `workers` running in all, and always one when none runs."""
    started, used = [], sum(need(g, longest) for g in running)
    for g in waiting:
        if len(running) + len(started) >= workers:
            break
        size = need(g, longest)
        if limit is None or used + size <= limit or not (running or started):
            started.append(g)
            used += size
    return started
