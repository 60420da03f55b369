"""Pretraining: mods reach the batches, resume is exact, loss falls, bad input fails cleanly."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import ROOT, TINY_SETTINGS, cli
from minimult.data.batching import SequenceSet, plan_epoch, steps_per_epoch
from minimult.config import resolve
from minimult.data.prepare import prepare
from minimult.runs import read_json, write_json
from minimult.data.run_data import RunData
from minimult.runs import load_checkpoint
from minimult.train import Loop, Progress, Stepper, lr_at, pretrain, setup

ROOT = Path(__file__).resolve().parents[1]


def tiny_cfg(mods=None, **overrides):
    return resolve("tiny", {**TINY_SETTINGS, **overrides}, mods)


def quiet(_):
    pass


def new_run(tmp_path, name, cfg):
    d = tmp_path / name
    d.mkdir()
    write_json(d / "config.json", cfg.to_dict())
    return d


def first_batch(mods):
    cfg, active = tiny_cfg(mods)
    data = RunData(cfg, active)
    sides = data.views("train")
    seqs = SequenceSet.from_sides(sides, data.layouts, "cpu")
    n = sides[0].num_sentences
    return cfg, seqs.batch(np.array([0, n])), sides  # sentence 0 in English and in language 1


def test_batches_default_share_positions_segments_and_specials():
    cfg, b, sides = first_batch(None)
    L = len(sides[0].sentence(0))
    assert b.input_ids[0, 0] == 2 and b.input_ids[1, 0] == 2  # shared [CLS]
    assert b.input_ids[0, L + 1] == 3 and b.input_ids[1, L + 1] == 3  # shared [SEP]
    assert torch.equal(b.input_ids[1, 1:L + 1], b.input_ids[0, 1:L + 1] + 256)
    assert torch.equal(b.position_ids[0], b.position_ids[1])
    assert int(b.token_type_ids.abs().sum()) == 0


def test_lang_pos_feeds_offset_positions_and_segment_one():
    cfg, b, _ = first_batch("lang-pos")
    T = b.input_ids.shape[1]
    assert torch.equal(b.position_ids[0], torch.arange(T))
    assert torch.equal(b.position_ids[1], torch.arange(T) + 128)
    assert b.token_type_ids[0].eq(0).all() and b.token_type_ids[1].eq(1).all()
    assert cfg.model.max_positions == 256 and cfg.model.type_vocab_size >= 2


def test_shift_special_shifts_only_the_second_languages_specials():
    _, plain, _ = first_batch(None)
    cfg, b, sides = first_batch("shift-special")
    L = len(sides[0].sentence(0))
    assert b.input_ids[0, 0] == 2 and b.input_ids[1, 0] == 2 + 256
    assert b.input_ids[1, L + 1] == 3 + 256
    assert torch.equal(b.input_ids[0], plain.input_ids[0])  # English unchanged
    assert torch.equal(b.input_ids[1, 1:L + 1], plain.input_ids[1, 1:L + 1])  # words unchanged


def test_bucketed_plan_covers_every_sequence_once_and_depends_on_seed_and_epoch():
    lengths = np.random.default_rng(0).integers(1, 60, size=1000)
    plan = plan_epoch(lengths, 32, seed=1, epoch=0)
    assert sorted(np.concatenate(plan).tolist()) == list(range(1000))
    assert len(plan) == steps_per_epoch(1000, 32)
    spread = np.mean([lengths[b].max() - lengths[b].min() for b in plan])
    assert spread < 10  # bucketed: similar lengths together (random batches would spread ~55)
    again = plan_epoch(lengths, 32, seed=1, epoch=0)
    assert all(np.array_equal(a, b) for a, b in zip(plan, again))
    assert not all(np.array_equal(a, b) for a, b in zip(plan, plan_epoch(lengths, 32, seed=1, epoch=1)))


def test_lr_schedule_warms_up_then_decays_to_zero():
    lrs = [lr_at(s, 100, 1.0, 10) for s in range(100)]
    assert lrs[9] == pytest.approx(1.0) and lrs[0] == pytest.approx(0.1)
    assert all(a >= b for a, b in zip(lrs[9:], lrs[10:])) and lr_at(100, 100, 1.0, 10) == 0.0
    # the decay starts at the peak and is linear over the steps after warm-up (halfway: half the peak)
    assert lrs[10] == pytest.approx(1.0) and lrs[55] == pytest.approx(0.5) and lrs[99] == pytest.approx(1 / 90)


def test_every_step_draws_its_own_masking_and_dropout_from_the_seed(tmp_path):
    """One batch at two steps is masked (dropout off) and dropped out differently; at one step, the same way
    every time: a step's draws come from (seed, step) alone, which is what makes a resume exact."""
    from minimult.runs import Run

    cfg, mods = tiny_cfg(None)
    member = setup(Run.create(cfg, mods, tmp_path / "run", log=quiet), torch.device("cpu"), quiet)
    stepper = Stepper([member])
    tc = cfg.train
    index = plan_epoch(member.train_set.lengths_np, tc.batch_size, tc.seed, 0, tc.batching)[0]
    with torch.no_grad():
        for training in (False, True):  # masking alone, then masking and dropout
            stepper.model.train(training)
            at = [float(stepper.losses(step, [index])) for step in (3, 4, 3)]
            assert at[0] == at[2] != at[1], (training, at)


