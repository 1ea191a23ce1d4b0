#!/usr/bin/env bash
# The GPU steps of docs/BENCHMARKS-log.md ("On a GPU"), made to fit the device machine's calls:
# each command below is one call of at most 10 minutes, writes what it measured into OUT (at
# most 8 files come back) and goes on past a failed step, recording it.
#
#   bench/gpu_session.sh prepare
#       Here, on Debian (once): .external-deps/debs (scripts/external-torch.sh prepare
#       --server) and .gpu-carry/: the fb237 splits from ../shared/data (the device machine
#       gets the repository only) and a GraIL model trained here on the CPU (fb237_v1, one
#       epoch, Debian's LibTorch 1.13). Carry both folders: carry=[".external-deps/debs",
#       ".gpu-carry"].
#
#   bench/gpu_session.sh fused OUT          (there; the fused operator's call)
#       Builds against python3's torch with the CUDA kernels of grail::rspmm, then, as the
#       call's time allows (each step bounded, most important first):
#       ops.json       the operator on CUDA against its CPU kernels (parity, forward and
#                      backward) and its speed on fb237_v4 at batch 64 (bench/gpu_ops_check.py);
#       path_parity.json  a path archive trained here on the CPU (Debian's LibTorch), scored
#                      on cuda and on cpu there: every fb237_v1_ind test fact's score;
#       fused.log      served RankTails over every entity of the dense FB15k-237 graph with
#                      --device cuda and --device cpu (grail-client load, p50/p99), then one
#                      fb237_v4 path epoch on cuda at batch 64 (NBFNet's FB configuration);
#       rank_all_{cuda,cpu}.json  those latencies.
#
#   bench/gpu_session.sh all OUT            (there; one lease of ~15 minutes in one call)
#       `fused`, then the GraIL archive's parity (parity.json, as `check`) and one GraIL epoch
#       of fb237_v4 and of fb237_v3 on the device, as GPU_SESSION_BUDGET (s) allows. Every
#       file is bundled in OUT/session.tgz; the JSON files also lie beside it.
#
#   bench/gpu_session.sh trace OUT          (there; ~2 minutes after the build)
#       Where an fb237_v4 path step at batch 64 spends its time: grail-train --trace over 5
#       steps after 10, with --batch-layout disjoint and shared (on a GPU the cost rule picks
#       shared where the union costs at most 1.3x: kPathGpuSharedAdvantage, model/path/
#       path_batch.h): trace_{disjoint,shared}.json.gz and their sums (bench/step_trace.py),
#       step_trace_{disjoint,shared}.json; then 60 steps timed each way, twice (trace.log).
#
#   bench/gpu_session.sh check OUT          (there, first call)
#       Builds against python3's torch (build-torch/), then:
#       parity.json  the CPU-exported archive on cuda: every fb237_v1_ind test fact's score
#                    against the CPU's (max relative difference), and grail-eval's metrics
#                    on cpu and on cuda;
#       grail_fb237_v1_gpu.pt  a model trained there for one epoch (the newer LibTorch), to
#                    load here with Debian's: build/bin/grail-eval --model OUT/... ;
#       throughput.json  forward subgraphs/s on fb237_v4_ind's test facts (grail-eval
#                    --score-only): cuda at batch sizes 256, 1024, 4096 against the CPU with
#                    2 threads on 2 cores (taskset);
#       check.log    every command and its output.
#
#   bench/gpu_session.sh epochs OUT [SPLITS]   (a later call)
#       One training epoch of each split (default: fb237_v1..v4) on cuda: epochs.log.
#
#   bench/gpu_session.sh reproduce OUT SPLIT SEEDS EPOCHS [-- GRAIL_TRAIN_ARGS...]
#       bench/reproduce.sh on cuda with its checkpoints under .gpu-carry/repro, stopped in
#       time to bring them back (GPU_SESSION_BUDGET s, default 560, counted from the call's
#       start) and checkpointing every 50 steps within an epoch: OUT/repro.tgz.0, .1, ...
#       (parts of at most 15 MiB, what a call brings back) hold the checkpoints, logs and
#       results: test.txt's and, once every run has finished, the published figures' test set
#       (`reproduce.sh --merged`). GPU_SESSION_JOBS=2 trains two seeds at once (the step
#       leaves the GPU idle part of the time). A run begun on the CPU here goes on there from
#       its checkpoint, and back: the run's name leaves --device out (see `prepare
#       --train-only --resume` and `unpack`).
#
#   bench/gpu_session.sh prepare --train-only [--resume NAME_GLOB [--from DIR]]
#       Here: what `lease` and `reproduce` need and nothing else, so that a run's checkpoint
#       (46 MB for fb237_v4) fits the call's 64 MiB: .gpu-deps/debs (the trainer's packages,
#       no server's), .gpu-carry/data.tar.xz, and in .gpu-carry/repro the checkpoints and
#       training logs of the runs NAME_GLOB names in DIR (default out/path-fused), e.g.
#       --resume 'fb237_v4.*seed0'. Carry: [".gpu-deps/debs", ".gpu-carry/data.tar.xz",
#       ".gpu-carry/repro"] (without .external-deps/debs there, .gpu-deps is the one used).
#
#   bench/gpu_session.sh lease OUT SPLIT SEEDS EPOCHS [-- GRAIL_TRAIN_ARGS...]
#       (there; one lease in one call) The trainer alone is built, then `trace` (one timing
#       round each way) and `reproduce` for the rest of GPU_SESSION_BUDGET (default 570 s):
#       OUT/lease.tgz.0, .1, ... (traces, logs, the runs' checkpoints), OUT/lease.log and
#       the two step_trace_*.json sums.
#
#   bench/gpu_session.sh unpack DIR [--into out/path-fused]
#       Here: the parts a call brought back (DIR: its files_at) unpacked; the runs'
#       checkpoints, logs and results replace theirs in out/path-fused, to resume here or to
#       carry again; the rest lands in out/gpu-session/.
#
# GPU_SESSION_DEVICE=cpu and GPU_SESSION_TORCH=PREFIX (or GPU_SESSION_BIN=DIR, binaries built
# already) run the same steps without a GPU (how this script is checked on the project's
# machines).
set -uo pipefail
cd "$(dirname "$0")/.."

