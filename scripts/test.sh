#!/usr/bin/env bash
# The README's test command: installs what the tests need, builds, runs the whole suite.
#
# The suite runs instrumented with AddressSanitizer and UndefinedBehaviorSanitizer (gcc, the
# product's compiler, in build-asan/): every test, the server processes the integration
# tests start included, fails on a memory error, a leak or undefined behaviour. The product
# build (scripts/build.sh, build/) is the same code without the instrumentation; the demo
# (scripts/demo.sh) builds and runs it. Then ThreadSanitizer over the storage tests and the
# server's in-process tests, and a short run of each libFuzzer target. docs/RELIABILITY.md says what each stage covers and
# what it leaves out.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs=${JOBS:-$(nproc)}
# The Kubernetes schema validator's packages (tests/deploy/k8s_schema, pinned by its
# package-lock.json), from the npm registry.
scripts/setup.sh --node
npm ci --prefix tests/deploy/k8s_schema --no-audit --no-fund --loglevel=error

# -O1 -g1: AddressSanitizer's recommended optimisation, line tables for its reports; about
# 40% less compile time than -O2 -g.
asan_dir=${ASAN_BUILD_DIR:-build-asan}
cmake -S . -B "$asan_dir" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1 -g1" \
  -DGRAIL_SANITIZE=address,undefined -DGRAIL_BUILD_BENCHMARKS=OFF > /dev/null
cmake --build "$asan_dir" -j"$jobs"

# ThreadSanitizer over the storage tests (the live index read by scorers while chunks are
# applied) and the server's in-process tests (the inference engine's scheduling, admission,
# cancellation and batching threads; the link predictor; the sequence gate), instrumented in
# a second build directory (about 5 minutes on 2 cores). The engine synchronises through
# absl::Mutex: its tests run on Debian's Abseil rebuilt with ThreadSanitizer
# (scripts/tsan_abseil.sh, cached after the first run), without which every guarded member
# reads as a race. tests/sanitizers/tsan.supp names what is not our code's. The
# crash-recovery tests are left out: they check process kills, not threads, and would fork
# an instrumented writer hundreds of times. setarch -R: TSan needs a predictable
# address-space layout on kernels with high mmap randomisation. docs/RELIABILITY.md.
# -O1 -g1 as for AddressSanitizer: ThreadSanitizer's recommended range, and about 40% less
# compiling than -O2 -g.
tsan_dir=${TSAN_BUILD_DIR:-build-tsan}
cmake -S . -B "$tsan_dir" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1 -g1" \
  -DGRAIL_SANITIZE=thread -DGRAIL_BUILD_BENCHMARKS=OFF > /dev/null
cmake --build "$tsan_dir" -j"$jobs" --target storage_test server_test
tsan_options="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/sanitizers/tsan.supp"
TSAN_OPTIONS=$tsan_options setarch "$(uname -m)" -R \
  "$tsan_dir/bin/storage_test" --gtest_filter='-CrashRecoveryTest.*' --gtest_brief=1
tsan_abseil=$(JOBS=$jobs scripts/tsan_abseil.sh)
LD_LIBRARY_PATH=$tsan_abseil TSAN_OPTIONS=$tsan_options OMP_WAIT_POLICY=passive \
  setarch "$(uname -m)" -R "$tsan_dir/bin/server_test" --gtest_brief=1

# Each libFuzzer target for a short while (clang, ASan + UBSan, in build-fuzz/); the long
# campaign is bench/fuzz.sh --runs 1000000 (docs/RELIABILITY.md).
bench/fuzz.sh --seconds "${FUZZ_SECONDS:-30}" --out "${FUZZ_OUT:-$asan_dir/fuzz}"

# The whole suite last, so the run closes on ctest's summary. -LE long: the tests labelled
# `long` (a second build of the product against another LibTorch) run on request, `ctest -L
# long` (docs/RELIABILITY.md, "Sanitizers in CI"). detect_leaks: LeakSanitizer
# runs at every instrumented process's exit (tests/sanitizers/lsan.supp: third-party leaks).
# GRAIL_CRASH_KILLS: the kill -9 tests kill 60 writers per mode here instead of 200 and 100
# (an instrumented writer starts several times slower; the kill semantics are the same, and
# the long campaigns are in docs/RELIABILITY.md).
# OMP_WAIT_POLICY=passive: LibTorch's and OpenBLAS's OpenMP threads sleep instead of spinning
# between parallel regions. With two tests at a time on 2 cores, each otherwise spends the
# cores on the other's spinning: RuleLearningTest beside a path-training test took 149 s, and
# 76 s passive (the other test 104 s, and 76 s); in the whole suite it took 479 s, against
# 66 s alone. Scheduling only: the computations are the same.
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive} \
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
  LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/sanitizers/lsan.supp} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
  GRAIL_CRASH_KILLS=${GRAIL_CRASH_KILLS:-60} \
  ctest --test-dir "$asan_dir" --output-on-failure -j"$jobs" --timeout 1500 -LE long
