"""A sweep's status lines while its runs train: which run is where, and roughly how long is left.

Public entry: `SweepProgress(tasks, workers, run_log, log, every, clock)`; the sweep calls
`.finished(outcome)` for every run that ends and `.tick()` whenever it has waited `every` seconds
without news (`clock`, `time.time` by default, says when `every` has passed, and the start that the run
logs' modification times are compared with). Each run's own progress is read from the last training line
of its `sweep.log` (`step 1173/1775 | epoch ... | loss 3.9585 | ... | 11,962 tok/s | 19m02s elapsed, 9m46s
left`), so it works the same for local workers and Ray tasks on a shared filesystem. A queued run that another
sweep (or a GPU machine) finished meanwhile, its results complete (`plan.results_complete`), is counted as
"finished elsewhere": neither running nor queued, and out of the time left.

The sweep's time left = (what the running runs have left + what the queued runs will take) / parallel
workers, at least the longest a running run has left. A queued run will take its cost (`run_cost`:
epochs x the work per token of its model's size, `token_cost`) times the median seconds per unit of
cost of the runs this sweep trained from the start, or of the running runs' whole length (`whole_run`) while
none has (a resumed run's time covers only the updates since its checkpoint, so it sets no pace), so a grid
of different sizes (experiments/k-et-al.toml: 0.46x to 4.1x BERT-small's time per token) is estimated
run by run. The units matter too (`data.tokenizer`): a run reads the same sentences at every
granularity, but characters make 3.3x as many units as word-pieces, each in a longer sequence, so
`run_cost` weighs a run by its units per sentence (`UNITS_PER_WORD`) and its typical length. Evaluation after
training is not in the runs' own estimates, so the figure is a lower bound until the first run finishes.
"""

from __future__ import annotations

import re
import statistics
import time
from pathlib import Path
from typing import Callable

from minimult.sweep.plan import results_complete
from minimult.train import fmt_time as fmt

EVERY = 300.0  # seconds between status lines
# The cost model (`token_cost`): a typical padded length of a length-bucketed batch, the share of tokens
# the MLM head sees, and two costs in multiply-adds per token and layer beyond the matmuls, fitted to
# experiments/bench_sizes.py on this project's 2-core CPU (k-et-al.toml's 13 shapes, one thread):
# per attention head and key (softmax, dropout of the probabilities, the per-head copies; so heads cost
# time at a fixed size) and per layer (the fixed work of a layer's ~30 ops per step). With them the
# predicted time ratios came within 25% of the measured ones, from 0.46x to 4.1x BERT-small's time;
# matmuls alone missed by up to 49% (small and deep models are slower than their FLOPs say).
TYPICAL_LENGTH, SELECTED, PER_HEAD_KEY, PER_LAYER = 27, 0.15, 100, 7000
# Units per word of each granularity (data.tokenizer), measured with `minimult prepare` on the default
# training corpus (BBE New Testament, 227,972 words): 238,980 word-pieces (2,048 entries), 786,521
# characters, 227,972 words (every word type kept). Only ratios to wordpiece are used; other English
# corpora give similar ratios. An unknown granularity counts as wordpiece.
UNITS_PER_WORD = {"wordpiece": 238_980 / 227_972, "char": 786_521 / 227_972, "word": 1.0}
_STEP = re.compile(r"step\s+(\d+)/(\d+) \|.*\| loss\s+(\S+) \|.*\|\s*([\d,]+) tok/s \| (\S+) elapsed, (\S+) left")
_TIME = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def seconds(text: str) -> float | None:
    """'1h02m' / '9m46s' (train.fmt_time) -> seconds; None if it is neither."""
    m = _TIME.match(text)
    if not m or not any(m.groups()):
        return None
    h, mi, s = (int(g or 0) for g in m.groups())
    return h * 3600 + mi * 60 + s


def last_step(log_file: Path, since: float) -> dict | None:
    """The last training line of a run's log written after `since` (epoch seconds), parsed."""
    try:
        if log_file.stat().st_mtime < since:
            return None
        with open(log_file, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 8192))
            tail = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    for line in reversed(tail):
        m = _STEP.search(line)
        if m:
            step, total, loss, rate, elapsed, left = m.groups()
            return {"step": int(step), "total": int(total), "loss": loss, "tok_s": rate,
                    "elapsed": seconds(elapsed), "left": seconds(left)}
    return None


def whole_run(state: dict) -> float | None:
    """A running run's seconds for all its updates at its present pace (`last_step`'s dict): its time left
    scaled from the updates left to all of them, since a resumed run's elapsed time counts only the updates
    since it resumed; None at its last update, where nothing is left to scale."""
    if state["left"] is None or state["step"] >= state["total"]:
        return None
    return state["left"] * state["total"] / (state["total"] - state["step"])


