"""Several models of one shape trained as one: a leading model axis on every parameter and input.

`stack(models)` gives a `StackedBert`: the module tree of `minimult.model.Bert` (same classes, same
parameter names, slice [m] of every parameter is model m's) with its leaf layers swapped for stacked ones
(`nn.Linear`, `nn.LayerNorm`, `nn.Embedding`, the MLM decoder and dropout), so the blocks' and heads' code
is the plain model's. It takes ids with a leading model axis, (M, B, T), and each layer is one batched
matrix product for all M models (`baddbmm` over the model axis). That pays off on a GPU, where one
BERT-small step cannot fill the device; on a CPU the products are already large and stacking is slower
(0.6-0.8x, experiments/bench_stacked.py).

Per-model equality with separate runs: every model keeps its own batches (`pack`: padded to a common
(B, T); padded rows and keys take no part in any real output), its own masking draws and its own dropout
stream (on the CPU drawn per model, in the order and shapes a single `Bert` draws them, from one generator
per model: `StackedBert.context.generators`); the loss is the sum of per-model losses (`Bert.mlm_loss`, MLM and
NSP, each model's over its own batch), gradient clipping is per model and AdamW is elementwise, so one
optimizer over the stacked tensors is M optimizers.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from minimult import kernels
from minimult.data import microbatches
from minimult.errors import MinimultError
from minimult.model import Bert, Decoder, Dropout, SelfAttention


class StackedDecoder(nn.Module):
    """The MLM decoder of M models, each tied to its own token table; M linear layers as one batched product."""

    def forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """x (M, ..., in) float, weight (M, out, in), bias (M, out) -> (M, ..., out): model m's rows through model
        m's layer (the decoder: h (M, N, H), each model's own token table (M, V, H) -> logits (M, N, V))."""
        M = x.shape[0]
        y = torch.baddbmm(bias[:, None, :], x.reshape(M, -1, x.shape[-1]), weight.transpose(1, 2))
        return y.view(*x.shape[:-1], weight.shape[1])


class StackedLinear(StackedDecoder):
    """M `nn.Linear`s of one shape: weight (M, out, in), bias (M, out)."""

    def __init__(self, weight: nn.Parameter, bias: nn.Parameter):
        super().__init__()
        self.weight, self.bias = weight, bias  # (M, out, in), (M, out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (M, ..., in) float -> (M, ..., out)."""
        return super().forward(x, self.weight, self.bias)


class StackedLayerNorm(nn.Module):
    """M `nn.LayerNorm`s over the last axis: weight and bias (M, H)."""

    def __init__(self, weight: nn.Parameter, bias: nn.Parameter, eps: float):
        super().__init__()
        self.weight, self.bias, self.eps = weight, bias, eps  # (M, H) each

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (M, ..., H) float -> (M, ..., H), normalised over H with model m's weight and bias."""
        shape = (x.shape[0],) + (1,) * (x.dim() - 2) + (x.shape[-1],)
        y = F.layer_norm(x, x.shape[-1:], eps=self.eps)
        return torch.addcmul(self.bias.view(shape), y, self.weight.view(shape))


class StackedEmbedding(nn.Module):
    """M `nn.Embedding`s of one shape: weight (M, rows, H)."""

    def __init__(self, weight: nn.Parameter):
        super().__init__()
        self.weight = weight  # (M, rows, H)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """ids (M, B, T), each model's into its own table -> (M, B, T, H)."""
        M, rows = self.weight.shape[:2]
        offset = torch.arange(M, device=ids.device).view(M, 1, 1) * rows
        return F.embedding(ids + offset, self.weight.reshape(-1, self.weight.shape[-1]))


@dataclass
class StackContext:
    """What the stacked dropouts of one `StackedBert` read besides their input: the part of the padded
    (M, B, T) batch each model's own batch covers (None: all of it) and each model's dropout generator
    (CPU; None: torch's default)."""

    models: int
    shapes: list[tuple[int, int]] | None = None  # (B_m, T_m)
    generators: list[torch.Generator] | None = None


