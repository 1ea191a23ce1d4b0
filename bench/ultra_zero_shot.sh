#!/usr/bin/env bash
# Zero-shot ULTRA on the inductive splits, ULTRA's protocol: the released checkpoint imported
# (grail-tools import-ultra), each split's _ind graph as the graph, its valid and test facts
# merged as the test set (as ULTRA's GraIL loaders merge them), full ranking filtered by the
# graph and those facts. One JSON line per split on stdout.
# --test-only: the split's test facts alone, filtered by its valid facts too (how this
# repository evaluates its own families, docs/BENCHMARKS-log.md), for a comparison with them.
# --head-queries inverse: the archive starts a head query's graph of relations at the inverse
# relation (grail-tools import-ultra --head-queries). --record MODEL COMMAND: also writes the
# splits' figures into bench/results/accuracy.jsonl as MODEL's, measured by COMMAND (a name in
# bench/results/commands.json; bench/result_rows.py).
#   bench/ultra_zero_shot.sh [--checkpoint FILE] [--splits "fb237_v1 ..."] [--threads N]
#                            [--out DIR] [--data DIR] [--test-only] [--head-queries forward|inverse]
#                            [--record MODEL COMMAND]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/build/bin
data=$root/../shared/data
checkpoint=$root/../shared/models/ultra/ultra_3g.pth
splits="fb237_v1 fb237_v2 fb237_v3 fb237_v4 WN18RR_v1 WN18RR_v2 WN18RR_v3 WN18RR_v4"
threads=2
out=$root/out/ultra
test_only=0
head_queries=forward
record_model=
while (($#)); do
  case $1 in
    --checkpoint) checkpoint=$2; shift 2 ;;
    --splits) splits=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --test-only) test_only=1; shift ;;
    --head-queries) head_queries=$2; shift 2 ;;
    --record) record_model=$2; record_command=$3; shift 3 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
model=$out/$(basename "$checkpoint" .pth).pt
"$bin/grail-tools" import-ultra --checkpoint "$checkpoint" --out "$model" \
  --head-queries "$head_queries" >&2
results=$out/results.jsonl
: > "$results"
for split in $splits; do
  ind=$data/${split}_ind
  if ((test_only)); then
    test=$ind/test.txt
    filter=$ind/valid.txt
  else
    cat "$ind/valid.txt" "$ind/test.txt" > "$out/$split.test.txt"
    test=$out/$split.test.txt
    filter=$test
  fi
  start=$(date +%s)
  line=$("$bin/grail-eval" --model "$model" --graph "$ind/train.txt" --test "$test" \
    --filter "$filter" --threads "$threads" 2> "$out/$split.eval.log" | tail -n 1)
  echo "${line%\}},\"split\":\"$split\",\"checkpoint\":\"$(basename "$checkpoint")\",\"test_only\":$test_only,\"head_queries\":\"$head_queries\",\"seconds\":$(($(date +%s) - start))}" |
    tee -a "$results"
done
if [[ -n $record_model ]]; then
  /usr/bin/python3 "$root/bench/result_rows.py" --accuracy "$record_model" \
    --command "$record_command" "$results" >&2
fi
