"""The sweep's memory model: an upper bound of a real training step's peak, and fewer CPU workers when
the largest runs would not fit side by side."""

from types import SimpleNamespace

import pytest

from conftest import TINY_SETTINGS
from minimult.config import resolve
from minimult.sweep import memory
from minimult.sweep.memory import BASE, GIB, SLACK, admit, available_bytes, budget, peak_bytes

CHAR = {"data.tokenizer": "char", "data.vocab_size": 114, "data.max_len": 349}  # k-et-al.toml's t-char

def config(preset="quick-b256", **overrides):
    return resolve(preset, overrides, "")[0].to_dict()


def saved_for_backward(cfg: dict) -> int:
    """Bytes one real forward pass of the lab's model keeps for backward (parameters aside): the
    activations the estimate models, counted exactly (an RSS peak adds the backward's transient buffers
    and is noisy on a shared machine)."""
    import torch

    from minimult.config import RunConfig
    from minimult.model import Bert

    run = RunConfig.from_dict(cfg)
    torch.manual_seed(0)
    B, T, V = run.train.batch_size, run.data.max_len, run.model.vocab_size
    model = Bert(run.model).train()
    ids = torch.randint(5, V, (B, T))
    selected = torch.randperm(B * T)[: int(run.mask.rate * B * T)]
    storages = {}

    def keep(t):
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
        model.mlm_loss(ids, torch.arange(T).expand(B, T), torch.zeros_like(ids), torch.ones_like(ids),
                       selected, ids.flatten()[selected])
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    return sum(n for ptr, n in storages.items() if ptr not in params)


@pytest.mark.parametrize("overrides", [{}, {"model.heads": 4}, CHAR], ids=["wordpiece", "wordpiece-4-heads", "char"])
def test_peak_estimate_covers_what_a_real_step_keeps(overrides):
    """At batch 16, what a real forward pass keeps for backward is most of the estimated activations
    (80-84% here; the backward's transient buffers, which the measured RSS peaks held, are the rest),
    never more."""
    cfg = config(**overrides, **{"train.batch_size": 16})
    activations = (peak_bytes(cfg) - BASE) / SLACK
    saved = saved_for_backward(cfg)
    assert 0.7 * activations < saved <= activations, (saved / GIB, activations / GIB)


def test_character_runs_need_far_more_memory_than_word_pieces():
    char, piece = peak_bytes(config(**CHAR)), peak_bytes(config())
    assert char > 2.5 * piece  # 349 characters a sequence against 128 pieces; attention is quadratic in it
    assert char > 12 * GIB > piece  # a worker was killed at 12.8 GiB with two such runs on a 24 GiB machine


def test_two_nsp_runs_do_not_share_a_24_gib_machine():
    """nsp's pair batches keep glibc's freed memory (README: 10.3 GB and growing; two were killed side by
    side); its estimate counts that, so the sweep runs them one at a time there."""
    nsp = [SimpleNamespace(config=resolve("quick-b256", {}, "nsp")[0].to_dict())]
    plain = [SimpleNamespace(config=config())]
    limit, _ = budget([nsp, nsp], 2, available=int(22.9 * GIB))  # MemAvailable of an idle 24 GiB machine
    assert admit([nsp, nsp], [], 2, limit) == [nsp]
    assert admit([plain, plain], [], 2, limit) == [plain, plain]


def test_budget_and_admission_keep_the_running_runs_inside_memory(monkeypatch):
    char, piece = (SimpleNamespace(config=config(**CHAR)), SimpleNamespace(config=config()))
    limit, lines = budget([[char], [char], [piece]], 2, available=24 * GIB)
    assert limit == int(0.9 * 24 * GIB) and len(lines) == 1 and "side by side only while" in lines[0]
    assert budget([[piece], [piece]], 2, available=24 * GIB) == (None, [])  # they fit anyway: no limit
    monkeypatch.setattr(memory, "available_bytes", lambda: None)
    assert budget([[char], [char]], 2) == (None, [])  # unknown memory (not Linux): as many as asked
    # admission: a character run beside a word-piece run fits, two character runs do not
    c1, c2, p1, p2 = [char], [char], [piece], [piece]
    assert admit([c1, c2, p1, p2], [], 2, limit) == [c1, p1]  # the first that fit, in order
    assert admit([c2, p2], [p1], 2, limit) == [c2]
    assert admit([c2, p2], [c1], 2, limit) == [p2]  # c2 waits for c1
    assert admit([c2], [c1], 2, limit) == []
    assert admit([c2, p2], [c1, p1], 2, limit) == []  # every worker busy
    assert admit([c1, c2], [], 2, None) == [c1, c2]  # no limit: as many as workers
    # a stacked group needs its runs' sum; one run larger than the machine still runs, alone, with a warning
    assert admit([[piece] * 3, p1], [p2], 2, 16 * GIB) == [p1]
    limit, lines = budget([[char]] * 2, 2, available=8 * GIB)
    assert "WARNING" in lines[-1] and "data.max_len" in lines[-1]
    assert admit([c1, c2], [], 2, limit) == [c1]


def test_available_bytes_reads_meminfo(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24683520 kB\nMemFree:  100 kB\nMemAvailable:   15731012 kB\n")
    assert available_bytes(meminfo) == 15731012 * 1024
    assert available_bytes(tmp_path / "missing") is None
    meminfo.write_text("MemTotal: 1 kB\n")
    assert available_bytes(meminfo) is None


def test_the_longest_prepared_sentence_bounds_the_estimate():
    """Word-piece batches pad to the longest training sentence (BBE NT: 90 pieces; the tiny corpus, read here:
    97), not to max_len 128; nsp's pairs can fill max_len, so they keep it."""
    from minimult.config import RunConfig
    from minimult.data.prepare import prepare
    from minimult.sweep.memory import data_key, longest_sequence, need

    cfg = config("tiny", **TINY_SETTINGS)
    prepared = prepare(RunConfig.from_dict(cfg).data)
    longest = longest_sequence(prepared)
    assert longest == 2 + int(prepared.train.lengths.max()) < cfg["data"]["max_len"]
    assert peak_bytes(cfg, longest) < peak_bytes(cfg) == peak_bytes(cfg, 10_000)
    nsp = resolve("tiny", {}, "nsp")[0].to_dict()
    assert peak_bytes(nsp, longest) == peak_bytes(nsp)
    task = SimpleNamespace(config=cfg)
    assert need([task, task], {data_key(cfg): longest}) == 2 * peak_bytes(cfg, longest)


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