def test_train_clip_cuts_every_steps_gradient(tmp_path):
    """train.clip bounds each step's gradient norm before AdamW's step. AdamW nearly ignores a gradient's scale,
    so a bound far below the gradients' norms shows in the weights through adam_eps: after 3 steps they differ
    from those of a bound no gradient reaches."""
    weights = []
    for clip in (1e-9, 1e9):
        cfg, mods = tiny_cfg(None, **{"train.clip": clip})
        pretrain(cfg, mods, new_run(tmp_path, f"clip{clip}", cfg), log=quiet, stop_after=3)
        weights.append(load_checkpoint(tmp_path / f"clip{clip}" / "checkpoint.pt")["model"])
    assert max((weights[0][k] - weights[1][k]).abs().max().item() for k in weights[0]) > 1e-4


@pytest.mark.parametrize("K", [1, 2])
def test_progress_logs_each_runs_mean_loss_and_share_of_tokens_since_its_last_line(monkeypatch, K):
    """A progress line every 5 steps: each run's mean loss over those steps, its share of the tokens per
    second, and the time left from the steps of this stretch (a resumed one begins at step 20)."""
    from types import SimpleNamespace

    import minimult.train

    class Sink(list):
        write, flush = list.append, lambda self: None

    sinks, lines = [Sink() for _ in range(K)], []
    loop = Loop([SimpleNamespace(run=None)] * K, None, None, spe=10, total=100, start_step=20, end=100,
                log=lines.append, metrics=sinks, t0=0.0, seconds_before=7.0)
    progress = Progress(log_every=5, checkpoint_every=1000)
    progress.window_t = 0.0
    monkeypatch.setattr(minimult.train.time, "time", lambda: 10.0)
    for step, loss in zip(range(21, 27), [1.0, 2.0, 6.0, 5.0, 1.0, 9.0]):
        progress.add(torch.tensor([loss, 2 * loss][:K]), tokens=100)
        loop.step = step
        progress(loop)
    rows = [[json.loads(r) for r in sink] for sink in sinks]
    assert [[(r["step"], r["loss"], r["tokens_per_s"], r["elapsed_s"]) for r in rs] for rs in rows] == [
        [(25, 3.0 * (k + 1), 50.0 / K, 17.0)] for k in range(K)]  # 500 tokens in 10 s; 7 s before this stretch
    assert len(lines) == 1 and lines[0].endswith("0m10s elapsed, 2m30s left")  # 10 s / 5 steps x 75 to go


@pytest.mark.parametrize("precision", ["auto", "bf16"])
def test_resumed_run_is_bit_identical(tmp_path, precision):
    cfg, mods = tiny_cfg(None, **{"train.checkpoint_every": 7, "train.precision": precision})
    full = new_run(tmp_path, "full", cfg)
    part = new_run(tmp_path, "part", cfg)
    pretrain(cfg, mods, full, log=quiet)
    pretrain(cfg, mods, part, log=quiet, stop_after=14)  # "killed" after 14 of 50 steps
    assert load_checkpoint(part / "checkpoint.pt")["step"] == 14
    pretrain(cfg, mods, part, resume=True, log=quiet)
    a, b = (load_checkpoint(d / "checkpoint.pt") for d in (full, part))
    assert a["step"] == b["step"] == 50 and b["complete"]
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    steps = [int(line.split('"step": ')[1].split(",")[0]) for line in (part / "metrics.jsonl").read_text().splitlines()]
    assert steps == sorted(set(steps))  # no duplicated log rows after resuming
    assert read_json(part / "run.json")["precision"] == ("fp32" if precision == "auto" else "bf16")


def test_an_interrupted_run_says_so_at_its_last_checkpoint_and_resumes_from_it(tmp_path):
    """Ctrl-C mid-training (KeyboardInterrupt, here from the progress line of step 20): run.json says
    `interrupted` at step 14, its last checkpoint's (step 0 before the first), which the report names and a
    resume goes on from; it then ends bit-identical to an uninterrupted run."""
    from minimult.report.collect import run_status

    cfg, mods = tiny_cfg(None, **{"train.checkpoint_every": 7})
    full, part = new_run(tmp_path, "full", cfg), new_run(tmp_path, "part", cfg)
    pretrain(cfg, mods, full, log=quiet)

    def ctrl_c_at_step(n):
        def log(line):
            if line.lstrip().startswith("step") and int(line.split()[1].split("/")[0]) >= n:
                raise KeyboardInterrupt
        return log

    with pytest.raises(KeyboardInterrupt):  # before its first checkpoint: where a resume begins is step 0
        pretrain(cfg, mods, part, log=ctrl_c_at_step(3))
    assert run_status(part) == "run.json status: interrupted, step 0 of 50" and not (part / "checkpoint.pt").exists()
    with pytest.raises(KeyboardInterrupt):
        pretrain(cfg, mods, part, resume=True, log=ctrl_c_at_step(20))
    meta = read_json(part / "run.json")
    assert (meta["status"], meta["steps"]) == ("interrupted", load_checkpoint(part / "checkpoint.pt")["step"])
    assert 14 <= meta["steps"] < 50 and run_status(part) == f"run.json status: interrupted, step {meta['steps']} of 50"
    kept = meta["steps"]
    with pytest.raises(KeyboardInterrupt):  # resumed, then stopped before its next checkpoint: still that step
        pretrain(cfg, mods, part, resume=True, log=ctrl_c_at_step(kept + 1))
    assert read_json(part / "run.json")["steps"] == kept

    def crash_at_step_30(line):  # as a kill -9 of the resumed stretch: nothing written at the end
        if line.lstrip().startswith("step") and int(line.split()[1].split("/")[0]) >= 30:
            raise RuntimeError("crash")

    with pytest.raises(RuntimeError):
        pretrain(cfg, mods, part, resume=True, log=crash_at_step_30)
    meta = read_json(part / "run.json")  # training again: the earlier stretch's step is no longer claimed
    assert meta["status"] == "training" and "steps" not in meta and run_status(part) == "run.json status: training"
    pretrain(cfg, mods, part, resume=True, log=quiet)
    a, b = (load_checkpoint(d / "checkpoint.pt")["model"] for d in (full, part))
    assert read_json(part / "run.json")["status"] == "complete" and all(torch.equal(a[k], b[k]) for k in a)
    logged = [(r["step"], r["loss"]) for r in map(json.loads, (part / "metrics.jsonl").read_text().splitlines())]
    assert logged == [(r["step"], r["loss"]) for r in map(json.loads, (full / "metrics.jsonl").read_text().splitlines())]


