"""The model against HuggingFace BertForMaskedLM with copied weights, plus its small contracts."""

import pytest
import torch
import torch.nn.functional as F

from minimult import precision
from minimult.errors import MinimultError
from minimult.export import save_hf, to_hf
from minimult.model import Bert, ModelConfig

ATOL = 1e-5
CONFIGS = {
    "1head": ModelConfig(vocab_size=100, hidden=32, intermediate=64, heads=1, layers=3, max_positions=32),
    "4heads": ModelConfig(vocab_size=100, hidden=32, intermediate=64, heads=4, layers=3, max_positions=32),
    "no-segments": ModelConfig(vocab_size=100, hidden=32, intermediate=64, heads=2, layers=3, max_positions=32,
                               type_vocab_size=0),
}


def make_batch(cfg: ModelConfig, seed: int = 0):
    """Three sequences of lengths 10, 7, 4 padded with id 0; row 1 uses offset (language-specific) positions."""
    g = torch.Generator().manual_seed(seed)
    B, T, lengths = 3, 10, torch.tensor([10, 7, 4])
    mask = torch.arange(T)[None, :] < lengths[:, None]  # (B, T) bool, True = real token
    input_ids = torch.randint(1, cfg.vocab_size, (B, T), generator=g).masked_fill(~mask, 0)
    position_ids = torch.arange(T).repeat(B, 1)
    position_ids[1] += 16
    token_type_ids = torch.randint(0, 2, (B, T), generator=g)
    return input_ids, position_ids, token_type_ids, mask


def hf_inputs(cfg, input_ids, position_ids, token_type_ids, mask):
    # with no segment table ours ignores token_type_ids; HF gets its single zero row
    segments = token_type_ids if cfg.type_vocab_size else torch.zeros_like(token_type_ids)
    return dict(input_ids=input_ids, position_ids=position_ids, token_type_ids=segments, attention_mask=mask.long())


def pair(cfg, seed=0):
    torch.manual_seed(seed)
    model = Bert(cfg).eval()
    with torch.no_grad():  # non-trivial LayerNorm and bias values, so a mis-mapped one would show
        for name, p in model.named_parameters():
            if p.dim() < 2:
                p.add_(0.1 * torch.randn_like(p))
    return model, to_hf(model, cfg).eval()


@pytest.mark.parametrize("name", CONFIGS)
def test_matches_huggingface(name):
    cfg = CONFIGS[name]
    model, hf = pair(cfg)
    batch = make_batch(cfg)
    mask = batch[3]
    with torch.no_grad():
        ours = model.hidden_states(*batch)
        final = model(*batch)
        logits = model.mlm_logits(final[mask])
        ref = hf(**hf_inputs(cfg, *batch), output_hidden_states=True)
    assert len(ours) == len(ref.hidden_states) == cfg.layers + 1
    for i, (a, b) in enumerate(zip(ours, ref.hidden_states)):
        torch.testing.assert_close(a[mask], b[mask], atol=ATOL, rtol=0, msg=f"layer {i}")
    torch.testing.assert_close(final, ours[-1], atol=0, rtol=0)
    torch.testing.assert_close(logits, ref.logits[mask], atol=ATOL, rtol=0)


def test_hidden_states_up_to_requested_layer():
    cfg = CONFIGS["1head"]
    model, _ = pair(cfg)
    batch = make_batch(cfg)
    with torch.no_grad():
        full, part = model.hidden_states(*batch), model.hidden_states(*batch, layers=[0, 2])
    assert len(part) == 3
    for a, b in zip(part, full):
        torch.testing.assert_close(a, b, atol=0, rtol=0)
    with pytest.raises(MinimultError, match=r"layers must be a non-empty subset of 0..3, got \[4\]"):
        model.hidden_states(*batch, layers=[cfg.layers + 1])


@pytest.mark.parametrize("name", ["1head", "4heads"])
def test_mlm_loss_matches_huggingface_logits(name):
    cfg = CONFIGS[name]
    model, hf = pair(cfg)
    batch = make_batch(cfg)
    real = batch[3].flatten().nonzero().squeeze(1)
    g = torch.Generator().manual_seed(1)
    selected = real[torch.randperm(len(real), generator=g)[:6]]
    targets = torch.randint(0, cfg.vocab_size, (6,), generator=g)
    with torch.no_grad():
        loss = model.mlm_loss(*batch, selected, targets)
        ref_logits = hf(**hf_inputs(cfg, *batch)).logits.flatten(0, 1)[selected]
    assert loss.dim() == 0
    torch.testing.assert_close(loss, F.cross_entropy(ref_logits, targets), atol=ATOL, rtol=0)


