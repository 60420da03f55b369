#!/usr/bin/env bash
# One device call for the CUDA-graph benchmark (experiments/bench_graphs.py, docs/speed.md "Static shapes"):
# eager against captured-and-replayed steps for K = 1, 4, 8, 16 stacked BERT-small models on fixed shapes
# (train.pad_multiple 16), fp32 and bf16, after a sameness check (dropout off: graphed losses against eager).
# It needs torch, numpy and tokenizers (bench_train imports minimult), which the device tool's machine had when
# bench_train.py ran there (experiments/results/bench/gpu/probe2.sh):
#   run(command="bash experiments/gpu/graphs_call.sh", timeout_s=420)
# Its JSON comes back as $OUT/graphs-<gpu>.json: copy it to experiments/results/bench/gpu/. Not yet run on a GPU.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr -cd 'A-Za-z0-9' | tr 'A-Z' 'a-z')
nvidia-smi -L
timeout "${LIMIT:-360}" python3 experiments/bench_graphs.py --models "${MODELS:-1,4,8,16}" --precisions fp32,bf16 \
    --steps "${STEPS:-40}" --json "$OUT/graphs-${gpu:-gpu}.json" 2>&1 | tail -40
echo "bench exit ${PIPESTATUS[0]} (124: stopped at LIMIT) after $SECONDS s"