def test_ctrl_c_of_pretrain_says_in_one_line_which_step_the_run_keeps(tmp_path, monkeypatch):
    """Ctrl-C of `minimult pretrain` (here at the progress line of step 20, checkpoints every 7 steps): one line
    names the run folder, the step its last checkpoint keeps and the command that goes on; exit code 130."""
    import click

    echo = click.echo

    def ctrl_c_at_step_20(message=None, *args, **kwargs):
        if str(message).startswith("step") and int(str(message).split()[1].split("/")[0]) >= 20:
            raise KeyboardInterrupt
        echo(message, *args, **kwargs)

    monkeypatch.setattr(click, "echo", ctrl_c_at_step_20)
    run = tmp_path / "run"
    sets = [a for k, v in {**TINY_SETTINGS, "train.checkpoint_every": 7}.items() for a in ("--set", f"{k}={v}")]
    stopped = cli("pretrain", "--preset", "tiny", *sets, "--out", run)
    kept, total = load_checkpoint(run / "checkpoint.pt")["step"], read_json(run / "run.json")["total_steps"]
    assert stopped.returncode == 130 and 14 <= kept < 20 < total
    assert stopped.stderr.splitlines()[-1] == (f"interrupted: {run} keeps step {kept} of {total} (continue with: "
                                               f"minimult pretrain --resume {run})")  # after the data's notes


