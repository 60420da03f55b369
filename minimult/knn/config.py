"""knn-replace's settings (`--set knn.dim=...`); k itself is the mod's value (`knn-replace=k`)."""

from dataclasses import dataclass

from minimult.errors import MinimultError

SEED_DICTIONARIES = ("unsupervised", "identical", "dictionary")


@dataclass(frozen=True)
class KnnConfig:
    dim: int = 300  # fastText dimension of the static embeddings
    # where VecMap's self-learning starts: "unsupervised" (the similarity-distribution seed, the paper's),
    # "identical" (pieces spelled alike in both languages) or "dictionary" (the source's translation
    # dictionary: en-es's silver pairs, the identity for Fake-English)
    seed_dictionary: str = "unsupervised"

    def __post_init__(self):
        if self.dim < 1:
            raise MinimultError(f"knn.dim must be >= 1, got {self.dim}")
        if self.seed_dictionary not in SEED_DICTIONARIES:
            raise MinimultError(f"knn.seed_dictionary must be one of {', '.join(SEED_DICTIONARIES)}, got "
                                f"{self.seed_dictionary!r}")