def token_cost(model, length: float = TYPICAL_LENGTH) -> float:
    """A training step's work per token of a model (`ModelConfig` or its dict) in sequences of about
    `length` tokens, in multiply-adds: the encoder's linear layers and attention products, the per-head
    and per-layer costs above, and the MLM head on the selected tokens. Only ratios between models mean
    anything (experiments/bench_sizes.py compares them with measured times)."""
    get = model.get if isinstance(model, dict) else lambda k: getattr(model, k)
    H, I, V, heads, layers = get("hidden"), get("intermediate"), get("vocab_size"), get("heads"), get("layers")
    T = length
    per_layer = 4 * H * H + 2 * H * I + 2 * T * H + PER_HEAD_KEY * heads * T + PER_LAYER
    return layers * per_layer + SELECTED * (H * H + H * V)


def units_ratio(data: dict) -> float:
    """Units per sentence of a run's data config (a dict) relative to wordpiece's: 1 for wordpiece."""
    tokenizer = data.get("tokenizer", "wordpiece")
    return UNITS_PER_WORD.get(tokenizer, UNITS_PER_WORD["wordpiece"]) / UNITS_PER_WORD["wordpiece"]


def typical_length(data: dict) -> float:
    """A typical padded sequence length of a run's batches ([CLS]/[SEP] included): TYPICAL_LENGTH for
    wordpiece, its units scaled by `units_ratio` otherwise, at most data.max_len."""
    ratio = units_ratio(data)
    if ratio == 1.0:
        return TYPICAL_LENGTH
    return min(2 + (TYPICAL_LENGTH - 2) * ratio, data.get("max_len", float("inf")))


def run_cost(config: dict) -> float:
    """A run's training work relative to others (a resolved config as a dict): epochs x units per
    sentence (relative to wordpiece's) x work per unit at the run's typical sequence length."""
    data = config.get("data", {})
    return config["train"]["epochs"] * units_ratio(data) * token_cost(config["model"], typical_length(data))


class SweepProgress:
    def __init__(self, tasks, workers: int, run_log: str, log: Callable[[str], None], every: float = EVERY,
                 clock: Callable[[], float] = time.time):
        self.run_log = run_log  # each run's log file name in its folder
        self.pending = dict.fromkeys(t.run_dir for t in tasks)  # run folders not finished yet, in order
        self.wants_transfer = {t.run_dir: bool(getattr(t, "wants_transfer", False)) for t in tasks}
        self.elsewhere: set[str] = set()  # pending runs finished by another sweep (or a GPU machine) meanwhile
        self.workers = max(1, workers)
        self.log, self.every, self.clock = log, every, clock
        self.start = self.last = clock()
        self.done = 0  # runs this sweep finished
        self.rates: list[float] = []  # seconds per unit of run_cost of the finished runs
        # tasks without a config (tests) weigh alike; untrained runs (0 epochs) cost nothing to train
        self.cost = {t.run_dir: run_cost(t.config) if getattr(t, "config", None) else 1.0 for t in tasks}

    def finished(self, outcome) -> None:
        self.pending.pop(outcome.task.run_dir, None)
        if outcome.status == "done":  # this sweep's own run, seen complete before its outcome came
            self.elsewhere.discard(outcome.task.run_dir)
        if outcome.status == "done" and outcome.seconds > 0:
            self.done += 1
            if self.cost.get(outcome.task.run_dir) and outcome.message.startswith("new run"):  # a whole run
                self.rates.append(outcome.seconds / self.cost[outcome.task.run_dir])

    def tick(self, dispatched=frozenset()) -> None:
        """The status lines, when `every` seconds have passed; `dispatched`: the run folders of this sweep's groups in
        flight (a stack's run may be complete before its group is reported), never counted as finished elsewhere."""
        now = self.clock()
        if now - self.last < self.every or not self.pending:
            return
        self.last = now
        for run_dir in [d for d in self.pending
                        if d not in dispatched and results_complete(Path(d), self.wants_transfer.get(d, False))]:
            del self.pending[run_dir]  # neither running (its log's last line is its last step) nor queued
            self.elsewhere.add(run_dir)
        running = {d: state for d in self.pending if (state := last_step(Path(d) / self.run_log, self.start))}
        waiting = [d for d in self.pending if d not in running]
        rates = self.rates or [whole / self.cost[d] for d, s in running.items()
                               if (whole := whole_run(s)) is not None and self.cost.get(d)]
        eta = ""
        if rates:
            lefts = [s["left"] or 0 for s in running.values()]
            later = sum(self.cost.get(d, 0.0) for d in waiting) * statistics.median(rates)
            left = max(max(lefts, default=0), (sum(lefts) + later) / self.workers)
            eta = f"; ~{fmt(left)} left"
        elsewhere = f", {len(self.elsewhere)} finished elsewhere" if self.elsewhere else ""
        self.log(f"  [{time.strftime('%H:%M')}] {len(running)} running, {len(waiting)} queued, "
                 f"{self.done} done{elsewhere} in {fmt(now - self.start)}{eta}")
        for run_dir, s in running.items():
            self.log(f"    {Path(run_dir).name}: step {s['step']}/{s['total']}, loss {s['loss']}, "
                     f"{s['tok_s']} tok/s" + (f", {fmt(s['left'])} left" if s["left"] is not None else ""))
