"""Several BERTs of one shape trained at once as one batched model (stacked weights).

`StackedBert(models)` holds, for every parameter of `Bert`, one tensor with a leading model axis:
slice [m] is model m's parameter. Its forward runs the same arithmetic as `Bert` with batched
matrix products (`baddbmm`/`bmm` over the model axis), so M small models make a few large kernel
calls instead of M times as many small ones: on a GPU, where one BERT-small step cannot fill the
device, that is the point; on a CPU the products are already large and stacking is slower
(0.6-0.8x, experiments/bench_stacked.py).

Per-model equality with separate runs (tests/test_stacked.py): every model keeps its own batches
(padded here to a common (B, T); padded rows and keys take no part in any real output), its own
masking draws and its own dropout stream. On the CPU dropout masks are drawn per model, in the order
and with the shapes a single `Bert` draws them, from one generator per model, so a stacked step
equals M separate steps up to float round-off of the batched products. The loss is the sum of the
per-model mean losses; the parameters are disjoint, so each model gets exactly its own gradient.
Gradient clipping is per model (`clip_grad_norm_per_model`), and AdamW is elementwise, so one
optimizer over the stacked tensors is M optimizers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .errors import MinimultError
from . import model as _model
from .model import Bert, _keep_scaled


def _key(name: str) -> str:
    return name.replace(".", "__")


@dataclass
class Packed:
    """M models' batches padded into one (M, B, T) layout."""

    input_ids: torch.Tensor  # (M, B, T) long
    position_ids: torch.Tensor  # (M, B, T) long
    token_type_ids: torch.Tensor  # (M, B, T) long
    key_bias: torch.Tensor | None  # CPU: (M*B, 1, T) additive float; other devices: (M*B, 1, 1, T) bool
    shapes: list[tuple[int, int]]  # (B_m, T_m) of every model's own batch
    selected: torch.Tensor  # (M, N) flat indices into M*B*T (padded entries point at 0)
    targets: torch.Tensor  # (M, N) long, -100 where padded
    counts: torch.Tensor  # (M,) selected tokens per model


def pack(items: list[dict], dtype=torch.float32) -> Packed:
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
    if bool(real.all()):
        key_bias = None
    elif _model.cpu_kernels(device):
        key_bias = torch.zeros(real.shape, dtype=dtype, device=device).masked_fill_(~real, torch.finfo(dtype).min)
        key_bias = key_bias.view(M * B, 1, T)
    else:
        key_bias = real.view(M * B, 1, 1, T)
    return Packed(ids, pos, seg, key_bias, shapes, selected, targets,
                  torch.tensor(counts, dtype=torch.float32, device=device))


