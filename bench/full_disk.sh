#!/usr/bin/env bash
# Full-disk campaign (docs/RELIABILITY.md): grail-server on a real, tiny file system.
#   1. ingest until the disk is full: the chunk must fail RESOURCE_EXHAUSTED naming the disk,
#      reads must go on, grail_store_writable must read 0, and SIGTERM must exit without an
#      abort;
#   2. restart on the still-full disk: the server must start and serve the graph read-only;
#   3. free space (grow the file system): the next chunk must be written, with no
#      acknowledged fact lost.
# Needs root (it mounts a tmpfs).
#
#   bench/full_disk.sh [--bin build/bin] [--out out/full_disk] [--model M.pt]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/bin
out=out/full_disk
model=
data=${GRAIL_DATA_DIR:-../shared/data}
while (($#)); do
  case $1 in
    --bin) bin=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $(id -u) == 0 ]] || { echo "full_disk.sh mounts a tmpfs: run it as root" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [[ -z $model ]]; then
  model=$out/model.pt
  [[ -s $model ]] || "$bin/grail-train" --train "$data/WN18RR_v1/train.txt" \
    --valid "$data/WN18RR_v1/valid.txt" --out "$model" --epochs 1 --seed 0 2> "$out/train.log"
fi
disk=$out/disk
mkdir -p "$disk"
mountpoint -q "$disk" && umount "$disk"
mount -t tmpfs -o size=3m tmpfs "$disk"
trap 'pkill -f "data-dir $disk/store" || true; umount "$disk" 2>/dev/null || true' EXIT

# 200 000 facts with long names: about 40 MB of WAL, far beyond 3 MB.
python3 - "$out/facts.txt" <<'EOF'
import random, sys
random.seed(0)
with open(sys.argv[1], "w") as f:
    for i in range(200000):
        f.write(f"entity_{i:08d}_with_a_long_name\t_hypernym\t"
                f"entity_{random.randrange(10**8):08d}_with_a_long_name\n")
EOF
printf 'late_head\t_hypernym\tlate_tail\n' > "$out/one.txt"

failures=0
check() {  # check NAME CONDITION...
  local name=$1; shift
  if "$@"; then echo "PASS $name"; else echo "FAIL $name"; failures=$((failures + 1)); fi
}
start() {  # start LOG: a server on the tmpfs store; sets port and metrics
  rm -f "$out/ready.json"
  "$bin/grail-server" --model "$model" --data-dir "$disk/store" --port 0 --metrics-port 0 \
    --ready-file "$out/ready.json" > "$out/$1" 2>&1 &
  server=$!
  for _ in $(seq 300); do [[ -s $out/ready.json ]] && break; sleep 0.1; done
  port=$(python3 -c "import json; print(json.load(open('$out/ready.json'))['port'])")
  metrics=$(python3 -c "import json; print(json.load(open('$out/ready.json'))['metrics_port'])")
}
metric() { curl -s "localhost:$metrics/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
client() { "$bin/grail-client" --target "127.0.0.1:$port" "$@"; }

echo "== 1. fill the disk"
start server1.log
set +e
client add "$out/facts.txt" --chunk 1000 > "$out/add1.txt" 2> "$out/add1.err"
add_rc=$?
set -e
acked=$(sed -n 's/.*facts_acknowledged=\([0-9]*\).*/\1/p' "$out/add1.txt")
echo "acknowledged before the disk filled: $acked facts"
check "ingest fails" test "$add_rc" -ne 0
check "RESOURCE_EXHAUSTED names the disk" grep -q "RESOURCE_EXHAUSTED.*No space left on device" \
  "$out/add1.err"
check "reads go on" client score entity_00000001_with_a_long_name _hypernym \
  entity_00000002_with_a_long_name
check "grail_store_writable 0" test "$(metric grail_store_writable)" = 0
check "graph holds what was acknowledged" test "$(metric grail_graph_facts)" = "$acked"
kill -TERM "$server"
set +e
wait "$server"
term_rc=$?
set -e
echo "exit status after SIGTERM: $term_rc"
check "SIGTERM exits without an abort" test "$term_rc" -ne 134

echo "== 2. restart on the full disk"
start server2.log
check "starts and serves" client score entity_00000001_with_a_long_name _hypernym \
  entity_00000002_with_a_long_name
check "graph after restart holds what was acknowledged" test "$(metric grail_graph_facts)" = "$acked"
check "grail_store_writable 0 after restart" test "$(metric grail_store_writable)" = 0
check "read-only start logged" grep -q '"event":"store".*read-only' "$out/server2.log"
check "a chunk is refused while full" bash -c "! $bin/grail-client --target 127.0.0.1:$port add $out/one.txt > /dev/null 2>&1"

echo "== 3. free space"
mount -o remount,size=256m "$disk"
check "the next chunk is written" client add "$out/one.txt"
check "grail_store_writable 1" test "$(metric grail_store_writable)" = 1
check "the rest of the file goes in" client add "$out/facts.txt" --chunk 1000
check "nothing lost: every fact stored" test "$(metric grail_graph_facts)" = 200001
kill -TERM "$server"
wait "$server"
check "clean exit" test $? -eq 0
echo "failures: $failures"
exit $((failures > 0))
