#!/usr/bin/env bash
# Reproduces the paper's inductive results (Table 2 and 3: AUC-PR and Hits@10) on the
# benchmark splits in ../shared/data: for each split and seed, grail-train on
# <split>/train.txt (validated on <split>/valid.txt), then grail-eval with
# <split>_ind/train.txt as the graph and <split>_ind/test.txt as the facts.
#
#   bench/reproduce.sh [--splits "WN18RR_v1 fb237_v1"] [--seeds "0 1 2"] [--epochs 50]
#                      [--out out/repro] [--threads 2] [--jobs 1] [--runs 5]
#                      [--transductive | --merged] [--checkpoint-every-steps N] [--so-far]
#                      [-- extra grail-train flags]
#
# --transductive: the paper's appendix protocol instead (Tables "Transductive results"): the
# same model, tested with <split>/train.txt as the graph and <split>/test.txt as the facts.
# It shares the inductive run's model (trained once, the result files differ:
# <name>.transductive.json).
#
# --merged: the test set the published full-ranking figures on these splits count instead:
# <split>_ind/valid.txt and test.txt together, every fact of both filtered (A*Net's repository,
# whose runs give NBFNet's published full MRR on these splits, and ULTRA's GraIL loaders merge
# them so; the model never sees either file). Same graph, same model as the inductive run's;
# the result is <name>.merged.json. Without it, the test set is test.txt alone, as the GraIL
# paper's protocol has it. A GraIL model is ranked against every entity too
# (grail-eval --grail-full-ranking) under --merged.
#
# Each model is evaluated --runs times (grail-eval --seed 0 --runs N: negatives drawn anew
# with seeds 0..N-1); the result holds the means. One draw of 1:1 negatives moves AUC-PR by
# several points on the small fb237 test sets, more than the differences being measured.
#
# --jobs N runs N (split, seed) pairs at once, each with --threads LibTorch threads. On a
# 2-core machine `--jobs 2 --threads 1` trains two seeds in about the time one takes with
# two threads: the step's scatters (index_add_) run on one core, so a second thread in the
# same process idles much of the time.
#
# Resumable: a (split, seed) whose result file exists is skipped, a model whose training
# finished is evaluated without training it again, and an unfinished training resumes from
# the checkpoint of its last finished epoch (either family), so an interrupted run continues
# where it stopped. --checkpoint-every-steps N (path family) checkpoints every N steps within
# an epoch as well, so a run killed in a long epoch (fb237_v4 on 2 cores: hours) loses at most N
# steps; it does not change the model, so it is not part of the run's name (nor are --device
# and --input-threads among the grail-train flags). A --device among them is grail-eval's too:
# a run trained on a GPU is evaluated there.
#
# --so-far: the same command plus --so-far evaluates runs that have not finished (stopped, or
# still going in another shell) at the best epoch they have finished, and trains nothing. For
# each such (split, seed), grail-train --epochs E --resume on a copy of its checkpoint (E: the
# epochs that checkpoint has finished) writes the best model of those E epochs to
# <name>.so-far-eE.pt, evaluated as a finished run is into <name>.so-far-eE.json ("so_far":
# true, "epochs": E, "epochs_planned" the run's). The run's own checkpoint is not touched.
#
# bench/reproduction_table.py turns the results into the table in
# docs/BENCHMARKS-log.md.
set -euo pipefail
cd "$(dirname "$0")/.."
splits="WN18RR_v1 WN18RR_v2 WN18RR_v3 WN18RR_v4 fb237_v1 fb237_v2 fb237_v3 fb237_v4"
seeds="0 1 2"
epochs=50
out=out/repro
threads=2
parallel=1
runs=5
transductive=0
merged=0
so_far=0
within=()
data=${GRAIL_DATA_DIR:-../shared/data}
extra=()
while (($#)); do
  case $1 in
    --splits) splits=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --jobs) parallel=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --transductive) transductive=1; shift ;;
    --merged) merged=1; shift ;;
    --so-far) so_far=1; shift ;;
    --checkpoint-every-steps) within=(--checkpoint-every-steps "$2"); shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