def test_kill_of_pretrain_stops_it_as_ctrl_c_does(tmp_path):
    """`kill PID` (SIGTERM) of a one-process `minimult pretrain`: the run keeps its last checkpoint, run.json says
    `interrupted` at that step, and one line says so with the command that goes on; exit code 130."""
    import signal
    import time

    run = tmp_path / "run"
    sets = [a for k, v in {**TINY_SETTINGS, "train.checkpoint_every": 5, "train.epochs": 400}.items()
            for a in ("--set", f"{k}={v}")]
    proc = subprocess.Popen([sys.executable, "-m", "minimult.cli", "pretrain", "--preset", "tiny", *sets, "--out",
                             str(run)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    deadline = time.monotonic() + 300
    while not (run / "checkpoint.pt").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    said = proc.stderr.read()
    assert proc.wait(timeout=120) == 130, said
    meta = read_json(run / "run.json")
    assert meta["status"] == "interrupted" and meta["steps"] == load_checkpoint(run / "checkpoint.pt")["step"] >= 5
    assert said.splitlines()[-1] == (f"interrupted: {run} keeps step {meta['steps']:,} of {meta['total_steps']:,} "
                                     f"(continue with: minimult pretrain --resume {run})"), said


def test_a_resumed_run_keeps_the_threads_it_trained_with(tmp_path):
    """Without train.threads a run trains with the process's threads (a sweep's workers set cores / runs); resumed
    in a process with other threads (a sweep with fewer runs left), it keeps the count of its last stretch, which
    run.json records, and so equals the uninterrupted run bit for bit (another count changes fp32 sums)."""
    cfg, mods = tiny_cfg(None, **{"train.checkpoint_every": 7, "train.threads": 0, "model.layers": 4})
    full, part = new_run(tmp_path, "full", cfg), new_run(tmp_path, "part", cfg)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        pretrain(cfg, mods, full, log=quiet)
        pretrain(cfg, mods, part, log=quiet, stop_after=14)
        torch.set_num_threads(1)
        pretrain(cfg, mods, part, resume=True, log=quiet)
    finally:
        torch.set_num_threads(before)
    a, b = (load_checkpoint(d / "checkpoint.pt") for d in (full, part))
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert [s["threads"] for s in read_json(part / "run.json")["execution"]] == [2]


def test_logged_seconds_add_up_every_stretch_where_the_clock_restarted(tmp_path):
    """A log from versions whose checkpoints did not carry the seconds: each stretch's clock starts again, and its
    last value adds to the stretches before; `up_to_step` counts the rows up to and at that step."""
    from minimult.runs import logged_seconds

    log = tmp_path / "metrics.jsonl"
    rows = [(5, 1.0), (10, 3.0), (5, 0.5), (10, 2.0), ({"eval": {}}, None), (15, 1.0), (20, 4.0)]
    log.write_text("".join(json.dumps({"step": s, "elapsed_s": x} if x is not None else s) + "\n" for s, x in rows))
    assert logged_seconds(log) == 3.0 + 2.0 + 4.0
    assert logged_seconds(log, up_to_step=15) == 3.0 + 2.0 + 1.0 and logged_seconds(log, up_to_step=4) is None
    assert logged_seconds(tmp_path / "none.jsonl") is None


def test_out_may_name_an_empty_folder_but_never_one_holding_files(tmp_path):
    from minimult.errors import MinimultError
    from minimult.runs import create_run_dir

    (tmp_path / "empty").mkdir()
    assert create_run_dir(tmp_path / "empty", "lang-pos", 0) == tmp_path / "empty"
    (tmp_path / "empty" / "notes.txt").write_text("mine")
    with pytest.raises(MinimultError, match="already exists"):
        create_run_dir(tmp_path / "empty", "lang-pos", 0)
    assert create_run_dir(tmp_path / "new" / "run", "lang-pos", 0).is_dir()  # parents made


@pytest.mark.parametrize("older_checkpoint", [False, True])
def test_a_resumed_runs_training_seconds_count_every_stretch(tmp_path, older_checkpoint):
    """A run killed after its checkpoint at step 14 and resumed: metrics.jsonl's elapsed_s goes on from the
    checkpoint's training seconds (never back to zero) and run.json's train_seconds is the whole run's, not the
    last stretch's. A checkpoint from before they were saved takes them from the metrics log."""
    cfg, mods = tiny_cfg(None, **{"train.checkpoint_every": 7})
    run = new_run(tmp_path, "part", cfg)
    pretrain(cfg, mods, run, log=quiet, stop_after=14)
    ckpt = load_checkpoint(run / "checkpoint.pt")
    before = ckpt["train_seconds"]
    assert before > 0
    if older_checkpoint:
        del ckpt["train_seconds"]
        torch.save(ckpt, run / "checkpoint.pt")
        before = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()][-1]["elapsed_s"]
    meta = read_json(run / "run.json")
    del meta["train_seconds"]  # killed: the first stretch never wrote its run.json
    (run / "run.json").write_text(json.dumps(meta))
    pretrain(cfg, mods, run, resume=True, log=quiet)
    elapsed = [json.loads(x)["elapsed_s"] for x in (run / "metrics.jsonl").read_text().splitlines()
               if "elapsed_s" in x]
    assert elapsed == sorted(elapsed) and elapsed[0] <= before < elapsed[-1]
    total = read_json(run / "run.json")["train_seconds"]
    assert elapsed[-1] <= load_checkpoint(run / "checkpoint.pt")["train_seconds"] <= total  # last row, checkpoint


def test_bf16_training_differs_from_fp32_only_by_rounding(tmp_path):
    """train.precision=bf16 really runs the matrix products in bf16 on a CPU (the weights end
    different from an fp32 run's) and still learns as well: the loss curves stay close."""
    runs = {}
    for precision in ("fp32", "bf16"):
        cfg, mods = tiny_cfg(None, **{"train.epochs": 6, "train.lr": 1e-2, "train.precision": precision})
        runs[precision] = new_run(tmp_path, precision, cfg)
        pretrain(cfg, mods, runs[precision], log=quiet)
    a, b = (load_checkpoint(d / "checkpoint.pt")["model"] for d in runs.values())
    assert a.keys() == b.keys() and all(b[k].dtype == torch.float32 for k in b)  # fp32 master weights
    assert not all(torch.equal(a[k], b[k]) for k in a)
    losses = {p: [json.loads(line)["loss"] for line in (d / "metrics.jsonl").read_text().splitlines()]
              for p, d in runs.items()}
    assert len(losses["fp32"]) == len(losses["bf16"])
    assert losses["bf16"][-1] < losses["bf16"][0] - 0.3  # it learns (6.19 -> 5.64 here)
    assert max(abs(x - y) for x, y in zip(losses["fp32"], losses["bf16"])) < 0.02, losses  # 0.002 here


def test_tiny_training_lowers_the_mlm_loss_substantially(tmp_path):
    cfg, mods = tiny_cfg(None, **{"train.epochs": 12, "train.lr": 1e-2})
    run = new_run(tmp_path, "learn", cfg)
    pretrain(cfg, mods, run, log=quiet)
    rows = [eval(l) for l in (run / "metrics.jsonl").read_text().splitlines()]  # noqa: S307 - our own JSON
    first, last = rows[0]["loss"], np.mean([r["loss"] for r in rows[-3:]])
    assert first > np.log(512) - 0.5  # starts near uniform over 2 x 256 ids
    assert last < first - 0.5, (first, last)  # perplexity down by more than 40%


def test_untrained_writes_the_initial_model_without_a_step(tmp_path):
    cfg, mods = tiny_cfg("untrained")
    assert cfg.train.epochs == 0
    run = new_run(tmp_path, "untrained", cfg)
    pretrain(cfg, mods, run, log=quiet)
    ckpt = load_checkpoint(run / "checkpoint.pt")
    assert ckpt["step"] == 0 and ckpt["complete"]
    torch.manual_seed(cfg.train.seed)
    from minimult.model import Bert

    fresh = Bert(cfg.model).state_dict()
    assert all(torch.equal(fresh[k], ckpt["model"][k]) for k in fresh)


def test_overparam_sets_bert_base_sizes_and_lr():
    cfg, _ = tiny_cfg("overparam")
    m = cfg.model
    assert (m.hidden, m.intermediate, m.heads, m.layers, cfg.train.lr) == (768, 3072, 12, 12, 1e-4)


def test_no_parallel_doubles_epochs():
    assert tiny_cfg("no-parallel")[0].train.epochs == 2 * tiny_cfg(None)[0].train.epochs


def process_cli(*args):
    """`minimult ARGS` in a process of its own, the other process to a lock this one holds (the other tests run
    the CLI in this process: `conftest.cli`)."""
    return subprocess.run([sys.executable, "-m", "minimult.cli", *args], capture_output=True, text=True, cwd=ROOT)


TINY_ARGS = ["--preset", "tiny", "--train-file", TINY_SETTINGS["data.train"],
             "--dev-file", TINY_SETTINGS["data.dev"],
             "--set", "data.vocab_size=256"]


def assert_one_line_error(proc, *fragments):
    assert proc.returncode != 0
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), proc.stderr
    assert "Traceback" not in proc.stderr
    for f in fragments:
        assert f in lines[0], lines[0]


