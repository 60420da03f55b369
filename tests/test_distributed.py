"""One run on several processes (minimult.distributed): every batch's rows shared out, gradients summed.

The multi-process tests spawn 2 ranks (gloo, CPU, tiny model) through the real torch.distributed; each
start costs a few seconds of imports, so each test starts as few as it can."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from minimult import distributed, ranks
from minimult.data import microbatches
from minimult.errors import MinimultError
from minimult.runs import Run, load_checkpoint, read_json
from minimult.train import train
from conftest import cli
from test_train import ROOT, TINY_ARGS, assert_one_line_error, quiet, tiny_cfg


# AdamW's first step moves a weight by lr*g/(|g| + eps): with eps far above every |g| that is (lr/eps)*g, a
# plain gradient step, so the weights after one step show the gradient itself (at the usual eps it would be
# ~lr*sign(g), blind to a gradient off by a factor). clip 0.05 is below the gradient's norm at the start, so
# clipping is active: clipping each rank's part instead of the summed gradient would show too.
GRADIENT_STEP = {"model.dropout": 0.0, "train.adam_eps": 1e3, "train.lr": 1e3, "train.weight_decay": 0.0,
                 "train.warmup_steps": 0, "train.clip": 0.05}


def _runs(tmp_path, name, specs, **overrides):
    runs = []
    for i, (mods, seed) in enumerate(specs):
        cfg, active = tiny_cfg(mods, **{"train.seed": seed, **overrides})
        runs.append(Run.create(cfg, active, tmp_path / f"{name}{i}", log=quiet))
    return runs


def _rows(run) -> list[dict]:
    return [json.loads(line) for line in run.metrics_path.read_text().splitlines()]


# ---------------------------------------------------------------------------------------------
# In one process: the shares and their weighting.


def test_shares_cover_every_row_once_and_their_losses_add_up_to_the_whole_batch():
    for B in range(0, 9):
        for N in (1, 2, 3, 4):
            parts = [distributed.share(B, ranks.World(r, N)) for r in range(N)]
            assert [i for p in parts for i in range(B)[p]] == list(range(B))
    from minimult.model import Bert, ModelConfig

    torch.manual_seed(0)
    model = Bert(ModelConfig(vocab_size=50, hidden=16, intermediate=32, heads=2, layers=2, max_positions=16,
                             dropout=0.0, nsp=True))
    B, T = 5, 7
    batch = {"input_ids": torch.randint(5, 50, (B, T)), "position_ids": torch.arange(T).expand(B, T),
             "token_type_ids": torch.zeros(B, T, dtype=torch.long),
             "attention_mask": torch.ones(B, T, dtype=torch.bool),
             "selected": torch.tensor([1, 3, 8, 15, 16, 22, 30, 34]), "nsp_labels": torch.tensor([0, 1, 1, 0, 1])}
    batch["targets"] = batch["input_ids"].flatten()[batch["selected"]]

    def loss_and_grads(b, totals=None):
        model.zero_grad()
        loss = model.mlm_loss(b["input_ids"], b["position_ids"], b["token_type_ids"], b["attention_mask"],
                              b["selected"], b["targets"], b["nsp_labels"], totals=totals)
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters()]

    full, full_grads = loss_and_grads(batch)
    totals = (len(batch["selected"]), B)
    parts = [loss_and_grads(microbatches.take(batch, distributed.share(B, ranks.World(r, 2))), totals)
             for r in range(2)]
    assert torch.allclose(parts[0][0] + parts[1][0], full, rtol=1e-6)
    for a, b, g in zip(parts[0][1], parts[1][1], full_grads):
        assert (a + b - g).abs().max() <= 1e-6 * g.abs().max(), (a + b - g).abs().max()


@pytest.mark.parametrize("key", ["nproc", "microbatches"])
def test_nproc_is_an_execution_setting_kept_out_of_fingerprints_folder_matches_and_resume_checks(tmp_path, key):
    from minimult.report.collect import _fingerprint
    from minimult.runs import save_checkpoint, write_json
    from minimult.sweep.plan import Task, _plain, state

    cfg, mods = tiny_cfg()
    two, _ = tiny_cfg(**{f"train.{key}": 2})
    older = cfg.to_dict()
    del older["train"][key]  # a run made before the setting existed
    assert _fingerprint(cfg.to_dict()) == _fingerprint(two.to_dict()) == _fingerprint(older)
    run = Run(tmp_path, two, mods)
    save_checkpoint(tmp_path / "checkpoint.pt", {}, None, 0, cfg, False)
    run.check_checkpoint_config(run.checkpoint())  # written with one value, resumed with another: accepted
    write_json(tmp_path / "config.json", two.to_dict())  # a sweep asking for one value finds its folder's run
    assert state(Task("0", "original", "", cfg.train.seed, str(tmp_path), _plain(cfg.to_dict()))) == "partial"
    lr, _ = tiny_cfg(**{"train.lr": cfg.train.lr / 2})  # (a setting that is no execution setting is refused)
    with pytest.raises(MinimultError, match="holds a run with another configuration: train.lr="):
        state(Task("0", "original", "", cfg.train.seed, str(tmp_path), _plain(lr.to_dict())))
    with pytest.raises(MinimultError, match=f"train.{key} must be >= 1"):
        tiny_cfg(**{f"train.{key}": 0})


# ---------------------------------------------------------------------------------------------
# Two processes.


@pytest.mark.parametrize("specs,clip", [([(None, 0)], 1e9), ([(None, 0), ("shift-special", 3)], 0.05)],
                         ids=["single-unclipped", "stacked-clipped"])
def test_one_step_on_two_processes_equals_one_process(tmp_path, specs, clip):
    """With dropout off, one step on 2 ranks (each half the rows, gradients summed, then clipped per model)
    gives the weights one process gives on the whole batch, up to float round-off: unclipped, the step is
    the gradient itself (a sum off by a factor would show); clipped, the clipping of the summed gradient."""
    from minimult.model import Bert

    one = _runs(tmp_path, "one", specs, **{**GRADIENT_STEP, "train.clip": clip})
    two = _runs(tmp_path, "two", specs, **{**GRADIENT_STEP, "train.clip": clip})
    train(one, stop_after=1, log=quiet)
    train(two, stop_after=1, log=quiet, nproc=2)
    for a, b in zip(one, two):
        A, B = (load_checkpoint(r.checkpoint_path)["model"] for r in (a, b))
        torch.manual_seed(a.cfg.train.seed)
        start = Bert(a.cfg.model).state_dict()  # the weights before the step (setup's seeded initialisation)
        moved = torch.cat([(A[k] - start[k]).flatten() for k in A]).norm().item()
        if clip < 1:
            assert moved == pytest.approx(clip, rel=0.01)  # a clipped gradient step
        else:
            assert moved > 0.05 * 10  # the whole gradient, unclipped: far above 0.05 and the tolerance below
        for k in A:
            assert torch.allclose(A[k], B[k], rtol=1e-6, atol=1e-7), k
        (la,), (lb,) = ([r["loss"] for r in _rows(run) if "loss" in r] for run in (a, b))
        assert lb == pytest.approx(la, rel=1e-6)
        assert read_json(b.path / "run.json")["processes"] == 2


def test_two_process_run_resumed_equals_an_uninterrupted_one(tmp_path):
    """Dropout on (drawn per rank, from the step's seed and the rank): interrupted and resumed on 2
    processes ends bit-identical to 2 processes uninterrupted, with rank 0's log rows once each."""
    over = {"train.epochs": 1, "train.checkpoint_every": 5, "train.eval_every": 10}
    (full,), (part,) = _runs(tmp_path, "full", [(None, 0)], **over), _runs(tmp_path, "part", [(None, 0)], **over)
    train([full], log=quiet, nproc=2)
    train([part], log=quiet, nproc=2, stop_after=10)
    assert load_checkpoint(part.checkpoint_path)["step"] == 10
    train([part], log=quiet, nproc=2, resume=True)
    a, b = (load_checkpoint(r.checkpoint_path) for r in (full, part))
    assert a["step"] == b["step"] == 25 and b["complete"]
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    drop = lambda row: {k: v for k, v in row.items() if k not in ("tokens_per_s", "elapsed_s")}  # noqa: E731
    assert [drop(r) for r in _rows(full)] == [drop(r) for r in _rows(part)]
    assert [r["step"] for r in _rows(full) if "eval" in r] == [10, 20, 25]


def _rank_process(launcher: int, rank: int) -> int | None:
    """The pid of the launcher's child that runs `rank` (ranks name themselves minimult-rankN)."""
    try:
        children = open(f"/proc/{launcher}/task/{launcher}/children").read().split()
    except OSError:
        return None
    for pid in children:
        try:
            if open(f"/proc/{pid}/comm").read().strip() == f"minimult-rank{rank}":
                return int(pid)
        except OSError:
            continue
    return None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds the rank's process in /proc")
def test_a_rank_that_dies_ends_the_run_in_one_line_and_keeps_the_checkpoint(tmp_path):
    from minimult.data.run_data import RunData

    cfg, mods = tiny_cfg()
    RunData(cfg, mods).prepare(quiet)  # the data cached first, so stderr holds nothing but the error
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "minimult.cli", "pretrain", *TINY_ARGS, "--epochs", "400",
                             "--set", "train.checkpoint_every=5", "--nproc", "2", "--out", str(out)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 600  # a guard against waiting forever, not a timing assertion
        victim = None
        while victim is None and proc.poll() is None and time.monotonic() < deadline:
            if (out / "checkpoint.pt").is_file():
                victim = _rank_process(proc.pid, 1)
            time.sleep(0.2)
        assert victim is not None, "the run never wrote a checkpoint with rank 1 alive"
        os.kill(victim, signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert_one_line_error(subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr),
                          "training process 1 of 2 died (killed by SIGKILL)", "checkpoint is kept")
    ckpt = load_checkpoint(out / "checkpoint.pt")  # the last one, whole
    assert ckpt["step"] >= 5 and ckpt["step"] % 5 == 0 and not ckpt["complete"]
    assert read_json(out / "run.json")["status"] == "training"


# ---------------------------------------------------------------------------------------------
# How many processes, and that none outlives the process that started them.


def test_the_world_a_launcher_describes_is_read_and_checked(monkeypatch):
    """RANK / WORLD_SIZE / LOCAL_RANK as torchrun sets them: one process is no world; LOCAL_RANK defaults to
    RANK; a rank outside the world, no MASTER_ADDR/MASTER_PORT or a value that is no number is one error;
    --nproc may be 1 or the launched world's size."""
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    assert ranks.from_env() is None
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert ranks.from_env() is None  # a world of one process
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    with pytest.raises(MinimultError, match="MASTER_PORT is not"):
        ranks.from_env()
    monkeypatch.setenv("MASTER_PORT", "29500")
    monkeypatch.setenv("RANK", "1")
    world = ranks.from_env()
    assert world == ranks.World(1, 2, 1) and not world.main
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert ranks.from_env() == ranks.World(1, 2, 0) and not ranks.from_env().main  # rank 1 on its own machine
    assert ranks.World(0, 2, 1).main
    monkeypatch.setenv("RANK", "2")
    with pytest.raises(MinimultError, match=r"RANK 2 is not in 0\.\.1"):
        ranks.from_env()
    monkeypatch.setenv("RANK", "one")
    with pytest.raises(MinimultError, match="not whole numbers"):
        ranks.from_env()
    with pytest.raises(MinimultError, match="train.nproc must be >= 1, got 0"):
        ranks.check_nproc(0, None)
    ranks.check_nproc(1, ranks.World(0, 4))
    ranks.check_nproc(4, ranks.World(0, 4))
    with pytest.raises(MinimultError, match="--nproc 2 asks for 2 processes, but this is one of the 4"):
        ranks.check_nproc(2, ranks.World(0, 4))


def test_a_failed_run_is_told_in_one_line_by_the_rank_that_knows_why(tmp_path):
    """A rank's own error first (the lowest rank's, in whatever order they came); else a rank that died without
    a word (one the launcher stopped is no such rank); else the lowest rank's crash; and what is kept."""
    kept = lambda: "K"  # noqa: E731
    assert ranks._failure([2, 2], {1: ("error", "disk full"), 0: ("error", "bad input")}, set(), kept) == "bad input"
    assert ranks._failure([1, -9], {0: ("crash", "RuntimeError: x")}, set(), kept) == (
        "training process 1 of 2 died (killed by SIGKILL); the others were stopped: K")
    assert ranks._failure([-15, 1], {1: ("crash", "RuntimeError: x")}, {0}, kept) == (
        "training process 1 of 2 failed (RuntimeError: x); the others were stopped: K")
    assert ranks._failure([1, 1], {1: ("crash", "B"), 0: ("crash", "A")}, set(), kept) == (
        "training process 0 of 2 failed (A); the others were stopped: K")
    assert ranks._failure([0, -15], {}, {1}, kept) == (  # every rank that ended badly was stopped here
        "training process 1 of 2 ended (killed by SIGTERM); the others were stopped: K")
    assert ranks._how_it_ended(3) == "exit code 3" and ranks._how_it_ended(-15) == "killed by SIGTERM"
    assert ranks._how_it_ended(-200) == "killed by signal 200"
    (tmp_path / "checkpoint.pt").write_bytes(b"x")
    assert ranks.kept_checkpoints([tmp_path / "checkpoint.pt", tmp_path / "missing.pt"]) == (
        f"the last checkpoint is kept ({tmp_path / 'checkpoint.pt'}); --resume continues from it")
    assert ranks.kept_checkpoints([tmp_path / "missing.pt"]) == "no checkpoint had been written yet"


@pytest.mark.parametrize("how", ["--nproc", "--set"])
def test_more_processes_than_cores_are_refused_in_one_line_before_anything_is_written(tmp_path, monkeypatch, how):
    """More ranks than cores only wait for each other, each holding the whole model (`--nproc 99` on 2 cores
    once started 99 torch processes); MINIMULT_MAX_NPROC allows more on purpose."""
    n = ranks.cpu_count() + 1
    monkeypatch.delenv(ranks.MAX_NPROC, raising=False)
    given = ["--nproc", str(n)] if how == "--nproc" else ["--set", f"train.nproc={n}"]
    out = tmp_path / "run"
    refused = cli("pretrain", *TINY_ARGS, *given, "--device", "cpu", "--stop-after", "1", "--out", str(out))
    assert_one_line_error(refused, f"{n} processes on CPU need a core each", f"may use {n - 1}",
                          f"MINIMULT_MAX_NPROC={n}")
    assert not out.exists()
    monkeypatch.setenv(ranks.MAX_NPROC, str(n))
    distributed.check_devices("cpu", n)  # allowed on purpose
    for bad in ("0", "two"):
        monkeypatch.setenv(ranks.MAX_NPROC, bad)
        with pytest.raises(MinimultError, match=f"MINIMULT_MAX_NPROC='{bad}': not a whole number >= 1"):
            distributed.check_devices("cpu", 2)


# Runs `pretrain ARGS` as a child subreaper (PR_SET_CHILD_SUBREAPER, as a container's init or systemd is: the
# launcher's orphans come here, not to pid 1), SIGTERMs it in the phase asked, and prints the launcher's exit
# code and which of its children still live DEADLINE s later (then kills and reaps them).
TERMINATE_IN = r"""
import ctypes, json, os, signal, subprocess, sys, time
phase, deadline, args = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)
launcher = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
seen, spawned, named_at, start = {}, set(), None, time.monotonic()

def look():
    try:
        tasks = os.listdir(f"/proc/{launcher.pid}/task")
    except OSError:
        return
    for task in tasks:
        try:
            pids = open(f"/proc/{launcher.pid}/task/{task}/children").read().split()
        except OSError:
            continue
        for pid in pids:
            try:
                seen[int(pid)] = open(f"/proc/{pid}/comm").read().strip()
                if b"spawn_main" in open(f"/proc/{pid}/cmdline", "rb").read():
                    spawned.add(int(pid))
            except OSError:
                pass

def alive(pid):
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False

while launcher.poll() is None and time.monotonic() - start < 600:
    look()
    ranks = [c for c in seen.values() if c.startswith("minimult-rank")]
    if phase == "starting" and len(spawned) == 2:  # both ranks started, still importing
        break
    if phase == "started" and len(ranks) == 2:
        named_at = named_at or time.monotonic()
        if time.monotonic() - named_at > 1:
            break
    time.sleep(0.02)
look()
launcher.send_signal(signal.SIGTERM)
code = launcher.wait()
end = time.monotonic() + deadline
while time.monotonic() < end and any(alive(p) for p in seen):
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass
    time.sleep(0.1)
left = {p: seen[p] for p in seen if alive(p)}
for p in left:
    os.kill(p, signal.SIGKILL)
print(json.dumps({"code": code, "ranks": len(spawned), "seen": sorted(seen.values()), "left": sorted(left.values())}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a child subreaper and /proc are Linux's")
@pytest.mark.parametrize("phase", ["starting", "started"])
def test_a_terminated_launcher_takes_every_rank_with_it_in_every_phase(tmp_path, phase):
    """`kill -TERM` of `pretrain --nproc 2` while its ranks import torch (before they could ask the kernel to
    end them with it) or once they run: the launcher ends them, then itself as SIGTERM would; a rank whose
    launcher is gone before its PR_SET_PDEATHSIG ends itself, whoever adopted it (once 99 ranks trained on)."""
    out = tmp_path / "run"
    script = [sys.executable, "-c", TERMINATE_IN, phase, "10", sys.executable, "-m", "minimult.cli", "pretrain",
              *TINY_ARGS, "--device", "cpu", "--epochs", "400", "--nproc", "2", "--out", str(out)]
    seen = json.loads(subprocess.run(script, cwd=ROOT, capture_output=True, text=True, timeout=900).stdout)
    assert seen["ranks"] == 2, seen  # both ranks had started
    if phase == "started":
        assert {"minimult-rank0", "minimult-rank1"} <= set(seen["seen"]), seen
    assert seen["left"] == [] and seen["code"] == -signal.SIGTERM, seen
