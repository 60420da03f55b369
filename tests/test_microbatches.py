"""Batches trained as groups of rows of similar length (train.microbatches, minimult.data.microbatches):
the same rows, selected tokens and gradient as one pass, at less padding."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from minimult.data import microbatches
from minimult.errors import MinimultError
from minimult.model import Bert, ModelConfig
from minimult.runs import load_checkpoint
from minimult.train import train
from test_distributed import GRADIENT_STEP, _rows, _runs
from test_train import quiet, tiny_cfg


def _batch(lengths, nsp=True, seed=0):
    """A masked batch of rows `[CLS] pieces [SEP]` of `lengths` real tokens each, padded to the longest,
    with about a third of each row's pieces selected."""
    g = torch.Generator().manual_seed(seed)
    B, T = len(lengths), max(lengths)
    col = torch.arange(T)
    real = col < torch.tensor(lengths)[:, None]
    ids = torch.where(real, torch.randint(5, 50, (B, T), generator=g), torch.zeros((), dtype=torch.long))
    maskable = real & (col >= 1) & (col < torch.tensor(lengths)[:, None] - 1)
    chosen = maskable & (torch.rand((B, T), generator=g) < 0.35)
    selected = chosen.flatten().nonzero().flatten()
    batch = {"input_ids": ids, "position_ids": col.expand(B, T), "token_type_ids": torch.zeros(B, T, dtype=torch.long),
             "attention_mask": real, "selected": selected, "targets": ids.flatten()[selected],
             "nsp_labels": torch.randint(0, 2, (B,), generator=g) if nsp else None}
    return batch


LENGTHS = [9, 3, 12, 5, 7, 12, 4]


