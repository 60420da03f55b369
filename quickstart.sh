#!/usr/bin/env bash
# The main job on the built-in corpus (BBE New Testament + 10k KJV Old Testament dev sentences):
# prepare (cached), then a tiny end-to-end smoke run; with --quick, the quick-preset pretraining.
set -euo pipefail
cd "$(dirname "$0")"
source scripts/env.sh
minimult prepare
if [ "${1:-}" = "--quick" ]; then
  minimult pretrain --preset quick --seed 0
else
  minimult pretrain --preset tiny --seed 0
  echo
  echo "smoke run done. For a meaningful model on this CPU: ./quickstart.sh --quick"
fi
