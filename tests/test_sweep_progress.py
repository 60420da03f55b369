"""The sweep's status lines: each running run's step, loss, speed and time left from its sweep.log,
and the sweep's time left from them, the queue and finished runs, once per status interval; a real
sweep prints them. The sweep's clock is the test's: nothing here depends on how fast the machine is."""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path
from types import SimpleNamespace

from minimult.sweep.progress import SweepProgress, last_step, seconds

LINE = ("step {step:>6}/1775 | epoch  16.52 | loss  3.9585 | lr 6.99e-04 |   11,962 tok/s | "
        "{elapsed} elapsed, {left} left\n")


def run(tmp_path, name, *lines):
    d = tmp_path / name
    d.mkdir()
    (d / "sweep.log").write_text("new run\n" + "".join(lines) + "step   1775 | eval: µ 0.21\n")
    return SimpleNamespace(run_dir=str(d), name=name)


def test_times_and_the_last_training_line(tmp_path):
    assert [seconds(t) for t in ("9m46s", "1h02m", "0m05s", "12", "")] == [586, 3720, 5, None, None]
    r = run(tmp_path, "a", LINE.format(step=100, elapsed="1m00s", left="9m00s"),
            LINE.format(step=1173, elapsed="19m02s", left="9m46s"))
    assert last_step(Path(r.run_dir) / "sweep.log", 0) == {
        "step": 1173, "total": 1775, "loss": "3.9585", "tok_s": "11,962", "elapsed": 1142, "left": 586}
    assert last_step(Path(r.run_dir) / "sweep.log", since=2e9) is None  # written before this sweep began
    assert last_step(tmp_path / "missing.log", 0) is None


class Clock:
    """A clock the test sets (`clock.now = 300`)."""

    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_status_lines_and_time_left(tmp_path):
    a = run(tmp_path, "a", LINE.format(step=600, elapsed="10m00s", left="19m35s"))  # 1 s an update
    b = run(tmp_path, "b", LINE.format(step=1200, elapsed="20m00s", left="9m35s"))
    queued = [SimpleNamespace(run_dir=str(tmp_path / q), name=q) for q in ("c", "d")]
    lines = []
    clock = Clock(0)  # the sweep starts at 0 (1970): the logs count as written during it
    progress = SweepProgress([a, b, *queued], workers=2, run_log="sweep.log", log=lines.append, every=300,
                             clock=clock)
    clock.now = 299
    progress.tick()
    assert lines == []  # less than a status interval since the start
    clock.now = 300
    progress.tick()
    # running: 1,175 + 575 s left; 2 queued x a whole run of 1,775 s; over 2 workers -> 2,650 s
    assert "] 2 running, 2 queued, 0 done in 5m00s" in lines[0] and lines[0].endswith("; ~44m10s left")
    assert lines[1:] == ["    a: step 600/1775, loss 3.9585, 11,962 tok/s, 19m35s left",
                         "    b: step 1200/1775, loss 3.9585, 11,962 tok/s, 9m35s left"]
    progress.finished(SimpleNamespace(task=b, status="done", message="new run", seconds=1200.0))  # sets the pace
    lines.clear()
    clock.now = 599
    progress.tick()
    assert lines == []  # the interval counts from the last status line
    clock.now = 600
    progress.tick()
    assert "1 running, 2 queued, 1 done in 10m00s" in lines[0]
    assert lines[0].endswith("~29m47s left")  # (1,175 + 2 x 1,200) / 2


def test_a_resumed_run_sets_no_pace(tmp_path):
    """A resumed run's times count only the updates since its checkpoint: its whole length is its time left
    scaled to all its updates, and when it finishes, its seconds are not a run's length (a sweep resumed near
    its runs' ends once said ~13 h left of ~45)."""
    resumed = run(tmp_path, "r", LINE.format(step=1475, elapsed="5m00s", left="5m00s"))  # resumed at 1,175
    fresh = run(tmp_path, "f", LINE.format(step=600, elapsed="10m00s", left="19m35s"))
    queued = SimpleNamespace(run_dir=str(tmp_path / "c"), name="c")
    lines, clock = [], Clock(0)
    progress = SweepProgress([resumed, fresh, queued], workers=2, run_log="sweep.log", log=lines.append,
                             every=300, clock=clock)
    clock.now = 300
    progress.tick()
    assert lines[0].endswith("~27m05s left")  # both runs 1,775 s whole: (300 + 1,175 + 1,775) / 2
    progress.finished(SimpleNamespace(task=resumed, status="done", message="resumed", seconds=600.0))
    lines.clear()
    clock.now = 600
    progress.tick()
    assert "1 running, 1 queued, 1 done" in lines[0] and lines[0].endswith("~24m35s left")  # (1,175 + 1,775) / 2


