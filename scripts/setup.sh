#!/usr/bin/env bash
# Installs everything the project needs to build, test and run, from Debian 12 packages.
# Idempotent: when every package is already installed it makes no network call.
# Used by the README's commands, by .ci/run and by the Dockerfile's build stage, so the
# package list lives here and nowhere else.
#
#   scripts/setup.sh            everything: build, test and run (the README's commands)
#   scripts/setup.sh --runtime  only the shared libraries the built binaries load (the
#                               Dockerfile's run stage)
#   scripts/setup.sh --node     Node.js's npm, for the Kubernetes schema check
#                               (tests/deploy/k8s_schema; scripts/test.sh), where none is
#                               installed: kept apart so the image's build stage skips it
#   scripts/setup.sh --image    what scripts/image.sh builds and checks images with
set -euo pipefail

runtime_packages=(
  ca-certificates libgrpc++1.51 libprotobuf32 librocksdb7.8 libabsl20220623
  libmicrohttpd12 libprometheus-cpp-core1.0 libssl3 libtorch1.13 libopenblas0-openmp wordnet-base
  libnats3.4 libtcmalloc-minimal4
)

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config clang-format git ca-certificates
  # service
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  librocksdb-dev libabsl-dev libcpp-httplib-dev libmicrohttpd-dev libssl-dev openssl
  prometheus-cpp-dev nlohmann-json3-dev
  # replication between replicas: the NATS C client (JetStream), and the NATS server the
  # replication tests and benchmarks start on loopback
  libnats-dev nats-server
  # model: LibTorch resolves BLAS through libblas.so.3; without an optimised provider it
  # lands on netlib's reference BLAS, ~20x slower for our matmuls. The OpenMP flavour
  # matches LibTorch's libgomp.
  libtorch-dev libopenblas0-openmp zlib1g-dev
  # the training and evaluation tools' allocator (gperftools' tcmalloc): glibc's heap
  # fragments under their gigabytes of tensors per step
  libtcmalloc-minimal4
  # the sanitizer build and the libFuzzer targets (scripts/test.sh, bench/fuzz.sh); Debian's
  # Abseil source, unpacked and built with ThreadSanitizer (scripts/tsan_abseil.sh)
  clang libclang-rt-14-dev dpkg-dev
  # tests and benchmarks; python3-yaml and yamllint check deploy/ (tests/deploy/)
  libgtest-dev libgmock-dev libbenchmark-dev prometheus python3 python3-yaml yamllint
  # the syscalls a trainer's checkpoint makes, in order (fsync before rename)
  strace
  # proves that exported models open in Python (torch.jit.load), same LibTorch 1.13
  python3-torch
  # the Python client (client/python) and its test; grail-train --plot
  python3-grpcio python3-protobuf gnuplot-nox
  # the embedded default data set: WordNet 3.0
  wordnet-base
)

image_packages=(mmdebstrap buildah podman openssl python3 python3-yaml)

case ${1:-} in
  --runtime) packages=("${runtime_packages[@]}") ;;
  --image) packages=("${image_packages[@]}") ;;
  # Debian's npm only where no Node.js with npm is installed (this kind of machine comes
  # with one, and Debian's npm conflicts with it).
  --node) packages=(); command -v npm > /dev/null || packages=(npm) ;;
  "") ;;
  *) echo "setup: unknown mode $1 (--runtime, --node or --image)" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "setup: all packages present"
