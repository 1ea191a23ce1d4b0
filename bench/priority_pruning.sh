#!/usr/bin/env bash
# The learned priority (A*Net's; model/path/path_model.h, PathConfig::priority) against exact
# ranking (docs/BENCHMARKS-log.md, "Pruned propagation"): for each split, a path model in the
# default configuration trained with --prune-node-ratio (out/priority/<split>.pt, trained
# here when absent), then bench/pruned_ranking on the split's inductive test graph with the
# model's own priority and, on the same weights, the parameter-free one (walks), with the
# protocol of bench/pruned_ranking.sh's inductive cases (the test graph's and the test facts
# filtered). One JSON line per case and budget appended to out/pruned/results.jsonl
# (bench/pruned_table.py renders it).
#   bench/priority_pruning.sh [SPLIT:EPOCHS ...]     (default fb237_v1:20)
# Environment: RATIO (training's node ratio, 0.1), FACTS (test facts drawn, 500), RATIOS
# (budgets, 0.05,0.1,0.25), SEED (0).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${GRAIL_DATA_DIR:-../shared/data}
BIN=build/bin
OUT=out/priority
mkdir -p "$OUT" out/pruned
RATIO=${RATIO:-0.1}
FACTS=${FACTS:-500}
RATIOS=${RATIOS:-0.05,0.1,0.25}
SEED=${SEED:-0}
splits=("$@")
[ ${#splits[@]} -gt 0 ] || splits=(fb237_v1:20)

. bench/pruning_cases.sh

for item in "${splits[@]}"; do
  split=${item%%:*}
  epochs=${item#*:}
  model="$OUT/${split}_r${RATIO}_s${SEED}.pt"
  if [ ! -f "$model" ]; then
    echo "== training $model ($epochs epochs)" >&2
    # A*Net's inductive FB15k-237 configuration: batch 64, 32 negatives, lr 5e-3,
    # self-adversarial temperature 0.5, 6 layers of 32, sum, query-dependent relations.
    /usr/bin/time -f "%e s, %M KB peak" "$BIN/grail-train" --family path \
        --train "$DATA/$split/train.txt" --valid "$DATA/$split/valid.txt" --out "$model" \
        --epochs "$epochs" --batch-size 64 --adversarial-temperature 0.5 \
        --prune-node-ratio "$RATIO" --seed "$SEED" --threads 2 2>&1 | tee "$OUT/${split}_r${RATIO}_s${SEED}.log" >&2
  fi
  [ "$split" = fb237_v1 ] && fb_dense_split out/pruned/fb_dense
  for priority in model walks; do
    name="priority_r${RATIO}"
    [ "$priority" = walks ] && name="priority_r${RATIO} (walks)"
    pruned_case "$name/${split}_ind" "$model" "$DATA/${split}_ind/train.txt" \
        "$DATA/${split}_ind/test.txt" "" "$priority"
    # The larger graphs of bench/pruned_ranking.sh: fb237_v1's model on the dense FB15k-237
    # graph (its facts of relations the model lacks are not message edges), WN18RR_v1's on
    # WN18RR's full graph.
    if [ "$split" = fb237_v1 ]; then
      pruned_case "$name/fb_dense" "$model" out/pruned/fb_dense/graph.txt \
          out/pruned/fb_dense/test.txt "" "$priority"
    elif [ "$split" = WN18RR_v1 ]; then
      pruned_case "$name/WN18RR" "$model" "$DATA/WN18RR/train.txt" "$DATA/WN18RR/test.txt" \
          "$DATA/WN18RR/valid.txt" "$priority"
    fi
  done
done
