#!/usr/bin/env bash
# What TLS and bearer tokens cost a call: the same ScoreTriplet load (grail-client load,
# 16 clients) against grail-server in plaintext, with TLS, and with TLS plus a token, one
# server per mode on WN18RR_v4_ind's graph. Results in docs/BENCHMARKS-log.md ("Security").
#
#   bench/security_bench.sh [--model MODEL.pt] [--requests N]
#
# The model defaults to out/scale/models/wn.pt (bench/scale_bench.py trains it); any model
# with WN18RR's relations serves.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BIN_DIR:-build/bin}
data=${GRAIL_DATA_DIR:-../shared/data}
model=out/scale/models/wn.pt
requests=3000
while [[ $# -gt 0 ]]; do
  case $1 in
    --model) model=$2; shift 2 ;;
    --requests) requests=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
graph=$data/WN18RR_v4_ind/train.txt

# A CA and a server certificate for localhost / 127.0.0.1.
(cd "$work" &&
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key \
    -out ca.crt -days 1 -subj /CN=bench-ca 2>/dev/null &&
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout server.key \
    -out server.csr -subj /CN=localhost 2>/dev/null &&
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > ext &&
  openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt \
    -days 1 -extfile ext 2>/dev/null)
token=bench-token-0123456789abcdef
printf '%s write bench\n' "$token" > "$work/tokens"

run_mode() {  # name, server flags..., then -- client flags...
  local name=$1; shift
  local server_flags=() client_flags=()
  while [[ $1 != -- ]]; do server_flags+=("$1"); shift; done
  shift
  client_flags=("$@")
  rm -rf "$work/store" "$work/ready"
  "$bin/grail-server" --model "$model" --data-dir "$work/store" --host 127.0.0.1 --port 0 \
    --metrics-port -1 --ready-file "$work/ready" "${server_flags[@]}" 2>"$work/$name.log" &
  local pid=$!
  for _ in $(seq 600); do [[ -s $work/ready ]] && break; sleep 0.1; done
  local port
  port=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["port"])' "$work/ready")
  local client=("$bin/grail-client" --target "127.0.0.1:$port" "${client_flags[@]}" --json)
  "${client[@]}" add "$graph" >/dev/null
  local result
  result=$("${client[@]}" load --triples "$graph" --method score --concurrency 16 \
    --requests "$requests" --warmup 200 --seed 3)
  python3 - "$name" "$result" <<'PY'
import json, sys
r = json.loads(sys.argv[2])
print(f"| {sys.argv[1]} | {r['requests_per_second']:,.0f} | {r['latency_ms']['p50']:.2f} / "
      f"{r['latency_ms']['p99']:.2f} | {r['errors']} |")
PY
  kill -TERM "$pid"; wait "$pid" || true
}

echo "| mode | ScoreTriplet req/s (16 clients) | p50 / p99 ms | errors |"
echo "|---|---:|---|---:|"
tls=(--tls-cert "$work/server.crt" --tls-key "$work/server.key")
run_mode plaintext --
run_mode tls "${tls[@]}" -- --tls-ca "$work/ca.crt"
run_mode "tls + token" "${tls[@]}" --auth-tokens "$work/tokens" -- --tls-ca "$work/ca.crt" \
  --token "$token"
