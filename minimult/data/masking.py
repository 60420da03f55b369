"""Masked-language-model corruption of a batch (docs/pipeline.md), fully vectorised.

Ids: language k uses `id + k*V`; its specials are `k*V + 0..4` = [PAD] [UNK] [CLS] [SEP] [MASK]
(with shared specials every language uses 0..4). The caller says which tokens may be selected
(`maskable`), which [MASK] id each sequence uses (`mask_ids`) and which ids a random replacement may
draw from (`random_ids`: the language source's `random_ids`); this module only draws and applies.

Replacement probabilities are (mask, keep, random, knn). The paper's text says `no-random` is
(0.8, 0.2, 0, 0) and `knn-replace` (0.5, 0.1, 0.1, 0.3); its published code used (0.9, 0.1, 0, 0) and
(0.5, 0.16, 0.1, 0.24). Both are exposed here as presets; `--mask-probs` picks any of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from minimult.errors import MinimultError
from minimult.registry import Registry

if TYPE_CHECKING:  # torch is imported where a batch is drawn: the CLI checks its input before paying for it
    import torch

STANDARD = (0.8, 0.1, 0.1, 0.0)
NO_RANDOM = (0.8, 0.2, 0.0, 0.0)
KNN = (0.5, 0.1, 0.1, 0.3)
NO_RANDOM_PUBLISHED = (0.9, 0.1, 0.0, 0.0)
KNN_PUBLISHED = (0.5, 0.16, 0.1, 0.24)
# Which mix each masking mod sets (`mask.mixes`): the paper's text, or the published code's (the `published`
# preset). An explicit `mask.probs` wins over either.
MIXES = Registry("mask.mixes", unknown="unknown mask.mixes {name!r}; valid: {valid}")
MIXES.update({"text": {"no-random": NO_RANDOM, "knn-replace": KNN},
              "code": {"no-random": NO_RANDOM_PUBLISHED, "knn-replace": KNN_PUBLISHED}})
PRESETS = Registry("masking preset")  # --mask-probs NAME
PRESETS.update({"standard": STANDARD, "no-random": NO_RANDOM, "knn": KNN, "no-random-published": NO_RANDOM_PUBLISHED,
                "knn-published": KNN_PUBLISHED})

MASK, KEEP, RANDOM, NEIGHBOUR = 0, 1, 2, 3  # the four actions, in the order of `probs`

# How the pieces to predict are chosen (`mask.selection`). exact: a uniform random subset of
# max(1, round(rate * n)) of a sequence's n maskable pieces (every sequence contributes, the count is fixed);
# bernoulli: each maskable piece on its own with probability `rate`, as the paper's published code (and HF's
# masking collator) did, so a short sequence often has none and the count varies from batch to batch.
SELECTIONS = ("exact", "bernoulli")


def _check_probs(probs) -> tuple[float, float, float, float]:
    try:
        probs = tuple(float(p) for p in probs)
    except (TypeError, ValueError):
        raise MinimultError(f"mask probabilities must be 4 numbers (mask, keep, random, knn), got {probs!r}") from None
    if len(probs) != 4:
        raise MinimultError(f"mask probabilities need 4 values (mask, keep, random, knn), got {len(probs)}")
    if any(not p >= 0.0 for p in probs):  # also rejects nan
        raise MinimultError(f"mask probabilities must be non-negative, got {probs}")
    if abs(sum(probs) - 1.0) > 1e-6:
        raise MinimultError(f"mask probabilities must sum to 1, got {probs} (sum {sum(probs):.6g})")
    return probs


@dataclass(frozen=True)
class MaskConfig:
    """The `mask` section of a run's config: how many pieces are selected and what becomes of them."""

    rate: float = 0.15  # fraction of each sequence's maskable tokens selected (exact: at least one)
    probs: tuple[float, float, float, float] = STANDARD  # (mask, keep, random, knn) for a selected token
    selection: str = "exact"  # exact | bernoulli (SELECTIONS)
    mixes: str = "text"  # the masking mods' mixes: text (the paper's) | code (its published code's): MIXES

    def __post_init__(self):
        object.__setattr__(self, "probs", _check_probs(self.probs))
        if not 0.0 < float(self.rate) < 1.0:
            raise MinimultError(f"mask rate must be strictly between 0 and 1, got {self.rate}")
        if self.selection not in SELECTIONS:
            raise MinimultError(f"unknown mask.selection {self.selection!r}; valid: {', '.join(SELECTIONS)}")
        MIXES[self.mixes]  # an unknown name is one error line naming the valid ones


def parse_probs(text: str) -> tuple[float, float, float, float]:
    """'0.9,0.1,0,0' (mask, keep, random, knn) or a preset name such as 'no-random-published'."""
    text = text.strip()
    if text.lower() in PRESETS:
        return PRESETS[text.lower()]
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise MinimultError(
            f"--mask-probs wants 4 comma-separated numbers (mask,keep,random,knn) or one of "
            f"{', '.join(PRESETS)}; got {text!r}") from None
    return _check_probs(values)


def inputs_needed(cfg: MaskConfig) -> set[str]:
    """What `mask_batch` needs beyond the batch for this mix: {"neighbours"} when it has a knn share."""
    return {"neighbours"} if cfg.probs[NEIGHBOUR] > 0 else set()


