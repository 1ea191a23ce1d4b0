#!/usr/bin/env bash
# The KGE models on WN18RR (../shared/data/WN18RR), for the transductive tables: for each
# model, grail-kge-train on train.txt (validated on valid.txt; test.txt's entities join the
# vocabulary, as the RotatE code's entities.dict holds every entity), then grail-eval with
# train.txt as the graph and test.txt as the facts, valid.txt filtered too: the filtered
# MRR / Hits@k against every entity (full_*), and the GraIL protocol's AUC-PR and
# 50-candidate Hits@10 on its negatives.
#
#   bench/kge_wn18rr.sh [--models "transe distmult complex rotate"] [--epochs 100]
#                       [--negatives 64] [--eval-every 25] [--seed 0] [--threads 2]
#                       [--data DIR] [--runs 1] [--out out/kge] [-- extra grail-kge-train flags]
#
# --data: another directory with train.txt, valid.txt and test.txt (a benchmark split, for
# its transductive fusion tables: bench/fusion_tables.sh); default ../shared/data/WN18RR.
#
# The RotatE code's WN18RR recipe (dim, gamma, learning rate, L3 weight per model: the
# defaults of grail-kge-train) runs 80,000 steps of 512 facts with 1,024 negatives each, on a
# GPU. On 2 CPU cores one such step takes seconds, so the defaults here are a budget: 64
# negatives and 100 epochs (17,000 steps); BENCHMARKS-log.md states it beside the figures.
#
# One evaluation run by default (one draw of the GraIL protocol's negatives; --runs N for more, as
# the small splits need): WN18RR's 3,134 test facts
# make one draw's spread small, unlike the inductive fb237 splits' 205, and a full pass of
# TransE or RotatE over 40,943 entities costs minutes on 2 cores.
#
# Resumable: a model whose result file exists is skipped, a finished training is evaluated
# without training again, and an unfinished one resumes from its last epoch's checkpoint.
set -euo pipefail
cd "$(dirname "$0")/.."
models="transe distmult complex rotate"
epochs=100
negatives=64
eval_every=25
seed=0
threads=2
out=out/kge
runs=1
data=${GRAIL_DATA_DIR:-../shared/data}/WN18RR
extra=()
while (($#)); do
  case $1 in
    --models) models=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --negatives) negatives=$2; shift 2 ;;
    --eval-every) eval_every=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
bin=${GRAIL_BIN_DIR:-build/bin}
[[ -x $bin/grail-kge-train && -x $bin/grail-eval ]] || { echo "build first: scripts/build.sh" >&2; exit 1; }
tag=$(IFS=_; echo "e${epochs}_n${negatives}${extra[*]+_${extra[*]}}" | tr -d ' -')
mkdir -p "$out"

for model in $models; do
  name="$model.$tag.seed$seed"
  result="$out/$name.json"
  [[ -f $result ]] && { cat "$result"; continue; }
  echo "== $name"
  if ! grep -q "^saved " "$out/$name.train.log" 2>/dev/null; then
    "$bin/grail-kge-train" --model "$model" --train "$data/train.txt" --valid "$data/valid.txt" \
      --entities-from "$data/test.txt" --out "$out/$name.pt" --epochs "$epochs" \
      --negatives "$negatives" --eval-every "$eval_every" --seed "$seed" --threads "$threads" \
      --checkpoint-dir "$out/$name.checkpoint" --resume ${extra[@]+"${extra[@]}"} \
      2>> "$out/$name.train.log"
  fi
  trained=$(date +%s)
  "$bin/grail-eval" --model "$out/$name.pt" --graph "$data/train.txt" --test "$data/test.txt" \
    --filter "$data/valid.txt" --seed 0 --runs "$runs" --threads "$threads" \
    2> "$out/$name.eval.log" > "$out/$name.eval.out"
  done_at=$(date +%s)
  read -r epoch_seconds train_seconds < <(awk '/^epoch /{for(i=1;i<=NF;i++) if($i=="s") {sum+=$(i-1); n++}} END{printf "%.1f %.0f\n", n? sum/n : 0, sum}' "$out/$name.train.log")
  tail -n 1 "$out/$name.eval.out" | sed "s/}\$/,\"model\":\"$model\",\"seed\":$seed,\"epochs\":$epochs,\"negatives\":$negatives,\"tag\":\"$tag\",\"seconds_per_epoch\":$epoch_seconds,\"threads\":$threads,\"train_seconds\":$train_seconds,\"eval_seconds\":$((done_at - trained))}/" > "$result.tmp"
  mv "$result.tmp" "$result"
  cat "$result"
done
