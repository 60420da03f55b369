#!/usr/bin/env bash
# The test command: sets up ./.venv on first use, then runs the whole test suite on CPU.
set -euo pipefail
cd "$(dirname "$0")"
source scripts/env.sh
exec python -m pytest -q "$@"
