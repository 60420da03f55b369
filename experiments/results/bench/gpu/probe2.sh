#!/usr/bin/env bash
# GPU measurements (issue 39 item 3): the knn fix on the stacked group, one paper-preset run's rate, a profile, bench_train/bench_stacked on cuda
export PYTHONUNBUFFERED=1 MINIMULT_CACHE=/tmp/mmcache
T0=$(date +%s); el() { echo "($(( $(date +%s)-T0 )) s)"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT
echo "=== 1: stacked group with knn-replace, 1 epoch (141 updates) $(el)"
timeout 150 python3 -m minimult.cli sweep experiments/table1.toml --preset paper --seeds 0 --only 0,2,4,7,30 --stack 8 --jobs 1 --set train.epochs=1 --root /tmp/p1 2>&1 | tail -8
grep -h 'knn-replace\|Traceback\|Error' /tmp/p1/*/sweep.log | sort -u | head -8
echo "=== 2: one run, paper preset, original, 5 epochs (705 updates, one periodic eval), auto precision $(el)"
timeout 100 python3 -m minimult.cli pretrain --preset paper --epochs 5 --device cuda --out /tmp/s1 2>&1 | grep -v '^step' | tail -6
python3 -c "import json; r=json.load(open('/tmp/s1/run.json')); print('steps', r.get('steps'), 'train_s', r.get('train_seconds'), 'tok/s', r.get('tokens_per_s'), 'ms/step', 1000*r['train_seconds']/r['steps'])"
echo "=== 3: profile, 1 epoch $(el)"
timeout 70 python3 -m cProfile -o /tmp/prof.out -m minimult.cli pretrain --preset paper --epochs 1 --eval-every 0 --device cuda --out /tmp/s3 > /dev/null 2>&1
python3 -c "import pstats; pstats.Stats('/tmp/prof.out').sort_stats('tottime').print_stats(30)" > $OUT/profile-tottime.txt 2>&1
python3 -c "import pstats; pstats.Stats('/tmp/prof.out').sort_stats('cumtime').print_stats(45)" > $OUT/profile-cumtime.txt 2>&1
echo "=== 4: bench_train cuda $(el)"
timeout 70 python3 experiments/bench_train.py --device cuda --steps 10 --batch-size 128 --precision fp32 --json $OUT/h100-fp32.json --label "H100, fp32, batch 128" 2>&1 | tail -4
timeout 70 python3 experiments/bench_train.py --device cuda --steps 10 --batch-size 128 --precision bf16 --hf-precision bf16 --json $OUT/h100-bf16.json --label "H100, bf16, batch 128" 2>&1 | tail -4
echo "=== 5: bench_stacked cuda $(el)"
timeout 60 python3 experiments/bench_stacked.py --device cuda --models 8 --steps 10 --batch-size 128 2>&1 | tail -6
echo "=== total $(el)"
