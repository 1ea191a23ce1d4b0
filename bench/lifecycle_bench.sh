#!/usr/bin/env bash
# Live-graph lifecycle benchmark (docs/BENCHMARKS-log.md, "Warm-up and model reload"):
#   1. first-call latency after start, with --warmup-batches=0 and with the default (3):
#      for each, R fresh server processes on the same stored graph, each answering one
#      ScoreTriplet (the first call) and then 200 more (steady state);
#   2. ReloadModel: R reloads alternating between two archives while 4 clients score, with
#      load and warm-up seconds per reload and the clients' failed calls (must be 0);
#   3. RemoveTriples throughput: the queries' facts removed in chunks of 100, then re-added.
#
#   bench/lifecycle_bench.sh [--out out/lifecycle] [--split fb237_v1] [--runs 5] [--bin build/bin]
#
# Model: out/repro/<split>.e*.seed0.pt if present, else one trained here for 2 epochs.
set -euo pipefail
cd "$(dirname "$0")/.."
out=out/lifecycle
split=fb237_v1
runs=5
bin=build/bin
data=${GRAIL_DATA_DIR:-../shared/data}
while (($#)); do
  case $1 in
    --out) out=$2; shift 2 ;;
    --split) split=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
for b in grail-server grail-client grail-train; do
  [[ -x $bin/$b ]] || { echo "build first: scripts/build.sh" >&2; exit 1; }
done
mkdir -p "$out"
graph=$data/${split}_ind/train.txt
queries=$data/${split}_ind/test.txt

model=$(ls out/repro/"$split".e*.seed0.pt 2>/dev/null | head -n 1 || true)
if [[ -z $model ]]; then
  model=$out/$split.e2.pt
  [[ -s $model ]] || "$bin/grail-train" --train "$data/$split/train.txt" \
    --valid "$data/$split/valid.txt" --out "$model" --epochs 2 --seed 0 2> "$out/train.log"
fi
second=$out/$split.e2.seed1.pt
[[ -s $second ]] || "$bin/grail-train" --train "$data/$split/train.txt" \
  --valid "$data/$split/valid.txt" --out "$second" --epochs 2 --seed 1 2> "$out/train1.log"

server=
stop_server() {
  if [[ -n $server ]]; then kill -TERM "$server" 2>/dev/null || true; wait "$server" || true; fi
  server=
}
trap stop_server EXIT
start_server() {  # log name, extra flags...
  local name=$1; shift
  rm -f "$out/ready"
  "$bin/grail-server" --model "$model" --data-dir "$out/store" --host 127.0.0.1 --port 0 \
    --metrics-port 0 --ready-file "$out/ready" "$@" 2> "$out/$name.log" &
  server=$!
  for _ in $(seq 1200); do [[ -s $out/ready ]] && break; sleep 0.1; done
  port=$(sed 's/.*"port":\([0-9]*\).*/\1/' "$out/ready")
  client=("$bin/grail-client" --target "127.0.0.1:$port" --json)
}

rm -rf "$out/store"
start_server ingest
"${client[@]}" add "$graph" --chunk 1000 > "$out/ingest.json"
stop_server

# 1. First call after start.
for warmup in 0 3; do
  for run in $(seq "$runs"); do
    start_server "start_w${warmup}_r$run" --warmup-batches=$warmup
    "${client[@]}" load --triples "$queries" --requests 1 --concurrency 1 --seed "$run" \
      > "$out/first_w${warmup}_r$run.json"
    "${client[@]}" load --triples "$queries" --requests 200 --concurrency 1 --seed 7 \
      > "$out/steady_w${warmup}_r$run.json"
    stop_server
  done
done

# 2. Reloads under load.
start_server reload
rm -f "$out/reloads.jsonl"
"${client[@]}" load --triples "$queries" --requests 20000 --concurrency 4 --seed 3 \
  > "$out/reload_load.json" &
load=$!
sleep 1
for run in $(seq "$runs"); do
  for m in "$second" "$model"; do
    "${client[@]}" reload-model "$(realpath "$m")" >> "$out/reloads.jsonl"
  done
done
kill -0 "$load" 2>/dev/null && echo "the load was still running after the last reload" > "$out/overlap.txt"
wait "$load" || true

# 3. Removal throughput: remove the graph's first 5000 facts, then add them back.
head -n 5000 "$graph" > "$out/removed.tsv"
"${client[@]}" remove "$out/removed.tsv" --chunk 100 > "$out/remove.json"
"${client[@]}" add "$out/removed.tsv" --chunk 100 > "$out/readd.json"
stop_server

python3 - "$out" "$runs" <<'PY'
import json, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
def load(name): return json.load(open(f"{out}/{name}.json"))
def warm_seconds(w, r):
    for line in open(f"{out}/start_w{w}_r{r}.log"):
        if '"event":"serving"' in line:
            return json.loads(line).get("warmup_seconds", 0.0)
for w in (0, 3):
    first = [load(f"first_w{w}_r{r}")["latency_ms"]["p50"] for r in range(1, runs + 1)]
    steady = [load(f"steady_w{w}_r{r}")["latency_ms"]["p50"] for r in range(1, runs + 1)]
    warm = [warm_seconds(w, r) for r in range(1, runs + 1)]
    print(f"warmup_batches={w}: first call median {statistics.median(first):.1f} ms "
          f"(runs {', '.join(f'{x:.1f}' for x in first)}), steady p50 {statistics.median(steady):.1f} ms, "
          f"warm-up {statistics.median(warm):.2f} s")
reloads = [json.loads(l) for l in open(f"{out}/reloads.jsonl")]
print(f"reloads: {len(reloads)}, load median {statistics.median(r['load_seconds'] for r in reloads):.2f} s, "
      f"warm-up median {statistics.median(r['warmup_seconds'] for r in reloads):.2f} s")
import os
during = load("reload_load")
print("calls during the reloads:", json.dumps({k: during[k] for k in during if k != "latency_ms"}),
      "(load outlasted the reloads)" if os.path.exists(f"{out}/overlap.txt") else "(load ended first)")
rm, ad = load("remove"), load("readd")
print(f"remove: {rm['facts_removed']} facts in {rm['seconds']:.2f} s ({rm['facts_per_second']:.0f} facts/s); "
      f"re-add: {ad['facts_added']} facts in {ad['seconds']:.2f} s ({ad['facts_per_second']:.0f} facts/s)")
PY
