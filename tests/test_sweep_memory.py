"""The sweep's memory model: an upper bound of a real training step's peak, and fewer CPU workers when
the largest runs would not fit side by side."""

import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

from minimult.config import resolve
from minimult.sweep import memory
from minimult.sweep.memory import BASE, GIB, SLACK, available_bytes, fit, peak_bytes

CHAR = {"data.tokenizer": "char", "data.vocab_size": 114, "data.max_len": 349}  # k-et-al.toml's t-char

# One forward and backward pass of the lab's model in a fresh process; prints the growth of its peak RSS.
STEP = textwrap.dedent("""
    import resource, sys, torch
    from minimult.config import RunConfig
    from minimult.model import Bert, ModelConfig
    import json
    cfg = RunConfig.from_dict(json.loads(sys.argv[1]))
    torch.set_num_threads(1)
    torch.manual_seed(0)
    B, T, V = cfg.train.batch_size, cfg.data.max_len, cfg.model.vocab_size
    model = Bert(cfg.model).train()
    ids = torch.randint(5, V, (B, T))
    selected = torch.randperm(B * T)[: int(cfg.mask.rate * B * T)]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    loss = model.mlm_loss(ids, torch.arange(T).expand(B, T), torch.zeros_like(ids), torch.ones_like(ids),
                          selected, ids.flatten()[selected])
    loss.backward()
    print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
""")


def config(preset="quick-b256", **overrides):
    return resolve(preset, overrides, "")[0].to_dict()


def measured_step_bytes(cfg: dict) -> int:
    import json

    out = subprocess.run([sys.executable, "-c", STEP, json.dumps(cfg)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1])


@pytest.mark.parametrize("overrides", [{"model.heads": 4}, CHAR], ids=["wordpiece-4-heads", "char"])
def test_peak_estimate_bounds_a_real_training_step(overrides):
    """At batch 16 (a sixteenth of the quick preset's), the estimate (activations with the allocator's
    slack) covers what one real forward and backward pass adds to the process's peak, and the
    activations alone are not wildly above it."""
    cfg = config(**overrides, **{"train.batch_size": 16})
    activations = (peak_bytes(cfg) - BASE) / SLACK  # measured within 6% of this on the project's CPU
    measured = measured_step_bytes(cfg)
    assert 0.6 * activations < measured <= SLACK * activations, (measured / GIB, activations / GIB)


def test_character_runs_need_far_more_memory_than_word_pieces():
    char, piece = peak_bytes(config(**CHAR)), peak_bytes(config())
    assert char > 2.5 * piece  # 349 characters a sequence against 128 pieces; attention is quadratic in it
    assert char > 12 * GIB > piece  # a worker was killed at 12.8 GiB with two such runs on a 24 GiB machine


def test_fit_lowers_the_workers_until_the_largest_runs_fit():
    char, piece = (SimpleNamespace(config=config(**CHAR)), SimpleNamespace(config=config()))
    workers, lines = fit([[char], [char], [piece]], 2, available=24 * GIB)
    assert workers == 1 and "1 run(s) at a time instead of 2" in lines[0] and len(lines) == 1
    assert fit([[piece], [piece]], 2, available=24 * GIB) == (2, [])
    assert fit([[piece], [piece]], 2, available=None) == (2, [])  # unknown memory: as asked (not Linux)
    # a stacked group needs its runs' sum
    assert fit([[piece, piece, piece], [piece]], 2, available=16 * GIB)[0] == 1
    workers, lines = fit([[char]], 1, available=8 * GIB)  # one run larger than the machine: run it, and warn
    assert workers == 1 and "WARNING" in lines[-1] and "data.max_len" in lines[-1]


def test_available_bytes_reads_meminfo(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24683520 kB\nMemFree:  100 kB\nMemAvailable:   15731012 kB\n")
    assert available_bytes(meminfo) == 15731012 * 1024
    assert available_bytes(tmp_path / "missing") is None
    meminfo.write_text("MemTotal: 1 kB\n")
    assert available_bytes(meminfo) is None


def test_sweep_announces_fewer_workers_for_memory(monkeypatch):
    """The local backend on CPU asks `fit`; its line reaches the sweep's opening lines."""
    import torch

    from minimult.sweep import Placement

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(memory, "available_bytes", lambda: 20 * GIB)
    char = SimpleNamespace(config=config(**CHAR, **{"train.threads": 1}))
    where = Placement.choose([char, char], [[char], [char]], jobs=2)
    assert where.workers == 1 and where.threads == 1 and "instead of 2" in where.notes[0]
    assert Placement.choose([char, char], [[char], [char]], jobs=2, local=False).workers == 2  # Ray schedules


def test_a_killed_worker_says_memory_and_resume():
    """A worker the kernel kills breaks the pool; each of its runs fails with a line saying what to do."""
    from concurrent.futures import Future
    from concurrent.futures.process import BrokenProcessPool

    from minimult.sweep.backends import _report_local

    future, task, seen = Future(), SimpleNamespace(name="t-char-original-s0"), []
    future.set_exception(BrokenProcessPool("A process in the process pool was terminated abruptly"))
    _report_local(future, [task], seen.append)
    assert [o.status for o in seen] == ["failed"]
    assert "for memory" in seen[0].message and "resumes it from its last checkpoint" in seen[0].message
    future = Future()
    future.set_exception(RuntimeError("boom"))
    _report_local(future, [task], seen.append)
    assert seen[1].message == "worker process died: RuntimeError: boom"