def test_loss_backward_reaches_tied_embedding_in_training_mode():
    cfg = CONFIGS["4heads"]
    model = Bert(cfg).train()
    input_ids, position_ids, token_type_ids, mask = make_batch(cfg)
    loss = model.mlm_loss(input_ids, position_ids, token_type_ids, mask, torch.tensor([0, 11]), torch.tensor([5, 7]))
    loss.backward()
    assert torch.isfinite(loss)
    assert model.embeddings.lookups["token"].weight.grad[[5, 7]].abs().sum() > 0  # through the tied decoder


@pytest.mark.parametrize("name", ["1head", "4heads"])
def test_padding_is_masked(name):
    cfg = CONFIGS[name]
    model, _ = pair(cfg)
    input_ids, position_ids, token_type_ids, mask = make_batch(cfg)
    changed = input_ids.masked_fill(~mask, 42)
    changed_types = token_type_ids.masked_fill(~mask, 1)
    with torch.no_grad():
        a = model(input_ids, position_ids, token_type_ids, mask)
        b = model(changed, position_ids, changed_types, mask)
        c = model(changed, position_ids, changed_types, None)  # unmasked: padding now leaks in
    torch.testing.assert_close(a[mask], b[mask], atol=1e-6, rtol=0)
    assert not torch.allclose(a[mask], c[mask], atol=1e-4)


def test_save_hf_round_trip(tmp_path):
    from transformers import BertForMaskedLM

    cfg = CONFIGS["4heads"]
    model, hf = pair(cfg)
    vocab = tmp_path / "vocab-src.txt"
    vocab.write_text("\n".join(f"tok{i}" for i in range(cfg.vocab_size)) + "\n")
    out = tmp_path / "export"
    save_hf(Bert(cfg), cfg, out)  # a first export ...
    with pytest.raises(MinimultError, match="not empty"):  # ... is never overwritten by accident
        save_hf(model, cfg, out, vocab_file=vocab)
    (out / "notes.txt").write_text("mine")
    save_hf(model, cfg, out, vocab_file=vocab, force=True)  # --force replaces the model's files only
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "vocab.txt").read_text() == vocab.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export", "vocab-src.txt"]  # no temp folders left
    assert all((f.stat().st_mode & 0o777) == 0o644 for f in out.iterdir() if f.name != "notes.txt")
    loaded = BertForMaskedLM.from_pretrained(out).eval()
    batch = make_batch(cfg)
    with torch.no_grad():
        torch.testing.assert_close(loaded(**hf_inputs(cfg, *batch)).logits, hf(**hf_inputs(cfg, *batch)).logits,
                                   atol=ATOL, rtol=0)


def test_export_refuses_run_folders_and_non_empty_folders(tmp_path):
    cfg = CONFIGS["1head"]
    run = tmp_path / "run"
    (run / "sub").mkdir(parents=True)
    (run / "config.json").write_text("{}")
    (run / "run.json").write_text("{}")
    for target in (run, run / "sub", run / "new"):
        with pytest.raises(MinimultError, match="the run folder"):
            save_hf(Bert(cfg), cfg, target, force=True)
    assert sorted(p.name for p in run.iterdir()) == ["config.json", "run.json", "sub"]
    fresh = tmp_path / "fresh"
    save_hf(Bert(cfg), cfg, fresh)
    assert (fresh.stat().st_mode & 0o777) == 0o755


def test_param_groups_partition_and_no_decay_on_layernorm():
    cfg = CONFIGS["1head"]
    model = Bert(cfg)
    groups = model.param_groups(0.01)
    ids = [id(p) for g in groups for p in g["params"]]
    assert len(ids) == len(set(ids)) and set(ids) == {id(p) for p in model.parameters()}
    decayed = {id(p) for g in groups if g["weight_decay"] > 0 for p in g["params"]}
    for name, p in model.named_parameters():
        is_ln = ".ln" in name or name.startswith("ln")
        assert (id(p) in decayed) == (p.dim() >= 2), name
        assert not (is_ln and id(p) in decayed), name
    n_matrices = 3 + 4 * cfg.layers + 1  # token, position, segment tables; qkv, proj, fc_in, fc_out; head dense
    assert len(decayed) == n_matrices
    assert model.num_parameters() == sum(p.numel() for p in model.parameters())


