"""Multinomial logistic regression in torch (there is no scikit-learn here): the frozen-encoder mode of
transfer and its bag-of-words baseline.

Public entry: `fit_logistic(train_x, train_y, dev_x, dev_y, classes) -> Logistic`. Features are scaled
to zero mean and unit variance on the training rows (so one grid of L2 strengths suits 64 pooled
dimensions and thousands of word counts alike); each strength of `L2_GRID` is fitted full-batch with
L-BFGS, which is deterministic, and the one with the best dev accuracy is kept. `x` may be a sparse
COO tensor (word counts): the scaling is folded into the weights, so it stays sparse.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

L2_GRID = (1e-4, 1e-3, 1e-2, 1e-1)  # strengths of the penalty l2 * sum(W**2) beside the mean cross-entropy
MAX_ITER = 200


def _matmul(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.sparse.mm(x, w) if x.is_sparse else x @ w


@dataclass
class Logistic:
    mean: torch.Tensor  # (D,) of the training rows
    scale: torch.Tensor  # (D,) 1 / their std
    weight: torch.Tensor  # (D, C) on standardised features
    bias: torch.Tensor  # (C,)
    l2: float = 0.0
    dev_accuracy: float = float("nan")

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """((x - mean) * scale) @ weight + bias, computed without densifying a sparse x."""
        return _logits(x, self.mean, self.scale, self.weight, self.bias)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self.logits(x).argmax(-1)

    def accuracy(self, x: torch.Tensor, y: torch.Tensor) -> float:
        return float((self.predict(x) == y).double().mean()) if len(y) else float("nan")


def _logits(x, mean, scale, weight, bias):
    w = scale[:, None] * weight  # (D, C)
    return _matmul(x, w) + (bias - mean @ w)


@torch.no_grad()
def _moments(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Column mean and 1 / std (std floored at 1e-6: a constant column gets no weight that matters)."""
    if x.is_sparse:
        n = x.shape[0]
        mean = torch.sparse.sum(x, 0).to_dense() / n
        var = (torch.sparse.sum(x * x, 0).to_dense() / n - mean**2).clamp(min=0)
        return mean, 1.0 / var.sqrt().clamp(min=1e-6)
    return x.mean(0), 1.0 / x.std(0, unbiased=False).clamp(min=1e-6)


def _fit(x, y, mean, scale, classes: int, l2: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Weights minimising mean cross-entropy + l2 * sum(W**2) on standardised x (bias not penalised)."""
    weight = torch.zeros(x.shape[1], classes, device=x.device, requires_grad=True)
    bias = torch.zeros(classes, device=x.device, requires_grad=True)
    opt = torch.optim.LBFGS([weight, bias], lr=1.0, max_iter=MAX_ITER, history_size=20,
                            tolerance_grad=1e-6, tolerance_change=1e-9, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(_logits(x, mean, scale, weight, bias), y) + l2 * weight.pow(2).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        opt.step(closure)
    return weight.detach(), bias.detach()


def fit_logistic(train_x: torch.Tensor, train_y: torch.Tensor, dev_x: torch.Tensor, dev_y: torch.Tensor,
                 classes: int, grid=L2_GRID) -> Logistic:
    """The best (by dev accuracy; the stronger L2 on a tie) of one fit per L2 strength in `grid`."""
    train_x, dev_x = train_x.float(), dev_x.float()
    mean, scale = _moments(train_x)
    best = None
    for l2 in sorted(grid, reverse=True):
        model = Logistic(mean, scale, *_fit(train_x, train_y, mean, scale, classes, l2), l2=l2)
        model.dev_accuracy = model.accuracy(dev_x, dev_y)
        if best is None or model.dev_accuracy > best.dev_accuracy:
            best = model
    return best
