#!/usr/bin/env bash
# The test command: sets up ./.venv on first use, then runs the whole test suite on CPU, one pytest worker per
# core (pytest-xdist; MINIMULT_TEST_WORKERS=0 runs it in this one process, e.g. for pdb).
set -euo pipefail
cd "$(dirname "$0")"
source scripts/env.sh
exec python -m pytest -q -n "${MINIMULT_TEST_WORKERS:-auto}" "$@"
