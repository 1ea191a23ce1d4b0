#!/usr/bin/env bash
# Zero-shot ULTRA on the inductive splits, ULTRA's protocol: the released checkpoint imported
# (grail-tools import-ultra), each split's _ind graph as the graph, its valid and test facts
# merged as the test set (as ULTRA's GraIL loaders merge them), full ranking filtered by the
# graph and those facts. One JSON line per split on stdout.
# --test-only: the split's test facts alone, filtered by its valid facts too (how this
# repository evaluates its own families, docs/BENCHMARKS-log.md), for a comparison with them.
# --fine-tune: each split's archive is first fine-tuned on the split's training graph
# (grail-train --family ultra --init: ULTRA's recipe, --seed S, valid on the split's valid
# facts), then evaluated the same way; "fine_tuned" and "train_seconds" in its line.
# --head-queries inverse: the archive starts a head query's graph of relations at the inverse
# relation (grail-tools import-ultra --head-queries). --record MODEL COMMAND: also writes the
# splits' figures into bench/results/accuracy.jsonl as MODEL's, measured by COMMAND (a name in
# bench/results/commands.json; bench/result_rows.py); --convention COMMAND into
# bench/results/convention.jsonl, the head-query convention's table.
#   bench/ultra_zero_shot.sh [--checkpoint FILE] [--splits "fb237_v1 ..."] [--threads N]
#                            [--out DIR] [--data DIR] [--test-only] [--head-queries forward|inverse]
#                            [--fine-tune [--seed S]] [--record MODEL COMMAND]
#                            [--convention COMMAND]
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
convention_command=
fine_tune=0
seed=0
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
    --convention) convention_command=$2; shift 2 ;;
    --fine-tune) fine_tune=1; shift ;;
    --seed) seed=$2; shift 2 ;;
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
  scored=$model
  train_seconds=0
  if ((fine_tune)); then
    scored=$out/$split.tuned.pt
    start=$(date +%s)
    "$bin/grail-train" --family ultra --init "$model" --train "$data/$split/train.txt" \
      --valid "$data/$split/valid.txt" --out "$scored" --threads "$threads" --seed "$seed" \
      > "$out/$split.train.log" 2>&1
    train_seconds=$(($(date +%s) - start))
  fi
  start=$(date +%s)
  line=$("$bin/grail-eval" --model "$scored" --graph "$ind/train.txt" --test "$test" \
    --filter "$filter" --threads "$threads" 2> "$out/$split.eval.log" | tail -n 1)
  echo "${line%\}},\"split\":\"$split\",\"checkpoint\":\"$(basename "$checkpoint")\",\"test_only\":$test_only,\"head_queries\":\"$head_queries\",\"fine_tuned\":$fine_tune,\"seed\":$seed,\"train_seconds\":$train_seconds,\"seconds\":$(($(date +%s) - start))}" |
    tee -a "$results"
done
if [[ -n $record_model ]]; then
  /usr/bin/python3 "$root/bench/result_rows.py" --accuracy "$record_model" \
    --command "$record_command" "$results" >&2
fi
if [[ -n $convention_command ]]; then
  /usr/bin/python3 "$root/bench/result_rows.py" --convention --command "$convention_command" \
    "$results" >&2
fi
