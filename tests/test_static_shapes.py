"""Batches padded to a few fixed shapes (train.pad_multiple, minimult.data.microbatches.pad): the loss and
gradient of the batch itself, every step in one of at most max_len / pad_multiple shapes, and a loss that
traces as one graph (no host synchronisation, no data-dependent shape), what a captured CUDA graph needs."""

from __future__ import annotations

import pytest
import torch

from minimult import kernels
from minimult.data import microbatches
from minimult.data.batching import plan_epoch
from minimult.errors import MinimultError
from minimult.model import Bert, ModelConfig
from minimult.runs import Run, load_checkpoint, read_json
from minimult.stacked import pack, stack
from minimult.train import setup, train
from test_distributed import GRADIENT_STEP, _rows, _runs
from test_microbatches import LENGTHS, _batch
from test_train import quiet, tiny_cfg

SHAPE = (9, 16, 40)  # rows, columns, selected entries: room for LENGTHS' 7 rows of at most 12


def _model(**over) -> Bert:
    torch.manual_seed(0)
    return Bert(ModelConfig(vocab_size=50, hidden=16, intermediate=32, heads=2, layers=2, max_positions=16,
                            dropout=0.0, nsp=True, **over))


def _loss(model, b) -> torch.Tensor:
    return model.mlm_loss(b["input_ids"], b["position_ids"], b["token_type_ids"], b["attention_mask"], b["selected"],
                          b["targets"], b["nsp_labels"])


@pytest.mark.parametrize("masked", [True, False], ids=["padding-masked", "no-padding"])
def test_a_padded_batch_has_its_shape_and_the_loss_and_gradient_of_the_batch_itself(masked):
    model = _model()
    batch = _batch(LENGTHS if masked else [12] * 7)
    if not masked:
        batch["attention_mask"] = None
    padded = microbatches.pad(batch, SHAPE)
    assert padded["input_ids"].shape == padded["attention_mask"].shape == SHAPE[:2]
    assert padded["selected"].shape == padded["targets"].shape == SHAPE[2:]
    assert padded["nsp_labels"].tolist()[7:] == [-100, -100]
    n = len(batch["selected"])
    assert torch.equal(padded["input_ids"].flatten()[padded["selected"][:n]], batch["targets"])  # the same tokens
    assert (padded["targets"][n:] == -100).all()
    grads = []
    for b in (batch, padded):
        model.zero_grad()
        loss = _loss(model, b)
        loss.backward()
        grads.append((float(loss.detach()), [p.grad.clone() for p in model.parameters()]))
    (one, one_grads), (two, two_grads) = grads
    assert two == pytest.approx(one, rel=1e-6)
    for a, g in zip(two_grads, one_grads):
        assert (a - g).abs().max() <= 1e-6 * g.abs().max()
    with pytest.raises(ValueError, match="does not fit"):
        microbatches.pad(batch, (9, 16, n - 1))


def test_fixed_shape_is_the_next_multiple_and_room_for_every_maskable_piece():
    """Columns: the smallest multiple of pad_multiple that holds the width (the width itself when it is one),
    at most max_len; selected entries: per row, all columns - 1 maskable pieces under bernoulli, max(1,
    round(rate x (columns - 1))) under exact."""
    assert microbatches.fixed_shape(16, 8, 16, 128, 0.15, "exact") == (8, 16, 8 * 2)  # round(.15 x 15) = 2
    assert microbatches.fixed_shape(17, 8, 16, 128, 0.15, "exact") == (8, 32, 8 * 5)  # round(.15 x 31) = 5
    assert microbatches.fixed_shape(50, 8, 16, 128, 0.15, "exact") == (8, 64, 8 * 9)  # round(.15 x 63) = 9
    assert microbatches.fixed_shape(1, 4, 16, 128, 0.01, "exact") == (4, 16, 4 * 1)  # at least one a row
    assert microbatches.fixed_shape(16, 8, 16, 128, 0.15, "bernoulli") == (8, 16, 8 * 15)
    assert microbatches.fixed_shape(125, 8, 16, 126, 0.15, "bernoulli") == (8, 126, 8 * 125)  # max_len caps


@pytest.mark.parametrize("selection", ["exact", "bernoulli"])
def test_every_batch_of_an_epoch_takes_one_of_the_few_fixed_shapes(tmp_path, selection):
    cfg, mods = tiny_cfg(None, **{"train.pad_multiple": 8, "mask.selection": selection, "data.max_len": 30})
    member = setup(Run.create(cfg, mods, tmp_path / "run", log=quiet), torch.device("cpu"), quiet)
    tc = cfg.train
    shapes, widths = set(), set()
    for index in plan_epoch(member.train_set.lengths_np, tc.batch_size, tc.seed, 0, tc.batching):
        widths.add(member.train_set.batch(index).input_ids.shape[1])
        b = member.masked_batch(index)  # pad raises if a batch selects more than its shape holds
        shapes.add((*b["input_ids"].shape, len(b["selected"])))
    assert {s[1] for s in shapes} <= {8, 16, 24, 30}  # multiples of 8, and max_len for the widest
    assert {s[0] for s in shapes} == {tc.batch_size}
    assert len(shapes) <= 4 < len(widths)  # fewer shapes than the batches' own widths


