"""BERT as in Devlin et al. (post-LayerNorm), written small.

Differences from the published BERT code, on purpose:
- padding keys are masked in attention (the original pretraining code did not mask them);
- the MLM output layer is applied only to the positions the caller selects (`mlm_logits`, `mlm_loss`).

The model knows nothing about languages or mods: position ids and token type ids always come from
the caller, so e.g. language-specific positions are just different ids into a taller position table.
Given identical weights it matches `transformers.BertForMaskedLM` (see `minimult.export`, tests).

Speed on CPU (measured with experiments/bench_train.py, which lists what was tried): attention is
written out (bmm/baddbmm/softmax on strided views with an additive key bias, instead of SDPA's math
fallback when dropout > 0), and dropout draws its keep mask from numpy's SFC64 generator (seeded from
torch's default generator, so `torch.manual_seed` still reproduces a run) instead of `bernoulli_`;
under bf16 autocast the attention softmax is computed in float32 (`_softmax`: bf16's CPU kernel is slower).
On other devices attention is SDPA and dropout is `F.dropout` (their fused kernels).

Several models of one shape train at once as one `Bert` whose parameters carry a leading model axis
(`stack(models)`; same parameter names, slice [m] is model m's), through the same forward pass with a
leading model axis on its inputs: each layer is then one batched matrix product for all M models
(`baddbmm` over the model axis), a single model keeping torch.nn's kernels. That pays off on a GPU, where one
BERT-small step cannot fill the device; on a CPU the products are already large and stacking is
slower (0.6-0.8x, experiments/bench_stacked.py). Per-model equality with separate runs: every model
keeps its own batches (padded to a common (B, T); padded rows and keys take no part in any real
output), its own masking draws and its own dropout stream (on the CPU drawn per model, in the order and
shapes a single `Bert` draws them, from one generator per model); the loss is the sum of per-model
mean losses, gradient clipping is per model and AdamW is elementwise, so one optimizer over the
stacked tensors is M optimizers.
"""

from __future__ import annotations

import copy
import re
from collections import deque
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from minimult.errors import MinimultError


from minimult.model_config import ModelConfig, check_stack


def pick_device(name: str) -> torch.device:
    """'auto' (CUDA when there is one, else CPU), 'cpu', 'cuda' or 'cuda:N'."""
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", name):
        raise MinimultError(f"unknown device {name!r}: use auto, cpu, cuda or cuda:N")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise MinimultError(f"device {name!r} requested but CUDA is not available")
    device = torch.device(name)
    if device.index is not None and device.index >= torch.cuda.device_count():
        n = torch.cuda.device_count()
        raise MinimultError(f"device {name!r} requested but this machine has {n} CUDA device(s)"
                            + (f": cuda:0 to cuda:{n - 1}" if n else ""))
    return device


# SDPA's kernels on GPU, cuDNN's left out: it builds an execution plan for every new (batch, length) shape, and
# length-bucketed batches bring new shapes for hundreds of steps (on an H200 a paper-preset run in bf16 took
# 35-45 ms a step with it allowed, 27-28 without; docs/speed.md, "On a GPU").
SDPA_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def attention_kernels(device: torch.device):
    """The context a forward pass runs its blocks in: SDPA restricted to `SDPA_BACKENDS` where SDPA runs (entered
    once per pass, not per block: ~30 us each on a CPU core), nothing for the CPU formulation."""
    return nullcontext() if cpu_kernels(device) else sdpa_kernel(SDPA_BACKENDS)


def cpu_kernels(device: torch.device) -> bool:
    """True: the CPU formulation (written-out attention with an additive key bias, numpy dropout
    masks); False: SDPA with a bool mask and `F.dropout` (GPUs). One switch, so tests can run the GPU
    formulation on a CPU."""
    return device.type == "cpu"


