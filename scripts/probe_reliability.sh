#!/usr/bin/env bash
# Bad-input probes (issue 36's list): each command, its exit status and the last line it printed on
# stderr. Run from a checkout after ./test.sh has set up .venv (or with .venv active):
#     scripts/probe_reliability.sh [WORKDIR]        # prints a markdown table
# Every probe must exit non-zero with one "error: ..." line, or exit 0 saying what it did.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/env.sh"
set +e
W="${1:-$(mktemp -d)}"
mkdir -p "$W" && cd "$W"
export OMP_NUM_THREADS=1
TINY=(--preset tiny --set model.layers=2)
minimult pretrain "${TINY[@]}" --out run >/dev/null 2>&1 || { echo "setup: tiny run failed"; exit 1; }
minimult eval run >/dev/null 2>&1
minimult export run --hf hf >/dev/null 2>&1
python - <<'PY' >/dev/null
import pathlib
pathlib.Path("pair.txt").write_text("in the beginning God made the heaven\nand the earth\n")
pathlib.Path("blank.txt").write_text("  \n\t\n")
pathlib.Path("sup.links").write_text("1\t¹\t1\n")
PY
echo "| probe | command | exit | last stderr line |"
echo "|---|---|--:|---|"
probe() {  # name, command...
  local name="$1"; shift
  "$@" </dev/null >/dev/null 2>"$W/stderr.txt"; local rc=$?
  local err; err="$(grep -v '^\s*$' "$W/stderr.txt" | tail -1)"
  printf '| %s | `%s` | %s | %s |\n' "$name" "$*" "$rc" "${err//|/\\|}"
}
probe "4 empty --only"          minimult eval run --only ,
probe "4 links without --links" minimult eval run --only links
probe "7 empty budget preset"   minimult budget --preset ''
probe "9 absent device"         minimult pretrain "${TINY[@]}" --device cuda:7 --out never
probe "10 non-ASCII digit link" minimult eval --hf hf --pair pair.txt pair.txt --links sup.links
probe "10 huge segment seed"    minimult eval run --segment rand:18446744073709551616
probe "10 blank pair file"      minimult eval --hf hf --pair blank.txt blank.txt
probe "10 png suffix"           minimult probe run --png out.xyz
probe "minor: inv-order="       minimult pretrain "${TINY[@]}" --mods inv-order= --out never2
probe "minor: resume an export" minimult pretrain --resume hf
probe "minor: unknown mod"      minimult pretrain "${TINY[@]}" --mods lang-pos,bogus --out never3
probe "minor: missing corpus"   minimult pretrain "${TINY[@]}" --train-file nothing.txt --out never4
printf 'no folder left by the refused pretrains: %s\n' "$(ls -d never* 2>/dev/null | wc -l)"
