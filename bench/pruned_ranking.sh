#!/usr/bin/env bash
# Pruned propagation against exact ranking on every graph where exact is feasible
# (docs/BENCHMARKS.md, "Pruned propagation"): bench/pruned_ranking for ULTRA's released
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

run() {  # label model graph test [filter]
  local label=$1 model=$2 graph=$3 test=$4 filter=${5:-}
  [ -f "$model" ] || { echo "skipping $label: no $model" >&2; return; }
  case "$label" in *"${ONLY:-}"*) ;; *) return ;; esac  # ONLY=substring: those cases alone
  echo "== $label" >&2
  "$BIN/pruned_ranking" --model "$model" --graph "$graph" --test "$test" --filter "$filter" \
      --ratios "$RATIOS" --max-facts "$FACTS" --seed 0 --threads 2 |
    sed "s|^{|{\"case\":\"$label\",|" >> "$OUT/results.jsonl"
}

if [ ! -f "$MODELS/ultra_3g.pt" ]; then
  "$BIN/grail-tools" import-ultra --checkpoint ../shared/models/ultra/ultra_3g.pth \
      --out "$MODELS/ultra_3g.pt"
fi
for split in fb237_v1 fb237_v2 fb237_v3 fb237_v4 WN18RR_v1 WN18RR_v2 WN18RR_v3 WN18RR_v4; do
  run "ultra_3g/${split}_ind" "$MODELS/ultra_3g.pt" "$DATA/${split}_ind/train.txt" \
      "$DATA/${split}_ind/test.txt"
done
run ultra_3g/WN18RR "$MODELS/ultra_3g.pt" "$DATA/WN18RR/train.txt" "$DATA/WN18RR/test.txt" \
    "$DATA/WN18RR/valid.txt"
# The dense FB15k-237 graph (valid+test facts, 14.5k entities, hubs): every 20th fact held
# out as the test set, the rest the graph.
mkdir -p "$OUT/fb_dense"
awk 'NR % 20 == 0' "$DATA/FB15k-237_validtest/graph.txt" > "$OUT/fb_dense/test.txt"
awk 'NR % 20 != 0' "$DATA/FB15k-237_validtest/graph.txt" > "$OUT/fb_dense/graph.txt"
run ultra_3g/fb_dense "$MODELS/ultra_3g.pt" "$OUT/fb_dense/graph.txt" "$OUT/fb_dense/test.txt"
run fb_path/fb_dense "$MODELS/fb_path.pt" "$OUT/fb_dense/graph.txt" "$OUT/fb_dense/test.txt"
run fb_path/fb237_v1_ind "$MODELS/fb_path.pt" "$DATA/fb237_v1_ind/train.txt" \
    "$DATA/fb237_v1_ind/test.txt"
run wn_path/WN18RR "$MODELS/wn_path.pt" "$DATA/WN18RR/train.txt" "$DATA/WN18RR/test.txt" \
    "$DATA/WN18RR/valid.txt"
for model in ${EXTRA_MODELS:-}; do  # label=archive:graph_dir
  label=${model%%=*}; rest=${model#*=}; archive=${rest%%:*}; split=${rest#*:}
  run "$label" "$archive" "$DATA/$split/train.txt" "$DATA/$split/test.txt"
done
