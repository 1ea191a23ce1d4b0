#!/usr/bin/env bash
# Runs the libFuzzer targets of fuzz/ (docs/RELIABILITY.md). Builds them first (clang, with
# AddressSanitizer and UndefinedBehaviorSanitizer) in build-fuzz/ unless --bin is given.
#
#   bench/fuzz.sh [--seconds S | --runs N] [--out out/fuzz] [--bin DIR] [TARGET...]
#
# --seconds S: each target for S seconds (scripts/test.sh: a short run of each in CI);
# --runs N: each target for N inputs (the campaign: N >= 1000000). Corpora live in
# OUT/corpus/TARGET and grow across runs; crashes go to OUT/crashes/ and fail the script.
# Targets: triple_line_fuzzer chunk_fuzzer extraction_fuzzer model_archive_fuzzer (all by
# default).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=
runs=
out=out/fuzz
bin=
targets=()
while (($#)); do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    -*) echo "unknown argument $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[[ -n $seconds || -n $runs ]] || seconds=60
((${#targets[@]})) ||
  targets=(triple_line_fuzzer chunk_fuzzer extraction_fuzzer model_archive_fuzzer)

if [[ -z $bin ]]; then
  dir=${FUZZ_BUILD_DIR:-build-fuzz}
  # -O1 -g1: libFuzzer's documented flags, and less compiling than -O2 -g.
  CC=clang CXX=clang++ cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=None \
    -DCMAKE_CXX_FLAGS="-O1 -g1" -DCMAKE_C_FLAGS="-O1 -g1" -DGRAIL_BUILD_FUZZERS=ON -DGRAIL_SANITIZE=address,undefined -DGRAIL_BUILD_TESTS=OFF \
    -DGRAIL_BUILD_BENCHMARKS=OFF > /dev/null
  cmake --build "$dir" -j"${JOBS:-$(nproc)}" --target "${targets[@]}"
  bin=$dir/bin
fi
mkdir -p "$out/crashes"

# Seeds: a few valid inputs per target, so that mutations start from the real formats.
seed() {  # seed TARGET NAME BYTES(printf format)
  mkdir -p "$out/corpus/$1"
  # shellcheck disable=SC2059
  printf "$3" > "$out/corpus/$1/$2"
}
seed triple_line_fuzzer line 'dog\t_hypernym\tcanine'
seed triple_line_fuzzer crlf 'a b\tr\tc\r'
# chunk_fuzzer: byte 0 picks AddTriples (even) or RemoveTriples (odd), then the message.
seed chunk_fuzzer add '\x00\x0a\x09\x0a\x01a\x12\x01r\x1a\x01b\x0a\x09\x0a\x01b\x12\x01r\x1a\x01c\x10\x05'
seed chunk_fuzzer remove '\x01\x0a\x09\x0a\x01a\x12\x01r\x1a\x01b\x1a\x01c'
seed extraction_fuzzer small '\x08\x02\x02\x01\x00\x05\x01\x00\x01\x01\x01\x02\x00\x02\x03\x03\x00\x04\x04\x01\x05'
mkdir -p "$out/corpus/model_archive_fuzzer"
[[ -s $out/corpus/model_archive_fuzzer/untrained.pt ]] ||
  GRAIL_FUZZ_WRITE_SEED=$out/corpus/model_archive_fuzzer/untrained.pt \
    "$bin/model_archive_fuzzer" > /dev/null

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
# The targets' scratch files (chunk_fuzzer's store, which it never closes, and
# model_archive_fuzzer's archives) in OUT/tmp rather than /tmp, emptied before each run.
scratch=$(realpath -m "$out/tmp")
for target in "${targets[@]}"; do
  limit=(-max_total_time="$seconds")
  [[ -n $runs ]] && limit=(-runs="$runs")
  rm -rf "$scratch" && mkdir -p "$scratch"
  # -rss_limit_mb: LibTorch's first load maps a few hundred MB; 4 GB still catches a leak.
  if TMPDIR=$scratch "$bin/$target" "$out/corpus/$target" "${limit[@]}" -rss_limit_mb=4096 \
    -timeout=30 -print_final_stats=1 -artifact_prefix="$out/crashes/$target-" \
    > "$out/$target.log" 2>&1; then
    echo "$target: $(grep -E '^stat::number_of_executed_units' "$out/$target.log" |
      awk '{print $2}') inputs, corpus $(ls "$out/corpus/$target" | wc -l), no failure"
  else
    echo "$target: FAILED (see $out/$target.log and $out/crashes/)" >&2
    tail -40 "$out/$target.log" >&2
    status=1
  fi
done
rm -rf "$scratch"
exit $status
