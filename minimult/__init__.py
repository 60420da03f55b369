"""minimult: a small-BERT pretraining lab for multilinguality research."""

__version__ = "0.1.0"

import os as _os

# On a shared 2-core machine, OpenMP threads that spin while waiting made 2-thread training ~10x
# slower whenever anything else ran (measured by experiments/bench_train.py); must precede torch.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
