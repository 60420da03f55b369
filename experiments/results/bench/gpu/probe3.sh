#!/usr/bin/env bash
# Is cuDNN attention's per-shape graph build what slows bf16 on length-bucketed batches? (issue 39)
export PYTHONUNBUFFERED=1 MINIMULT_CACHE=/tmp/mmcache
T0=$(date +%s); el() { echo "($(( $(date +%s)-T0 )) s)"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi -L
NOCUDNN='import sys, torch; torch.backends.cuda.enable_cudnn_sdp(False); from minimult.cli import main; sys.argv[0] = "minimult"; main()'
rate() { python3 -c "import json; r=json.load(open('$1/run.json')); print('$2: steps', r['steps'], 'train_s %.1f' % r['train_seconds'], 'tok/s %.0f' % r['tokens_per_s'], 'ms/step %.1f' % (1000*r['train_seconds']/r['steps']))"; }
for i in 1 2; do
echo "=== round $i $(el)"
timeout 90 python3 -m minimult.cli pretrain --preset paper --epochs 5 --device cuda --out /tmp/a$i > /tmp/a$i.log 2>&1; rate /tmp/a$i "bf16 (auto), cuDNN attention allowed"
timeout 90 python3 -c "$NOCUDNN" pretrain --preset paper --epochs 5 --device cuda --out /tmp/b$i > /tmp/b$i.log 2>&1; rate /tmp/b$i "bf16 (auto), cuDNN attention off"
timeout 90 python3 -m minimult.cli pretrain --preset paper --epochs 5 --device cuda --precision fp32 --out /tmp/c$i > /tmp/c$i.log 2>&1; rate /tmp/c$i "fp32"
done
tail -3 /tmp/b1.log
echo "=== total $(el)"
