"""Multinomial logistic regression in torch, for probes on frozen vectors (no scikit-learn needed).

Features are standardised with the training set's mean and spread, and the weights fitted full-batch
by L-BFGS on the mean cross-entropy plus an L2 penalty, from zeros: the same data give the same
classifier on every run. Tens of thousands of 64- to 768-dimensional vectors fit in well under a
second on a CPU.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from minimult.errors import MinimultError


class LogisticRegression:
    def __init__(self, classes: int, l2: float = 1e-3, max_iter: int = 100):
        self.classes, self.l2, self.max_iter = classes, l2, max_iter

    def fit(self, x: torch.Tensor, y: torch.Tensor) -> "LogisticRegression":
        """x (N, H) float, y (N,) long in 0..classes-1."""
        if x.dim() != 2 or y.shape != (x.shape[0],) or x.shape[0] == 0:
            raise MinimultError(f"a probe needs (N, H) features and (N,) labels, got {tuple(x.shape)} and "
                                f"{tuple(y.shape)}")
        x = x.detach().double()
        self.mean, self.scale = x.mean(0), x.std(0, unbiased=False).clamp_min(1e-6)
        z, y = (x - self.mean) / self.scale, y.long().to(x.device)
        self.weight = torch.zeros(x.shape[1], self.classes, dtype=torch.float64, device=x.device, requires_grad=True)
        self.bias = torch.zeros(self.classes, dtype=torch.float64, device=x.device, requires_grad=True)
        opt = torch.optim.LBFGS([self.weight, self.bias], max_iter=self.max_iter, line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            loss = F.cross_entropy(z @ self.weight + self.bias, y) + self.l2 * self.weight.pow(2).sum()
            loss.backward()
            return loss

        with torch.enable_grad():
            opt.step(closure)
        return self

    @torch.no_grad()
    def predict(self, x: torch.Tensor) -> torch.Tensor:
        z = (x.detach().double() - self.mean) / self.scale
        return (z @ self.weight + self.bias).argmax(1)

    def accuracy(self, x: torch.Tensor, y: torch.Tensor) -> float:
        return float((self.predict(x) == y.to(x.device)).double().mean()) if len(y) else float("nan")