carry=.gpu-carry
data=$carry/data
device=${GPU_SESSION_DEVICE:-cuda}
bin=${GPU_SESSION_BIN:-build-torch/bin}
# The packages carried: the whole product's (`prepare`) or the trainer's (`prepare --train-only`).
deps=${GPU_SESSION_DEPS:-.external-deps}
[[ -n ${GPU_SESSION_DEPS:-} || -d $deps/debs ]] || deps=.gpu-deps
log=/dev/null

# Runs a command, logging it and its output; a failure is logged and the script goes on.
step() {
  echo "\$ $*" >> "$log"
  "$@" >> "$log" 2>&1
  local rc=$?
  ((rc == 0)) || echo "FAILED ($rc): $*" >> "$log"
  return $rc
}

build() {
  # nvcc for the CUDA kernels (CUDA's usual place when it is not on the PATH).
  command -v nvcc > /dev/null || export PATH=/usr/local/cuda/bin:$PATH
  local torch=${GPU_SESSION_TORCH:-$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')}
  step python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
"gpu", torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)'
  step nproc
  local server=(--server)
  [[ ${GPU_SESSION_SERVER:-1} == 0 ]] && server=()
  step env EXTERNAL_TORCH_KEEP_GOING=1 \
    scripts/external-torch.sh build "${server[@]}" --deps "$deps" --torch "$torch" --jobs "$(nproc)" \
    -- ${GPU_SESSION_CUDA_ARCH:+-DCMAKE_CUDA_ARCHITECTURES=$GPU_SESSION_CUDA_ARCH}
}

# Builds the trainer alone (the server too with GPU_SESSION_SERVER=1) unless it is built.
need_trainer() {
  [[ -x $bin/grail-train ]] || GPU_SESSION_SERVER=${GPU_SESSION_SERVER:-0} build
}

# Runs a step only while at least $1 seconds of the call's $budget are left.
within() {
  local need=$1
  shift
  if ((SECONDS + need > budget)); then
    echo "SKIPPED (${need} s needed, $((budget - SECONDS)) s left): $*" >> "$log"
    return 1
  fi
  step "$@"
}

