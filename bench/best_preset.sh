#!/usr/bin/env bash
# grail-train --preset best on the inductive splits: for each split, ULTRA's released
# checkpoint imported (grail-tools import-ultra), then the preset within --budget on the
# split's training graph and valid facts (ULTRA fine-tuned, the path preset's model, their
# ensemble; the best of the three on held-out valid facts kept), then the archive it keeps
# evaluated as bench/ultra_zero_shot.sh evaluates ULTRA: the _ind graph, its valid and test
# facts merged as the test set, full ranking filtered by the graph and those facts. One JSON
# line per split on stdout: grail-eval's figures, the candidate kept, and each candidate's MRR
# on the held-out valid facts (from the preset's --report).
# --record MODEL COMMAND: also writes the splits' figures into bench/results/accuracy.jsonl as
# MODEL's, measured by COMMAND (a name in bench/results/commands.json; bench/result_rows.py).
#   bench/best_preset.sh [--checkpoint FILE] [--budget 2h] [--splits "fb237_v1 ..."]
#                        [--threads N] [--seed S] [--out DIR] [--data DIR]
#                        [--record MODEL COMMAND]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/build/bin
data=$root/../shared/data
checkpoint=$root/../shared/models/ultra/ultra_4g.pth
budget=2h
splits="fb237_v1 fb237_v2 fb237_v3 fb237_v4 WN18RR_v1 WN18RR_v2 WN18RR_v3 WN18RR_v4"
threads=2
seed=0
out=$root/out/best
record_model=
while (($#)); do
  case $1 in
    --checkpoint) checkpoint=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --splits) splits=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --record) record_model=$2; record_command=$3; shift 3 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
ultra=$out/$(basename "$checkpoint" .pth).pt
"$bin/grail-tools" import-ultra --checkpoint "$checkpoint" --out "$ultra" >&2
results=$out/results.jsonl
: > "$results"
for split in $splits; do
  ind=$data/${split}_ind
  cat "$ind/valid.txt" "$ind/test.txt" > "$out/$split.test.txt"
  test=$out/$split.test.txt
  start=$(date +%s)
  "$bin/grail-train" --preset best --init "$ultra" --train "$data/$split/train.txt" \
    --valid "$data/$split/valid.txt" --out "$out/$split.best.pt" --time-budget "$budget" \
    --report "$out/$split.report.json" --threads "$threads" --seed "$seed" --progress=false \
    > "$out/$split.train.log" 2>&1
  train_seconds=$(($(date +%s) - start))
  start=$(date +%s)
  line=$("$bin/grail-eval" --model "$out/$split.best.pt" --graph "$ind/train.txt" \
    --test "$test" --filter "$test" --threads "$threads" 2> "$out/$split.eval.log" | tail -n 1)
  report=$(cat "$out/$split.report.json")
  echo "${line%\}},\"split\":\"$split\",\"train_seed\":$seed,\"budget\":\"$budget\",\"train_seconds\":$train_seconds,\"seconds\":$(($(date +%s) - start)),\"preset\":$report}" |
    tee -a "$results"
done
if [[ -n $record_model ]]; then
  /usr/bin/python3 "$root/bench/result_rows.py" --accuracy "$record_model" \
    --command "$record_command" "$results" >&2
fi