@pytest.mark.parametrize("specs", [[(None, 0)], [(None, 0), ("shift-special", 3)], [("nsp", 0)]],
                         ids=["single", "stacked", "nsp"])
def test_training_on_padded_batches_gives_the_gradient_steps_of_unpadded_ones(tmp_path, specs):
    """Dropout off: three steps on batches padded to fixed shapes give the weights and logged losses of the
    same steps unpadded, up to float round-off (GRADIENT_STEP: each step is about the gradient itself)."""
    over = {**GRADIENT_STEP, "train.checkpoint_every": 3}
    plain = _runs(tmp_path, "plain", specs, **over)
    padded = _runs(tmp_path, "padded", specs, **over, **{"train.pad_multiple": 16})
    lines = []
    train(plain, stop_after=3, log=quiet)
    train(padded, stop_after=3, log=lines.append)
    assert any("batches padded to 32 rows and a multiple of 16 columns" in line for line in lines)
    for a, b in zip(plain, padded):
        A, B = (load_checkpoint(r.checkpoint_path)["model"] for r in (a, b))
        for k in A:
            assert torch.allclose(A[k], B[k], rtol=1e-4, atol=1e-5), k
        la, lb = ([r["loss"] for r in _rows(run) if "loss" in r] for run in (a, b))
        assert lb == pytest.approx(la, rel=1e-5)
        meta = read_json(b.path / "run.json")
        assert meta["pad_multiple"] == 16 and meta["execution"][-1]["pad_multiple"] == 16
        assert read_json(a.path / "run.json")["pad_multiple"] == 0


def test_run_json_records_from_which_step_a_run_trained_on_padded_batches(tmp_path):
    """Switched off on resume, the padding ends its stretch; a stretch recorded before the setting existed
    trained unpadded (no new stretch for it)."""
    from test_train import new_run

    from minimult.runs import write_json
    from minimult.train import pretrain

    padded, mods = tiny_cfg(None, **{"train.pad_multiple": 16, "train.checkpoint_every": 7})
    plain, _ = tiny_cfg(None, **{"train.checkpoint_every": 7})
    d = new_run(tmp_path, "run", padded)
    pretrain(padded, mods, d, log=quiet, stop_after=7)
    pretrain(plain, mods, d, resume=True, log=quiet, stop_after=14)
    meta = read_json(d / "run.json")
    assert meta["pad_multiple"] == 0
    assert [(e["from_step"], e["pad_multiple"]) for e in meta["execution"]] == [(0, 16), (7, 0)]
    del meta["execution"][-1]["pad_multiple"]  # as a stretch written before the setting existed
    write_json(d / "run.json", meta)
    pretrain(plain, mods, d, resume=True, log=quiet)
    assert [e["from_step"] for e in read_json(d / "run.json")["execution"]] == [0, 7]


def test_the_loss_of_a_padded_batch_traces_as_one_graph(monkeypatch):
    """With the GPU formulation (SDPA, F.dropout), one model's loss and a stack's on padded batches compile with
    fullgraph=True: nothing in them reads a value on the host or takes a shape from the data. They equal the
    eager losses."""
    monkeypatch.setattr(kernels, "cpu_kernels", lambda device: False)
    model, other = _model(), _model()
    torch.nn.init.normal_(other.blocks[0].fc_in.weight)
    batches = [microbatches.pad(_batch(LENGTHS, seed=s), SHAPE) for s in (0, 1)]
    compiled = torch.compile(_loss, backend="eager", fullgraph=True, dynamic=False)
    for b in batches:
        assert float(compiled(model, b).detach()) == pytest.approx(float(_loss(model, b).detach()), rel=1e-6)
    stacked, packed = stack([model, other]), pack(batches)
    compiled = torch.compile(stacked.stacked_losses, backend="eager", fullgraph=True, dynamic=False)
    assert torch.allclose(compiled(packed), stacked.stacked_losses(packed), rtol=1e-6)


def test_pad_multiple_refuses_what_would_cut_or_attend_its_padding():
    with pytest.raises(MinimultError, match="train.pad_multiple must be >= 0"):
        tiny_cfg(**{"train.pad_multiple": -1})
    for over in ({"train.microbatches": 2}, {"train.nproc": 2}):
        with pytest.raises(MinimultError, match="use it with neither"):
            tiny_cfg(**{"train.pad_multiple": 8, **over})
    with pytest.raises(MinimultError, match="train.pad_multiple > 1 needs train.attention=masked"):
        tiny_cfg(**{"train.pad_multiple": 8, "train.attention": "attend-padding"})
