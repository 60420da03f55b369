"""How much memory a CPU run needs at its peak, and how many fit side by side on this machine.

Public entry: `fit(groups, workers) -> (workers, lines)`, used by the local backend on CPU before it
starts its pool: it lowers the number of parallel workers until the largest groups' peaks fit in the
memory available now, and says so; a single run larger than that gets a warning line (it may be killed
for memory; the sweep goes on with the others, and `sweep` resumes it from its last checkpoint).

Why: two character-unit runs (`data.tokenizer = "char"`, max_len 349) at batch 256 each need ~12 GiB for
their longest batch; side by side on a 24 GiB machine the kernel killed one 33 minutes in, and the
process pool with it. Nothing else in a run comes close to the training step's activations.

`peak_bytes(config)` is a model of a training step's peak resident memory, fitted on this project's
2-core CPU by measuring the peak RSS of one forward and backward pass (`Bert.mlm_loss`) at batch 16–64
for (T, hidden, heads, layers) in {128, 349} x {64, 128, 256} x {1, 4} x {6, 12}: per sequence and
layer and token, `ACT_PER_HIDDEN` floats per hidden unit and `ACT_PER_INTERMEDIATE` per intermediate
unit (the linear layers' inputs and outputs, GELU, dropout masks, layer norms) plus `ACT_PER_HEAD_KEY`
per head and query-key pair (scores, softmax, dropout); the MLM head's logits on the selected tokens; and a worker's
fixed share (`BASE`: interpreter, torch, the prepared data) and what the allocator keeps (`SLACK`). The activation
fit is within ~12% of every measured point and rounded up. Against real sweep workers' peak RSS
(VmHWM): ~1.75M parameters 4.5 GiB after 18 min (estimate 6.0), characters at least 12.8 GiB (when
the kernel killed it; estimate 14.1). T is `data.max_len`, the
longest a length-bucketed batch can pad to, so the estimate is an upper bound for shorter corpora.
"""

from __future__ import annotations

from pathlib import Path

GIB = 1024**3
# float32 values kept for backward per token and layer: per hidden unit, per intermediate unit, and per
# head and key; fitted as above (at intermediate = 4 x hidden the first two give 22 per hidden unit)
ACT_PER_HIDDEN, ACT_PER_INTERMEDIATE, ACT_PER_HEAD_KEY = 9.0, 3.25, 3.5
MLM_COPIES = 3  # logits, their softmax and its gradient, per selected token and vocabulary entry
BASE = 1.0 * GIB  # a worker's fixed share: interpreter, torch, the prepared data
SLACK = 1.25  # what the allocator keeps beyond the live activations (a character run was killed ~30% above them)
HEADROOM = 0.9  # use at most this share of the available memory


def peak_bytes(config: dict) -> int:
    """A CPU training run's peak resident memory, from its config dict (`RunConfig.to_dict()`)."""
    m, d, t = config["model"], config["data"], config["train"]
    batch, length = t["batch_size"], d["max_len"]
    per_layer = length * (ACT_PER_HIDDEN * m["hidden"] + ACT_PER_INTERMEDIATE * m["intermediate"]
                          + ACT_PER_HEAD_KEY * m["heads"] * length)
    selected = config.get("mask", {}).get("rate", 0.15) * batch * length
    floats = batch * m["layers"] * per_layer + MLM_COPIES * selected * m["vocab_size"]
    return int(BASE + SLACK * 4 * floats)


def available_bytes(meminfo: str | Path = "/proc/meminfo") -> int | None:
    """Memory the kernel can give now (MemAvailable), or None where it does not say (not Linux)."""
    try:
        for line in Path(meminfo).read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def fit(groups: list[list], workers: int, available: int | None = None) -> tuple[int, list[str]]:
    """(workers, lines to log): at most `workers` CPU workers, fewer while the largest groups' peaks
    (a group of stacked runs needs the sum of its runs') would not fit in `available` (default: now)."""
    available = available_bytes() if available is None else available
    if available is None or not groups:
        return workers, []
    need = sorted((sum(peak_bytes(t.config) for t in g) for g in groups), reverse=True)
    budget, lines = HEADROOM * available, []
    fits = workers
    while fits > 1 and sum(need[:fits]) > budget:
        fits -= 1
    if fits < workers:
        lines.append(f"  memory: the largest runs need up to {need[0] / GIB:.1f} GiB each at their longest batch "
                     f"and {available / GIB:.1f} GiB is available, so {fits} run(s) at a time instead of {workers} "
                     f"(minimult.sweep.memory)")
    if need[0] > budget:
        lines.append(f"  memory: WARNING: a run needs ~{need[0] / GIB:.1f} GiB at its longest batch, more than the "
                     f"{available / GIB:.1f} GiB available; it may be killed for memory (a smaller train.batch_size "
                     f"or data.max_len needs less); the sweep resumes it from its last checkpoint when run again")
    return fits, lines
