#!/usr/bin/env bash
# Ensembles of path-family, GraIL and KGE archives on the inductive splits (grail-fuse --member):
# for each split, the members' archives (MEMBER patterns with {split} for the split's name), the
# rule fitted on the split's training graph and valid facts, then the ensemble evaluated as
# bench/ultra_zero_shot.sh evaluates ULTRA: the _ind graph, its valid and test facts merged as
# the test set, full ranking filtered by the graph and those facts. One JSON line per split on
# stdout, with each member's own line's figures beside it (`members_full_mrr`; a GraIL
# member's from grail-eval --grail-full-ranking, a KGE member's with --full-ranking).
# --transductive: evaluated on the split's own training graph instead, its test facts the test
# set, filtered by the graph and its valid facts (the entities a KGE member was trained on; on
# the _ind graph it knows none, and the ensemble ranks as its other members do).
# --record MODEL COMMAND: also writes the splits' figures into bench/results/accuracy.jsonl as
# MODEL's, measured by COMMAND (a name in bench/results/commands.json; bench/result_rows.py).
#   bench/ensemble.sh --member 'out/ft_4g_forward/{split}.tuned.pt' --member 'DIR/{split}.pt'
#                     [--splits "fb237_v1 ..."] [--threads N] [--out DIR] [--data DIR]
#                     [--transductive] [--record MODEL COMMAND]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/build/bin
data=$root/../shared/data
splits="fb237_v1"
threads=2
out=$root/out/ensemble
members=()
record_model=
transductive=0
while (($#)); do
  case $1 in
    --member) members+=("$2"); shift 2 ;;
    --splits) splits=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --record) record_model=$2; record_command=$3; shift 3 ;;
    --transductive) transductive=1; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
if ((${#members[@]} < 1)); then
  echo "bench/ensemble.sh needs --member (twice or more)" >&2
  exit 2
fi
mkdir -p "$out"
results=$out/results.jsonl
: > "$results"
for split in $splits; do
  if ((transductive)); then
    graph=$data/$split/train.txt
    test=$data/$split/test.txt
    filter=$data/$split/valid.txt
  else
    ind=$data/${split}_ind
    graph=$ind/train.txt
    cat "$ind/valid.txt" "$ind/test.txt" > "$out/$split.test.txt"
    test=$out/$split.test.txt
    filter=$test
  fi
  args=()
  member_mrr=()
  for pattern in "${members[@]}"; do
    archive=${pattern//\{split\}/$split}
    args+=(--member "$archive")
    line=$("$bin/grail-eval" --model "$archive" --graph "$graph" --test "$test" \
      --filter "$filter" --threads "$threads" --grail-full-ranking --full-ranking 2> /dev/null |
      tail -n 1)
    member_mrr+=("$(/usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])["full_mrr"])' "$line")")
  done
  start=$(date +%s)
  "$bin/grail-fuse" "${args[@]}" --graph "$data/$split/train.txt" --valid "$data/$split/valid.txt" \
    --out "$out/$split.ensemble.pt" --threads "$threads" > "$out/$split.fuse.log" 2>&1
  fit_seconds=$(($(date +%s) - start))
  start=$(date +%s)
  line=$("$bin/grail-eval" --model "$out/$split.ensemble.pt" --graph "$graph" \
    --test "$test" --filter "$filter" --threads "$threads" 2> "$out/$split.eval.log" | tail -n 1)
  echo "${line%\}},\"split\":\"$split\",\"transductive\":$transductive,\"members_full_mrr\":[$(IFS=,; echo "${member_mrr[*]}")],\"fit_seconds\":$fit_seconds,\"seconds\":$(($(date +%s) - start))}" |
    tee -a "$results"
done
if [[ -n $record_model ]]; then
  /usr/bin/python3 "$root/bench/result_rows.py" --accuracy "$record_model" \
    --command "$record_command" "$results" >&2
fi
