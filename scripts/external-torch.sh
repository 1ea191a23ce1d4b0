#!/usr/bin/env bash
# Builds the trainer and the evaluator (and, with --server, the server and the client)
# against a LibTorch other than Debian's — the one inside a CUDA PyTorch, say — on a machine
# that may reach no package registry.
#
# Two steps, on two machines:
#
#   scripts/external-torch.sh prepare [--server] [--deps DIR]
#       On a Debian 12 machine with apt (this project's own): downloads the Debian packages
#       the build needs besides LibTorch (Abseil, nlohmann-json, zlib, tcmalloc; with --server also
#       gRPC, protobuf with its compilers, RocksDB, OpenSSL, prometheus-cpp, cpp-httplib,
#       libmicrohttpd) and their runtime libraries with `apt-get download`, and unpacks
#       them with `dpkg -x` into DIR/root (default: .external-deps/, git-ignored). Copy
#       DIR to the other machine beside the source tree.
#
#   scripts/external-torch.sh build --torch PREFIX [--server] [--deps DIR]
#                                   [--build-dir DIR] [--jobs N] [-- CMAKE_ARGS...]
#       On the machine with the other LibTorch: configures and builds against LibTorch at
#       PREFIX (the folder that holds share/cmake/Torch, or that folder itself: for a
#       PyTorch, `python3 -c 'import torch; print(torch.utils.cmake_prefix_path)'`) and
#       the prepared folder only, into build-torch/ (default); arguments after -- go to
#       CMake. The binaries find the prepared libraries (and theirs) and LibTorch's through
#       their RPATH: nothing is installed. Only DIR/debs needs copying: when DIR/root is
#       missing, `build` unpacks the .deb files itself (with dpkg, or with ar and tar).
#
# Needs on the build machine: a C++17 compiler, CMake >= 3.25 and Ninja (a CUDA LibTorch
# also needs the CUDA toolkit its CMake files look for). LibTorch must use the C++11 string
# ABI, as Debian's Abseil does (PyTorch's own wheels do from 2.7 on); CMakeLists.txt checks
# this.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

command=${1:-}
[[ $command == prepare || $command == build ]] || {
  usage >&2
  exit 2
}
shift
deps=.external-deps
server=0
torch=""
build_dir=build-torch
jobs=$(nproc)
cmake_args=()
while (($#)); do
  case $1 in
  --) shift; cmake_args=("$@"); break ;;
  --server) server=1 ;;
  --deps) deps=$2; shift ;;
  --torch) torch=$2; shift ;;
  --build-dir) build_dir=$2; shift ;;
  --jobs) jobs=$2; shift ;;
  -h | --help) usage; exit 0 ;;
  *) echo "external-torch: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
root=$(realpath -m "$deps/root")
multiarch=x86_64-linux-gnu

# What the model library and the tools build against besides LibTorch, and what the service
# adds (the -dev packages of scripts/setup.sh's "service" group).
model_packages=(libabsl-dev nlohmann-json3-dev zlib1g-dev libtcmalloc-minimal4)
server_packages=(libgrpc++-dev libgrpc-dev protobuf-compiler-grpc libprotobuf-dev
  protobuf-compiler librocksdb-dev libcpp-httplib-dev libmicrohttpd-dev libssl-dev
  prometheus-cpp-dev libnats-dev pkgconf)
# Never carried: the C library and the compiler's runtime belong to the build machine (a
# newer glibc and libstdc++ run libraries built against Debian 12's).
base_packages=(gcc-12-base libc6 libc6-dev libc-dev-bin libgcc-s1 libstdc++6 linux-libc-dev
  libcrypt1 libcrypt-dev libnsl-dev libnsl2 libtirpc-common libtirpc-dev libtirpc3 rpcsvc-proto)

