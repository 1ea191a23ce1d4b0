#!/usr/bin/env bash
# Serving benchmark (docs/BENCHMARKS-log.md, "Serving"): for each (model, graph) pair, starts
# grail-server on a fresh data directory, streams the serving graph in with AddTriples,
# then drives it with grail-client's load generator:
#   ScoreTriplet at 1 and 16 concurrent clients, RankTails over 50 candidates (1 client and
#   16 clients) and over every entity (1 client);
# and, in the same run, measures the model's raw batched throughput on the same graph and
# queries with grail-eval (extraction + forward in batches of 256, no RPC), so the ratio
# says what the serving layer costs.
#
#   bench/serve_bench.sh [--out out/serve] [--pairs "fb237_v1 WN18RR_v4"] [--requests 2000]
#
# Models: out/repro/<split>.e*.seed0.pt from bench/reproduce.sh if present, else a model
# trained here for 5 epochs (seed 0). Queries: the facts of <split>_ind/test.txt, served
# on the graph <split>_ind/train.txt (the model never saw its entities).
set -euo pipefail
cd "$(dirname "$0")/.."
out=out/serve
pairs="fb237_v1 WN18RR_v4"
requests=2000
data=${GRAIL_DATA_DIR:-../shared/data}
while (($#)); do
  case $1 in
    --out) out=$2; shift 2 ;;
    --pairs) pairs=$2; shift 2 ;;
    --requests) requests=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
bin=build/bin
for b in grail-server grail-client grail-train grail-eval; do
  [[ -x $bin/$b ]] || { echo "build first: scripts/build.sh" >&2; exit 1; }
done
mkdir -p "$out"

server=
stop_server() {
  if [[ -n $server ]]; then kill -TERM "$server" 2>/dev/null || true; wait "$server" || true; fi
  server=
}
trap stop_server EXIT

for split in $pairs; do
  model=$(ls out/repro/"$split".e*.seed0.pt 2>/dev/null | head -n 1 || true)
  if [[ -z $model ]]; then
    model=$out/$split.e5.pt
    [[ -s $model ]] || "$bin/grail-train" --train "$data/$split/train.txt" \
      --valid "$data/$split/valid.txt" --out "$model" --epochs 5 --seed 0 2> "$out/$split.train.log"
  fi
  graph=$data/${split}_ind/train.txt
  queries=$data/${split}_ind/test.txt
  echo "== $split: model $model, graph $graph"

  rm -rf "$out/$split.store" "$out/$split.ready"
  "$bin/grail-server" --model "$model" --data-dir "$out/$split.store" --host 127.0.0.1 \
    --port 0 --metrics-port 0 --ready-file "$out/$split.ready" 2> "$out/$split.server.log" &
  server=$!
  for _ in $(seq 600); do [[ -s $out/$split.ready ]] && break; sleep 0.1; done
  port=$(sed 's/.*"port":\([0-9]*\).*/\1/' "$out/$split.ready")
  client=("$bin/grail-client" --target "127.0.0.1:$port" --json)

  "${client[@]}" add "$graph" --chunk 1000 > "$out/$split.add.json"
  run() {  # name, then grail-client load arguments
    local name=$1; shift
    "${client[@]}" load --triples "$queries" --seed 1 "$@" > "$out/$split.$name.json"
    echo "  $name: $(cat "$out/$split.$name.json")"
  }
  run score_c1 --method score --concurrency 1 --requests "$requests" --warmup 100
  run score_c16 --method score --concurrency 16 --requests "$((requests * 4))" --warmup 200
  run rank50_c1 --method rank-tails --candidates-per-request 50 --concurrency 1 \
    --requests "$((requests / 10))" --warmup 20
  run rank50_c16 --method rank-tails --candidates-per-request 50 --concurrency 16 \
    --requests "$((requests / 2))" --warmup 50
  run rankall_c1 --method rank-tails --candidates-per-request 0 --concurrency 1 \
    --requests 20 --warmup 2
  stop_server

  # The model alone, no RPC, on the same graph (2 worker threads, each extracting and
  # running its own forwards). For ScoreTriplet: the very test facts, best of batch sizes
  # 16/32/64. For RankTails over 50 candidates: grail-eval's protocol, whose lists are the
  # same mix (a true fact among random replacements), in batches of 256.
  for b in 16 32 64; do
    "$bin/grail-eval" --model "$model" --graph "$graph" --test "$queries" --threads 2 \
      --score-only --batch-size "$b" 2> /dev/null > "$out/$split.raw_score_b$b.json"
    echo "  raw score-only, batches of $b: $(cat "$out/$split.raw_score_b$b.json")"
  done
  "$bin/grail-eval" --model "$model" --graph "$graph" --test "$queries" --threads 2 \
    > "$out/$split.eval.out" 2> "$out/$split.eval.log"
  grep 'subgraphs/s' "$out/$split.eval.log" | sed 's/^/  raw ranking mix: /'
done
python3 - "$out" $pairs <<'EOF'
import json, re, sys
out, pairs = sys.argv[1], sys.argv[2:]
print("\n| graph | ScoreTriplet c=1 p50 / p99 ms, req/s | ScoreTriplet c=16 p50 / p99 ms, req/s "
      "| RankTails 50 c=1 p50 ms | RankTails 50 c=16 subgraphs/s | RankTails all c=1 p50 ms "
      "(entities) | AddTriples facts/s | raw subgraphs/s (test facts; ranking mix) | served / raw "
      "(score c=16; rank 50 c=16) |")
print("|---|---|---|---|---|---|---|---|---|")
for split in pairs:
    load = lambda name: json.load(open(f"{out}/{split}.{name}.json"))
    s1, s16, r1, r16, ra = (load(n) for n in ("score_c1", "score_c16", "rank50_c1", "rank50_c16", "rankall_c1"))
    add = json.load(open(f"{out}/{split}.add.json"))
    raw_mix = float(re.search(r"\(([0-9.]+) subgraphs/s", open(f"{out}/{split}.eval.log").read()).group(1))
    raw_score = max(json.load(open(f"{out}/{split}.raw_score_b{b}.json"))["subgraphs_per_second"]
                    for b in (16, 32, 64))
    stats_entities = add.get("entities_created", 0)
    rank16 = r16["requests_per_second"] * 50
    print(f"| {split}_ind | {s1['latency_ms']['p50']:.2f} / {s1['latency_ms']['p99']:.2f}, "
          f"{s1['requests_per_second']:.0f} | {s16['latency_ms']['p50']:.2f} / "
          f"{s16['latency_ms']['p99']:.2f}, {s16['requests_per_second']:.0f} | "
          f"{r1['latency_ms']['p50']:.1f} | {rank16:.0f} | {ra['latency_ms']['p50']:.0f} "
          f"({stats_entities}) | {add['facts_per_second']:.0f} | {raw_score:.0f}; {raw_mix:.0f} | "
          f"{s16['requests_per_second'] / raw_score:.2f}; {rank16 / raw_mix:.2f} |")
EOF