# Serves the CPU-trained path model on the dense FB graph with --device $1 and times
# RankTails over every entity.
serve_rank_all() {
  local device=$1 out=$2 model=$carry/models/path_fb237_v1_cpu.pt
  local dir=/tmp/gpu_session_serve_$device
  rm -rf "$dir" "$dir.ready"
  "$bin/grail-server" --model "$model" --data-dir "$dir" --host 127.0.0.1 --port 0 \
    --metrics-port -1 --ready-file "$dir.ready" --device "$device" --allow-unknown-relations \
    2> "$out/serve_$device.log" &
  local server=$!
  for _ in $(seq 600); do [[ -s $dir.ready ]] && break; sleep 0.1; done
  local port
  port=$(sed 's/.*"port":\([0-9]*\).*/\1/' "$dir.ready")
  local client=("$bin/grail-client" --target "127.0.0.1:$port" --json)
  step "${client[@]}" add "$data/FB15k-237_validtest/graph.txt" --chunk 5000
  echo "\$ rank-all load --device $device" >> "$log"
  timeout 120 "${client[@]}" load --triples "$data/FB15k-237_validtest/graph.txt" --seed 1 \
    --method rank-tails --candidates-per-request 0 --concurrency 1 --requests 40 --warmup 4 \
    > "$out/rank_all_$device.json" 2>> "$log" || echo "FAILED: rank-all load $device" >> "$log"
  kill -TERM "$server" 2> /dev/null
  wait "$server"
  echo "server --device $device exited $?" >> "$log"
}

fused() {
  local out=$1
  log=$out/fused.log
  budget=${GPU_SESSION_BUDGET:-480}
  GPU_SESSION_CUDA_ARCH=${GPU_SESSION_CUDA_ARCH-90} build
  echo "build done at ${SECONDS} s" >> "$log"
  echo "\$ gpu_ops_check.py" >> "$log"
  timeout 240 python3 bench/gpu_ops_check.py --device "$device" \
    --ops-library build-torch/lib/libgrail_ops.so --graph "$data/fb237_v4/train.txt" \
    2>> "$log" | tail -n 1 > "$out/ops.json" &
  local ops=$!
  # Path parity: the CPU-trained archive scored there on cpu and on the device.
  local model=$carry/models/path_fb237_v1_cpu.pt scores=/tmp/gpu_session_path
  mkdir -p "$scores"
  for d in cpu "$device"; do
    within 30 timeout 120 "$bin/grail-eval" --model "$model" \
      --graph "$data/fb237_v1_ind/train.txt" --test "$data/fb237_v1_ind/test.txt" \
      --device "$d" --score-only --scores-out "$scores/$d.tsv"
  done
  python3 - "$scores" "$device" > "$out/path_parity.json" 2>> "$log" << 'EOF'
import json, sys
folder, device = sys.argv[1:3]
def scores(d):
    return {tuple(l.split("\t")[:3]): float(l.split("\t")[3])
            for l in open(f"{folder}/{d}.tsv") if l.strip()}
cpu, other = scores("cpu"), scores(device)
scale = max(abs(v) for v in cpu.values())
worst = max(abs(other[k] - v) for k, v in cpu.items()) / scale
print(json.dumps({"facts": len(cpu), "same_facts": set(cpu) == set(other),
                  "max_relative_difference": worst, "within_1e-5": worst <= 1e-5}))
EOF
  wait "$ops"
  # Served rank-all on both devices first (the epoch below takes what time is left).
  local d
  for d in "$device" cpu; do
    if [[ -x $bin/grail-server ]] && ((SECONDS + 40 < budget)); then serve_rank_all "$d" "$out"; fi
  done
  # One fb237_v4 epoch at NBFNet's batch on the device (the target: <= 60 s on one H100).
  # First 30 steps alone: the step time, should the whole epoch outlast its limit.
  within 60 timeout 60 "$bin/grail-train" --family path --train "$data/fb237_v4/train.txt" \
    --out /tmp/gpu_session_v4_steps.pt --pna --reach-mask=false --batch-size 64 \
    --adversarial-temperature 0.5 --epochs 1 --max-steps 30 --seed 0 --device "$device" \
    --noprogress
  local limit=$((budget - SECONDS - 20))
  ((limit > ${GPU_SESSION_EPOCH_S:-$limit})) && limit=$GPU_SESSION_EPOCH_S
  within 90 timeout "$limit" "$bin/grail-train" --family path \
    --train "$data/fb237_v4/train.txt" --valid "$data/fb237_v4/valid.txt" \
    --out /tmp/gpu_session_v4.pt --pna --reach-mask=false --batch-size 64 \
    --adversarial-temperature 0.5 --epochs 1 --seed 0 --device "$device" --noprogress
  echo "fused done at ${SECONDS} s" >> "$log"
}