# Unpacks every .deb of DIR/debs into DIR/root.
unpack() {
  rm -rf "$root"
  mkdir -p "$root"
  local deb
  for deb in "$deps"/debs/*.deb; do
    # EXTERNAL_TORCH_UNPACK=ar takes the second way even where dpkg exists (the test does).
    if [[ ${EXTERNAL_TORCH_UNPACK:-} != ar ]] && command -v dpkg > /dev/null; then
      dpkg -x "$deb" "$root"
    else  # a .deb is an ar archive; its data.tar.* member holds the files
      local member
      member=$(ar t "$deb" | grep '^data\.tar')
      case $member in
      *.xz) ar p "$deb" "$member" | tar -xJ -C "$root" ;;
      *.zst) ar p "$deb" "$member" | tar --zstd -x -C "$root" ;;
      *.gz) ar p "$deb" "$member" | tar -xz -C "$root" ;;
      *) ar p "$deb" "$member" | tar -x -C "$root" ;;
      esac
    fi
  done
  # Absolute links (libz.so -> /lib/...) would point at the build machine's files: make
  # them point inside the folder.
  local link target
  while IFS= read -r -d '' link; do
    target=$(readlink "$link")
    if [[ $target == /* ]]; then
      ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$root$target")" "$link"
    fi
  done < <(find "$root" -type l -print0)
  # Some packages' CMake files name their own files by absolute path (Snappy's, which
  # RocksDB's config loads: /usr/lib/.../libsnappy.so.1.1.9): those too must point inside the
  # folder, or configuring fails where the build machine has no such file.
  local file
  while IFS= read -r -d '' file; do
    sed -i "s|\"/usr/|\"$root/usr/|g" "$file"
  done < <(grep -rlZ '"/usr/' --include='*.cmake' "$root/usr" 2> /dev/null || true)
  rm -rf "$root/usr/share/doc" "$root/usr/share/man"
}

prepare() {
  command -v apt-get > /dev/null && command -v dpkg > /dev/null || {
    echo "external-torch prepare: needs a Debian machine with apt-get and dpkg" >&2
    exit 1
  }
  local sudo=""
  [[ $(id -u) -eq 0 ]] || sudo=sudo
  # No package lists yet (a new machine where nothing was installed): fetch them.
  apt-cache show libabsl-dev > /dev/null 2>&1 || $sudo apt-get update -qq
  local wanted=("${model_packages[@]}")
  ((server)) && wanted+=("${server_packages[@]}")
  # The packages and everything they depend on, less the base.
  local closure=()
  local p base=" ${base_packages[*]} "
  while read -r p; do
    [[ $base == *" $p "* ]] || closure+=("$p")
  done < <(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
    --no-breaks --no-replaces --no-enhances "${wanted[@]}" | grep -v '^[ <]' | sort -u)
  mkdir -p "$deps/debs"
  # As root, apt's download sandbox user could not write into the folder.
  local sandbox=()
  [[ $(id -u) -eq 0 ]] && sandbox=(-o APT::Sandbox::User=root)
  if ! (cd "$deps/debs" && apt-get download -qq "${sandbox[@]}" "${closure[@]}"); then
    # Package lists older than the mirror name versions it no longer has.
    echo "external-torch: download failed; refreshing the package lists and trying again" >&2
    $sudo apt-get update -qq
    (cd "$deps/debs" && apt-get download -qq "${sandbox[@]}" "${closure[@]}")
  fi
  unpack
  printf '%s\n' "${closure[@]}" > "$deps/packages.txt"
  echo "external-torch: ${#closure[@]} packages in $root ($(du -sh "$root" | cut -f1))"
}

build() {
  [[ -n $torch ]] || {
    echo "external-torch build: --torch PREFIX is required" >&2
    exit 2
  }
  if [[ ! -d $root/usr/include/absl ]] && compgen -G "$deps/debs/*.deb" > /dev/null; then
    unpack
  fi
  [[ -d $root/usr/include/absl ]] || {
    echo "external-torch build: $root has no Abseil; run 'prepare' first" >&2
    exit 1
  }
  if ((server)) && [[ ! -x $root/usr/bin/protoc ]]; then
    echo "external-torch build: $root has no protoc; run 'prepare --server' first" >&2
    exit 1
  fi
  local torch_dir
  for torch_dir in "$torch/Torch" "$torch/share/cmake/Torch" "$torch/lib/$multiarch/cmake/Torch" \
    "$torch"; do
    [[ -f $torch_dir/TorchConfig.cmake ]] && break
  done
  [[ -f $torch_dir/TorchConfig.cmake ]] || {
    echo "external-torch build: no TorchConfig.cmake under $torch" >&2
    exit 1
  }
  local libs="$root/usr/lib/$multiarch;$root/lib/$multiarch"
  # The carried protoc and grpc_cpp_plugin (and pkgconf) load the carried libraries.
  export LD_LIBRARY_PATH="$root/usr/lib/$multiarch:$root/lib/$multiarch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PKG_CONFIG_LIBDIR="$root/usr/lib/$multiarch/pkgconfig:$root/usr/share/pkgconfig"
  export PKG_CONFIG_SYSROOT_DIR="$root"
  local service=OFF
  local extra=()
  if ((server)); then
    service=ON
    extra+=(-DProtobuf_PROTOC_EXECUTABLE="$root/usr/bin/protoc"
      -DPKG_CONFIG_EXECUTABLE="$root/usr/bin/pkgconf")
  fi
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DGRAIL_BUILD_SERVICE=$service -DGRAIL_BUILD_TESTS=OFF -DGRAIL_BUILD_BENCHMARKS=OFF \
    -DTorch_DIR="$torch_dir" -DCMAKE_FIND_ROOT_PATH="$root" \
    -DCMAKE_PREFIX_PATH="$root/usr" -DCMAKE_LIBRARY_ARCHITECTURE=$multiarch \
    -DCMAKE_BUILD_RPATH="$libs" -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags \
    "${extra[@]}" "${cmake_args[@]}"
  local targets=(grail-train grail-kge-train grail-fuse grail-eval grail_ops_python)
  ((server)) && targets+=(grail-server grail-client)
  # EXTERNAL_TORCH_KEEP_GOING=1: build every target that compiles, and report every error at
  # once (a first build on a new LibTorch, where a call's time is short).
  local keep_going=()
  [[ ${EXTERNAL_TORCH_KEEP_GOING:-0} == 1 ]] && keep_going=(-- -k 0)
  cmake --build "$build_dir" -j"$jobs" --target "${targets[@]}" "${keep_going[@]}"
  echo "external-torch: built ${targets[*]} in $build_dir/bin against $torch_dir"
}

"$command"
