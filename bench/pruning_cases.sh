# shellcheck shell=bash
# Shared by bench/pruned_ranking.sh and bench/priority_pruning.sh (sourced; both run from the
# repository root with DATA, BIN, FACTS and RATIOS set): one case of pruned against exact
# ranking, and the dense FB15k-237 graph's split.

# pruned_case LABEL MODEL GRAPH TEST [FILTER [PRIORITY]]: bench/pruned_ranking's JSON lines,
# labelled, appended to out/pruned/results.jsonl. A missing model is skipped; ONLY=substring
# runs the cases whose label has it alone.
pruned_case() {
  local label=$1 model=$2 graph=$3 test=$4 filter=${5:-} priority=${6:-}
  [ -f "$model" ] || { echo "skipping $label: no $model" >&2; return; }
  case "$label" in *"${ONLY:-}"*) ;; *) return ;; esac
  echo "== $label" >&2
  "$BIN/pruned_ranking" --model "$model" --graph "$graph" --test "$test" --filter "$filter" \
      --ratios "$RATIOS" --max-facts "$FACTS" --seed 0 --threads 2 \
      ${priority:+--priority "$priority"} |
    sed "s|^{|{\"case\":\"$label\",|" >> out/pruned/results.jsonl
}

# fb_dense_split DIR: the dense FB15k-237 graph (valid+test facts, 14.5k entities, hubs) with
# every 20th fact held out, DIR/test.txt, and the rest, DIR/graph.txt.
fb_dense_split() {
  mkdir -p "$1"
  awk 'NR % 20 == 0' "$DATA/FB15k-237_validtest/graph.txt" > "$1/test.txt"
  awk 'NR % 20 != 0' "$DATA/FB15k-237_validtest/graph.txt" > "$1/graph.txt"
}