@dataclass
class Masked:
    """`mask_batch`'s result: the corrupted batch and what the loss predicts where."""

    input_ids: torch.Tensor  # (B, T) long, the corrupted batch
    selected: torch.Tensor   # (N,) long, flat indices into B*T of the selected tokens
    targets: torch.Tensor    # (N,) long, their original ids


def _thresholds(probs) -> list[float]:
    # action = number of thresholds <= u, u ~ U[0,1). A threshold after which every probability is 0 is
    # +inf, so float round-off in the cumulative sum can never pick an action with probability 0.
    out, cum = [], 0.0
    for j in range(3):
        cum += probs[j]
        out.append(cum if sum(probs[j + 1:]) > 0 else float("inf"))
    return out


def mask_batch(input_ids: torch.Tensor, maskable: torch.Tensor, mask_ids: torch.Tensor,
               random_ids: torch.Tensor, cfg: MaskConfig, generator: torch.Generator,
               neighbours: torch.Tensor | None = None) -> Masked:
    """Select max(1, round(rate * n_i)) maskable tokens per sequence (`cfg.selection` exact; bernoulli: each
    with probability `rate`, and the first of one random order when the whole batch drew none, so a step
    always has a loss) and corrupt them.

    input_ids (B, T) long; maskable (B, T) bool; mask_ids (B,) long, the [MASK] id of each sequence's
    language; random_ids (R,) long, the ids a random replacement draws from; neighbours (V_total, k)
    long or None, -1 = no neighbour (such tokens get a random replacement instead). `round` is
    round-half-to-even as in Python. Every draw comes from `generator`, which must live on the batch's
    device; the number of draws does not depend on `cfg.probs`, so one seed gives one selection.
    """
    if input_ids.dim() != 2 or maskable.shape != input_ids.shape:
        raise MinimultError(f"input_ids and maskable must both be (B, T), got {tuple(input_ids.shape)} and "
                            f"{tuple(maskable.shape)}")
    B, T = input_ids.shape
    if mask_ids.shape != (B,):
        raise MinimultError(f"mask_ids must be (B,) = ({B},), got {tuple(mask_ids.shape)}")
    if random_ids.dim() != 1 or random_ids.numel() == 0:
        raise MinimultError("random_ids must be a non-empty 1-D tensor of ids")
    if cfg.probs[NEIGHBOUR] > 0:
        if neighbours is None:
            raise MinimultError("knn replacement (probs[3] > 0) needs a neighbour table")
        if neighbours.dim() != 2 or neighbours.shape[1] == 0:
            raise MinimultError(f"neighbour table must be (V_total, k) with k >= 1, got {tuple(neighbours.shape)}")
    import torch  # a no-op lookup once torch is loaded (which the tensors above already needed)

    device, g = input_ids.device, generator
    maskable = maskable.to(torch.bool)

    # selection: random key per token, +inf where not maskable. exact: a token is selected iff its rank in
    # its row is below the row's count, i.e. a uniform random subset of that size; bernoulli: iff its key < rate
    keys = torch.rand((B, T), generator=g, device=device).masked_fill(~maskable, float("inf"))
    if cfg.selection == "bernoulli":
        chosen = keys < cfg.rate                                                   # (B, T)
        if not bool(chosen.any()) and bool(maskable.any()):
            chosen.view(-1)[keys.argmin()] = True
    else:
        n = maskable.sum(1)                                                        # (B,)
        count = torch.where(n > 0, torch.round(cfg.rate * n).clamp(min=1), torch.zeros_like(n, dtype=torch.float))
        order = keys.argsort(dim=1)                                                # (B, T)
        rank = torch.empty_like(order).scatter_(1, order, torch.arange(T, device=device).expand(B, T))
        chosen = (rank < count[:, None]) & maskable                                # (B, T)
    selected = chosen.flatten().nonzero().squeeze(1)                               # (N,)
    flat = input_ids.flatten()
    targets = flat[selected]                                                       # (N,)

    # action per selected token, plus the draws every action might need (always drawn: fixed stream)
    N = selected.numel()
    u = torch.rand(N, generator=g, device=device)
    action = sum((u >= t).long() for t in _thresholds(cfg.probs))                  # (N,) in 0..3
    random_tok = random_ids.to(device)[torch.randint(random_ids.numel(), (N,), generator=g, device=device)]
    k = neighbours.shape[1] if neighbours is not None else 1
    pick = torch.randint(k, (N,), generator=g, device=device)

    replacement = torch.where(action == MASK, mask_ids.to(device)[selected // T], targets)
    replacement = torch.where(action == RANDOM, random_tok, replacement)
    if cfg.probs[NEIGHBOUR] > 0:
        neighbour = neighbours.to(device)[targets, pick]                          # (N,), -1 = none
        neighbour = torch.where(neighbour >= 0, neighbour, random_tok)
        replacement = torch.where(action == NEIGHBOUR, neighbour, replacement)

    corrupted = flat.clone()
    corrupted[selected] = replacement
    return Masked(input_ids=corrupted.view(B, T), selected=selected, targets=targets)