prepare() {
  local train_only=0 resume="" from=out/path-fused
  while (($#)); do
    case $1 in
    --train-only) train_only=1; shift ;;
    --resume) resume=$2; shift 2 ;;
    --from) from=$2; shift 2 ;;
    *) echo "prepare: unknown argument $1" >&2; exit 2 ;;
    esac
  done
  if ((train_only)); then
    scripts/external-torch.sh prepare --deps .gpu-deps
  else
    scripts/external-torch.sh prepare --server
  fi
  local shared=${GRAIL_DATA_DIR:-../shared/data}
  mkdir -p "$data" "$carry/models"
  for split in fb237_v1 fb237_v2 fb237_v3 fb237_v4; do
    for d in "$split" "${split}_ind"; do
      mkdir -p "$data/$d"
      cp "$shared/$d"/*.txt "$data/$d/"
    done
  done
  mkdir -p "$data/FB15k-237_validtest"
  cp "$shared/FB15k-237_validtest/graph.txt" "$data/FB15k-237_validtest/"
  ((train_only)) || [[ -s $carry/models/grail_fb237_v1_cpu.pt ]] ||
    build/bin/grail-train --train "$data/fb237_v1/train.txt" --valid "$data/fb237_v1/valid.txt" \
      --out "$carry/models/grail_fb237_v1_cpu.pt" --epochs 1 --seed 0 --noprogress
  # A path model in NBFNet's FB configuration, a few steps (parity needs weights, not skill).
  ((train_only)) || build/bin/grail-train --family path --train "$data/fb237_v1/train.txt" \
    --valid "$data/fb237_v1/valid.txt" --out "$carry/models/path_fb237_v1_cpu.pt" --pna \
    --reach-mask=false --batch-size 64 --adversarial-temperature 0.5 --max-steps 20 --seed 0 \
    --noprogress
  # Text compresses 5x: what travels stays under the call's 64 MiB with the packages.
  tar -cJf "$carry/data.tar.xz" -C "$carry" data && rm -rf "$data"
  if [[ -n $resume ]]; then
    # The runs to go on there: their checkpoints and logs (bench/reproduce.sh's layout).
    rm -rf "$carry/repro"
    mkdir -p "$carry/repro"
    local run found=0
    for run in "$from"/$resume.checkpoint; do
      [[ -d $run ]] || continue
      cp -r "$run" "$carry/repro/"
      cp "${run%.checkpoint}.train.log" "$carry/repro/" 2> /dev/null || true
      found=1
    done
    ((found)) || { echo "prepare: no checkpoint matches $from/$resume.checkpoint" >&2; exit 1; }
  fi
  if ((train_only)); then
    du -sh .gpu-deps/debs "$carry/data.tar.xz" "$carry/repro" 2> /dev/null
  else
    du -sh .external-deps/debs "$carry"
  fi
}

# Bundles folders into OUT/NAME.tgz.0, .1, ...: parts of at most 15 MiB, what a call brings
# back (16 MiB a file). `unpack` joins them.
bundle() {
  local out=$1 name=$2
  shift 2
  rm -f "$out/$name".tgz.*
  tar -czf - "$@" | split -b 15m -d -a 1 - "$out/$name.tgz."
}

unpack() {
  local dir=$1 into=out/path-fused
  [[ ${2:-} == --into ]] && into=$3
  local work=out/gpu-session
  mkdir -p "$work" "$into"
  local name
  for name in lease repro; do
    compgen -G "$dir/$name.tgz.*" > /dev/null || continue
    cat "$dir/$name".tgz.* | tar -xzf - -C "$work"
  done
  [[ -d $work/repro ]] || { echo "unpack: no runs in $dir" >&2; return 0; }
  local run
  for run in "$work"/repro/*; do
    rm -rf "$into/$(basename "$run")"
    cp -r "$run" "$into/"
    echo "unpacked $(basename "$run") into $into"
  done
  rm -rf "$work/repro"
}

# The GraIL archive trained here on the CPU, scored there on cpu and on the device:
# OUT/parity.json.
grail_parity() {
  local out=$1
  local model=$carry/models/grail_fb237_v1_cpu.pt
  local graph=$data/fb237_v1_ind/train.txt test=$data/fb237_v1_ind/test.txt
  local scores=/tmp/gpu_session_scores
  mkdir -p "$scores"
  for d in cpu "$device"; do
    step "$bin/grail-eval" --model "$model" --graph "$graph" --test "$test" --device "$d" \
      --score-only --scores-out "$scores/$d.tsv"
    echo "\$ grail-eval --device $d --seed 0 > $scores/$d.json" >> "$log"
    "$bin/grail-eval" --model "$model" --graph "$graph" --test "$test" --device "$d" \
      --seed 0 > "$scores/$d.json" 2>> "$log" || echo "FAILED: grail-eval --device $d" >> "$log"
  done
  python3 - "$scores" "$device" > "$out/parity.json" 2>> "$log" << 'EOF'
import json, sys
folder, device = sys.argv[1:3]
def scores(d):
    return {tuple(l.split("\t")[:3]): float(l.split("\t")[3])
            for l in open(f"{folder}/{d}.tsv") if l.strip()}
cpu, other = scores("cpu"), scores(device)
worst = max(abs(other[k] - v) / max(1e-12, abs(v)) for k, v in cpu.items())
metrics = {d: json.loads(open(f"{folder}/{d}.json").read().strip().splitlines()[-1])
           for d in ("cpu", device)}
print(json.dumps({"facts": len(cpu), "same_facts": set(cpu) == set(other),
                  "max_relative_difference": worst, "within_1e-5": worst <= 1e-5,
                  "metrics": metrics}))
EOF
}

check() {
  local out=$1
  log=$out/check.log
  build
  grail_parity "$out"
  local model=$carry/models/grail_fb237_v1_cpu.pt graph test
  step "$bin/grail-train" --train "$data/fb237_v1/train.txt" --valid "$data/fb237_v1/valid.txt" \
    --out "$out/grail_fb237_v1_gpu.pt" --epochs 1 --seed 0 --device "$device" --noprogress
  # Forward speed on the largest test graph's subgraphs.
  graph=$data/fb237_v4_ind/train.txt test=$data/fb237_v4_ind/test.txt
  {
    echo "{"
    for b in 256 1024 4096; do
      echo "\"$device batch $b\": $("$bin/grail-eval" --model "$model" --graph "$graph" \
        --test "$test" --device "$device" --batch-size "$b" --threads 4 --score-only \
        2>> "$log" | tail -n 1),"
    done
    echo "\"cpu 2 cores\": $(taskset -c 0,1 "$bin/grail-eval" --model "$model" --graph "$graph" \
      --test "$test" --device cpu --threads 2 --score-only 2>> "$log" | tail -n 1)"
    echo "}"
  } > "$out/throughput.json"
}

all() {
  local out=$1 work=/tmp/gpu_session_all
  budget=${GPU_SESSION_BUDGET:-540}
  rm -rf "$work"
  mkdir -p "$work"
  GPU_SESSION_BUDGET=$budget fused "$work"
  log=$work/grail.log
  within 40 grail_parity "$work"
  local split
  for split in fb237_v4 fb237_v3; do
    within 60 timeout $((budget - SECONDS - 15)) "$bin/grail-train" \
      --train "$data/$split/train.txt" --valid "$data/$split/valid.txt" \
      --out "/tmp/gpu_session_grail_$split.pt" --epochs 1 --seed 0 --device "$device" --noprogress
  done
  echo "all done at ${SECONDS} s" >> "$log"
  tar -czf "$out/session.tgz" -C "$work" .
  cp "$work"/*.json "$out"/
  tail -n 60 "$work/fused.log" "$work/grail.log"
}

trace() {
  local out=$1
  log=$out/trace.log
  need_trainer
  local args=(--family path --train "$data/fb237_v4/train.txt" --pna --reach-mask=false
    --batch-size 64 --adversarial-temperature 0.5 --seed 0 --device "$device" --noprogress)
  local layout
  for layout in disjoint shared; do
    step timeout 120 "$bin/grail-train" "${args[@]}" --batch-layout $layout \
      --out /tmp/gpu_session_trace.pt --trace "/tmp/trace_$layout.json" --trace-after 10 \
      --trace-steps 5 &&
      python3 bench/step_trace.py "/tmp/trace_$layout.json" --steps 5 \
        --json "$out/step_trace_$layout.json" > /dev/null 2>> "$log" &&
      gzip -c "/tmp/trace_$layout.json" > "$out/trace_$layout.json.gz"
  done
  local round
  for ((round = 0; round < ${GPU_SESSION_TIMING_ROUNDS:-2}; ++round)); do  # 60 steps each way
    for layout in disjoint shared; do
      step timeout 120 "$bin/grail-train" "${args[@]}" --batch-layout $layout \
        --out /tmp/gpu_session_steps.pt --max-steps 60
    done
  done
}

epochs() {
  local out=$1
  shift
  log=$out/epochs.log
  [[ -x $bin/grail-train ]] || build
  local split
  for split in ${1:-fb237_v1 fb237_v2 fb237_v3 fb237_v4}; do
    step "$bin/grail-train" --train "$data/$split/train.txt" --valid "$data/$split/valid.txt" \
      --out "/tmp/gpu_session_$split.pt" --epochs 1 --seed 0 --device "$device" --noprogress
  done
}

# bench/reproduce.sh on the device until $budget is nearly spent (the runs' checkpoints every
# 50 steps keep what a stop cuts short), into $carry/repro.
train_runs() {
  local out=$1 split=$2 seeds=$3 epochs=$4
  shift 4
  [[ ${1:-} == -- ]] && shift
  log=$out/reproduce.log
  # Bundling ~50 MB of checkpoints takes a few seconds; the rest of the budget trains.
  local limit=$((budget - SECONDS - 30))
  ((limit > 60)) || { echo "SKIPPED reproduce: ${limit} s left" >> "$log"; return 1; }
  local run=(--splits "$split" --seeds "$seeds" --epochs "$epochs" --threads 4 --runs 5
    --jobs "${GPU_SESSION_JOBS:-1}"
    --checkpoint-every-steps "${GPU_SESSION_CHECKPOINT_STEPS:-50}" --out "$carry/repro"
    -- --device "$device" "$@")
  local reproduce=(env GRAIL_DATA_DIR="$data" GRAIL_BIN_DIR="$bin" bench/reproduce.sh)
  if step timeout "$limit" "${reproduce[@]}" "${run[@]}"; then
    # Every run finished: its models on the published figures' test set too (the _ind split's
    # valid and test facts; seconds on the device, trains nothing), so that the call brings
    # back both results and no archive needs evaluating here.
    limit=$((budget - SECONDS - 30))
    ((limit > 30)) && step timeout "$limit" "${reproduce[@]}" --merged "${run[@]}"
  fi
  echo "reproduce stopped at ${SECONDS} s" >> "$log"
}

reproduce() {
  local out=$1
  budget=${GPU_SESSION_BUDGET:-560}
  log=$out/reproduce.log
  need_trainer
  train_runs "$@"
  bundle "$out" repro -C "$carry" repro
}

lease() {
  local out=$1 work=/tmp/gpu_session_lease
  shift
  budget=${GPU_SESSION_BUDGET:-570}
  rm -rf "$work"
  mkdir -p "$work"
  log=$work/trace.log
  need_trainer
  echo "build done at ${SECONDS} s" >> "$log"
  GPU_SESSION_TIMING_ROUNDS=${GPU_SESSION_TIMING_ROUNDS:-1} trace "$work"
  echo "trace done at ${SECONDS} s" >> "$log"
  train_runs "$work" "$@"
  # What comes back is at most 64 MiB: the runs' checkpoints first, raw traces if they fit.
  local trace
  for trace in "$work"/trace_*.json.gz; do
    [[ -f $trace ]] && (($(stat -c %s "$trace") > 6 * 1024 * 1024)) &&
      echo "left out $(basename "$trace") ($(stat -c %s "$trace") bytes)" >> "$work/trace.log" &&
      rm "$trace"
  done
  bundle "$out" lease -C "$work" . -C "$PWD/$carry" repro
  cp "$work"/step_trace_*.json "$out"/ 2> /dev/null
  {
    tail -n 40 "$work/trace.log"
    cat "$work/reproduce.log"
    grep -H "^epoch" "$carry"/repro/*.train.log
    cat "$carry"/repro/*.json 2> /dev/null  # a run finished there was evaluated there too
  } > "$out/lease.log" 2>&1
}

command=${1:-}
case $command in
prepare) shift; prepare "$@" ;;
unpack)
  [[ -n ${2:-} ]] || { echo "usage: bench/gpu_session.sh unpack DIR [--into DIR]" >&2; exit 2; }
  shift
  unpack "$@"
  ;;
all | check | epochs | reproduce | fused | trace | lease)
  [[ -n ${2:-} ]] || { echo "usage: bench/gpu_session.sh $command OUT ..." >&2; exit 2; }
  mkdir -p "$2"
  shift
  [[ -d $data ]] || tar -xJf "$carry/data.tar.xz" -C "$carry"
  "$command" "$@"
  ;;
*)
  sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
  ;;
esac
