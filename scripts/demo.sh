#!/usr/bin/env bash
# The README's main command: the product's main job, end to end, on the embedded default
# data set (WordNet 3.0 from Debian's wordnet-base). Installs what it needs, builds, then:
#   1. converts WordNet's synset pointers into triples with WN18RR's relation names,
#   2. cuts an inductive pair of graphs with disjoint entities (paper appendix),
#   3. extracts and prints the enclosing subgraph of a held-out fact of the unseen test
#      graph, labelled with its double-radius distances,
#   4. trains a small GraIL model on the training graph (bounded: $EPOCHS epochs),
#   5. starts grail-server on an empty data directory,
#   6. streams the *unseen* test graph into it with AddTriples (grail-client add),
#   7. ranks the held-out test facts over gRPC against every entity of that graph and
#      prints MRR / Hits@10 and a few rankings with entity names,
#   8. stops the server with SIGTERM (it drains and exits 0).
# Output goes to $OUT_DIR (default out/demo). Ports: $GRPC_PORT (default 50051) and
# $METRICS_PORT (default 9090).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
bin=build/bin
out=${OUT_DIR:-out/demo}
mkdir -p "$out"

echo
echo "== 1. WordNet 3.0 -> $out/wordnet/triples.txt"
"$bin/grail-tools" wordnet --out "$out/wordnet"

echo
echo "== 2. inductive split -> $out/splits/wordnet{,_ind}/"
"$bin/grail-tools" split --triples "$out/wordnet/triples.txt" --out "$out/splits" \
  --name wordnet --seed "${SEED:-0}"

echo
echo "== 3. the enclosing subgraph (k = 3) of a held-out fact in the unseen test graph"
graph="$out/splits/wordnet_ind/train.txt"
head -n 1 "$out/splits/wordnet_ind/test.txt" | while IFS=$'\t' read -r h r t; do
  echo "($h, $r, $t):"
  "$bin/grail-tools" subgraph --graph "$graph" --head "$h" --relation "$r" --tail "$t" --hops 3
done

echo
echo "== 4. train GraIL on $out/splits/wordnet/train.txt (${EPOCHS:-30} epochs)"
"$bin/grail-train" --train "$out/splits/wordnet/train.txt" \
  --valid "$out/splits/wordnet/valid.txt" --out "$out/model.pt" \
  --epochs "${EPOCHS:-30}" --seed "${SEED:-0}"

echo
echo "== 5. start grail-server on an empty data directory"
rm -rf "$out/store" "$out/server.ready"
grpc_port=${GRPC_PORT:-50051}
"$bin/grail-server" --model "$out/model.pt" --data-dir "$out/store" --host 127.0.0.1 \
  --port "$grpc_port" --metrics-port "${METRICS_PORT:-9090}" \
  --ready-file "$out/server.ready" 2> "$out/server.log" &
server=$!
trap 'kill -TERM $server 2>/dev/null || true' EXIT
for _ in $(seq 600); do
  [[ -s $out/server.ready ]] && break
  kill -0 $server 2>/dev/null || { cat "$out/server.log"; echo "grail-server failed" >&2; exit 1; }
  sleep 0.1
done
[[ -s $out/server.ready ]] || { cat "$out/server.log"; echo "grail-server did not start" >&2; exit 1; }
echo "serving on 127.0.0.1:$grpc_port: $(cat "$out/server.ready")"
target=127.0.0.1:$grpc_port

echo
echo "== 6. stream the unseen test graph into the live graph (AddTriples)"
"$bin/grail-client" --target "$target" add "$graph" --chunk 200
"$bin/grail-client" --target "$target" stats

echo
echo "== 7. rank the held-out test facts over gRPC (filtered, against every entity)"
python3 scripts/rank_over_rpc.py --client "$bin/grail-client" --target "$target" \
  --limit "${RANK_FACTS:-100}" --examples 3 "$out/splits/wordnet_ind/test.txt" |
  tee "$out/ranking.txt"

echo
echo "== 8. stop the server (SIGTERM: drain, flush, exit 0)"
trap - EXIT
kill -TERM $server
wait $server
echo "grail-server exited with $?"
tail -n 1 "$out/server.log"
