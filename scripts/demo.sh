#!/usr/bin/env bash
# The README's main command: the product's main job, end to end, on the embedded default
# data set (WordNet 3.0 from Debian's wordnet-base). Installs what it needs, builds, then:
#   1. converts WordNet's synset pointers into triples with WN18RR's relation names,
#   2. cuts an inductive pair of graphs with disjoint entities (paper appendix),
#   3. extracts and prints the enclosing subgraphs of a few held-out facts of the unseen
#      test graph, labelled with their double-radius distances.
# Output goes to $OUT_DIR (default out/demo).
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
echo "== 3. enclosing subgraphs (k = 3) of held-out facts in the unseen test graph"
graph="$out/splits/wordnet_ind/train.txt"
head -n 3 "$out/splits/wordnet_ind/test.txt" | while IFS=$'\t' read -r h r t; do
  echo "($h, $r, $t):"
  "$bin/grail-tools" subgraph --graph "$graph" --head "$h" --relation "$r" --tail "$t" --hops 3
done
