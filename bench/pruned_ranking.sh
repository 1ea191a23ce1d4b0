#!/usr/bin/env bash
# Pruned propagation against exact ranking on every graph where exact is feasible
# (docs/BENCHMARKS-log.md, "Pruned propagation"): bench/pruned_ranking for ULTRA's released
# weights (imported) on the 8 inductive test graphs and WN18RR's full graph, and for learned
# path models (with and without the reach mask) where they exist. One JSON line per graph,
# model and budget appended to out/pruned/results.jsonl (bench/pruned_table.py renders it).
#   bench/pruned_ranking.sh [MODELS_DIR]    (default out/scale/models: ultra_3g.pt,
#                                            fb_path.pt, wn_path.pt as bench/scale_bench.py
#                                            makes them)
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${GRAIL_DATA_DIR:-../shared/data}
MODELS=${1:-out/scale/models}
OUT=out/pruned
BIN=build/bin
mkdir -p "$OUT"
FACTS=${FACTS:-500}
RATIOS=${RATIOS:-0.05,0.1,0.25}

. bench/pruning_cases.sh

if [ ! -f "$MODELS/ultra_3g.pt" ]; then
  "$BIN/grail-tools" import-ultra --checkpoint ../shared/models/ultra/ultra_3g.pth \
      --out "$MODELS/ultra_3g.pt"
fi
for split in fb237_v1 fb237_v2 fb237_v3 fb237_v4 WN18RR_v1 WN18RR_v2 WN18RR_v3 WN18RR_v4; do
  pruned_case "ultra_3g/${split}_ind" "$MODELS/ultra_3g.pt" "$DATA/${split}_ind/train.txt" \
      "$DATA/${split}_ind/test.txt"
done
pruned_case ultra_3g/WN18RR "$MODELS/ultra_3g.pt" "$DATA/WN18RR/train.txt" \
    "$DATA/WN18RR/test.txt" "$DATA/WN18RR/valid.txt"
fb_dense_split "$OUT/fb_dense"
for model in ultra_3g fb_path; do
  pruned_case "$model/fb_dense" "$MODELS/$model.pt" "$OUT/fb_dense/graph.txt" \
      "$OUT/fb_dense/test.txt"
done
pruned_case fb_path/fb237_v1_ind "$MODELS/fb_path.pt" "$DATA/fb237_v1_ind/train.txt" \
    "$DATA/fb237_v1_ind/test.txt"
pruned_case wn_path/WN18RR "$MODELS/wn_path.pt" "$DATA/WN18RR/train.txt" \
    "$DATA/WN18RR/test.txt" "$DATA/WN18RR/valid.txt"
for model in ${EXTRA_MODELS:-}; do  # label=archive:graph_dir
  label=${model%%=*}; rest=${model#*=}; archive=${rest%%:*}; split=${rest#*:}
  pruned_case "$label" "$archive" "$DATA/$split/train.txt" "$DATA/$split/test.txt"
done