class StackedDropout(nn.Dropout):
    """Dropout of M stacked models, on hidden states (M, B, T, H) or (`attention`) on attention weights
    (M*B, [nh,] T, T): on CPU each model's mask over its own batch (`_keep_scaled`)."""

    def __init__(self, p: float, context: StackContext, attention: bool):
        super().__init__(p)
        self.context, self.attention = context, attention

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x as in the class docstring -> the same shape, each model's part dropped with its own mask."""
        return kernels.dropout(x, self.p, self.training, self._keep_scaled)

    def _keep_scaled(self, x: torch.Tensor, p: float) -> torch.Tensor:
        """Dropout multipliers for x: model m's drawn from its own generator over the part of x[m] its batch
        covers, the mask a single `Bert` draws for its batch; 1 elsewhere."""
        ctx = self.context
        if self.attention:  # (M, B, [nh,] T, T): model m's (B_m, [nh,] T_m, T_m)
            per_model = x.view(ctx.models, -1, *x.shape[1:])
            heads = per_model.shape[2:-2]
            shapes = ctx.shapes or [(per_model.shape[1], per_model.shape[-1])] * ctx.models
            parts = [(b, *heads, t, t) for b, t in shapes]
        else:  # (M, B, T, H): model m's (B_m, T_m, H)
            per_model = x
            shapes = ctx.shapes or [tuple(x.shape[1:3])] * ctx.models
            parts = [(b, t, *x.shape[3:]) for b, t in shapes]
        generators = ctx.generators or [None] * ctx.models
        if all(tuple(shape) == tuple(per_model.shape[1:]) for shape in parts):  # no padding between models
            scale = torch.stack([kernels.keep_scaled(per_model[m], p, g) for m, g in enumerate(generators)])
        else:
            scale = torch.ones_like(per_model)
            for m, (shape, g) in enumerate(zip(parts, generators)):
                region = scale[m][tuple(slice(0, n) for n in shape)]
                region.copy_(kernels.keep_scaled(region, p, g))
        return scale.view(x.shape)


@dataclass
class Packed:
    """M models' batches padded into one (M, B, T) layout."""

    input_ids: torch.Tensor  # (M, B, T) long
    position_ids: torch.Tensor  # (M, B, T) long
    token_type_ids: torch.Tensor  # (M, B, T) long
    attention_mask: torch.Tensor | None  # (M, B, T) bool, True = a real token of the model's batch; None: all are
    shapes: list[tuple[int, int]]  # (B_m, T_m) of every model's own batch
    selected: torch.Tensor  # (M, N) flat indices into M*B*T (padded entries point at the model's first token)
    targets: torch.Tensor  # (M, N) long, -100 where padded
    counts: torch.Tensor  # (M,) selected tokens per model
    nsp_labels: torch.Tensor | None = None  # (M, B) long, -100 in padded rows; None: no NSP
    rows: torch.Tensor | None = None  # (M,) rows per model (B_m); None: no NSP


def pack(items: list[dict]) -> Packed:
    """items[m]: input_ids, position_ids, token_type_ids, attention_mask (or None) and nsp_labels (or None)
    as `Bert.mlm_loss` takes them, plus `selected` (flat indices into that model's B_m*T_m) and `targets`: each
    padded to the largest rows, columns and selected count among them (`microbatches.pad`) and stacked, model
    m's selected tokens offset into the (M, B, T) layout."""
    shapes = [tuple(it["input_ids"].shape) for it in items]
    B, T = max(b for b, _ in shapes), max(t for _, t in shapes)
    padded = [microbatches.pad(it, (B, T, max(int(it["selected"].numel()) for it in items))) for it in items]
    joined = {k: torch.stack([p[k] for p in padded]) for k, v in padded[0].items() if v is not None}
    real, targets, labels = joined["attention_mask"], joined["targets"], joined.get("nsp_labels")
    offsets = torch.arange(len(items), device=targets.device)[:, None] * (B * T)
    # each model's own selected tokens and rows (a batch padded to a fixed shape holds more entries)
    return Packed(joined["input_ids"], joined["position_ids"], joined["token_type_ids"],
                  None if bool(real.all()) else real, shapes, joined["selected"] + offsets, targets,
                  (targets >= 0).sum(1).float(), labels, None if labels is None else (labels >= 0).sum(1).float())