bin=${GRAIL_BIN_DIR:-build/bin}  # GRAIL_BIN_DIR: another build's binaries
[[ -x $bin/grail-train && -x $bin/grail-eval ]] || { echo "build first: scripts/build.sh" >&2; exit 1; }
suffix="" protocol=inductive
((transductive && merged)) && { echo "--transductive and --merged are two protocols: pick one" >&2; exit 2; }
((transductive)) && suffix=.transductive protocol=transductive
((merged)) && suffix=.merged protocol=inductive-merged
# The run's name holds the flags that change the model, not where or how fast it runs:
# --device and --input-threads are left out, so a run begun on the CPU resumes on a GPU
# from the same checkpoint (bench/gpu_session.sh reproduce) and lands in the same result.
# The evaluation runs where the training does.
named=() eval_device=()
for ((i = 0; i < ${#extra[@]}; i++)); do
  case ${extra[i]} in
    --device) eval_device=(--device "${extra[i + 1]}"); ((++i)) ;;
    --device=*) eval_device=("${extra[i]}") ;;
    --input-threads) ((++i)) ;;
    --input-threads=*) ;;
    *) named+=("${extra[i]}") ;;
  esac
done
tag=$(IFS=_; echo "e${epochs}${named[*]+_${named[*]}}" | tr -d ' -')
mkdir -p "$out"

# Trains split $1 with seed $2 for $3 epochs from checkpoint directory $4 (resuming what it
# holds) and writes the best model to $5; the run's stderr goes to the caller's.
train() {
  local split=$1 seed=$2 train_epochs=$3 checkpoint=$4 model=$5
  "$bin/grail-train" --train "$data/$split/train.txt" --valid "$data/$split/valid.txt" \
    --out "$model" --epochs "$train_epochs" --seed "$seed" --threads "$threads" \
    --checkpoint-dir "$checkpoint" --resume ${within[@]+"${within[@]}"} ${extra[@]+"${extra[@]}"}
}

# Evaluates model $out/$1.pt (trained on split $2 with seed $3 for $4 epochs, $5: 1 if the run
# has not finished) and writes the result, $out/$1$suffix.json.
evaluate() {
  local model=$1 split=$2 seed=$3 done_epochs=$4 partial=$5
  local name="$split.$tag.seed$seed" result="$out/$model$suffix.json"
  local test_graph="$data/${split}_ind" trained done_at epoch_seconds train_seconds
  ((transductive)) && test_graph="$data/$split"
  local test_facts="$test_graph/test.txt"
  if ((merged)); then  # the test facts are filtered (grail-eval), so both files are
    test_facts="$out/$model$suffix.test.txt"
    cat "$test_graph/valid.txt" "$test_graph/test.txt" > "$test_facts"
  fi
  trained=$(date +%s)
  local full_ranking=()  # a GraIL model's full ranking too (the path family's is always on)
  ((merged)) && full_ranking=(--grail-full-ranking)
  "$bin/grail-eval" --model "$out/$model.pt" --graph "$test_graph/train.txt" \
    --test "$test_facts" --seed 0 --runs "$runs" --threads "$threads" \
    ${eval_device[@]+"${eval_device[@]}"} ${full_ranking[@]+"${full_ranking[@]}"} 2> "$out/$model$suffix.eval.log" > "$out/$model$suffix.eval.out"
  done_at=$(date +%s)
  # Training time from the log's epoch lines (also right when this call only evaluated); a
  # partial run counts the epochs its model saw.
  read -r epoch_seconds train_seconds < <(awk -v last="$done_epochs" '/^epoch /{split($2, at, "/"); if (at[1] > last) next; for(i=1;i<=NF;i++) if($i=="s") {sum+=$(i-1); n++}} END{printf "%.1f %.0f\n", n? sum/n : 0, sum}' "$out/$name.train.log")
  local extra_fields=""
  ((partial)) && extra_fields=",\"so_far\":true,\"epochs_planned\":$epochs"
  # The result: the evaluation JSON plus how it was obtained.
  tail -n 1 "$out/$model$suffix.eval.out" | sed "s/}\$/,\"protocol\":\"$protocol\",\"split\":\"$split\",\"seed\":$seed,\"epochs\":$done_epochs,\"tag\":\"$tag\",\"seconds_per_epoch\":$epoch_seconds,\"threads\":$threads,\"jobs\":$parallel,\"train_seconds\":$train_seconds,\"eval_seconds\":$((done_at - trained))$extra_fields}/" > "$result.tmp"
  mv "$result.tmp" "$result"
  cat "$result"
}