def test_initial_weights_are_truncated_normal_at_two_std():
    """Tables and linear weights ~ N(0, init_std) cut at ±2 std (BERT's initialiser); biases 0, LayerNorm 1 and 0."""
    cfg = ModelConfig(vocab_size=500, hidden=64, intermediate=256, heads=2, layers=2, max_positions=64, init_std=0.05)
    torch.manual_seed(0)
    model = Bert(cfg)
    matrices = torch.cat([p.detach().flatten() for p in model.parameters() if p.dim() >= 2])
    assert float(matrices.abs().max()) <= 2 * cfg.init_std  # a plain normal puts ~4.6% of them beyond
    assert float(matrices.abs().max()) > 1.95 * cfg.init_std
    assert float(matrices.std()) == pytest.approx(0.8796 * cfg.init_std, rel=0.02)  # the cut normal's std
    for name, p in model.named_parameters():
        if p.dim() == 1:
            assert torch.equal(p, torch.ones_like(p) if ".ln" in name and name.endswith("weight")
                               else torch.zeros_like(p)), name


@pytest.mark.parametrize("kwargs,message", [
    (dict(hidden=64, heads=3), r"model.hidden \(64\) must be divisible by model.heads \(3\)"),
    (dict(layers=0), "model.layers must be >= 1, got 0"),
    (dict(vocab_size=-1), "model.vocab_size must be >= 1, got -1"),
    (dict(type_vocab_size=-1), "model.type_vocab_size must be >= 0, got -1"),
    (dict(dropout=1.0), r"model.dropout must be in \[0, 1\), got 1.0"),
])
def test_bad_config_raises(kwargs, message):
    with pytest.raises(MinimultError, match=message):
        ModelConfig(**kwargs)


def training_case(cfg):
    """A model and its HF copy in training mode, a padded batch and 8 selected positions with targets."""
    model, hf = pair(cfg)
    model.train(), hf.train()
    batch = make_batch(cfg)
    real = batch[3].flatten().nonzero().squeeze(1)
    g = torch.Generator().manual_seed(2)
    selected = real[torch.randperm(len(real), generator=g)[:8]]
    targets = torch.randint(0, cfg.vocab_size, (8,), generator=g)
    return model, hf, batch, selected, targets


@pytest.mark.parametrize("name", ["1head", "4heads"])
def test_training_gradients_match_huggingface(name):
    """Training mode (the CPU fast path: written-out attention, additive key bias) without dropout:
    loss and every gradient as HF's, padding included."""
    import copy

    from minimult.export import _hf_state_dict

    cfg = ModelConfig(**{**CONFIGS[name].__dict__, "dropout": 0.0})
    model, hf, batch, selected, targets = training_case(cfg)
    loss = model.mlm_loss(*batch, selected, targets)
    loss.backward()
    ref = F.cross_entropy(hf(**hf_inputs(cfg, *batch)).logits.flatten(0, 1)[selected], targets)
    ref.backward()
    torch.testing.assert_close(loss, ref, atol=ATOL, rtol=0)
    grads = copy.deepcopy(model)
    for p, q in zip(grads.parameters(), model.parameters()):
        p.data = q.grad.clone()
    ours = _hf_state_dict(grads, cfg)  # our gradients under HF's names (qkv split, tied decoder)
    for hf_name, p in hf.named_parameters():
        torch.testing.assert_close(ours[hf_name], p.grad, atol=ATOL, rtol=1e-4, msg=hf_name)


@pytest.mark.parametrize("stacked", [False, True])
def test_attended_padding_gradients_match_huggingface_unmasked(stacked):
    """train.attention = attend-padding: no attention mask, and [PAD] (id 0) with HF's padding_idx, so its
    lookups pass no gradient (the tied decoder still trains the row): every gradient as HF's run without
    an attention mask, through the single and the stacked forward; without padding_idx the [PAD] row differs."""
    import copy

    from minimult.export import _hf_state_dict
    from minimult.stacked import pack, stack

    grads = {}
    for padding_idx in (0, -1):
        cfg = ModelConfig(**{**CONFIGS["1head"].__dict__, "dropout": 0.0, "padding_idx": padding_idx})
        model, hf, batch, selected, targets = training_case(cfg)
        if stacked:  # two models, of which the first is checked
            model = stack([model, copy.deepcopy(model)])
            item = dict(zip(("input_ids", "position_ids", "token_type_ids"), batch[:3]), attention_mask=None,
                        selected=selected, targets=targets)
            loss = model.stacked_losses(pack([item, item]))[0]
        else:
            loss = model.mlm_loss(*batch[:3], None, selected, targets)
        loss.backward()
        hf_in = {k: v for k, v in hf_inputs(cfg, *batch).items() if k != "attention_mask"}
        ref = F.cross_entropy(hf(**hf_in).logits.flatten(0, 1)[selected], targets)
        ref.backward()
        torch.testing.assert_close(loss, ref, atol=ATOL, rtol=0)
        copied = copy.deepcopy(model)
        for p, q in zip(copied.parameters(), model.parameters()):
            p.data = q.grad.clone()
        if stacked:
            single = Bert(cfg)
            single.load_state_dict(copied.unstacked_state(0))
            copied = single
        ours = _hf_state_dict(copied, cfg)
        grads[padding_idx] = (ours, dict(hf.named_parameters()))
    ours, hf_params = grads[0]
    for hf_name, p in hf_params.items():
        torch.testing.assert_close(ours[hf_name], p.grad, atol=ATOL, rtol=1e-4, msg=hf_name)
    name = "bert.embeddings.word_embeddings.weight"
    ours, hf_params = grads[-1]
    assert (ours[name][0] - hf_params[name].grad[0]).abs().max() > 1e-6
    torch.testing.assert_close(ours[name][1:], hf_params[name].grad[1:], atol=ATOL, rtol=1e-4)