def test_cli_pretrain_export_and_refusals(tmp_path):
    out = tmp_path / "run"
    proc = cli("pretrain", *TINY_ARGS, "--epochs", "1", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "parameters" in proc.stdout and "tok/s" in proc.stdout and "left" in proc.stdout
    for name in ("config.json", "run.json", "checkpoint.pt", "metrics.jsonl", "vocab.txt", "tokenizer.json"):
        assert (out / name).is_file(), name
    # the same folder again: refused, nothing lost
    before = (out / "checkpoint.pt").read_bytes()
    assert_one_line_error(cli("pretrain", *TINY_ARGS, "--out", str(out)), "already exists")
    assert (out / "checkpoint.pt").read_bytes() == before
    # export loads in transformers
    hf = tmp_path / "hf"
    assert cli("export", str(out), "--hf", str(hf)).returncode == 0
    # export never deletes: a folder holding a file, or the run folder itself, is refused and kept
    keep = tmp_path / "mine"
    keep.mkdir()
    (keep / "notes.txt").write_text("hi")
    assert_one_line_error(cli("export", str(out), "--hf", str(keep)), "not empty")
    assert_one_line_error(cli("export", str(out), "--hf", str(out)), "is the run folder")
    assert (keep / "notes.txt").read_text() == "hi" and (out / "checkpoint.pt").is_file()
    from transformers import BertForMaskedLM

    assert BertForMaskedLM.from_pretrained(hf).config.vocab_size == 512
    # resuming a complete run does nothing harmful
    proc = cli("pretrain", "--resume", str(out))
    assert proc.returncode == 0 and "already complete" in proc.stdout


def test_cli_stop_after_stops_with_a_checkpoint_and_resume_goes_on_as_if_never_stopped(tmp_path):
    """`pretrain --stop-after 5`: a checkpoint at update 5 of the whole schedule, the run marked unfinished and
    the command to continue it printed; `--resume` then ends where an uninterrupted run ends, bit for bit."""
    full, part = tmp_path / "full", tmp_path / "part"
    assert cli("pretrain", *TINY_ARGS, "--epochs", "2", "--out", str(full)).returncode == 0
    proc = cli("pretrain", *TINY_ARGS, "--epochs", "2", "--stop-after", "5", "--out", str(part))
    assert proc.returncode == 0, proc.stderr
    total = read_json(full / "run.json")["total_steps"]
    assert f"stopped at step 5 of {total}" in proc.stdout and f"--resume {part}" in proc.stdout
    assert load_checkpoint(part / "checkpoint.pt")["step"] == 5
    assert read_json(part / "run.json")["status"] == "interrupted"
    assert_one_line_error(cli("pretrain", "--resume", str(part), "--stop-after", "5"), "has trained 5 steps already")
    proc = cli("pretrain", "--resume", str(part), "--set", "train.threads=1", "--device", "cpu")  # how it executes
    assert proc.returncode == 0 and "stopped" not in proc.stdout, proc.stderr
    assert proc.stdout.splitlines()[-1] == f"done: {part}"  # as a run that was never stopped ends
    a, b = (load_checkpoint(d / "checkpoint.pt") for d in (full, part))
    assert a["step"] == b["step"] == total and b["complete"] and read_json(part / "run.json")["status"] == "complete"
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])


def test_cli_bad_input(tmp_path):
    assert_one_line_error(cli("pretrain", *TINY_ARGS, "--mods", "lang-pos,nope"), "unknown mod", "lang-pos")
    assert_one_line_error(cli("pretrain", *TINY_ARGS, "--epochs", "0"), "--epochs")
    assert_one_line_error(cli("pretrain", "--resume", str(tmp_path / "missing")), "not a run folder")
    assert_one_line_error(cli("pretrain", *TINY_ARGS, "--mask-probs", "0.5,0.5,0.5,0"), "sum")
    assert_one_line_error(cli("pretrain", *TINY_ARGS, "--set", "train.precision=fp16"), "unknown precision 'fp16'")
    # a knn share in the mix needs the mod that builds the neighbour table; no run folder is left behind
    assert_one_line_error(cli("pretrain", *TINY_ARGS, "--mask-probs", "0.5,0.1,0.1,0.3", "--out", str(tmp_path / "k")),
                          "needs neighbours", "--mods knn-replace")
    assert not (tmp_path / "k").exists()


def test_corrupt_checkpoint_and_nan_loss_fail_cleanly(tmp_path):
    out = tmp_path / "run"
    assert cli("pretrain", *TINY_ARGS, "--epochs", "1", "--out", str(out)).returncode == 0
    (out / "checkpoint.pt").write_bytes(b"not a checkpoint")
    assert_one_line_error(cli("pretrain", "--resume", str(out)), "corrupt")
    assert_one_line_error(cli("export", str(out), "--hf", str(tmp_path / "hf")), "corrupt")

    nan = tmp_path / "nan"
    proc = cli("pretrain", *TINY_ARGS, "--set", "train.lr=1e12", "--set", "train.clip=1e30",
               "--set", "train.checkpoint_every=1", "--out", str(nan))
    assert_one_line_error(proc, "loss became nan", "train a new run, another --out, with e.g. a lower --set train.lr")
    ckpt = load_checkpoint(nan / "checkpoint.pt")  # the last good one is kept and readable
    assert all(torch.isfinite(v).all() for v in ckpt["model"].values())


