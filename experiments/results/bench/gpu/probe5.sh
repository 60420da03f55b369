#!/usr/bin/env bash
# overparam (BERT-base sizes, Table 1 rows 15-17) on a GPU: ms per update in fp32 and bf16 autocast, two
# rounds alternated, beside BERT-small fp32 (the reference, measured in the same call); 2 epochs (282 updates
# of the paper preset) each, evaluation included in the wall time but not in train_seconds.
#   run(command="bash experiments/results/bench/gpu/probe5.sh", carry=[".whl"], timeout_s=420)
# (2026-11-28 on a lent H200: its output is probe5.out, the overparam runs' run.json files probe5/; docs/speed.md)
export PYTHONUNBUFFERED=1 MINIMULT_CACHE=/tmp/mmcache
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi -L
python3 -c "import torch; print('torch', torch.__version__)"
rate() { python3 -c "import json; r=json.load(open('$1/run.json')); print('$2: steps', r['steps'], 'params', r['parameters'], 'train_s %.1f' % r['train_seconds'], 'tok/s %.0f' % r['tokens_per_s'], 'ms/step %.1f' % (1000*r['train_seconds']/r['steps']))" || tail -3 "$1.log"; }
run() {  # out label precision mods
    local t0=$SECONDS
    timeout 150 python3 -m minimult.cli pretrain --preset paper --epochs 2 --device cuda --precision "$3" \
        ${4:+--mods "$4"} --out "/tmp/$1" > "/tmp/$1.log" 2>&1
    rate "/tmp/$1" "$2 (wall $((SECONDS - t0)) s)"
}
run s0 "BERT-small fp32, warm-up (prepares the corpus)" fp32
for r in 1 2; do
    run o$r-f "round $r overparam fp32" fp32 overparam
    run o$r-b "round $r overparam bf16" bf16 overparam
    run s$r "round $r BERT-small fp32" fp32
done
cp /tmp/*.log "$OUT"/ 2>/dev/null; for d in /tmp/s? /tmp/o?-?; do cp "$d/run.json" "$OUT/$(basename $d)-run.json"; done