def _keep_scaled(x: torch.Tensor, p: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """Dropout multiplier for CPU tensor x: 1/(1-p) with probability 1-p, else 0 (float, x's shape).

    32 random bits per element from numpy's SFC64, seeded by one draw from `generator` (default:
    torch's default generator), so runs stay reproducible under `torch.manual_seed`; P(drop) = p up
    to 2**-32.
    """
    seed = int(torch.randint(0, 2**62, (), generator=generator))
    n = x.numel()
    bits = np.random.Generator(np.random.SFC64(seed)).bit_generator.random_raw((n + 1) // 2).view(np.int32)[:n]
    keep = np.greater_equal(bits, round(p * 2**32) - 2**31)
    scaled = np.multiply(keep, np.float32(1.0 / (1.0 - p)), dtype=np.float32)
    return torch.from_numpy(scaled).view(x.shape).to(x.dtype)


def _dropout(x: torch.Tensor, p: float, training: bool, stack: Stack | None = None, part=None) -> torch.Tensor:
    """F.dropout, with the mask from `_keep_scaled` on CPU (bernoulli_ costs ~5x more per element); for
    stacked models (x (M, B, ...)) each model's own mask (`Stack.keep_scaled`)."""
    if not training or p == 0.0:
        return x
    if not cpu_kernels(x.device):
        return F.dropout(x, p, True)
    return x * (_keep_scaled(x, p) if stack is None else stack.keep_scaled(x, p, part))


# Every layer runs one model, or M stacked ones whose parameters carry a leading model axis (`stack`) on
# inputs with that axis in front: the same arithmetic, each operation picking its kernel from whether its
# parameters are stacked (one model: the module itself, so its kernels and hooks are those of torch.nn).


def _lookup(m: nn.Embedding, ids: torch.Tensor) -> torch.Tensor:
    """ids (B, T) -> (B, T, H); stacked: ids (M, B, T), each model's into its own table -> (M, B, T, H)."""
    table = m.weight
    if table.dim() == 2:
        return m(ids)
    M = table.shape[0]
    offset = torch.arange(M, device=ids.device).view(M, 1, 1) * table.shape[1]
    return F.embedding(ids + offset, table.reshape(-1, table.shape[-1]))


def _linear(m: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """x (..., in) -> (..., out); stacked: x (M, ..., in) through M linear layers."""
    return m(x) if m.weight.dim() == 2 else _affine(x, m.weight, m.bias)


def _affine(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """F.linear; stacked (weight (M, out, in), bias (M, out), x (M, ..., in)): one batched product."""
    if weight.dim() == 2:
        return F.linear(x, weight, bias)
    M = x.shape[0]
    y = torch.baddbmm(bias[:, None, :], x.reshape(M, -1, x.shape[-1]), weight.transpose(1, 2))
    return y.view(*x.shape[:-1], weight.shape[1])


def _layer_norm(m: nn.LayerNorm, x: torch.Tensor) -> torch.Tensor:
    if m.weight.dim() == 1:
        return m(x)
    shape = (x.shape[0],) + (1,) * (x.dim() - 2) + (x.shape[-1],)  # stacked: weight and bias (M, H)
    y = F.layer_norm(x, x.shape[-1:], eps=m.eps)
    return torch.addcmul(m.bias.view(shape), y, m.weight.view(shape))


@dataclass(frozen=True)
class Stack:
    """What a forward pass of M stacked models needs besides their weights (`Bert` builds it for ids with a
    leading model axis): the part of the padded (M, B, T) batch each model's own batch covers, and each
    model's dropout generator (CPU; None: torch's default)."""

    shapes: list[tuple[int, int]]  # (B_m, T_m)
    generators: list[torch.Generator | None]

    def keep_scaled(self, x: torch.Tensor, p: float, part=None) -> torch.Tensor:
        """Dropout multipliers for x (M, B, ...): model m's drawn from its own generator over the part of
        x[m] its batch covers (`part(B_m, T_m)`; default (B_m, T_m, rest): hidden states), the mask a single
        `Bert` draws for its batch; 1 elsewhere."""
        parts = [part(b, t) if part else (b, t, *x.shape[3:]) for b, t in self.shapes]
        if all(tuple(shape) == tuple(x.shape[1:]) for shape in parts):  # no padding between models
            return torch.stack([_keep_scaled(x[m], p, g) for m, g in enumerate(self.generators)])
        scale = torch.ones_like(x)
        for m, (shape, g) in enumerate(zip(parts, self.generators)):
            region = scale[m][tuple(slice(0, n) for n in shape)]
            region.copy_(_keep_scaled(region, p, g))
        return scale


class Embeddings(nn.Module):
    """Sum of lookups (token, position, segment) -> LayerNorm -> dropout.

    The lookups live in a dict so that an ablation drops or adds one through the config, not through
    branches in `forward`; each lookup reads the id tensor of the same name.
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        sizes = {"token": cfg.vocab_size, "position": cfg.max_positions, "segment": cfg.type_vocab_size}
        self.lookups = nn.ModuleDict({k: nn.Embedding(n, cfg.hidden) for k, n in sizes.items() if n > 0})
        self.ln = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.drop = nn.Dropout(cfg.dropout)
        self.padding_idx = cfg.padding_idx

    def forward(self, ids: dict[str, torch.Tensor], stack: Stack | None = None) -> torch.Tensor:
        x = sum(_no_padding_gradient(_lookup(lookup, ids[name]), ids[name], name, self.padding_idx)
                for name, lookup in self.lookups.items())  # (B, T, H)
        return _dropout(_layer_norm(self.ln, x), self.drop.p, self.training, stack)


def _no_padding_gradient(looked_up: torch.Tensor, ids: torch.Tensor, name: str, padding_idx: int) -> torch.Tensor:
    """The token lookup with no gradient at `padding_idx` (as nn.Embedding's padding_idx); others unchanged."""
    if name != "token" or padding_idx < 0:
        return looked_up
    return torch.where((ids == padding_idx)[..., None], looked_up.detach(), looked_up)


def _softmax(scores: torch.Tensor) -> torch.Tensor:
    """Attention weights over the last axis, computed in float32 and returned in the scores' dtype: under
    bf16 autocast on a CPU the bf16 softmax kernel and its backward take ~4x as long as float32's with
    both casts (1.6 vs 0.37 ms a layer for (256, 27, 27); docs/speed.md), and float32 rounds less; in
    float32 it is the plain softmax."""
    return torch.softmax(scores, -1, dtype=torch.float32).to(scores.dtype)


class SelfAttention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.heads, self.dropout = cfg.heads, cfg.dropout
        self.qkv = nn.Linear(cfg.hidden, 3 * cfg.hidden)  # fused query, key, value (in that order)
        self.proj = nn.Linear(cfg.hidden, cfg.hidden)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, stack: Stack | None = None) -> torch.Tensor:
        """x (B, T, H), stacked (M, B, T, H); mask None (no padding) or (rows, 1, 1, T) with rows = B or M*B:
        on CPU an additive key bias, else bool."""
        *lead, T, H = x.shape
        nh, hs = self.heads, H // self.heads
        q, k, v = (t.reshape(-1, T, H) for t in _linear(self.qkv, x).split(H, dim=-1))  # (rows, T, H) strided views
        if not cpu_kernels(x.device):
            q, k, v = (t.view(-1, T, nh, hs).transpose(1, 2) for t in (q, k, v))  # (rows, nh, T, hs) views
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0)
            return _linear(self.proj, y.transpose(1, 2).reshape(*lead, T, H))
        if nh == 1:  # (rows, T, H) views straight into bmm: no copies, no transposes
            kt = k.transpose(1, 2)
            s = torch.bmm(q, kt).mul_(hs**-0.5) if mask is None else torch.baddbmm(mask[:, 0], q, kt, alpha=hs**-0.5)
            y = torch.bmm(self._drop(_softmax(s), lead, stack), v)  # (rows, T, H)
        else:
            q, k, v = (t.view(-1, T, nh, hs).transpose(1, 2) for t in (q, k, v))
            s = torch.matmul(q, k.transpose(-1, -2)).mul_(hs**-0.5)
            if mask is not None:
                s = s + mask
            y = torch.matmul(self._drop(_softmax(s), lead, stack), v).transpose(1, 2)  # (rows, T, nh, hs)
        return _linear(self.proj, y.reshape(*lead, T, H))

    def _drop(self, a: torch.Tensor, lead: list[int], stack: Stack | None) -> torch.Tensor:
        """Dropout on attention weights a (rows, [nh,] T, T); stacked, each model's over its own batch."""
        if stack is None:
            return _dropout(a, self.dropout, self.training)
        heads = a.shape[1:-2]  # () or (nh,)
        per_model = a.view(*lead, *a.shape[1:])  # (M, B, [nh,] T, T)
        return _dropout(per_model, self.dropout, self.training, stack, lambda b, t: (b, *heads, t, t)).view(a.shape)


class Block(nn.Module):
    """Post-LN transformer block: x = LN(x + drop(attn(x))); x = LN(x + drop(ffn(x)))."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attn = SelfAttention(cfg)
        self.ln_attn = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.fc_in = nn.Linear(cfg.hidden, cfg.intermediate)
        self.fc_out = nn.Linear(cfg.intermediate, cfg.hidden)
        self.ln_ffn = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, stack: Stack | None = None) -> torch.Tensor:
        p, training = self.drop.p, self.training
        x = _layer_norm(self.ln_attn, x + _dropout(self.attn(x, mask, stack), p, training, stack))
        ffn = _linear(self.fc_out, F.gelu(_linear(self.fc_in, x)))  # exact erf GELU
        return _layer_norm(self.ln_ffn, x + _dropout(ffn, p, training, stack))


class MLMHead(nn.Module):
    """dense -> GELU -> LayerNorm -> decoder tied to the token embeddings, plus its own bias."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.dense = nn.Linear(cfg.hidden, cfg.hidden)
        self.ln = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(cfg.vocab_size))

    def forward(self, h: torch.Tensor, decoder_weight: torch.Tensor) -> torch.Tensor:
        h = _layer_norm(self.ln, F.gelu(_linear(self.dense, h)))  # (N, H); stacked (M, N, H)
        return _affine(h, decoder_weight, self.bias)  # (N, V); decoder_weight (V, H) is the token table


class NSPHead(nn.Module):
    """BERT's pooler (dense + tanh on [CLS]) and a two-way classifier: is B the next sentence?"""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.pool = nn.Linear(cfg.hidden, cfg.hidden)
        self.out = nn.Linear(cfg.hidden, 2)

    def forward(self, cls: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.pool(cls)))  # (B, 2)


class Bert(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.models = 1  # > 1: parameters carry a leading model axis (see `stack`)
        self.generators: list[torch.Generator] | None = None  # stacked, CPU: one dropout generator per model
        self.embeddings = Embeddings(cfg)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.head = MLMHead(cfg)
        if cfg.nsp:  # registered last: the other modules draw the same initial weights with or without it
            self.nsp_head = NSPHead(cfg)
        self.apply(self._init)

    def _init(self, m: nn.Module):
        std = self.cfg.init_std
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.trunc_normal_(m.weight, std=std, a=-2 * std, b=2 * std)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)
        if isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)

    def _embed(self, input_ids, position_ids, token_type_ids, attention_mask, stack: Stack | None = None):
        """Embedding output (B, T, H) and the attention mask (B, 1, 1, T) or None (no padding): on CPU
        an additive bias (0 = key takes part, finfo.min = padding; a row with no real key at all would
        attend uniformly, where SDPA gives zeros), elsewhere bool for SDPA. Stacked: (M, B, T, H) and
        (M*B, 1, 1, T)."""
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        x = self.embeddings({"token": input_ids, "position": position_ids, "segment": token_type_ids}, stack)
        if attention_mask is None:
            return x, None
        mask = attention_mask.reshape(-1, 1, 1, attention_mask.shape[-1]).bool()
        if not cpu_kernels(x.device):
            return x, mask
        return x, torch.zeros(mask.shape, dtype=x.dtype).masked_fill_(~mask, torch.finfo(x.dtype).min)

    def _layers(self, input_ids, position_ids, token_type_ids, attention_mask, depth: int,
                shapes: list[tuple[int, int]] | None) -> Iterator[torch.Tensor]:
        """The forward pass, of one model or of M stacked ones: the embedding output, then the output of
        each block up to block `depth`."""
        stack = None
        if input_ids.dim() == 3:  # (M, B, T): a leading model axis
            M, B, T = input_ids.shape
            stack = Stack(shapes or [(B, T)] * M, self.generators or [None] * M)
        x, mask = self._embed(input_ids, position_ids, token_type_ids, attention_mask, stack)
        yield x
        for block in self.blocks[:depth]:
            x = block(x, mask, stack)
            yield x

    def forward(self, input_ids, position_ids, token_type_ids=None, attention_mask=None, shapes=None) -> torch.Tensor:
        """(B, T) long ids, (B, T) bool attention_mask (True = real token; None = no padding) -> (B, T, H).

        Stacked (`stack`): (M, B, T) ids and mask -> (M, B, T, H), model m's own batch in [m, :B_m, :T_m]
        with `shapes[m]` = (B_m, T_m) (default: all of it); the rest is padding that takes no part in
        model m's outputs there and draws none of its dropout."""
        with attention_kernels(input_ids.device):
            return deque(self._layers(input_ids, position_ids, token_type_ids, attention_mask, self.cfg.layers,
                                      shapes), maxlen=1)[0]  # the last layer, without holding the others

    def hidden_states(self, input_ids, position_ids, token_type_ids=None, attention_mask=None,
                      layers=None, shapes=None) -> list[torch.Tensor]:
        """List indexed by layer: [0] = embedding output after LayerNorm, [i] = output of block i
        (stacked, as `forward`: each (M, B, T, H)).

        With `layers` (an iterable of layer numbers) only blocks up to max(layers) run, and the list
        stops there (length max(layers) + 1), so `out[i]` is still layer i for every requested i.
        """
        layers = range(self.cfg.layers + 1) if layers is None else sorted(layers)
        if not layers or layers[0] < 0 or layers[-1] > self.cfg.layers:
            raise MinimultError(f"layers must be a non-empty subset of 0..{self.cfg.layers}, got {list(layers)}")
        with attention_kernels(input_ids.device):
            return list(self._layers(input_ids, position_ids, token_type_ids, attention_mask, layers[-1], shapes))

    def mlm_logits(self, hidden_selected: torch.Tensor) -> torch.Tensor:
        """(N, H) final hidden states at the selected positions -> (N, V) logits; stacked (M, N, H) -> (M, N, V)."""
        return self.head(hidden_selected, self.embeddings.lookups["token"].weight)  # tied decoder

    def mlm_loss(self, input_ids, position_ids, token_type_ids, attention_mask, selected, targets,
                 nsp_labels=None, totals: tuple[int, int] | None = None) -> torch.Tensor:
        """Mean cross-entropy at `selected` (N,) flat indices into B*T, against `targets` (N,); with
        `nsp_labels` (B,) (1 = B is the next sentence) plus the next-sentence cross-entropy on [CLS].

        `totals` = (masked tokens, rows) of a whole batch this one is a share of (several processes,
        minimult.distributed): the sums of the cross-entropies divided by those instead, so that the
        shares' losses (and gradients) add up to the whole batch's mean."""
        h = self(input_ids, position_ids, token_type_ids, attention_mask)  # (B, T, H)
        logits = self.mlm_logits(h.flatten(0, 1)[selected])  # (N, V)
        if totals is not None:
            masked, rows = totals
            loss = F.cross_entropy(logits.float(), targets, reduction="sum") / masked
            if nsp_labels is not None:
                loss = loss + F.cross_entropy(self.nsp_head(h[:, 0]).float(), nsp_labels, reduction="sum") / rows
            return loss
        loss = F.cross_entropy(logits.float(), targets)
        if nsp_labels is not None:
            loss = loss + F.cross_entropy(self.nsp_head(h[:, 0]).float(), nsp_labels)
        return loss

    def num_parameters(self) -> int:
        """Parameters of one model (the tied decoder matrix counts once)."""
        return sum(p.numel() for p in self.parameters()) // self.models

    def param_groups(self, weight_decay: float) -> list[dict]:
        """AdamW groups: decay every weight matrix (dim >= 2 per model), none on biases and LayerNorm."""
        params = [p for p in self.parameters() if p.requires_grad]
        matrix = lambda p: p.dim() - (self.models > 1) >= 2  # noqa: E731
        return [
            {"params": [p for p in params if matrix(p)], "weight_decay": weight_decay},
            {"params": [p for p in params if not matrix(p)], "weight_decay": 0.0},
        ]

    # --- several models at once: parameters with a leading model axis ---

    def unstacked_state(self, m: int) -> dict[str, torch.Tensor]:
        """Model m's state dict, as a single `Bert` of this config has it."""
        return {k: v[m] for k, v in self.state_dict().items()} if self.models > 1 else self.state_dict()

    def stacked_losses(self, packed: "Packed") -> torch.Tensor:
        """(M,) mean MLM cross-entropy of every stacked model on its own selected tokens."""
        h = self(packed.input_ids, packed.position_ids, packed.token_type_ids, packed.attention_mask,
                 packed.shapes)  # (M, B, T, H)
        M, N = packed.selected.shape
        logits = self.mlm_logits(h.reshape(-1, h.shape[-1])[packed.selected])  # (M, N, V)
        ce = F.cross_entropy(logits.float().reshape(M * N, -1), packed.targets.reshape(-1),
                             reduction="none", ignore_index=-100).view(M, N)
        return ce.sum(1) / packed.counts

    @torch.no_grad()
    def clip_grad_norm_per_model(self, max_norm: float) -> torch.Tensor:
        """`torch.nn.utils.clip_grad_norm_` applied to each model's own gradients; (M,) norms.

        The per-tensor norms are summed in sorted order of the parameter names with `.` read as `__`:
        the order stacked training has always used, so stacked runs stay bit-identical to earlier ones
        (the order changes the norm's last bits, and with them every clipped step)."""
        named = sorted(self.named_parameters(), key=lambda item: item[0].replace(".", "__"))
        grads = [p.grad for _, p in named if p.grad is not None]
        norms = torch.stack([g.reshape(self.models, -1).float().norm(dim=1) for g in grads], 1).norm(dim=1)
        coef = (max_norm / (norms + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef.view((self.models,) + (1,) * (g.dim() - 1)).to(g.dtype))
        return norms


def stack(models: list[Bert]) -> Bert:
    """One `Bert` holding `models` (same config) with a leading model axis on every parameter."""
    if not models:
        raise MinimultError("stacking needs at least one model")
    cfg = models[0].cfg
    check_stack(cfg, len(models))
    if any(m.cfg != cfg for m in models):
        raise MinimultError("only models with the same configuration can be stacked "
                            f"(got {sorted({str(m.cfg) for m in models})})")
    stacked = copy.deepcopy(models[0])
    per_model = [dict(m.named_parameters()) for m in models]
    for name, _ in list(stacked.named_parameters()):
        owner, _, leaf = name.rpartition(".")
        joined = torch.stack([p[name].detach() for p in per_model]).clone()
        setattr(stacked.get_submodule(owner), leaf, nn.Parameter(joined))
    stacked.models = len(models)
    return stacked


@dataclass
class Packed:
    """M models' batches padded into one (M, B, T) layout."""

    input_ids: torch.Tensor  # (M, B, T) long
    position_ids: torch.Tensor  # (M, B, T) long
    token_type_ids: torch.Tensor  # (M, B, T) long
    attention_mask: torch.Tensor | None  # (M, B, T) bool, True = a real token of the model's batch; None: all are
    shapes: list[tuple[int, int]]  # (B_m, T_m) of every model's own batch
    selected: torch.Tensor  # (M, N) flat indices into M*B*T (padded entries point at 0)
    targets: torch.Tensor  # (M, N) long, -100 where padded
    counts: torch.Tensor  # (M,) selected tokens per model


def pack(items: list[dict]) -> Packed:
    """items[m]: input_ids, position_ids, token_type_ids, attention_mask (or None) as `Bert.mlm_loss`
    takes them, plus `selected` (flat indices into that model's B_m*T_m) and `targets`."""
    M = len(items)
    shapes = [tuple(it["input_ids"].shape) for it in items]
    B, T = max(b for b, _ in shapes), max(t for _, t in shapes)
    device = items[0]["input_ids"].device
    ids, pos, seg = (torch.zeros((M, B, T), dtype=torch.long, device=device) for _ in range(3))
    real = torch.zeros((M, B, T), dtype=torch.bool, device=device)
    N = max(int(it["selected"].numel()) for it in items)
    selected = torch.zeros((M, N), dtype=torch.long, device=device)
    targets = torch.full((M, N), -100, dtype=torch.long, device=device)
    counts = []
    for m, (it, (b, t)) in enumerate(zip(items, shapes)):
        ids[m, :b, :t] = it["input_ids"]
        pos[m, :b, :t] = it["position_ids"]
        if it.get("token_type_ids") is not None:
            seg[m, :b, :t] = it["token_type_ids"]
        real[m, :b, :t] = True if it.get("attention_mask") is None else it["attention_mask"].bool()
        sel = it["selected"]
        n = sel.numel()
        selected[m, :n] = m * B * T + (sel // t) * T + sel % t
        targets[m, :n] = it["targets"]
        counts.append(n)
    return Packed(ids, pos, seg, None if bool(real.all()) else real, shapes, selected, targets,
                  torch.tensor(counts, dtype=torch.float32, device=device))
