#!/usr/bin/env bash
# The main job on the built-in corpus (BBE New Testament + 10k KJV Old Testament dev sentences):
# prepare (cached) with statistics and examples of what it trains on, then a tiny end-to-end pretrain + eval;
# with --quick, BERT-small with the quick preset instead.
set -euo pipefail
cd "$(dirname "$0")"
source scripts/env.sh
preset=tiny
[ "${1:-}" = "--quick" ] && preset=quick
minimult prepare --preset "$preset"  # the vocabulary and views the run below trains on
minimult pretrain --preset "$preset" --seed 0
minimult eval
if [ "$preset" = tiny ]; then
  echo
  echo "smoke run done. For a meaningful model on this CPU: ./quickstart.sh --quick"
fi