# Trains and evaluates one (split, seed) pair; its logs and result go to $out/<name>.*.
run_one() {
  local split=$1 seed=$2
  local name="$split.$tag.seed$seed"
  echo "== $name"
  if ! grep -q "^saved " "$out/$name.train.log" 2>/dev/null; then
    # Every epoch ends with a checkpoint: an interrupted run resumes where it stopped (its
    # log is appended to, so the epoch lines stay complete).
    train "$split" "$seed" "$epochs" "$out/$name.checkpoint" "$out/$name.pt" \
      2>> "$out/$name.train.log"
  fi
  evaluate "$name" "$split" "$seed" "$epochs" 0
}

# --so-far: archives an unfinished pair's best model of its finished epochs and evaluates it.
run_so_far() {
  local split=$1 seed=$2
  local name="$split.$tag.seed$seed"
  if [[ ! -s $out/$name.checkpoint/state.json ]] || grep -q "^saved " "$out/$name.train.log"; then
    echo "skip $name (not begun, or finished: its result is the run's own)"; return 0
  fi
  # A copy, so the run's checkpoint is left as it is. The epochs done are the copy's own (its
  # state.json), so they name the model it holds even if the run has finished one more since.
  # A run still going may commit a newer checkpoint while it is copied, removing the files
  # the copied state.json names: then the archive fails and the copy is taken again.
  local copy done_epochs model archived=0
  copy=$(mktemp -d)
  for _ in 1 2 3; do
    rm -rf "$copy"
    cp -r "$out/$name.checkpoint" "$copy" || continue
    done_epochs=$(grep -o '"epoch":[0-9]*' "$copy/state.json" | cut -d: -f2)
    ((done_epochs > 0)) || { echo "skip $name (no epoch finished yet)"; rm -rf "$copy"; return 0; }
    model="$name.so-far-e$done_epochs"
    if [[ -s $out/$model$suffix.json ]]; then
      echo "skip $model$suffix (done)"; rm -rf "$copy"; return 0
    fi
    train "$split" "$seed" "$done_epochs" "$copy" "$out/$model.pt" \
      2> "$out/$model.archive.log" && { archived=1; break; }
  done
  rm -rf "$copy"
  ((archived)) || { echo "$name: cannot archive, see $out/$name.so-far-*.archive.log" >&2; return 1; }
  echo "== $model"
  evaluate "$model" "$split" "$seed" "$done_epochs" 1
}

# A failed pair leaves no result file and makes the script exit 1; a rerun retries just it.
failed=0
for split in $splits; do
  for seed in $seeds; do
    if ((!so_far)); then
      [[ -s $out/$split.$tag.seed$seed$suffix.json ]] && { echo "skip $split.$tag.seed$seed$suffix (done)"; continue; }
    fi
    while (($(jobs -rp | wc -l) >= parallel)); do wait -n || failed=1; done
    if ((so_far)); then run_so_far "$split" "$seed" & else run_one "$split" "$seed" & fi
  done
done
while (($(jobs -rp | wc -l) > 0)); do wait -n || failed=1; done
exit $failed
