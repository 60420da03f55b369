#!/usr/bin/env bash
# The main job on the built-in corpus (BBE New Testament + 10k KJV Old Testament dev sentences):
# prepare (cached) with statistics and examples, then a tiny end-to-end pretrain + eval;
# with --quick, BERT-small with the quick preset instead.
set -euo pipefail
cd "$(dirname "$0")"
source scripts/env.sh
minimult prepare
if [ "${1:-}" = "--quick" ]; then
  minimult pretrain --preset quick --seed 0
  minimult eval
else
  minimult pretrain --preset tiny --seed 0
  minimult eval
  echo
  echo "smoke run done. For a meaningful model on this CPU: ./quickstart.sh --quick"
fi
