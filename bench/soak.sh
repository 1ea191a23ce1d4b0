#!/usr/bin/env bash
# Soak campaign (docs/RELIABILITY.md): one grail-server under 16 clients for a while
# (default 10 minutes) - 8 scoring, 4 ranking, 4 writing (each adds a batch of facts, then
# removes it again, so the graph oscillates around its starting size) - with the server's
# RSS sampled every 10 s. With --churn, also a reloader (the model, then a copy of it, every
# 20 s: each reload loads, warms up and swaps) and a relation churner (50 facts of a relation
# new to the graph, a ranking of it, then the relation removed by name, over and over: the
# graph of relations ULTRA reads changes each time). --ultra serves ULTRA (grail-tools
# import-ultra of CHECKPOINT) instead of a GraIL model trained here. Passes when no call
# failed except by its deadline and, after --warmup-seconds (60), the second half's mean and
# peak RSS are within --rss-percent (10) of the first half's.
#
#   bench/soak.sh [--seconds 600] [--split fb237_v1] [--bin build/bin] [--out out/soak]
#                 [--churn] [--ultra ../shared/models/ultra/ultra_3g.pth] [--rss-percent 5]
#                 [--warmup-seconds 200]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=600
split=fb237_v1
bin=build/bin
out=out/soak
churn=false
ultra=
rss_percent=10
warmup_seconds=60
data=${GRAIL_DATA_DIR:-../shared/data}
while (($#)); do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --split) split=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --churn) churn=true; shift ;;
    --ultra) ultra=$2; shift 2 ;;
    --rss-percent) rss_percent=$2; shift 2 ;;
    --warmup-seconds) warmup_seconds=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
graph=$data/${split}_ind/train.txt
queries=$data/${split}_ind/test.txt
flags=()
if [[ -n $ultra ]]; then
  model=$out/ultra.pt
  [[ -s $model ]] || "$bin/grail-tools" import-ultra --checkpoint "$ultra" --out "$model" > /dev/null
else
  model=$out/$split.e2.pt
  [[ -s $model ]] || "$bin/grail-train" --train "$data/$split/train.txt" \
    --valid "$data/$split/valid.txt" --out "$model" --epochs 2 --seed 0 2> "$out/train.log"
  # A GraIL model takes the churned relations into the graph (their edges it ignores).
  if $churn; then flags+=(--allow-unknown-relations); fi
fi
cp "$model" "$out/model_copy.pt"

rm -rf "$out/store" "$out/ready" "$out"/reloader.log "$out"/churner.log
"$bin/grail-server" --model "$model" --data-dir "$out/store" --port 0 --metrics-port 0 \
  --ready-file "$out/ready" ${flags[@]+"${flags[@]}"} 2> "$out/server.log" &
server=$!
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  kill -TERM "$server" 2>/dev/null || true
}
trap cleanup EXIT
for _ in $(seq 1200); do [[ -s $out/ready ]] && break; sleep 0.1; done
port=$(sed 's/.*"port":\([0-9]*\).*/\1/' "$out/ready")
client=("$bin/grail-client" --target "127.0.0.1:$port")
"${client[@]}" add "$graph" > "$out/ingest.txt"

# The writers' batches: 500 facts each among fresh entities and the graph's own.
python3 - "$graph" "$out" <<'EOF'
import random, sys
graph, out = sys.argv[1], sys.argv[2]
facts = [l.rstrip("\n").split("\t") for l in open(graph) if l.strip()]
entities = sorted({f[0] for f in facts} | {f[2] for f in facts})
relations = sorted({f[1] for f in facts})
for w in range(4):
    rng = random.Random(w)
    with open(f"{out}/writer{w}.txt", "w") as f:
        for i in range(500):
            new = f"soak_w{w}_e{i}"
            old = rng.choice(entities)
            h, t = (new, old) if rng.random() < 0.5 else (old, new)
            f.write(f"{h}\t{rng.choice(relations)}\t{t}\n")
EOF

