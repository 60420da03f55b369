"""minimult: a small-BERT pretraining lab for multilinguality research."""

__version__ = "0.1.0"
