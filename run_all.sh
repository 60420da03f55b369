#!/usr/bin/env bash
# The batch of ablations: every setting of the paper's Table 1 (experiments/table1.toml) for each
# seed, then the report (Table 1 as mean ± std over seeds, figures) in report/.
#
#   ./run_all.sh                                   # this machine (CPU): quick preset, seeds 0,42;
#                                                  # the overparam rows (needs_gpu) are left out on a CPU
#   PRESET=paper SEEDS=0,42,43,100,101 ./run_all.sh   # the full reproduction, on a GPU box
#
# Extra arguments go to `minimult sweep`, e.g. `./run_all.sh --only 0,1,30`, `--jobs 2`,
# `--backend ray --address HOST:6379`. Run it again after an interruption: finished runs are
# skipped and interrupted ones resume from their checkpoints. The K et al.-style settings:
# `minimult sweep experiments/extra.toml --preset quick --seeds 0,42` (same runs/ folder).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
source scripts/env.sh

status=0
minimult sweep experiments/table1.toml --preset "${PRESET:-quick}" --seeds "${SEEDS:-0,42}" "$@" || status=$?
# the report covers whatever finished, even when some runs failed
minimult report runs/ --out report/ || { rc=$?; [ "$status" -ne 0 ] || status=$rc; }
exit "$status"