class Hurried:
    """The wall clock at the sweep's start, then an hour later at every reading: every tick is due."""

    def __init__(self):
        self.now = None

    def __call__(self) -> float:
        self.now = time.time() if self.now is None else self.now + 3600
        return self.now


def test_a_sweep_prints_status_lines_while_runs_train(tmp_path, monkeypatch):
    """Whatever this machine's speed: every tick is due (`Hurried`), and the sweep ticks whenever it stops
    waiting, so once more after the run has ended and before it counts it done (`sweep.backends.run_local`):
    that tick reads the run's last training line (step 26/26) at least."""
    from minimult.sweep.grid import load_grid
    from minimult.sweep import run_sweep

    from test_sweep import GRID

    monkeypatch.setattr("minimult.sweep.SweepProgress", partial(SweepProgress, clock=Hurried()))
    grid_file = tmp_path / "tiny.toml"  # 2 layers, no evaluation during training: 2 epochs of 13 steps
    small = GRID.replace('"model.layers" = 4', '"model.layers" = 2').replace('"train.eval_every" = 13', "")
    grid_file.write_text(small)
    lines = []
    summary = run_sweep(load_grid(grid_file), seeds=[0], root=tmp_path / "runs", log=lines.append, only=["0"],
                        jobs=1, progress_every=0.5)
    assert summary.ok
    status = [l for l in lines if l.startswith("  [") and " running, " in l]
    assert status, "\n".join(lines)
    assert any(l.startswith("    0-original-s0: step ") and "/26, loss " in l for l in lines), "\n".join(lines)


def test_a_run_finished_elsewhere_is_neither_running_nor_queued(tmp_path):
    """A queued run that another sweep (or a GPU machine) finished meanwhile: its log's last line is its last
    step, but the status lines count it apart and the time left leaves it out; a run this sweep itself
    finishes is counted done once, even when a status line saw it complete before its outcome came."""
    a = run(tmp_path, "a", LINE.format(step=600, elapsed="10m00s", left="19m35s"))
    gpu = run(tmp_path, "gpu", LINE.format(step=1775, elapsed="5m00s", left="0m00s"))
    (Path(gpu.run_dir) / "run.json").write_text('{"status": "complete", "steps": 1775}')
    (Path(gpu.run_dir) / "results.json").write_text('{"steps": 1775, "perplexity": {}, "layers": {"0": {}}}')
    queued = SimpleNamespace(run_dir=str(tmp_path / "c"), name="c")
    lines, clock = [], Clock(0)
    progress = SweepProgress([a, gpu, queued], workers=1, run_log="sweep.log", log=lines.append, every=300,
                             clock=clock)
    clock.now = 300
    progress.tick()
    # 1,175 s left of a, one queued run as long as a (1,775 s), one worker (the finished one adds nothing)
    assert "] 1 running, 1 queued, 0 done, 1 finished elsewhere in 5m00s; ~49m10s left" in lines[0], lines
    assert lines[1:] == ["    a: step 600/1775, loss 3.9585, 11,962 tok/s, 19m35s left"]
    progress.finished(SimpleNamespace(task=gpu, status="skipped", message="already complete", seconds=0.0))  # skipped
    (Path(a.run_dir) / "run.json").write_text('{"status": "complete", "steps": 1775}')
    (Path(a.run_dir) / "results.json").write_text('{"steps": 1775, "perplexity": {}, "layers": {"0": {}}}')
    lines.clear()
    clock.now = 600
    progress.tick()  # a is complete before its outcome arrives
    progress.finished(SimpleNamespace(task=a, status="done", message="new run", seconds=1800.0))
    lines.clear()
    clock.now = 900
    progress.tick()
    assert "0 running, 1 queued, 1 done, 1 finished elsewhere in 15m00s" in lines[0], lines
