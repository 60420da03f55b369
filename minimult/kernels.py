"""The kernels a forward pass calls where CPU and GPU are best served differently: the attention itself,
dropout, the attention mask's form and the context the blocks run in. `cpu_kernels` is the one switch.

CPU (measured with experiments/bench_train.py, which lists what was tried): attention is written out
(bmm/baddbmm/softmax on strided views with an additive key bias, instead of SDPA's math fallback when
dropout > 0), and dropout draws its keep mask from numpy's SFC64 generator (seeded from torch's default
generator, or a given one, so `torch.manual_seed` still reproduces a run) instead of `bernoulli_`; under
bf16 autocast the attention softmax is computed in float32 (`_softmax`: bf16's CPU kernel is slower).
Elsewhere attention is SDPA (restricted to `SDPA_BACKENDS`) with a bool key mask, and dropout is `F.dropout`
(their fused kernels).
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

# SDPA's kernels on GPU, cuDNN's left out: it builds an execution plan for every new (batch, length) shape, and
# length-bucketed batches bring new shapes for hundreds of steps (on an H200 a paper-preset run in bf16 took
# 35-45 ms a step with it allowed, 27-28 without; docs/speed.md, "On a GPU").
SDPA_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def cpu_kernels(device: torch.device) -> bool:
    """True: the CPU formulation (written-out attention with an additive key bias, numpy dropout
    masks); False: SDPA with a bool mask and `F.dropout` (GPUs). One switch, so tests can run the GPU
    formulation on a CPU (monkeypatch this function)."""
    return device.type == "cpu"


def attention_kernels(device: torch.device):
    """The context a forward pass runs its blocks in: SDPA restricted to `SDPA_BACKENDS` where SDPA runs (entered
    once per pass, not per block: ~30 us each on a CPU core), nothing for the CPU formulation."""
    return nullcontext() if cpu_kernels(device) else sdpa_kernel(SDPA_BACKENDS)


def key_mask(attention_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(..., T) attention mask (True / nonzero = real token) -> (rows, 1, 1, T), rows the product of the
    leading axes: on CPU an additive bias (0 = key takes part, finfo.min = padding; a row with no real key
    at all would attend uniformly, where SDPA gives zeros) in `dtype`, elsewhere bool for SDPA."""
    mask = attention_mask.reshape(-1, 1, 1, attention_mask.shape[-1]).bool()
    if not cpu_kernels(mask.device):
        return mask
    return torch.zeros(mask.shape, dtype=dtype).masked_fill_(~mask, torch.finfo(dtype).min)


def keep_scaled(x: torch.Tensor, p: float, generator: torch.Generator | None = None) -> torch.Tensor:
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


def dropout(x: torch.Tensor, p: float, training: bool,
            multipliers: Callable[[torch.Tensor, float], torch.Tensor] = keep_scaled) -> torch.Tensor:
    """F.dropout; on CPU x times `multipliers(x, p)` (default `keep_scaled`, from torch's default generator:
    bernoulli_ costs ~5x more per element)."""
    if not training or p == 0.0:
        return x
    if not cpu_kernels(x.device):
        return F.dropout(x, p, True)
    return x * multipliers(x, p)


def _softmax(scores: torch.Tensor) -> torch.Tensor:
    """Attention weights over the last axis, computed in float32 and returned in the scores' dtype: under
    bf16 autocast on a CPU the bf16 softmax kernel and its backward take ~4x as long as float32's with
    both casts (1.6 vs 0.37 ms a layer for (256, 27, 27); docs/speed.md), and float32 rounds less; in
    float32 it is the plain softmax."""
    return torch.softmax(scores, -1, dtype=torch.float32).to(scores.dtype)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, heads: int,
              drop: torch.nn.Module) -> torch.Tensor:
    """Scaled dot-product attention of q, k, v (..., T, H) over `heads` heads -> (..., T, H).

    `mask`: None (no padding) or `key_mask`'s (rows, 1, 1, T), rows the product of the leading axes.
    `drop`: the dropout module applied to the attention weights (rows, [heads,] T, T); on SDPA its rate
    (`drop.p` when training) goes to SDPA's own dropout."""
    *lead, T, H = q.shape
    nh, hs = heads, H // heads
    q, k, v = (t.reshape(-1, T, H) for t in (q, k, v))  # (rows, T, H): views of the fused projection
    if not cpu_kernels(q.device):
        q, k, v = (t.view(-1, T, nh, hs).transpose(1, 2) for t in (q, k, v))  # (rows, nh, T, hs) views
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=drop.p if drop.training else 0.0)
        return y.transpose(1, 2).reshape(*lead, T, H)
    if nh == 1:  # (rows, T, H) views straight into bmm: no copies, no transposes
        kt = k.transpose(1, 2)
        s = torch.bmm(q, kt).mul_(hs**-0.5) if mask is None else torch.baddbmm(mask[:, 0], q, kt, alpha=hs**-0.5)
        y = torch.bmm(drop(_softmax(s)), v)  # (rows, T, H)
    else:
        q, k, v = (t.view(-1, T, nh, hs).transpose(1, 2) for t in (q, k, v))
        s = torch.matmul(q, k.transpose(-1, -2)).mul_(hs**-0.5)
        if mask is not None:
            s = s + mask
        y = torch.matmul(drop(_softmax(s)), v).transpose(1, 2)  # (rows, T, nh, hs)
    return y.reshape(*lead, T, H)