end=$((SECONDS + seconds))
: > "$out/calls.txt"
reader() {  # reader NAME ARGS...: load runs until the end
  local name=$1; shift
  while ((SECONDS < end)); do
    "${client[@]}" --deadline-ms 10000 load --triples "$queries" "$@" >> "$out/$name.txt" 2>&1 || true
  done
}
writer() {  # writer W: add then remove its batch until the end
  local w=$1
  while ((SECONDS < end)); do
    "${client[@]}" add "$out/writer$w.txt" --chunk 100 >> "$out/writer$w.log" 2>&1 ||
      echo "FAILED add" >> "$out/writer$w.log"
    "${client[@]}" remove "$out/writer$w.txt" --chunk 100 >> "$out/writer$w.log" 2>&1 ||
      echo "FAILED remove" >> "$out/writer$w.log"
  done
}
reloader() {  # the model and its copy in turn, every 20 s
  local n=0 path
  while ((SECONDS + 20 < end)); do
    sleep 20
    path=$model
    if ((n++ % 2 == 0)); then path=$out/model_copy.pt; fi
    "${client[@]}" --deadline-ms 120000 reload-model "$path" >> "$out/reloader.log" 2>&1 ||
      echo "FAILED reload $path" >> "$out/reloader.log"
  done
}
churner() {  # a relation new to the graph, 50 facts of it, a ranking, the relation removed
  local n=0 relation
  while ((SECONDS < end)); do
    relation="soak_churn_$((n++ % 20))"
    python3 - "$graph" "$relation" "$out/churn.txt" <<'EOF'
import random, sys
graph, relation, out = sys.argv[1:]
entities = sorted({f.split("\t")[0] for f in open(graph) if f.strip()})
rng = random.Random(relation)
with open(out, "w") as f:
    for _ in range(50):
        f.write(f"{rng.choice(entities)}\t{relation}\t{rng.choice(entities)}\n")
EOF
    echo "$relation" > "$out/churn_relation.txt"
    "${client[@]}" add "$out/churn.txt" >> "$out/churner.log" 2>&1 ||
      echo "FAILED add $relation" >> "$out/churner.log"
    if [[ -n $ultra ]]; then  # a GraIL model does not know the relation: ULTRA ranks it
      "${client[@]}" --deadline-ms 30000 rank-tails "$(cut -f1 "$out/churn.txt" | head -1)" \
        "$relation" --top-k 5 > /dev/null 2>> "$out/churner.log" ||
        echo "FAILED rank $relation" >> "$out/churner.log"
    fi
    "${client[@]}" remove-relations "$out/churn_relation.txt" >> "$out/churner.log" 2>&1 ||
      echo "FAILED remove $relation" >> "$out/churner.log"
  done
}
for i in 1 2; do reader "score$i" --method score --concurrency 4 --requests 2000 --seed "$i" & pids+=($!); done
if $churn; then
  reloader & pids+=($!)
  churner & pids+=($!)
fi
reader rank --method rank-tails --concurrency 4 --requests 200 --candidates-per-request 50 & pids+=($!)
for w in 0 1 2 3; do writer "$w" & pids+=($!); done

echo "seconds rss_mb" > "$out/rss.txt"
start=$SECONDS
while ((SECONDS < end)); do
  rss_kb=$(awk '/VmRSS/ {print $2}' "/proc/$server/status")
  echo "$((SECONDS - start)) $((rss_kb / 1024))" | tee -a "$out/rss.txt"
  sleep 10
done
for p in "${pids[@]}"; do wait "$p" || true; done
pids=()

failed_writes=$( (cat "$out"/writer*.log | grep -c FAILED) || true)
failed_churn=$( (cat "$out"/reloader.log "$out"/churner.log 2> /dev/null | grep -c FAILED) || true)
reloads=$( (grep -c '^version=' "$out/reloader.log" 2> /dev/null) || true)
churned=$( (grep -c ' relations_removed=1 ' "$out/churner.log" 2> /dev/null) || true)
passes=$( (cat "$out"/writer*.log | grep -c '^chunks_acknowledged') || true)
# Outcomes by status code in the load generator's summaries ("status OK=2000 ..." lines).
statuses=$(grep -h '^status ' "$out"/score*.txt "$out"/rank.txt | tr ' ' '\n' | grep '=' || true)
reads=$(echo "$statuses" | awk -F= 'NF == 2 {s += $2} END {print s + 0}')
# (awk alone: a grep that finds no failed status exits 1, which pipefail made fatal.)
bad_reads=$(echo "$statuses" |
  awk -F= 'NF == 2 && $1 != "OK" && $1 != "DEADLINE_EXCEEDED" {s += $2} END {print s + 0}')
"${client[@]}" stats > "$out/stats.json"
# RSS swings with the writers' snapshots and malloc's returns: compare the two halves after
# the warm-up (mean and peak), not two single samples.
python3 - "$out/rss.txt" "$reads" "$bad_reads" "$passes" "$failed_writes" "$reloads" \
  "$churned" "$failed_churn" "$rss_percent" "$warmup_seconds" <<'EOF'
import sys
rows = [tuple(map(int, l.split())) for l in open(sys.argv[1]).read().splitlines()[1:]]
reads, bad_reads, passes, failed_writes, reloads, churned, failed_churn = map(int, sys.argv[2:9])
bound, warmup = float(sys.argv[9]), int(sys.argv[10])
rss = [m for s, m in rows if s >= warmup]
first, second = rss[: len(rss) // 2], rss[len(rss) // 2 :]
mean = lambda v: sum(v) / len(v)
mean_change = (mean(second) - mean(first)) / mean(first) * 100
peak_change = (max(second) - max(first)) / max(first) * 100
print(f"reads: {reads} ({bad_reads} failed); add/remove passes: {passes} ({failed_writes} failed)")
print(f"reloads: {reloads}; relations added and removed: {churned}; churn calls failed: "
      f"{failed_churn}")
print(f"RSS after {warmup} s: first half mean {mean(first):.0f} MB, peak {max(first)} MB; "
      f"second half mean {mean(second):.0f} MB ({mean_change:+.1f}%), peak {max(second)} MB "
      f"({peak_change:+.1f}%); min {min(rss)} MB, max {max(rss)} MB")
ok = (bad_reads == 0 and failed_writes == 0 and failed_churn == 0 and
      abs(mean_change) <= bound and peak_change <= bound)
sys.exit(0 if ok else 1)
EOF