def test_resume_refuses_what_it_cannot_continue_faithfully(tmp_path):
    """Resume checks the vocabulary (run.json's hash and the run's own vocab.txt against the prepared
    one), the checkpoint's config against config.json, the run's lock, and options it would ignore."""
    import fcntl
    import json

    run = tmp_path / "run"
    assert cli("pretrain", *TINY_ARGS, "--epochs", "1", "--out", str(run)).returncode == 0
    before = (run / "checkpoint.pt").read_bytes()
    meta = json.loads((run / "run.json").read_text())
    # another vocabulary than the one recorded (a rebuilt cache gives every piece other ids)
    (run / "run.json").write_text(json.dumps({**meta, "vocab_sha256": "0" * 64}))
    assert_one_line_error(cli("pretrain", "--resume", str(run)), "not the one this run trained with", "0000000000")
    (run / "run.json").write_text(json.dumps(meta))
    vocab = (run / "vocab.txt").read_text()
    (run / "vocab.txt").write_text(vocab.replace("\n", "\nX\n", 1))
    own = "vocab.txt is not the vocabulary run.json records"  # the run's copy, not the cache, changed
    assert_one_line_error(cli("pretrain", "--resume", str(run)), own, "the run's own copy was changed")
    assert_one_line_error(cli("eval", str(run)), own)
    (run / "vocab.txt").write_text(vocab)
    # a config.json that is not the checkpoint's
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**config, "train": {**config["train"], "lr": 0.5}}))
    assert_one_line_error(cli("pretrain", "--resume", str(run)), "another configuration", "train.lr")
    (run / "config.json").write_text(json.dumps({**config, "train": {**config["train"], "epochs": "four"}}))
    assert_one_line_error(cli("pretrain", "--resume", str(run)), "is not a run configuration", "train.epochs is 'four'")
    (run / "config.json").write_text(json.dumps(config))
    # options --resume would ignore
    assert_one_line_error(cli("pretrain", "--resume", str(run), "--epochs", "10", "--mods", "lang-pos"),
                          "--mods, --epochs")
    assert_one_line_error(cli("pretrain", "--resume", str(run), "--set", "train.lr=1", "--set", "train.threads=1"),
                          "--set train.lr would be ignored", "train.threads")  # only execution settings may change
    # a second writer while the run is held (by another process, as a sweep's worker holds it)
    with open(run / ".sweep.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert_one_line_error(process_cli("pretrain", "--resume", str(run)), "another process is working on")
        assert_one_line_error(cli("eval", str(run)), "another process is working on")
    assert (run / "checkpoint.pt").read_bytes() == before  # nothing lost
    proc = cli("pretrain", "--resume", str(run))
    assert proc.returncode == 0 and "already complete" in proc.stdout, proc.stderr


@pytest.mark.parametrize("args, fragment", [
    (["--set", "train.lr=nan"], "lr a finite number"),
    (["--seed", "-1"], "seed must be a whole number"),
    (["--seed", "99999999999999999999999"], "seed must be a whole number"),
    (["--device", "gpu"], "unknown device 'gpu'"),
    (["--eval-every", "-5"], "train.eval_every must be >= 0"),
    (["--set", "train.epochs=0"], "train.epochs must be at least 1"),
])
def test_bad_values_are_one_line_and_leave_no_run_folder(tmp_path, args, fragment):
    out = tmp_path / "run"
    assert_one_line_error(cli("pretrain", *TINY_ARGS, *args, "--out", str(out)), fragment)
    assert not out.exists()


def test_save_checkpoint_on_a_full_disk_keeps_the_old_one_and_no_temp_file(tmp_path, monkeypatch):
    import errno

    from minimult import runs
    from minimult.errors import MinimultError

    cfg, _ = tiny_cfg()
    path = tmp_path / "checkpoint.pt"
    runs.save_checkpoint(path, {"w": torch.ones(2)}, None, 1, cfg, False)
    real_save = torch.save

    def full_disk(obj, f):  # writes part of the file, then the disk is full
        real_save({"partial": True}, f)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(MinimultError, match="No space left on device.*previous checkpoint is kept"):
        runs.save_checkpoint(path, {"w": torch.zeros(2)}, None, 2, cfg, False)
    monkeypatch.undo()
    assert runs.load_checkpoint(path)["step"] == 1 and [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]


def test_unreadable_run_folders_are_one_line(tmp_path):
    for name, content in (("binary", b"\x00\xff\xfe"), ("list", b"[1, 2]"), ("shape", b'{"train": 5}')):
        run = tmp_path / name
        run.mkdir()
        (run / "config.json").write_bytes(content)
        assert_one_line_error(cli("eval", str(run)), str(run))
        assert_one_line_error(cli("pretrain", "--resume", str(run)), str(run))


def test_unwritable_run_folder_fails_before_evaluating(tmp_path):
    """eval takes the run's lock (a file it writes) first, so a folder it cannot write to is one line
    before a minute of evaluation, not a traceback after it. (A directory in the lock file's place
    stands in for a read-only folder, which root could write to anyway.)"""
    run = tmp_path / "run"
    assert cli("pretrain", *TINY_ARGS, "--epochs", "1", "--out", str(run)).returncode == 0
    (run / ".sweep.lock").unlink(missing_ok=True)
    (run / ".sweep.lock").mkdir()
    assert_one_line_error(cli("eval", str(run)), "cannot write to the run folder")
    assert not (run / "results.json").exists()


def test_long_lines_encode_whole_and_are_reported_cut(tmp_path):
    """Encoding is linear in a line's length (a 60k-word line once took minutes), and sequences longer
    than max_len are counted in the training log, not cut silently."""
    from minimult.data.vocab import train_wordpiece

    words = ("the light of the world " * 12_000).split()
    vocab = train_wordpiece([words[:50]], 64)
    enc = vocab.encode([words], [0])
    assert int(enc.word_starts.sum()) == len(words) and len(enc.ids) >= len(words)
    train = tmp_path / "train.txt"
    train.write_text(open(TINY_SETTINGS["data.train"]).read() + " ".join(words[:400]) + "\n")
    proc = cli("pretrain", "--preset", "tiny", "--train-file", str(train), "--dev-file", TINY_SETTINGS["data.dev"],
               "--set", "data.vocab_size=256", "--set", "data.train_sentences=0", "--epochs", "1",
               "--out", str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr
    assert "note: 2 of 802 training sequences have more than data.max_len - 2 = 126 pieces" in proc.stdout


def test_a_run_without_a_checkpoint_resumes_from_the_start(tmp_path):
    """A run that stopped before its first checkpoint is not a dead end: --resume trains it from step 0
    and gives what an uninterrupted run gives."""
    import json

    runs = {name: tmp_path / name for name in ("whole", "again")}
    for run in runs.values():
        assert cli("pretrain", *TINY_ARGS, "--epochs", "1", "--out", str(run)).returncode == 0
    (runs["again"] / "checkpoint.pt").unlink()
    proc = cli("pretrain", "--resume", str(runs["again"]))
    assert proc.returncode == 0 and "training from step 0" in proc.stdout, proc.stderr
    a, b = (load_checkpoint(r / "checkpoint.pt")["model"] for r in runs.values())
    assert all(torch.equal(a[k], b[k]) for k in a)
    losses = [[json.loads(l)["loss"] for l in (r / "metrics.jsonl").read_text().splitlines()] for r in runs.values()]
    assert losses[0] == losses[1]  # the log starts afresh, not appended to the stopped attempt's


def test_resume_and_eval_refuse_a_corpus_that_changed_since_the_run_started(tmp_path):
    """A training file edited between the start and the resume (each line's words reversed: the same words, so
    the same word vocabulary) would have the rest of the run train on other text without a word: refused in one
    line, which names the file also where new words changed the vocabulary too; put back, the run resumes. Evaluating the finished run on the edited text is refused the same way."""
    train = tmp_path / "train.txt"
    lines = Path(TINY_SETTINGS["data.train"]).read_text(encoding="utf-8").splitlines()[:200]
    train.write_text("\n".join(lines) + "\n", encoding="utf-8")
    cfg, mods = tiny_cfg(**{"data.train": str(train), "data.tokenizer": "word", "train.checkpoint_every": 5})
    run = tmp_path / "run"
    write_json(run.mkdir() or run / "config.json", cfg.to_dict())
    pretrain(cfg, mods, run, log=quiet, stop_after=10)
    vocab = read_json(run / "run.json")["vocab_sha256"]
    train.write_text("\n".join(" ".join(l.split()[::-1]) for l in lines) + "\n", encoding="utf-8")
    assert_one_line_error(cli("pretrain", "--resume", str(run)), "not the text this run trained on", str(train))
    assert read_json(run / "run.json")["vocab_sha256"] == vocab and load_checkpoint(run / "checkpoint.pt")["step"] == 10
    train.write_text("\n".join(lines + ["Zyx came here ."]) + "\n", encoding="utf-8")  # new words: another vocabulary
    assert_one_line_error(cli("pretrain", "--resume", str(run)), "not the text this run trained on", str(train))
    train.write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = cli("pretrain", "--resume", str(run))
    assert proc.returncode == 0 and "resuming" in proc.stdout, proc.stderr
    # evaluated on the edited text, its scores would read as this run's: refused too, nothing written
    train.write_text("\n".join(" ".join(l.split()[::-1]) for l in lines) + "\n", encoding="utf-8")
    assert_one_line_error(cli("eval", str(run)), "refusing to evaluate it on other text", str(train))
    assert not (run / "results.json").exists()
    train.write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = cli("eval", str(run))
    assert proc.returncode == 0 and (run / "results.json").is_file(), proc.stderr


def test_resume_refuses_a_mod_whose_version_changed_since_the_run_started(tmp_path):
    """A mod whose behaviour changed (its version bumped) between the start and the resume would train the rest
    of the run otherwise than its start, while run.json named only the new version: refused in one line."""
    cfg, mods = tiny_cfg("lang-pos", **{"train.checkpoint_every": 5})
    run = tmp_path / "run"
    write_json(run.mkdir() or run / "config.json", cfg.to_dict())
    pretrain(cfg, mods, run, log=quiet, stop_after=10)
    meta = read_json(run / "run.json")
    version = meta["mod_versions"]["lang-pos"]
    write_json(run / "run.json", {**meta, "mod_versions": {"lang-pos": version - 1}})
    assert_one_line_error(cli("pretrain", "--resume", str(run)), "lang-pos", f"version {version - 1}",
                          f"version {version}")
    assert load_checkpoint(run / "checkpoint.pt")["step"] == 10
    write_json(run / "run.json", meta)
    proc = cli("pretrain", "--resume", str(run))
    assert proc.returncode == 0 and "resuming" in proc.stdout, proc.stderr


def test_init_seed_changes_the_initial_weights_alone():
    """train.init_seed=0 at seed 42: the initial weights of a seed-0 run, and torch's generator left where a
    plain seed-42 run leaves it (so every later draw is seed 42's); init_seed equal to seed, or -1, is a
    plain run."""
    from minimult.train import initial_model

    def start(**sets):
        cfg, _ = resolve("tiny", {f"train.{k}": v for k, v in sets.items()})
        model = initial_model(cfg)
        return model.state_dict(), torch.get_rng_state(), torch.rand(3)

    w0, _, _ = start(seed=0)
    w42, state42, after42 = start(seed=42)
    mixed, state, after = start(seed=42, init_seed=0)
    assert all(torch.equal(mixed[k], w0[k]) for k in w0)
    assert not all(torch.equal(w42[k], w0[k]) for k in w0)
    assert torch.equal(state, state42) and torch.equal(after, after42)
    same, state_same, _ = start(seed=42, init_seed=42)
    assert all(torch.equal(same[k], w42[k]) for k in w42) and torch.equal(state_same, state42)


@pytest.mark.parametrize("value", [-2, 2**32])
def test_init_seed_out_of_range_is_one_clear_error(value):
    from minimult.errors import MinimultError

    with pytest.raises(MinimultError, match="train.init_seed must be -1"):
        resolve("tiny", {"train.init_seed": value})


@pytest.mark.parametrize("settings, fragment", [
    ({"data.n_langs": 1}, "a run needs English and at least one more language"),
    ({"data.max_len": 2}, "max_len 2 leaves no room for a word between [CLS] and [SEP]"),
    ({"data.vocab_size": 5}, "vocab_size 5 leaves no room: it must exceed the 5 special tokens"),
    ({"data.dev_sentences": -1}, "train_sentences and dev_sentences must be >= 0"),
    ({"train.batch_size": 0}, "batch_size >= 1 and lr a finite number > 0"),
    ({"train.weight_decay": float("inf")}, "train.weight_decay must be a finite number >= 0"),
    ({"train.adam_eps": float("nan")}, "train.adam_eps must be a finite number >= 0"),
    ({"train.clip": -0.5}, "train.clip must be a finite number >= 0"),
    ({"train.eval_sentences": 1}, "train.eval_sentences must be >= 2"),
    ({"train.seed": 2**32}, "seed must be a whole number from 0 to 4294967295"),
    ({"train.device": "cuda:"}, "unknown device 'cuda:'"),
    ({"train.pad_multiple": 2, "train.attention": "attend-padding"}, "train.pad_multiple > 1 needs train.attention"),
    ({"train.epochs": 2.5}, "bad value for train.epochs: 2.5 is not a valid int"),
    ({"train.epochs": True}, "bad value for train.epochs: True is not a valid int"),
    ({"train.epochs": 0}, "train.epochs must be at least 1"),
    ({"model.vocab_size": 100}, "model.vocab_size is sized from data.vocab_size"),
    ({"model.target_params": 10**6, "model.intermediate": 64}, "drop model.intermediate or the target"),
    ({"transfer.seeds": 0}, "transfer.seeds, epochs and batch_size >= 1"),
    ({"transfer.warmup": 1.0}, "transfer.warmup in [0, 1)"),
    ({"transfer.lr": float("inf")}, "transfer.lr must be a finite number > 0"),
    ({"transfer.modes": "full,frozen,full"}, "must name each mode once"),
])
def test_bad_settings_are_one_clear_error_before_anything_runs(settings, fragment):
    from minimult.errors import MinimultError

    with pytest.raises(MinimultError, match=re.escape(fragment)):
        resolve("tiny", settings)


def test_settings_at_the_edge_of_what_is_allowed_resolve():
    """Zero weight decay, clip and adam_eps, the largest seed, 2 evaluation sentences, cuda:N, warmup 0, "no" and
    "off" for false, a whole float for an int; a setting under its old key and its new one: the new one wins."""
    from minimult.config import parse_overrides
    from minimult.errors import MinimultError

    cfg, _ = resolve("tiny", {"train.weight_decay": 0, "train.clip": 0, "train.adam_eps": 0, "train.seed": 2**32 - 1,
                              "train.eval_sentences": 2, "train.device": "cuda:1", "transfer.warmup": 0,
                              "transfer.enabled": "no", "data.shared_vocab": "off", "train.epochs": 3.0})
    assert (cfg.train.seed, cfg.train.eval_sentences, cfg.train.epochs) == (2**32 - 1, 2, 3)
    assert cfg.transfer.enabled is False and cfg.data.shared_vocab is False
    assert resolve("tiny", {"data.fake": "unicode", "data.source": "shift"})[0].data.source == "shift"
    assert parse_overrides(["train.lr = 1e-3"]) == {"train.lr": "1e-3"}
    with pytest.raises(MinimultError, match="bad --set 'train.lr': use section.key=value"):
        parse_overrides(["train.lr"])


def test_every_train_setting_is_either_shared_by_a_stack_or_each_runs_own():
    """Stacked runs share one schedule: every TrainConfig field but the per-run ones (their randomness), so a
    new field is shared (and checked by check_stackable) unless it is named per-run."""
    import copy
    import dataclasses

    from minimult.config import TrainConfig
    from minimult.errors import MinimultError
    from minimult.train import PER_RUN_TRAIN, SHARED_TRAIN, check_stackable

    names = [f.name for f in dataclasses.fields(TrainConfig)]
    assert set(PER_RUN_TRAIN) <= set(names) and set(SHARED_TRAIN) == set(names) - set(PER_RUN_TRAIN)
    a = tiny_cfg()[0]
    check_stackable([a, dataclasses.replace(a, train=dataclasses.replace(a.train, seed=7, init_seed=3))])

    def other(v):  # a value of the field's kind that differs from v
        return (not v if isinstance(v, bool) else v + 1 if isinstance(v, (int, float)) else v + "x"
                if isinstance(v, str) else tuple(v) + (0,) if isinstance(v, (tuple, list)) else 1)

    for name in SHARED_TRAIN:  # each shared setting, changed in one run, keeps the two from stacking
        train = copy.copy(a.train)
        object.__setattr__(train, name, other(getattr(a.train, name)))  # past validation: only the compare counts
        b = dataclasses.replace(a, train=train)
        with pytest.raises(MinimultError, match=f"train.{name} differs"):
            check_stackable([a, b])
