#!/usr/bin/env bash
# The batch of ablations: every setting of the paper's Table 1 (experiments/table1.toml) for each
# seed, then the report (Table 1 as mean ± std over seeds, figures), which ends with the table.
#
#   ./run_all.sh --preset tiny       # the whole grid in minutes (tiny models: checks the machinery)
#   ./run_all.sh                     # this machine (CPU): quick preset, seeds 0,42 (~22 min a run);
#                                    # the overparam rows (needs_gpu) are left out on a CPU
#   ./run_all.sh --preset paper --seeds 0,42,43,100,101   # the full reproduction, on a GPU box
#   ./run_all.sh --preset published --seeds 0,42,43       # the same budget as the paper's code trained it
#   ./run_all.sh --precision bf16    # bf16 autocast on this CPU too (~1.6x faster; docs/speed.md)
#
# Runs go to runs/<preset>/, the report to report/<preset>/ (table1.md, table1.csv, report.json,
# PNG figures, and the HTML site: index.html, whose path it prints last; <preset>-<precision> with
# --precision), both under --out DIR (default: the folder of this script). Other arguments go to
# `minimult sweep`, e.g. `--only 0,1,30`, `--jobs 2`, `--backend ray --address HOST:6379`. Run it
# again after an interruption: finished runs are skipped and interrupted ones resume from their
# checkpoints. PRESET=... and SEEDS=... also work. The K et al.-style settings:
# `minimult sweep experiments/extra.toml --preset quick --seeds 0,42 --root runs/extra-quick`.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

preset="${PRESET:-quick}"
seeds="${SEEDS:-0,42}"
precision=""
out=""
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --preset) preset="${2:?--preset needs a value: tiny, quick, paper, published, quick-b256 or paper-b256}"; shift 2 ;;
    --preset=*) preset="${1#*=}"; shift ;;
    --seeds) seeds="${2:?--seeds needs a value, e.g. 0,42}"; shift 2 ;;
    --seeds=*) seeds="${1#*=}"; shift ;;
    --precision) precision="${2:?--precision needs a value: auto, fp32 or bf16}"; shift 2 ;;
    --precision=*) precision="${1#*=}"; shift ;;
    --out) out="${2:?--out needs a folder}"; shift 2 ;;
    --out=*) out="${1#*=}"; shift ;;
    *) args+=("$1"); shift ;;
  esac
done
case "$preset" in
  tiny|quick|paper|published|quick-b256|paper-b256) ;;  # config.PRESETS (a test checks)
  *) echo "run_all.sh: unknown preset '$preset': use tiny, quick, paper, published, quick-b256 or paper-b256" >&2; exit 2 ;;
esac
name="$preset"
case "$precision" in
  "") ;;
  auto|fp32|bf16) name="$preset-$precision"; args+=(--set "train.precision=$precision") ;;
  *) echo "run_all.sh: unknown precision '$precision': use auto, fp32 or bf16" >&2; exit 2 ;;
esac
out="$(mkdir -p "${out:-$here}" && cd "${out:-$here}" && pwd)"  # a relative --out is the caller's

cd "$here"
source scripts/env.sh

status=0
minimult sweep experiments/table1.toml --preset "$preset" --seeds "$seeds" --root "$out/runs/$name" \
  ${args[@]+"${args[@]}"} \
  || status=$?
# the report covers whatever finished, even when some runs failed; its HTML site goes beside it, and
# the site's path (report/<preset>/index.html) is the last line; a --dry-run has nothing to report
[[ " ${args[*]-} " == *" --dry-run "* ]] && exit "$status"
minimult report "$out/runs/$name" --out "$out/report/$name" --html "$out/report/$name" \
  || { rc=$?; [ "$status" -ne 0 ] || status=$rc; }
exit "$status"