class StackedBert(Bert):
    """M `Bert`s of one config as one module (see the module docstring); build it with `stack`."""

    def __init__(self, models: list[Bert]):
        nn.Module.__init__(self)
        if not models:
            raise MinimultError("stacking needs at least one model")
        cfg = models[0].cfg
        if any(m.cfg != cfg for m in models):
            raise MinimultError("only models with the same configuration can be stacked "
                                f"(got {sorted({str(m.cfg) for m in models})})")
        self.cfg, self.models, self.context = cfg, len(models), StackContext(len(models))
        tree = copy.deepcopy(models[0])  # one model's module tree, its parameters replaced by the stacked ones
        per_model = [dict(m.named_parameters()) for m in models]
        for name, _ in list(tree.named_parameters()):
            owner, _, leaf = name.rpartition(".")
            joined = torch.stack([p[name].detach() for p in per_model]).clone()
            setattr(tree.get_submodule(owner), leaf, nn.Parameter(joined))
        for name, module in list(tree.named_modules()):
            owner, _, leaf = name.rpartition(".")
            if (swapped := self._stacked(module, tree.get_submodule(owner))) is not None:
                setattr(tree.get_submodule(owner), leaf, swapped)
        for name, child in tree.named_children():
            self.add_module(name, child)
        self.training = tree.training

    def _stacked(self, m: nn.Module, parent: nn.Module) -> nn.Module | None:
        """The stacked counterpart of leaf layer `m` (holding its already stacked parameters), or None."""
        if type(m) is nn.Linear:
            return StackedLinear(m.weight, m.bias)
        if type(m) is nn.LayerNorm:
            return StackedLayerNorm(m.weight, m.bias, m.eps)
        if type(m) is nn.Embedding:
            return StackedEmbedding(m.weight)
        if type(m) is Decoder:
            return StackedDecoder()
        if type(m) is Dropout:
            return StackedDropout(m.p, self.context, attention=isinstance(parent, SelfAttention))
        return None

    def stacked_losses(self, packed: Packed, totals: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """(M,) every model's `Bert.mlm_loss` on its own batch: its mean, or with `totals` = (masked tokens,
        rows) (M,) each of the whole batches these are shares of, its sums divided by those. The forward pass
        sees model m's own batch in [m, :B_m, :T_m] of the (M, B, T) inputs; the rest is padding that draws
        none of model m's dropout."""
        before, self.context.shapes = self.context.shapes, packed.shapes
        try:
            return self.mlm_loss(packed.input_ids, packed.position_ids, packed.token_type_ids, packed.attention_mask,
                                 packed.selected, packed.targets, packed.nsp_labels,
                                 totals=(packed.counts, packed.rows) if totals is None else totals)
        finally:
            self.context.shapes = before

    @staticmethod
    def cross_entropy(logits: torch.Tensor, targets: torch.Tensor, total: torch.Tensor) -> torch.Tensor:
        """logits (M, N, C) against targets (M, N) (-100: padding), in float32 -> (M,): each model's sum / total[m]."""
        M, N = targets.shape
        ce = F.cross_entropy(logits.float().reshape(M * N, -1), targets.reshape(-1), reduction="none",
                             ignore_index=-100)
        return ce.view(M, N).sum(1) / total

    @staticmethod
    def is_matrix(p: torch.Tensor) -> bool:
        """Whether stacked parameter p (M, ...) is a weight matrix of each model (`Bert.is_matrix` per model)."""
        return p.dim() - 1 >= 2  # per model

    def num_parameters(self) -> int:
        """Parameters of one model (the tied decoder matrix counts once)."""
        return super().num_parameters() // self.models

    def unstacked_state(self, m: int) -> dict[str, torch.Tensor]:
        """Model m's state dict, as a single `Bert` of this config has it."""
        return {k: v[m] for k, v in self.state_dict().items()}

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


def stack(models: list[Bert]) -> StackedBert:
    """One `StackedBert` holding `models` (same config) with a leading model axis on every parameter."""
    return StackedBert(models)
