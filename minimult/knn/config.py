"""knn-replace's settings (`--set knn.dim=...`); k itself is the mod's value (`knn-replace=k`)."""

from dataclasses import dataclass

from minimult.errors import MinimultError


@dataclass(frozen=True)
class KnnConfig:
    dim: int = 300  # fastText dimension of the static embeddings

    def __post_init__(self):
        if self.dim < 1:
            raise MinimultError(f"knn.dim must be >= 1, got {self.dim}")