@pytest.mark.parametrize("parts", [2, 3, 7, 10])
def test_groups_hold_every_row_and_selected_token_once_each_cut_to_its_longest_row(parts):
    batch = _batch(LENGTHS)
    groups = microbatches.by_length(batch, parts)
    assert len(groups) == min(parts, len(LENGTHS))
    seen_rows, seen_tokens = [], []
    for g in groups:
        lengths = g["attention_mask"].sum(1).tolist() if g["attention_mask"] is not None else \
            [g["input_ids"].shape[1]] * g["input_ids"].shape[0]
        assert g["input_ids"].shape[1] == max(lengths)  # padded to its own longest row only
        assert (g["attention_mask"] is None) == (len(set(lengths)) == 1)
        for r in range(g["input_ids"].shape[0]):
            seen_rows.append(tuple(g["input_ids"][r, : lengths[r]].tolist()))
        W = g["input_ids"].shape[1]
        assert torch.equal(g["input_ids"].flatten()[g["selected"]], g["targets"])  # still the right tokens
        seen_tokens += [(tuple(g["input_ids"][int(s) // W, : lengths[int(s) // W]].tolist()), int(s) % W)
                        for s in g["selected"]]
    T = batch["input_ids"].shape[1]
    rows = [tuple(batch["input_ids"][r, :n].tolist()) for r, n in enumerate(LENGTHS)]
    assert sorted(seen_rows) == sorted(rows)
    assert sorted(seen_tokens) == sorted((rows[int(s) // T], int(s) % T) for s in batch["selected"])
    widths = [g["input_ids"].shape[1] for g in groups]
    assert widths == sorted(widths)  # sorted by length: the short rows are not padded to the long ones


def test_one_group_when_there_is_nothing_to_cut():
    batch = _batch(LENGTHS)
    assert microbatches.by_length(batch, 1) == [batch]
    batch["attention_mask"] = None  # no padding (bucketed batches of one length, or padding attended)
    assert microbatches.by_length(batch, 4) == [batch]


@pytest.mark.parametrize("parts", [2, 3, 7])
def test_the_groups_losses_and_gradients_add_up_to_one_pass(parts):
    torch.manual_seed(0)
    model = Bert(ModelConfig(vocab_size=50, hidden=16, intermediate=32, heads=2, layers=2, max_positions=16,
                             dropout=0.0, nsp=True))
    batch = _batch(LENGTHS)

    def loss_and_grads(groups, totals=None):
        model.zero_grad()
        loss = sum(model.mlm_loss(g["input_ids"], g["position_ids"], g["token_type_ids"], g["attention_mask"],
                                  g["selected"], g["targets"], g["nsp_labels"], totals=totals) for g in groups)
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters()]

    one, one_grads = loss_and_grads([batch])
    totals = (len(batch["selected"]), len(LENGTHS))
    split, split_grads = loss_and_grads(microbatches.by_length(batch, parts), totals)
    assert split == pytest.approx(float(one), rel=1e-6)
    for a, g in zip(split_grads, one_grads):
        assert (a - g).abs().max() <= 1e-6 * g.abs().max()


@pytest.mark.parametrize("specs,clip", [([(None, 0)], 1e9), ([(None, 0), ("shift-special", 3)], 0.05)],
                         ids=["single-unclipped", "stacked-clipped"])
def test_one_training_step_in_microbatches_equals_one_pass(tmp_path, monkeypatch, specs, clip):
    """Random batches (mixed lengths, padded), dropout off: one step with each batch in 3 groups gives the
    weights and the logged loss of one pass, up to float round-off (the step is the gradient itself, or
    its clipping, as in test_distributed). The step really trains each batch as 3 groups of 3 widths."""
    over = {**GRADIENT_STEP, "train.clip": clip, "train.batching": "random"}
    one = _runs(tmp_path, "one", specs, **over)
    three = _runs(tmp_path, "three", specs, **over, **{"train.microbatches": 3})
    widths, by_length = [], microbatches.by_length

    def spied(batch, parts):  # the groups training cut, as it cut them
        groups = by_length(batch, parts)
        widths.append(sorted(g["input_ids"].shape[1] for g in groups))
        return groups

    train(one, stop_after=1, log=quiet)
    monkeypatch.setattr(microbatches, "by_length", spied)
    train(three, stop_after=1, log=quiet)
    assert widths and all(len(set(w)) == 3 for w in widths), widths
    for a, b in zip(one, three):
        A, B = (load_checkpoint(r.checkpoint_path)["model"] for r in (a, b))
        for k in A:
            assert torch.allclose(A[k], B[k], rtol=1e-5, atol=1e-6), k
        (la,), (lb,) = ([r["loss"] for r in _rows(run) if "loss" in r] for run in (a, b))
        assert lb == pytest.approx(la, rel=1e-6)


def test_microbatches_need_masked_padding_and_a_positive_count():
    with pytest.raises(MinimultError, match="train.microbatches must be >= 1"):
        tiny_cfg(**{"train.microbatches": 0})
    with pytest.raises(MinimultError, match="needs train.attention=masked"):
        tiny_cfg(**{"train.microbatches": 2, "train.batching": "random", "train.attention": "attend-padding"})
    assert tiny_cfg(**{"train.microbatches": 2})[0].train.microbatches == 2


def test_cuts_leave_the_fewest_padded_positions():
    """Against every way of cutting a small sorted batch into n groups (brute force)."""
    from itertools import combinations

    rng = np.random.default_rng(0)
    for trial in range(20):
        lengths = np.sort(rng.integers(3, 40, size=rng.integers(1, 10)))
        B = len(lengths)
        for n in (1, 2, 3, 5):
            def padded(bounds):
                return sum((hi - lo) * lengths[hi - 1] for lo, hi in zip(bounds[:-1], bounds[1:]))

            bounds = microbatches.cuts(lengths, n)
            assert bounds[0] == 0 and bounds[-1] == B and len(bounds) == min(n, B) + 1
            assert all(a < b for a, b in zip(bounds[:-1], bounds[1:]))
            fewest = min(padded([0, *inner, B]) for inner in combinations(range(1, B), min(n, B) - 1))
            assert padded(bounds) == fewest


def test_run_json_records_from_which_step_a_run_trained_in_microbatches(tmp_path):
    """An execution setting may change when a run resumes (a long random-batch run sped up halfway, on
    another number of threads): run.json keeps each way it trained with the step it began at, and the run
    ends complete."""
    from test_train import new_run

    from minimult.runs import cpu_name, read_json
    from minimult.train import pretrain

    over = {"train.batching": "random", "train.checkpoint_every": 7}
    cfg, mods = tiny_cfg(None, **over)
    threads = torch.get_num_threads()
    split, _ = tiny_cfg(None, **over, **{"train.microbatches": 3, "train.threads": threads + 1})
    d = new_run(tmp_path, "run", cfg)
    pretrain(cfg, mods, d, log=quiet, stop_after=14)
    cpu = {"processes": 1, "device": "cpu", "machine": cpu_name()}
    cpu["pad_multiple"] = 0
    assert read_json(d / "run.json")["execution"] == [{"from_step": 0, **cpu, "microbatches": 1, "threads": threads}]
    lines = []
    pretrain(cfg, mods, new_run(tmp_path, "again", cfg), log=lines.append, stop_after=1)
    assert sum("--set train.microbatches=4" in line for line in lines) == 1  # random batches in one pass: the hint
    lines = []
    pretrain(split, mods, d, resume=True, log=lines.append)
    assert any("each batch in 3 groups of rows by length" in line for line in lines)
    assert not any("--set train.microbatches" in line for line in lines)
    meta = read_json(d / "run.json")
    assert meta["status"] == "complete" and meta["microbatches"] == 3
    assert meta["execution"] == [{"from_step": 0, **cpu, "microbatches": 1, "threads": threads},
                                 {"from_step": 14, **cpu, "microbatches": 3, "threads": threads + 1}]


def test_a_run_resumed_on_another_machine_records_the_stretch_each_machine_trained(tmp_path):
    """run.json's `execution` names the machine each stretch trained on (the seconds of a run resumed across
    machines are otherwise unattributable), and a resume on the same machine adds no stretch."""
    from test_train import new_run

    from minimult.runs import cpu_name, read_json, write_json
    from minimult.train import pretrain

    cfg, mods = tiny_cfg(None, **{"train.checkpoint_every": 7})
    d = new_run(tmp_path, "run", cfg)
    pretrain(cfg, mods, d, log=quiet, stop_after=7)
    meta = read_json(d / "run.json")
    meta["execution"][-1]["machine"] = "another CPU"
    write_json(d / "run.json", meta)
    for stop in (14, 21):
        pretrain(cfg, mods, d, resume=True, log=quiet, stop_after=stop)
    stretches = [(e["from_step"], e["machine"]) for e in read_json(d / "run.json")["execution"]]
    assert stretches == [(0, "another CPU"), (7, cpu_name())]