def test_dropout_rate_scale_and_reproducibility():
    from minimult.kernels import keep_scaled

    x = torch.empty(1000, 1000)
    torch.manual_seed(3)
    m = keep_scaled(x, 0.1)
    assert m.shape == x.shape and m.dtype == x.dtype
    values = m.unique()
    assert len(values) == 2 and values[0] == 0 and abs(values[1].item() - 1 / 0.9) < 1e-6
    assert abs((m == 0).float().mean().item() - 0.1) < 0.002  # 1e6 draws: sd 3e-4
    torch.manual_seed(3)
    assert torch.equal(keep_scaled(x, 0.1), m)
    assert not torch.equal(keep_scaled(x, 0.1), m)  # the generator moved on

    cfg = ModelConfig(**{**CONFIGS["1head"].__dict__, "dropout": 0.1})
    model = Bert(cfg).train()
    batch = make_batch(cfg)
    outs = []
    for seed in (5, 5, 6):
        torch.manual_seed(seed)
        outs.append(model(*batch))
    assert torch.equal(outs[0], outs[1]) and not torch.allclose(outs[0], outs[2])


def test_attention_softmax_is_computed_in_float32_under_bf16(monkeypatch):
    """On a CPU the attention weights come from a float32 softmax of the (bf16 under autocast) scores,
    rounded back to the scores' dtype (bf16's CPU softmax is ~4x slower); in fp32 it is the plain
    softmax, bit for bit. Every block's attention goes through it, single-head and multi-head."""
    from minimult import kernels as model_mod

    s = torch.randn(4, 9, 9) * 3
    assert torch.equal(model_mod._softmax(s), torch.softmax(s, -1))
    low = s.to(torch.bfloat16)
    assert model_mod._softmax(low).dtype == torch.bfloat16
    assert torch.equal(model_mod._softmax(low), torch.softmax(low.float(), -1).to(torch.bfloat16))
    real = model_mod._softmax
    for name in ("1head", "4heads"):
        cfg = CONFIGS[name]
        model, _ = pair(cfg)
        seen = []
        monkeypatch.setattr(model_mod, "_softmax", lambda x: seen.append(x.dtype) or real(x))
        with torch.no_grad(), precision.autocast("bf16", torch.device("cpu")):
            model(*make_batch(cfg))
        assert len(seen) == cfg.layers, (name, seen)  # every block's attention
        if name == "1head":  # bf16 scores straight from baddbmm (4 heads: the padding bias's add makes them fp32)
            assert seen == [torch.bfloat16] * cfg.layers, seen


def test_bf16_autocast_runs_the_linears_in_bf16_and_stays_close():
    """precision.autocast('bf16') on a CPU: matrix products come out in bf16, LayerNorm outputs (what
    the blocks pass on) in fp32, and the hidden states stay within bf16 rounding of fp32's."""
    cfg = CONFIGS["4heads"]
    model, _ = pair(cfg)
    batch = make_batch(cfg)
    seen = []
    model.blocks[0].attn.qkv.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    with torch.no_grad():
        ref = model(*batch)
        with precision.autocast("bf16", torch.device("cpu")):
            low = model(*batch)
    assert seen == [torch.float32, torch.bfloat16] and low.dtype == torch.float32
    mask = batch[3]
    err = (low - ref)[mask].abs().max() / ref[mask].abs().max()
    assert 0 < err < 0.05, err
    with pytest.raises(MinimultError, match="unknown precision"):
        precision.autocast("fp16", torch.device("cpu"))
    assert precision.resolve("auto", torch.device("cpu")) == "fp32"
    assert precision.resolve("auto", torch.device("cuda")) == "bf16"

