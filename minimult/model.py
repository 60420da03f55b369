"""BERT as in Devlin et al. (post-LayerNorm), written small: one model, read top to bottom.

Differences from the published BERT code, on purpose:
- padding keys are masked in attention (the original pretraining code did not mask them);
- the MLM output layer is applied only to the positions the caller selects (`mlm_logits`, `mlm_loss`).

The model knows nothing about languages or mods: position ids and token type ids always come from
the caller, so e.g. language-specific positions are just different ids into a taller position table.
Given identical weights it matches `transformers.BertForMaskedLM` (see `minimult.export`, tests).

Where CPU and GPU are best served differently (the attention itself, dropout, the mask's form) the
modules call `minimult.kernels`, whose `cpu_kernels` is the one switch. Several models of one shape train
as one (a leading model axis on every parameter and input) through this same module tree with its leaf
layers swapped for stacked ones: `minimult.stacked`.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator

import torch
import torch.nn as nn
import torch.nn.functional as F

from minimult import kernels
from minimult.errors import MinimultError
from minimult.model_config import ModelConfig

__all__ = ["Bert", "ModelConfig", "pick_device"]


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


class Dropout(nn.Dropout):
    """nn.Dropout through `kernels.dropout` (on CPU: numpy SFC64 masks from torch's default generator)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (any shape) float -> the same shape: zeros with probability p, the rest scaled by 1/(1-p) (training)."""
        return kernels.dropout(x, self.p, self.training)


class Decoder(nn.Module):
    """The MLM output layer's product with a weight it does not own (the tied token table): F.linear."""

    def forward(self, h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """h (N, H) float, weight (V, H), bias (V,) -> logits (N, V)."""
        return F.linear(h, weight, bias)


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
        self.drop = Dropout(cfg.dropout)
        self.padding_idx = cfg.padding_idx

    def forward(self, ids: dict[str, torch.Tensor]) -> torch.Tensor:
        """ids: (B, T) long tensors by lookup name -> (B, T, H)."""
        x = sum(_no_padding_gradient(lookup(ids[name]), ids[name], name, self.padding_idx)
                for name, lookup in self.lookups.items())  # (B, T, H)
        return self.drop(self.ln(x))


def _no_padding_gradient(looked_up: torch.Tensor, ids: torch.Tensor, name: str, padding_idx: int) -> torch.Tensor:
    """The token lookup with no gradient at `padding_idx` (as nn.Embedding's padding_idx); others unchanged."""
    if name != "token" or padding_idx < 0:
        return looked_up
    return torch.where((ids == padding_idx)[..., None], looked_up.detach(), looked_up)


class SelfAttention(nn.Module):
    """Multi-head self-attention: fused query/key/value projection, `kernels.attention`, output projection."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.heads = cfg.heads
        self.qkv = nn.Linear(cfg.hidden, 3 * cfg.hidden)  # fused query, key, value (in that order)
        self.proj = nn.Linear(cfg.hidden, cfg.hidden)
        self.drop = Dropout(cfg.dropout)  # on the attention weights

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """x (B, T, H), mask None (no padding) or `kernels.key_mask`'s (B, 1, 1, T) -> (B, T, H)."""
        q, k, v = self.qkv(x).split(x.shape[-1], dim=-1)  # (B, T, H) each
        return self.proj(kernels.attention(q, k, v, mask, self.heads, self.drop))


class Block(nn.Module):
    """Post-LN transformer block: x = LN(x + drop(attn(x))); x = LN(x + drop(ffn(x)))."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attn = SelfAttention(cfg)
        self.ln_attn = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.fc_in = nn.Linear(cfg.hidden, cfg.intermediate)
        self.fc_out = nn.Linear(cfg.intermediate, cfg.hidden)
        self.ln_ffn = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.drop = Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """x (B, T, H) -> (B, T, H)."""
        x = self.ln_attn(x + self.drop(self.attn(x, mask)))
        ffn = self.fc_out(F.gelu(self.fc_in(x)))  # exact erf GELU
        return self.ln_ffn(x + self.drop(ffn))


class MLMHead(nn.Module):
    """dense -> GELU -> LayerNorm -> decoder tied to the token embeddings, plus its own bias."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.dense = nn.Linear(cfg.hidden, cfg.hidden)
        self.ln = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(cfg.vocab_size))
        self.decoder = Decoder()

    def forward(self, h: torch.Tensor, decoder_weight: torch.Tensor) -> torch.Tensor:
        """h (N, H), decoder_weight (V, H) the token table -> logits (N, V)."""
        return self.decoder(self.ln(F.gelu(self.dense(h))), decoder_weight, self.bias)


class NSPHead(nn.Module):
    """BERT's pooler (dense + tanh on [CLS]) and a two-way classifier: is B the next sentence?"""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.pool = nn.Linear(cfg.hidden, cfg.hidden)
        self.out = nn.Linear(cfg.hidden, 2)

    def forward(self, cls: torch.Tensor) -> torch.Tensor:
        """cls (B, H) final hidden states at [CLS] -> logits (B, 2)."""
        return self.out(torch.tanh(self.pool(cls)))


class Bert(nn.Module):
    """Embeddings -> `cfg.layers` post-LN blocks -> MLM head tied to the token table (and, with `cfg.nsp`,
    an NSP head on [CLS]). Inputs (B, T): token, position and segment ids, attention mask; hidden states
    (B, T, H); logits at the selected positions (N, V). `cross_entropy`, `is_matrix` and `num_parameters` are
    where `minimult.stacked.StackedBert` (the same tree with a model axis) computes differently."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
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

    def _layers(self, input_ids, position_ids, token_type_ids, attention_mask, depth: int) -> Iterator[torch.Tensor]:
        """The embedding output (B, T, H), then the output of each block up to block `depth`."""
        ids = {"token": input_ids, "position": position_ids,
               "segment": torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids}
        x = self.embeddings(ids)
        mask = None if attention_mask is None else kernels.key_mask(attention_mask, x.dtype)  # (B, 1, 1, T)
        yield x
        for block in self.blocks[:depth]:
            x = block(x, mask)
            yield x

    def forward(self, input_ids, position_ids, token_type_ids=None, attention_mask=None) -> torch.Tensor:
        """input_ids, position_ids, token_type_ids (B, T) long (token_type_ids None: all 0); attention_mask
        (B, T) bool, True = real token (None: no padding) -> the last layer's hidden states (B, T, H)."""
        with kernels.attention_kernels(input_ids.device):
            return deque(self._layers(input_ids, position_ids, token_type_ids, attention_mask, self.cfg.layers),
                         maxlen=1)[0]  # the last layer, without holding the others

    def hidden_states(self, input_ids, position_ids, token_type_ids=None, attention_mask=None,
                      layers=None) -> list[torch.Tensor]:
        """List indexed by layer, each (B, T, H): [0] = embedding output after LayerNorm, [i] = output of block i.

        With `layers` (an iterable of layer numbers) only blocks up to max(layers) run, and the list
        stops there (length max(layers) + 1), so `out[i]` is still layer i for every requested i.
        """
        layers = range(self.cfg.layers + 1) if layers is None else sorted(layers)
        if not layers or layers[0] < 0 or layers[-1] > self.cfg.layers:
            raise MinimultError(f"layers must be a non-empty subset of 0..{self.cfg.layers}, got {list(layers)}")
        with kernels.attention_kernels(input_ids.device):
            return list(self._layers(input_ids, position_ids, token_type_ids, attention_mask, layers[-1]))

    def mlm_logits(self, hidden_selected: torch.Tensor) -> torch.Tensor:
        """(N, H) final hidden states at the selected positions -> (N, V) logits."""
        return self.head(hidden_selected, self.embeddings.lookups["token"].weight)  # tied decoder

    def mlm_loss(self, input_ids, position_ids, token_type_ids, attention_mask, selected, targets,
                 nsp_labels=None, totals=None) -> torch.Tensor:
        """The training loss (every training path computes it here): mean cross-entropy at `selected` (N,)
        flat indices into B*T against `targets` (N,), plus with `nsp_labels` (B,) (1 = B is the next
        sentence) the mean next-sentence cross-entropy on [CLS]. Inputs as `forward`'s.

        `totals` = (masked tokens, rows) of a whole batch this one is a share of (several processes,
        micro-batches): the sums of the cross-entropies divided by those instead, so that the shares'
        losses (and gradients) add up to the whole batch's mean."""
        h = self(input_ids, position_ids, token_type_ids, attention_mask)  # (B, T, H)
        masked, rows = (None, None) if totals is None else totals
        loss = self.cross_entropy(self.mlm_logits(h.flatten(0, -2)[selected]), targets, masked)
        if nsp_labels is not None:
            loss = loss + self.cross_entropy(self.nsp_head(h[..., 0, :]), nsp_labels, rows)
        return loss

    @staticmethod
    def cross_entropy(logits: torch.Tensor, targets: torch.Tensor, total) -> torch.Tensor:
        """logits (N, C) against targets (N,), in float32: their mean (total None) or their sum / total."""
        if total is None:
            return F.cross_entropy(logits.float(), targets)
        return F.cross_entropy(logits.float(), targets, reduction="sum") / total

    def num_parameters(self) -> int:
        """Parameters of the model (the tied decoder matrix counts once)."""
        return sum(p.numel() for p in self.parameters())

    def param_groups(self, weight_decay: float) -> list[dict]:
        """AdamW groups: decay every weight matrix, none on biases and LayerNorm."""
        params = [p for p in self.parameters() if p.requires_grad]
        return [
            {"params": [p for p in params if self.is_matrix(p)], "weight_decay": weight_decay},
            {"params": [p for p in params if not self.is_matrix(p)], "weight_decay": 0.0},
        ]

    @staticmethod
    def is_matrix(p: torch.Tensor) -> bool:
        """Whether parameter p is a weight matrix (a table or a linear layer's weight)."""
        return p.dim() >= 2
