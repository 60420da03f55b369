"""A model's shape (`ModelConfig`), its parameter count and sizes solved for a parameter target, without
torch: the config and the CLI check a model's settings before anything heavy is imported. `minimult.model`
builds the model itself."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from minimult.errors import MinimultError, check_at_least


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
    nsp: bool = False  # a next-sentence-prediction head on [CLS] (the nsp mod)
    # whole-model parameters to size the model for (0 = off): `config.resolve` solves `hidden` (a multiple
    # of `heads`) and `intermediate` = 4 x hidden for the given layers, heads and tables (`solve_sizes`)
    target_params: int = 0
    # a token id whose lookups pass no gradient to its embedding (HF BERT's `padding_idx`; the tied decoder
    # still trains that row); -1: none. Set to [PAD] under train.attention = attend-padding, where padding is
    # attended to; masked padding never reaches a gradient, so it is -1 there
    padding_idx: int = -1

    def __post_init__(self):
        if self.target_params < 0:
            raise MinimultError(f"model.target_params must be >= 0 (0 = off), got {self.target_params}")
        check_at_least("model", self, 1, "vocab_size", "hidden", "intermediate", "heads", "layers", "max_positions")
        check_at_least("model", self, 0, "type_vocab_size")
        if self.hidden % self.heads and not self.target_params:  # with a target, solve_sizes picks hidden
            raise MinimultError(f"model.hidden ({self.hidden}) must be divisible by model.heads ({self.heads})")
        if not 0.0 <= self.dropout < 1.0:
            raise MinimultError(f"model.dropout must be in [0, 1), got {self.dropout}")
        if self.layer_norm_eps <= 0 or self.init_std <= 0:
            raise MinimultError("model.layer_norm_eps and model.init_std must be > 0")


def parameter_count(cfg: ModelConfig) -> int:
    """`Bert(cfg).num_parameters()` without building it: every table, linear layer, LayerNorm and bias,
    the tied decoder matrix once (tests check it against built models)."""
    H, I, V = cfg.hidden, cfg.intermediate, cfg.vocab_size
    embeddings = (V + cfg.max_positions + cfg.type_vocab_size) * H + 2 * H  # tables + LayerNorm
    block = (3 * H * H + 3 * H) + (H * H + H) + (H * I + I) + (I * H + H) + 2 * 2 * H  # qkv, proj, ffn, 2 LNs
    head = (H * H + H) + 2 * H + V  # dense, LayerNorm, decoder bias (its matrix is the token table)
    nsp = (H * H + H) + (2 * H + 2) if cfg.nsp else 0  # pooler and classifier
    return embeddings + cfg.layers * block + head + nsp


TARGET_TOLERANCE = 0.03  # how far a solved size's parameter count may miss `target_params`


def solve_sizes(cfg: ModelConfig) -> ModelConfig:
    """`cfg` with `hidden` and `intermediate` = 4 x hidden solved for `cfg.target_params` whole-model
    parameters (K et al. 2020: intermediate = 4 x hidden, heads dividing hidden) at its depth, heads and
    table sizes: the multiple of `heads` whose count is closest to the target (the smaller on a tie).
    One error line when none lands within TARGET_TOLERANCE of it."""
    target, h = cfg.target_params, cfg.heads
    count = lambda hidden: parameter_count(  # noqa: E731
        dataclasses.replace(cfg, hidden=hidden, intermediate=4 * hidden))
    where = f"model.target_params={target:,} at {cfg.layers} layers and {h} head{'s' * (h > 1)}"
    if count(h) > target * (1 + TARGET_TOLERANCE):
        tables = cfg.vocab_size + cfg.max_positions + cfg.type_vocab_size
        raise MinimultError(f"{where} is too small: the smallest such model (hidden {h}) already has {count(h):,} "
                            f"parameters, {tables * h:,} of them in the embedding tables ({tables:,} rows of {h}); "
                            f"ask for at least {math.ceil(count(h) / (1 + TARGET_TOLERANCE)):,}")
    lo, hi = 1, 2  # multiples of h: count(h * k) grows with k; find the first k at or above the target
    while count(h * hi) < target:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if count(h * mid) < target else (lo, mid)
    best = min((k for k in (lo, hi) if k >= 1), key=lambda k: (abs(count(h * k) - target), k))
    miss = count(h * best) / target - 1
    if abs(miss) > TARGET_TOLERANCE:
        near = ", ".join(f"hidden {h * k} gives {count(h * k):,}" for k in sorted({lo, hi}))
        raise MinimultError(f"{where}: no hidden size that {h} heads divide comes within {TARGET_TOLERANCE:.0%} of "
                            f"the target ({near}); change the target or the number of heads")
    return dataclasses.replace(cfg, hidden=h * best, intermediate=4 * h * best)