class StackedBert(nn.Module):
    """M `Bert`s of one `ModelConfig`; parameter `name` of `Bert` is `self.stack[_key(name)]` (M, ...)."""

    def __init__(self, models: list[Bert]):
        super().__init__()
        if not models:
            raise MinimultError("stacking needs at least one model")
        self.cfg = models[0].cfg
        if any(m.cfg != self.cfg for m in models):
            raise MinimultError("only models with the same configuration can be stacked "
                                f"(got {sorted({str(m.cfg) for m in models})})")
        self.M = len(models)
        self.names = [n for n, _ in models[0].named_parameters()]
        per_model = [dict(m.named_parameters()) for m in models]
        self.stack = nn.ParameterDict({_key(n): nn.Parameter(torch.stack([p[n].detach() for p in per_model]).clone())
                                       for n in self.names})
        self.generators: list[torch.Generator] | None = None  # CPU dropout: one per model, set per step

    def p(self, name: str) -> torch.Tensor:
        return self.stack[_key(name)]

    def unstack_into(self, models: list[Bert]) -> None:
        """Copy slice m of every stacked parameter into models[m]."""
        with torch.no_grad():
            for m, model in enumerate(models):
                params = dict(model.named_parameters())
                for n in self.names:
                    params[n].copy_(self.p(n)[m])

    def param_groups(self, weight_decay: float) -> list[dict]:
        """As `Bert.param_groups`, in the same order: decay weight matrices, not biases/LayerNorm."""
        params = [self.p(n) for n in self.names]
        return [{"params": [p for p in params if p.dim() >= 3], "weight_decay": weight_decay},
                {"params": [p for p in params if p.dim() < 3], "weight_decay": 0.0}]

    # --- building blocks, each the batched twin of the `Bert` module of the same name ---

    def _linear(self, x: torch.Tensor, name: str) -> torch.Tensor:
        M = x.shape[0]
        w, b = self.p(name + ".weight"), self.p(name + ".bias")  # (M, out, in), (M, out)
        y = torch.baddbmm(b[:, None, :], x.reshape(M, -1, x.shape[-1]), w.transpose(1, 2))
        return y.view(*x.shape[:-1], w.shape[1])

    def _layer_norm(self, x: torch.Tensor, name: str) -> torch.Tensor:
        w, b = self.p(name + ".weight"), self.p(name + ".bias")  # (M, H)
        shape = (self.M,) + (1,) * (x.dim() - 2) + (x.shape[-1],)
        y = F.layer_norm(x, x.shape[-1:], eps=self.cfg.layer_norm_eps)
        return torch.addcmul(b.view(shape), y, w.view(shape))

    def _dropout(self, x: torch.Tensor, shapes: list[tuple[int, ...]]) -> torch.Tensor:
        """x (M, B, ...); shapes[m] is the part of x[m] model m's own batch covers (the shape a single
        Bert would draw its mask for)."""
        p = self.cfg.dropout
        if not self.training or p == 0.0:
            return x
        if not _model.cpu_kernels(x.device):
            return F.dropout(x, p, True)
        gens = self.generators or [None] * self.M
        if all(tuple(shape) == tuple(x.shape[1:]) for shape in shapes):  # no padding between models
            return x * torch.stack([_keep_scaled(x[m], p, gens[m]) for m in range(self.M)])
        scale = torch.ones_like(x)
        for m, shape in enumerate(shapes):
            part = scale[m][tuple(slice(0, s) for s in shape)]
            part.copy_(_keep_scaled(part, p, gens[m]))
        return x * scale

    def _attention(self, x: torch.Tensor, i: int, key_bias, shapes) -> torch.Tensor:
        M, B, T, H = x.shape
        nh, hs = self.cfg.heads, H // self.cfg.heads
        pre = f"blocks.{i}.attn."
        q, k, v = (t.reshape(M * B, T, H) for t in self._linear(x, pre + "qkv").split(H, dim=-1))
        if not _model.cpu_kernels(x.device):
            q, k, v = (t.view(M * B, T, nh, hs).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=key_bias,
                                               dropout_p=self.cfg.dropout if self.training else 0.0)
            return self._linear(y.transpose(1, 2).reshape(M, B, T, H), pre + "proj")
        if nh == 1:
            kt = k.transpose(1, 2)
            s = (torch.bmm(q, kt).mul_(hs**-0.5) if key_bias is None
                 else torch.baddbmm(key_bias, q, kt, alpha=hs**-0.5))  # (M*B, T, T)
            a = self._dropout(torch.softmax(s, -1).view(M, B, T, T), [(b, t, t) for b, t in shapes])
            y = torch.bmm(a.view(M * B, T, T), v)
        else:
            q, k, v = (t.view(M * B, T, nh, hs).transpose(1, 2) for t in (q, k, v))
            s = torch.matmul(q, k.transpose(-1, -2)).mul_(hs**-0.5)
            if key_bias is not None:
                s = s + key_bias[:, None]
            a = self._dropout(torch.softmax(s, -1).view(M, B, nh, T, T), [(b, nh, t, t) for b, t in shapes])
            y = torch.matmul(a.view(M * B, nh, T, T), v).transpose(1, 2)
        return self._linear(y.reshape(M, B, T, H), pre + "proj")

    def forward(self, packed: Packed) -> torch.Tensor:
        """(M, B, T, H) final hidden states."""
        M, B, T = packed.input_ids.shape
        hidden_shapes = [(b, t, self.cfg.hidden) for b, t in packed.shapes]
        x = 0
        for name, ids in (("token", packed.input_ids), ("position", packed.position_ids),
                          ("segment", packed.token_type_ids)):
            key = f"embeddings.lookups.{name}.weight"
            if _key(key) not in self.stack:
                continue
            table = self.p(key)  # (M, rows, H)
            offset = torch.arange(M, device=ids.device).view(M, 1, 1) * table.shape[1]
            x = x + F.embedding(ids + offset, table.reshape(-1, table.shape[-1]))
        x = self._dropout(self._layer_norm(x, "embeddings.ln"), hidden_shapes)
        for i in range(self.cfg.layers):
            pre = f"blocks.{i}."
            a = self._attention(x, i, packed.key_bias, packed.shapes)
            x = self._layer_norm(x + self._dropout(a, hidden_shapes), pre + "ln_attn")
            f = self._linear(F.gelu(self._linear(x, pre + "fc_in")), pre + "fc_out")
            x = self._layer_norm(x + self._dropout(f, hidden_shapes), pre + "ln_ffn")
        return x

    def mlm_losses(self, packed: Packed) -> torch.Tensor:
        """(M,) mean MLM cross-entropy of every model on its own selected tokens."""
        h = self(packed)
        M, N = packed.selected.shape
        hs = h.reshape(-1, h.shape[-1])[packed.selected]  # (M, N, H)
        hs = self._layer_norm(F.gelu(self._linear(hs, "head.dense")), "head.ln")
        decoder = self.p("embeddings.lookups.token.weight")  # (M, V, H), tied
        logits = torch.baddbmm(self.p("head.bias")[:, None, :], hs, decoder.transpose(1, 2))  # (M, N, V)
        ce = F.cross_entropy(logits.float().reshape(M * N, -1), packed.targets.reshape(-1),
                             reduction="none", ignore_index=-100).view(M, N)
        return ce.sum(1) / packed.counts

    @torch.no_grad()
    def clip_grad_norm_per_model(self, max_norm: float) -> torch.Tensor:
        """`torch.nn.utils.clip_grad_norm_` applied to each model's own gradients; (M,) norms."""
        grads = [p.grad for p in self.stack.values() if p.grad is not None]
        norms = torch.stack([g.reshape(self.M, -1).float().norm(dim=1) for g in grads], 1).norm(dim=1)  # (M,)
        coef = (max_norm / (norms + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef.view((self.M,) + (1,) * (g.dim() - 1)).to(g.dtype))
        return norms
