#!/usr/bin/env bash
# Debian's own Abseil, built with ThreadSanitizer, for the ThreadSanitizer stage of
# scripts/test.sh. Prints the directory that holds the instrumented shared libraries.
#
# Why: the engine and the server synchronise through absl::Mutex, whose lock and unlock are
# compiled into Debian's libabsl_synchronization.so without ThreadSanitizer's annotations
# (absl/base/internal/tsan_mutex_interface.h switches them on only when Abseil itself is built
# with -fsanitize=thread), so an instrumented test reports every ABSL_GUARDED_BY member as a
# race. This builds the same source Debian built (`apt-get source` of the installed
# version, Debian's patches applied: the same inline namespace and sonames), instrumented;
# with the directory first on LD_LIBRARY_PATH, every absl::Mutex of the process, ours and
# gRPC's, is one ThreadSanitizer sees. Every library is built: one left uninstrumented (a
# call_once inlined into it, say) hides the order it gives and reads as a race elsewhere.
#
# The result is cached (GRAIL_TSAN_ABSEIL_CACHE, default ~/.cache/grail-kg/abseil-tsan-VERSION):
# a second run prints the directory at once. The system's apt configuration is not touched:
# the source list lives in a temporary directory.
set -euo pipefail
version=$(dpkg-query -W -f='${Version}' libabsl20220623)
cache=${GRAIL_TSAN_ABSEIL_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/grail-kg/abseil-tsan-$version}
if [[ -f $cache/complete ]]; then
  echo "$cache/lib"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/sources" "$work/lists/partial"
cat > "$work/sources/debian-src.sources" <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
apt=(apt-get -qq -o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$work/sources"
  -o "Dir::State::Lists=$work/lists" -o APT::Sandbox::User=root)
"${apt[@]}" update > /dev/null
(cd "$work" && "${apt[@]}" source --download-only "abseil=$version" > /dev/null 2>&1)
# apt checked the files against the signed Sources index; the .dsc's own signature is the
# uploader's, whose key this machine does not hold.
dpkg-source --no-check -x "$work"/abseil_*.dsc "$work/src" > /dev/null
cmake -S "$work/src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_STANDARD=17 -DABSL_PROPAGATE_CXX_STD=ON -DBUILD_SHARED_LIBS=ON \
  -DCMAKE_CXX_FLAGS=-fsanitize=thread \
  -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread > /dev/null
cmake --build "$work/build" -j"${JOBS:-$(nproc)}" > /dev/null
rm -rf "$cache"
mkdir -p "$cache/lib"
find "$work/build/absl" -name 'libabsl_*.so.*' -exec cp -a {} "$cache/lib/" \;
touch "$cache/complete"
echo "$cache/lib"
