#!/usr/bin/env bash
# The product image's smoke test, run INSIDE the built image by scripts/image.sh (as the
# image's user, uid 10001, with the pod's environment from deploy/k8s/configmap.yaml).
# Nothing here is installed in the image: scripts/image.sh mounts this directory at /smoke.
#
#   smoke.sh first  PORT METRICS_PORT   trains a small model into /models, starts
#                                       grail-server on the empty /data, streams a graph in,
#                                       scores, ranks, runs the Dockerfile's HEALTHCHECK and
#                                       the StatefulSet's probes, reads /metrics, stops it
#                                       with SIGTERM (exit 0 required) and records the graph
#   smoke.sh second PORT METRICS_PORT   a fresh container on the same /data: the server
#                                       starts, holds the recorded graph, stops with 0
#
# /run/smoke (writable, from the host) carries between the two: the recorded graph size,
# and the commands scripts/image.sh read out of the image and the manifests, one argument
# per line: the HEALTHCHECK (healthcheck.argv) and the probes (probe-*.argv), with the
# port put in.
set -euo pipefail
phase=$1
port=$2
metrics_port=$3
shared=/run/smoke
work=$(mktemp -d)
target=localhost:$port
export GRAIL_PORT=$port GRAIL_METRICS_PORT=$metrics_port
client=(grail-client "--target=$target" --tls-ca=/etc/grail/tls/ca.crt --deadline-ms=20000)

server=""
# However the script ends, no server of it outlives it (a container run with chroot
# isolation shares the host's process table).
trap '[[ -n $server ]] && kill -KILL "$server" 2> /dev/null; true' EXIT

step() { printf '\n[smoke %s] %s\n' "$phase" "$*"; }
fail() {
  echo "SMOKE FAILED ($phase): $*" >&2
  [[ -f $work/server.log ]] && tail -n 40 "$work/server.log" >&2
  exit 1
}

[[ $(id -u):$(id -g) == 10001:10001 ]] || fail "running as $(id -u):$(id -g), not the image's 10001:10001"

start_server() {
  step "grail-server (the image's entry point) on $target, data in $GRAIL_DATA_DIR"
  rm -f "$work/ready"
  grail-server --ready-file "$work/ready" 2> "$work/server.log" &
  server=$!
  for _ in $(seq 1200); do
    [[ -s $work/ready ]] && break
    kill -0 "$server" 2> /dev/null || fail "grail-server exited during start"
    sleep 0.1
  done
  [[ -s $work/ready ]] || fail "grail-server not ready in 120 s"
}

stop_server() {
  step "SIGTERM: drain, flush, exit 0"
  kill -TERM "$server"
  local rc=0
  wait "$server" || rc=$?
  server=""
  [[ $rc == 0 ]] || fail "grail-server exited $rc after SIGTERM"
  grep -q '"event":"stopped","all_calls_finished":true' "$work/server.log" ||
    fail "no clean stop line in the server's log"
  echo "exit status 0"
}

metrics() {
  # The run stage has no curl: the same bash /dev/tcp request the HEALTHCHECK sends.
  exec 3<> "/dev/tcp/127.0.0.1/$metrics_port"
  printf 'GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n' "$1" >&3
  timeout 10 cat <&3
  exec 3<&-
}

run_argv() {  # runs the command written one argument per line (the image has no python)
  local -a argv=()
  mapfile -t argv < "$1"
  "${argv[@]}"
}

graph_size() {  # GetStats' "entities":N,"relations":N,"facts":N
  "${client[@]}" --token "$read_token" stats | grep -oE '^\{"entities":[0-9]+,"relations":[0-9]+,"facts":[0-9]+'
}

read_token=$(awk '$2 == "read" {print $1; exit}' /etc/grail/tokens/tokens)
write_token=$(awk '$2 == "write" {print $1; exit}' /etc/grail/tokens/tokens)

case $phase in
first)
  step "train a small GraIL model inside the image (grail-tools synth, grail-train)"
  grail-tools synth --out "$work/g" --entities 200 --facts 1000 --relations 4 --seed 0
  head -n 900 "$work/g/triples.txt" > "$work/train.txt"
  tail -n 100 "$work/g/triples.txt" > "$work/valid.txt"
  grail-train --train "$work/train.txt" --valid "$work/valid.txt" --out "$GRAIL_MODEL" \
    --epochs 1 --threads 2 --progress=false
  start_server

  step "grpc.health.v1 answers SERVING"
  [[ $("${client[@]}" health) == SERVING ]] || fail "health is not SERVING"

  step "the Dockerfile's HEALTHCHECK command"
  run_argv "$shared/healthcheck.argv" || fail "HEALTHCHECK failed"
  echo "healthy"

  for probe in "$shared"/probe-*.argv; do
    step "the StatefulSet's $(basename "$probe" .argv) command"
    run_argv "$probe" || fail "$(basename "$probe") failed"
  done

  step "a call without a token is refused (the ConfigMap's GRAIL_AUTH_TOKENS)"
  if "${client[@]}" stats > "$work/anon.txt" 2>&1; then fail "stats answered without a token"; fi
  grep -q UNAUTHENTICATED "$work/anon.txt" || fail "not UNAUTHENTICATED: $(cat "$work/anon.txt")"

  step "AddTriples: stream the graph in"
  "${client[@]}" --token "$write_token" add "$work/train.txt" --chunk 200 | tee "$work/add.txt"
  grep -qE '(^| )facts_added=900( |$)' "$work/add.txt" || fail "900 facts not added"

  step "ScoreTriplet of a stored fact"
  IFS=$'\t' read -r h r t < "$work/train.txt"
  "${client[@]}" --token "$read_token" --json score "$h" "$r" "$t" | tee "$work/score.json"
  grep -q '"known_fact":true' "$work/score.json" || fail "the stored fact is not known"

  step "RankTails over every entity"
  "${client[@]}" --token "$read_token" rank-tails "$h" "$r" --top-k 5 | tee "$work/rank.txt"
  [[ $(wc -l < "$work/rank.txt") == 5 ]] || fail "not 5 ranked tails"

  step "/metrics"
  metrics /metrics > "$work/metrics.txt"
  head -n 1 "$work/metrics.txt"
  grep -q '^HTTP/1\.[01] 200' "$work/metrics.txt" || fail "/metrics did not answer 200"
  grep -qE '^grail_facts_ingested_total 900$' "$work/metrics.txt" ||
    fail "grail_facts_ingested_total is not 900"
  grep -qE '^grail_requests_total\{code="OK",method="AddTriples"\} ' "$work/metrics.txt" ||
    fail "no AddTriples in grail_requests_total"
  echo "grail_facts_ingested_total 900"

  graph_size | tee "$shared/stats.txt"
  printf '%s\t%s\t%s\n' "$h" "$r" "$t" > "$shared/fact.txt"
  stop_server
  ;;
second)
  start_server
  step "the same data directory holds the same graph"
  graph_size | tee "$work/stats.txt"
  diff "$shared/stats.txt" "$work/stats.txt" || fail "the graph differs after the restart"
  IFS=$'\t' read -r h r t < "$shared/fact.txt"
  "${client[@]}" --token "$read_token" --json score "$h" "$r" "$t" > "$work/score.json"
  grep -q '"known_fact":true' "$work/score.json" || fail "the stored fact is not known"
  echo "($h, $r, $t) still known"
  stop_server
  ;;
*)
  fail "unknown phase $phase"
  ;;
esac
echo
echo "[smoke $phase] passed"
