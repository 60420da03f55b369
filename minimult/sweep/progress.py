"""A sweep's status lines while its runs train: which run is where, and roughly how long is left.

Public entry: `SweepProgress(tasks, workers, run_log, log, every)`; the sweep calls
`.finished(outcome)` for every run that ends and `.tick()` whenever it has waited `every` seconds
without news. Each run's own progress is read from the last training line of its `sweep.log`
(`step 1173/1775 | epoch ... | loss 3.9585 | ... | 11,962 tok/s | 19m02s elapsed, 9m46s left`), so it
works the same for local workers and Ray tasks on a shared filesystem.

The sweep's time left = (what the running runs have left + queued runs x a typical run's length) /
parallel workers, at least the longest a running run has left; a typical run's length is the median
over finished runs, or over the running runs' elapsed + left while none has finished. Evaluation after training is not in the runs' own
estimates, so the figure is a lower bound until the first run finishes.
"""

from __future__ import annotations

import re
import statistics
import time
from pathlib import Path
from typing import Callable

from minimult.train import fmt_time as fmt

EVERY = 300.0  # seconds between status lines
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


class SweepProgress:
    def __init__(self, tasks, workers: int, run_log: str, log: Callable[[str], None], every: float = EVERY):
        self.run_log = run_log  # each run's log file name in its folder
        self.pending = dict.fromkeys(t.run_dir for t in tasks)  # run folders not finished yet, in order
        self.workers = max(1, workers)
        self.log, self.every = log, every
        self.start = self.last = time.time()
        self.durations: list[float] = []

    def finished(self, outcome) -> None:
        self.pending.pop(outcome.task.run_dir, None)
        if outcome.status == "done" and outcome.seconds > 0:
            self.durations.append(outcome.seconds)

    def tick(self) -> None:
        now = time.time()
        if now - self.last < self.every or not self.pending:
            return
        self.last = now
        running = {}
        for run_dir in self.pending:
            state = last_step(Path(run_dir) / self.run_log, self.start)
            if state:
                running[run_dir] = state
        queued = len(self.pending) - len(running)
        lengths = self.durations or [s["elapsed"] + s["left"] for s in running.values()
                                     if s["elapsed"] is not None and s["left"] is not None]
        eta = ""
        if lengths:
            lefts = [s["left"] or 0 for s in running.values()]
            left = max(max(lefts, default=0), (sum(lefts) + queued * statistics.median(lengths)) / self.workers)
            eta = f"; ~{fmt(left)} left"
        self.log(f"  [{time.strftime('%H:%M')}] {len(running)} running, {queued} queued, "
                 f"{len(self.durations)} done in {fmt(now - self.start)}{eta}")
        for run_dir, s in running.items():
            self.log(f"    {Path(run_dir).name}: step {s['step']}/{s['total']}, loss {s['loss']}, "
                     f"{s['tok_s']} tok/s" + (f", {fmt(s['left'])} left" if s["left"] is not None else ""))
