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
torch's default generator, so `torch.manual_seed` still reproduces a run) instead of `bernoulli_`.
On other devices attention is SDPA and dropout is `F.dropout` (their fused kernels).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from minimult.errors import MinimultError


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 4096
    hidden: int = 64
    intermediate: int = 256
    heads: int = 1
    layers: int = 12
    max_positions: int = 128  # rows of the position table (256 for language-specific positions)
    type_vocab_size: int = 2  # 0: no segment table at all, token_type_ids are ignored
    dropout: float = 0.1
    layer_norm_eps: float = 1e-12
    init_std: float = 0.02

    def __post_init__(self):
        for name in ("vocab_size", "hidden", "intermediate", "heads", "layers", "max_positions"):
            if getattr(self, name) < 1:
                raise MinimultError(f"model.{name} must be >= 1, got {getattr(self, name)}")
        if self.type_vocab_size < 0:
            raise MinimultError(f"model.type_vocab_size must be >= 0, got {self.type_vocab_size}")
        if self.hidden % self.heads:
            raise MinimultError(f"model.hidden ({self.hidden}) must be divisible by model.heads ({self.heads})")
        if not 0.0 <= self.dropout < 1.0:
            raise MinimultError(f"model.dropout must be in [0, 1), got {self.dropout}")
        if self.layer_norm_eps <= 0 or self.init_std <= 0:
            raise MinimultError("model.layer_norm_eps and model.init_std must be > 0")


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


def _dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """F.dropout, with the mask from `_keep_scaled` on CPU (bernoulli_ costs ~5x more per element)."""
    if not training or p == 0.0:
        return x
    if not cpu_kernels(x.device):
        return F.dropout(x, p, True)
    return x * _keep_scaled(x, p)


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

    def forward(self, ids: dict[str, torch.Tensor]) -> torch.Tensor:
        x = sum(lookup(ids[name]) for name, lookup in self.lookups.items())  # (B, T, H)
        return _dropout(self.ln(x), self.drop.p, self.training)


class SelfAttention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.heads, self.dropout = cfg.heads, cfg.dropout
        self.qkv = nn.Linear(cfg.hidden, 3 * cfg.hidden)  # fused query, key, value (in that order)
        self.proj = nn.Linear(cfg.hidden, cfg.hidden)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """mask: None (no padding); on CPU an additive float key bias (B, 1, 1, T), else bool (B, 1, 1, T)."""
        B, T, H = x.shape
        nh, hs = self.heads, H // self.heads
        p = self.dropout if self.training else 0.0
        q, k, v = self.qkv(x).split(H, dim=-1)  # strided views of one (B, T, 3H) tensor
        if not cpu_kernels(x.device):
            q, k, v = (t.view(B, T, nh, hs).transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hs) views
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)  # (B, nh, T, hs)
            return self.proj(y.transpose(1, 2).reshape(B, T, H))
        if nh == 1:  # (B, T, H) views straight into bmm: no copies, no transposes
            kt = k.transpose(1, 2)
            s = torch.bmm(q, kt).mul_(hs**-0.5) if mask is None else torch.baddbmm(mask[:, 0], q, kt, alpha=hs**-0.5)
            return self.proj(torch.bmm(_dropout(torch.softmax(s, -1), p, True), v))
        q, k, v = (t.view(B, T, nh, hs).transpose(1, 2) for t in (q, k, v))
        s = torch.matmul(q, k.transpose(-1, -2)).mul_(hs**-0.5)
        if mask is not None:
            s = s + mask
        y = torch.matmul(_dropout(torch.softmax(s, -1), p, True), v)  # (B, nh, T, hs)
        return self.proj(y.transpose(1, 2).reshape(B, T, H))


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

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        p, training = self.drop.p, self.training
        x = self.ln_attn(x + _dropout(self.attn(x, mask), p, training))
        return self.ln_ffn(x + _dropout(self.fc_out(F.gelu(self.fc_in(x))), p, training))  # exact erf GELU


class MLMHead(nn.Module):
    """dense -> GELU -> LayerNorm -> decoder tied to the token embeddings, plus its own bias."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.dense = nn.Linear(cfg.hidden, cfg.hidden)
        self.ln = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(cfg.vocab_size))

    def forward(self, h: torch.Tensor, decoder_weight: torch.Tensor) -> torch.Tensor:
        h = self.ln(F.gelu(self.dense(h)))  # (N, H)
        return F.linear(h, decoder_weight, self.bias)  # (N, V); decoder_weight (V, H) is the token table


class Bert(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.embeddings = Embeddings(cfg)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.head = MLMHead(cfg)
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

    def _embed(self, input_ids, position_ids, token_type_ids, attention_mask):
        """Embedding output (B, T, H) and the attention mask (B, 1, 1, T) or None (no padding): on CPU
        an additive bias (0 = key takes part, finfo.min = padding; a row with no real key at all would
        attend uniformly, where SDPA gives zeros), elsewhere bool for SDPA."""
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        x = self.embeddings({"token": input_ids, "position": position_ids, "segment": token_type_ids})
        if attention_mask is None:
            return x, None
        mask = attention_mask[:, None, None, :].bool()
        if not cpu_kernels(x.device):
            return x, mask
        return x, torch.zeros(mask.shape, dtype=x.dtype).masked_fill_(~mask, torch.finfo(x.dtype).min)

    def forward(self, input_ids, position_ids, token_type_ids=None, attention_mask=None) -> torch.Tensor:
        """(B, T) long ids, (B, T) bool attention_mask (True = real token; None = no padding) -> (B, T, H)."""
        x, mask = self._embed(input_ids, position_ids, token_type_ids, attention_mask)
        for block in self.blocks:
            x = block(x, mask)
        return x

    def hidden_states(self, input_ids, position_ids, token_type_ids=None, attention_mask=None,
                      layers=None) -> list[torch.Tensor]:
        """List indexed by layer: [0] = embedding output after LayerNorm, [i] = output of block i.

        With `layers` (an iterable of layer numbers) only blocks up to max(layers) run, and the list
        stops there (length max(layers) + 1), so `out[i]` is still layer i for every requested i.
        """
        layers = range(self.cfg.layers + 1) if layers is None else sorted(layers)
        if not layers or layers[0] < 0 or layers[-1] > self.cfg.layers:
            raise MinimultError(f"layers must be a non-empty subset of 0..{self.cfg.layers}, got {list(layers)}")
        x, mask = self._embed(input_ids, position_ids, token_type_ids, attention_mask)
        out = [x]
        for block in self.blocks[: layers[-1]]:
            x = block(x, mask)
            out.append(x)
        return out

    def mlm_logits(self, hidden_selected: torch.Tensor) -> torch.Tensor:
        """(N, H) final hidden states at the selected positions -> (N, V) logits."""
        return self.head(hidden_selected, self.embeddings.lookups["token"].weight)  # tied decoder

    def mlm_loss(self, input_ids, position_ids, token_type_ids, attention_mask, selected, targets) -> torch.Tensor:
        """Mean cross-entropy at `selected` (N,) flat indices into B*T, against `targets` (N,)."""
        h = self(input_ids, position_ids, token_type_ids, attention_mask)  # (B, T, H)
        logits = self.mlm_logits(h.flatten(0, 1)[selected])  # (N, V)
        return F.cross_entropy(logits.float(), targets)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())  # the tied decoder matrix counts once

    def param_groups(self, weight_decay: float) -> list[dict]:
        """AdamW groups: decay every weight matrix (dim >= 2), none on biases and LayerNorm (dim < 2)."""
        params = [p for p in self.parameters() if p.requires_grad]
        return [
            {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
        ]
