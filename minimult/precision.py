"""Training precision: float32, or bfloat16 autocast (weights, gradients and AdamW state stay float32).

`train.precision`:
  auto  bf16 on CUDA, fp32 on CPU (the CPU default keeps runs comparable across machines, with or
        without native bf16)
  fp32  float32 everywhere
  bf16  bf16 autocast on any device. Matrix products run in bf16; on a CPU so do the ops between
        them and the next residual add (GELU, dropout, the MLM head's LayerNorm; CUDA's autocast
        runs LayerNorm in float32), except the attention softmax, computed in float32 from the bf16
        scores and rounded to bf16 (`minimult.kernels._softmax`: bf16's CPU kernel is ~4x slower); the
        residual stream, the blocks' LayerNorms and the loss stay float32. On CPUs with AVX512-BF16
        or AMX (`native_bf16`) this is 1.6-2.2x faster per training step (experiments/bench_train.py
        --precision bf16); elsewhere on CPU it is emulated, slower.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

from minimult.errors import MinimultError

if TYPE_CHECKING:  # config checks a precision's name without loading torch (seconds)
    import torch

PRECISIONS = ("auto", "fp32", "bf16")


def check(precision: str) -> str:
    if precision not in PRECISIONS:
        raise MinimultError(f"unknown precision {precision!r}: use {', '.join(PRECISIONS)}")
    return precision


def resolve(precision: str, device: torch.device) -> str:
    """'fp32' or 'bf16' for this device."""
    if check(precision) == "auto":
        return "bf16" if device.type == "cuda" else "fp32"
    return precision


def native_bf16(device: torch.device) -> bool:
    """Whether bf16 matrix products run in hardware on this device: on a CPU, AVX512-BF16 or AMX. (oneDNN's
    own check, `torch.ops.mkldnn._is_mkldnn_bf16_supported`, also says yes for plain AVX-512, where bf16
    is emulated: on such a Xeon a BERT-small training step took 2.2x fp32's, experiments/bench_train.py.)"""
    import torch

    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    return device.type == "cpu" and bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


def autocast(precision: str, device: torch.device) -> AbstractContextManager:
    """The context a forward pass runs in: bf16 autocast, or nothing."""
    import torch

    if resolve(precision, device) == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return nullcontext()


def describe(precision: str, device: torch.device) -> str:
    """For the run's log line: 'fp32', 'bf16', or bf16 with a warning where it is emulated."""
    chosen = resolve(precision, device)
    if chosen == "bf16" and not native_bf16(device):
        return "bf16 (emulated: this device has no native bf16, expect it slower than fp32)"
    return chosen
