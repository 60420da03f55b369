#!/usr/bin/env bash
# the committed SDPA_BACKENDS (cuDNN left out) in bf16, against fp32 on the same machine
export PYTHONUNBUFFERED=1 MINIMULT_CACHE=/tmp/mmcache
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi -L
rate() { python3 -c "import json; r=json.load(open('$1/run.json')); print('$2: steps', r['steps'], 'train_s %.1f' % r['train_seconds'], 'tok/s %.0f' % r['tokens_per_s'], 'ms/step %.1f' % (1000*r['train_seconds']/r['steps']))"; }
timeout 80 python3 -m minimult.cli pretrain --preset paper --epochs 5 --device cuda --out /tmp/n1 > /tmp/n1.log 2>&1; rate /tmp/n1 "bf16 (auto), SDPA_BACKENDS"
timeout 60 python3 -m minimult.cli pretrain --preset paper --epochs 5 --device cuda --precision fp32 --out /tmp/f1 > /tmp/f1.log 2>&1; rate /tmp/f1 "fp32"
tail -2 /tmp/n1.log
