#!/usr/bin/env bash
# GPU probe : does the CUDA path run, and how long does a stacked paper-preset step take?
export PYTHONUNBUFFERED=1 MINIMULT_CACHE=/tmp/mmcache
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/nltk*.whl .whl/fasttext*.whl .whl/pythonbible*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi -L; nproc
python3 -c "import torch, tokenizers, numpy, scipy, click, matplotlib, jinja2, markdown_it; print('torch', torch.__version__, torch.cuda.get_device_name(), 'tokenizers', tokenizers.__version__, 'numpy', numpy.__version__)"
echo "=== smoke: tiny pretrain + eval on cuda ($(( $(date +%s)-T0 )) s)"
timeout 150 python3 -m minimult.cli pretrain --preset tiny --device cuda --out /tmp/smoke 2>&1 | tail -8
echo "=== probe: paper preset, 2 epochs (282 updates), seed 0, 8 settings stacked + knn + untrained ($(( $(date +%s)-T0 )) s)"
timeout 300 python3 -m minimult.cli sweep experiments/table1.toml --preset paper --seeds 0 --only 0,2,4,5,6,7,8,30,18 --stack 8 --jobs 3 --set train.epochs=2 --root /tmp/probe 2>&1 | tail -25
for f in /tmp/probe/*/run.json; do python3 -c "import json,sys; r=json.load(open('$f')); print('$f'.split('/')[-2], r.get('steps'), r.get('train_seconds'), r.get('tokens_per_s'), r.get('device'))"; done
for f in /tmp/probe/*/results.json; do python3 -c "import json; r=json.load(open('$f')); print('$f'.split('/')[-2], 'mu', r.get('mu'), 'eval_s', r.get('eval_seconds'))"; done
mkdir -p $OUT; cp /tmp/probe/*/sweep.log $OUT/ 2>/dev/null | true
echo "=== total $(( $(date +%s)-T0 )) s"
