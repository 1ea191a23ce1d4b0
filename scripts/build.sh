#!/usr/bin/env bash
# Configures and builds everything into build/ (binaries in build/bin/).
# BUILD_DIR and BUILD_TYPE may be overridden from the environment.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
build_type=${BUILD_TYPE:-Release}
jobs=${JOBS:-$(nproc)}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" "$@" >/dev/null
cmake --build "$build_dir" -j"$jobs"
