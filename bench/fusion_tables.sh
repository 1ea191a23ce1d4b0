#!/usr/bin/env bash
# The GraIL paper's transductive ensembles on one data set (Section 5.2): late fusion of every
# pair among TransE, DistMult, ComplEx, RotatE and GraIL (Tables 3-5, AUC-PR, and the
# appendix's Hits@10, with the gain G), and early fusion, GraIL++ (Table 6: GraIL trained with
# TransE's entity embeddings concatenated to its node labels).
#
#   bench/fusion_tables.sh --data DIR --grail G.pt [--out out/fusion/NAME] [--epochs 50]
#                          [--hops K] [--seed 0] [--runs 5] [--threads 1]
#                          [-- extra bench/kge_wn18rr.sh flags, e.g. --epochs 100 -- --lr 0.002]
#
# DIR holds train.txt (the graph every model reads, and the training facts), valid.txt (the
# classifiers' training facts) and test.txt. G.pt is GraIL trained on DIR/train.txt (for the
# benchmark splits, the model bench/reproduce.sh --transductive evaluates). Steps, each
# skipped when its output exists (so an interrupted run resumes):
#   1. the four KGE models: bench/kge_wn18rr.sh --data DIR (its filtered full ranking too);
#   2. GraIL++: grail-train --node-features <TransE> with grail-train's defaults, --epochs,
#      --seed and --hops (give G.pt's: the paper's 2 on WN18RR; default grail-train's 3),
#      then grail-eval on DIR (graph train.txt, facts test.txt, --runs draws);
#   3. bench/fusion_table over GraIL and the four KGE models (every pair, the same
#      negatives); its Markdown tables go to <out>/late.md and its figures to late.json.
set -euo pipefail
cd "$(dirname "$0")/.."
data="" grail="" out="" epochs=50 seed=0 runs=5 threads=1 hops=3
extra=()
while (($#)); do
  case $1 in
    --data) data=$2; shift 2 ;;
    --grail) grail=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --hops) hops=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -n $data && -n $grail ]] || { echo "usage: bench/fusion_tables.sh --data DIR --grail G.pt [...]" >&2; exit 2; }
[[ -f $grail ]] || { echo "no GraIL model at $grail" >&2; exit 1; }
out=${out:-out/fusion/$(basename "$data")}
bin=${GRAIL_BIN_DIR:-build/bin}
[[ -x $bin/fusion_table ]] || { echo "build first: scripts/build.sh" >&2; exit 1; }
mkdir -p "$out"

echo "== KGE models"
bench/kge_wn18rr.sh --data "$data" --out "$out/kge" --threads "$threads" --runs "$runs" \
  --seed "$seed" ${extra[@]+"${extra[@]}"} | tee "$out/kge.log"
# The archives, in the paper's column order.
kge=()
for model in transe distmult complex rotate; do
  found=$(ls "$out/kge/$model".*".seed$seed.pt" 2>/dev/null | head -n 1)
  [[ -n $found ]] || { echo "no $model archive in $out/kge" >&2; exit 1; }
  kge+=("$found")
done

echo "== GraIL++ (early fusion with ${kge[0]})"
plus="$out/grail_plus.seed$seed.pt"
if ! grep -q "^saved " "$out/grail_plus.train.log" 2>/dev/null; then
  "$bin/grail-train" --train "$data/train.txt" --valid "$data/valid.txt" --out "$plus" \
    --node-features "${kge[0]}" --hops "$hops" --epochs "$epochs" --seed "$seed" \
    --threads "$threads" \
    --checkpoint-dir "$out/grail_plus.checkpoint" --resume --noprogress \
    2>> "$out/grail_plus.train.log"
fi
for model in "$grail" "$plus"; do
  name=$(basename "$model" .pt)
  [[ -s $out/$name.eval.json ]] && continue
  "$bin/grail-eval" --model "$model" --graph "$data/train.txt" --test "$data/test.txt" \
    --seed 0 --runs "$runs" --threads "$threads" 2> "$out/$name.eval.log" |
    tail -n 1 > "$out/$name.eval.json.tmp"
  mv "$out/$name.eval.json.tmp" "$out/$name.eval.json"
done
echo "GraIL:   $(cat "$out/$(basename "$grail" .pt).eval.json")"
echo "GraIL++: $(cat "$out/grail_plus.seed$seed.eval.json")"

echo "== late fusion"
if [[ ! -s $out/late.json ]]; then
  "$bin/fusion_table" --grail "$grail" --kge "$(IFS=,; echo "${kge[*]}")" \
    --graph "$data/train.txt" --valid "$data/valid.txt" --test "$data/test.txt" \
    --seed 0 --runs "$runs" --threads "$threads" --json "$out/late.json.tmp" \
    > "$out/late.md" 2> "$out/late.log"
  mv "$out/late.json.tmp" "$out/late.json"
fi
cat "$out/late.md"
