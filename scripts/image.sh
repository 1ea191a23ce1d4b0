#!/usr/bin/env bash
# Builds the product images from the repository's Dockerfiles with buildah (no Docker engine
# needed) and smoke-tests them by running them: deploy/README.md, "Building and checking the
# image here".
#
#   scripts/image.sh [--prebuilt BUILD_DIR] [--tag NAME:TAG] [--model-tag NAME:TAG]
#                    [--no-smoke]
#
#   --prebuilt DIR  take the binaries from DIR/bin (a scripts/build.sh build of this
#                   checkout, on Debian 12) instead of compiling them in the Dockerfile's
#                   build stage: the `build` stage is replaced by a build context holding
#                   them (buildah's and Docker's --build-context), every other line of the
#                   Dockerfile runs as written. Without it the image is built from source,
#                   exactly as `docker build .` does.
#   --tag           the product image (default grail-kg:local)
#   --model-tag     the model image of deploy/docker/Dockerfile.model (default
#                   grail-model:local), built from the model the smoke test trains
#   --no-smoke      build only
#
# 1. Base images where no registry can be pulled from: `debian:12` is made with mmdebstrap
#    (Debian 12 minbase from the package mirror, $DEBIAN_MIRROR, default deb.debian.org, with
#    bookworm-updates and bookworm-security as the official image has them) and imported
#    with podman; Dockerfile.model's base is made from Debian's busybox-static. An image
#    already in local storage under either name is used as it is.
# 2. `buildah bud --isolation chroot` builds the root Dockerfile (chroot isolation: podman's
#    and buildah's default OCI runtime needs cgroups this kernel's hybrid mode refuses).
# 3. The smoke test (deploy/docker/smoke.sh) runs inside the image as its user (10001) with
#    the pod's environment from deploy/k8s/configmap.yaml (TLS and tokens on; NATS off, there
#    is no NATS server), volumes at /data and /models, and checks what a pod relies on:
#    a model trained with the image's grail-train, grail-server serving grpc.health.v1,
#    AddTriples, ScoreTriplet and RankTails from the image's grail-client, /metrics, the
#    Dockerfile's HEALTHCHECK and the StatefulSet's three probe commands, exit 0 on SIGTERM;
#    then a fresh container on the same /data holds the same graph.
# 4. The model image is built from that model, and the StatefulSet's init-container command
#    runs in it (as uid 10001) and must copy the model out unchanged.
#
# Needs root (re-runs itself with sudo), and installs mmdebstrap, buildah and podman.
# Prints the images' sizes and the build and smoke times at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $(id -u) != 0 ]]; then
  exec sudo --preserve-env=DEBIAN_MIRROR "$0" "$@"
fi

prebuilt=""
tag=grail-kg:local
model_tag=grail-model:local
smoke=1
while (($#)); do
  case $1 in
    --prebuilt) prebuilt=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    --model-tag) model_tag=$2; shift 2 ;;
    --no-smoke) smoke=0; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "image.sh: unknown argument $1 (--help)" >&2; exit 2 ;;
  esac
done

say() { printf '\n== %s\n' "$*"; }
seconds() { date +%s.%N; }
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.0f}')" "$@"; }

scripts/setup.sh --image

tmp=$(mktemp -d /tmp/grail-image.XXXXXX)
containers=()
cleanup() {
  for c in "${containers[@]}"; do buildah rm "$c" > /dev/null 2>&1 || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
report=()

# --- 1. base images ------------------------------------------------------------------
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
if podman image exists debian:12; then
  say "debian:12: in local storage"
else
  say "debian:12: mmdebstrap --variant=minbase bookworm from $mirror"
  t0=$(seconds)
  mmdebstrap --quiet --variant=minbase bookworm "$tmp/debian.tar" \
    "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
    "deb $security bookworm-security main"
  podman import --quiet --change 'CMD ["bash"]' "$tmp/debian.tar" localhost/debian:12 > /dev/null
  rm "$tmp/debian.tar"
  report+=("debian:12 base: mmdebstrap + import $(elapsed "$t0" "$(seconds)") s")
fi

busybox=localhost/grail-busybox:bookworm
if ! podman image exists "$busybox"; then
  say "$busybox: Debian's busybox-static (Dockerfile.model's base)"
  (cd "$tmp" && apt-get download -qq busybox-static > /dev/null 2>&1) ||
    { apt-get update -qq && (cd "$tmp" && apt-get download -qq busybox-static); }
  mkdir -p "$tmp/busybox"
  dpkg-deb -x "$tmp"/busybox-static_*.deb "$tmp/busybox"
  ctr=$(buildah from scratch)
  containers+=("$ctr")
  buildah copy --quiet "$ctr" "$tmp/busybox/bin/busybox" /bin/busybox > /dev/null
  buildah run --isolation chroot "$ctr" -- /bin/busybox --install -s /bin
  buildah config --cmd sh "$ctr"
  buildah commit --quiet "$ctr" "$busybox" > /dev/null
fi

# --- 2. the product image -------------------------------------------------------------
build_context=()
if [[ -n $prebuilt ]]; then
  # The run stage copies /src/build/bin/<tool> from the build stage: the same paths here.
  mkdir -p "$tmp/prebuilt/src/build/bin"
  for tool in $(grep -oE '/src/build/bin/grail-[a-z-]+' Dockerfile | sort -u); do
    cp "$prebuilt/bin/$(basename "$tool")" "$tmp/prebuilt$tool"
  done
  build_context=(--build-context "build=$tmp/prebuilt")
  say "$tag: buildah bud (binaries from $prebuilt/bin)"
else
  say "$tag: buildah bud (compiles in the build stage)"
fi
t0=$(seconds)
buildah bud --isolation chroot --format docker --pull=never --layers -f Dockerfile -t "$tag" \
  "${build_context[@]}" .
build_seconds=$(elapsed "$t0" "$(seconds)")
report+=("$tag: built in $build_seconds s ($([[ -n $prebuilt ]] && echo prebuilt binaries || echo from source)), $(podman image inspect --format '{{.Size}}' "$tag" | numfmt --to=iec) bytes")

if ((smoke == 0)); then
  printf '\n%s\n' "${report[@]}"
  exit 0
fi

# --- 3. the smoke test ----------------------------------------------------------------
t0=$(seconds)
say "smoke test: TLS certificate and tokens, the pod's environment, the probes"
mkdir -p "$tmp/tls" "$tmp/tokens" "$tmp/data" "$tmp/models" "$tmp/run"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=grail-smoke-ca \
  -keyout "$tmp/tls/ca.key" -out "$tmp/tls/ca.crt" 2> /dev/null
openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout "$tmp/tls/tls.key" \
  -out "$tmp/tls/tls.csr" 2> /dev/null
openssl x509 -req -in "$tmp/tls/tls.csr" -CA "$tmp/tls/ca.crt" -CAkey "$tmp/tls/ca.key" \
  -CAcreateserial -days 2 -out "$tmp/tls/tls.crt" \
  -extfile <(printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n') 2> /dev/null
rm "$tmp/tls/ca.key" "$tmp/tls/tls.csr"
printf '%s read smoke-reader\n%s write smoke-writer\n' \
  "$(openssl rand -hex 16)" "$(openssl rand -hex 16)" > "$tmp/tokens/tokens"
chown -R 10001:10001 "$tmp/tls" "$tmp/tokens" "$tmp/data" "$tmp/models" "$tmp/run"
chmod 0600 "$tmp/tls/tls.key" "$tmp/tokens/tokens"

read -r port metrics_port < <(python3 - << 'EOF'
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
EOF
)

# The pod's environment (configmap.yaml) less NATS, the probe commands (statefulset.yaml)
# and the image's HEALTHCHECK, one argument per line, with this run's port put in.
podman image inspect --format '{{json .Config.Healthcheck.Test}}' "$tag" > "$tmp/healthcheck.json"
mapfile -t env_args < <(python3 - "$tmp" "$port" << 'EOF'
import json, pathlib, sys, yaml
tmp, port = pathlib.Path(sys.argv[1]), sys.argv[2]
config = yaml.safe_load(pathlib.Path("deploy/k8s/configmap.yaml").read_text())["data"]
for key, value in config.items():
    if key.startswith("GRAIL_NATS_"):
        continue
    if key == "GRAIL_HOST":
        value = "127.0.0.1"  # the container shares this machine's network
    print(f"--env={key}={value}")
test = json.loads((tmp / "healthcheck.json").read_text())
assert test[0] == "CMD", test
(tmp / "run" / "healthcheck.argv").write_text("".join(a + "\n" for a in test[1:]))
docs = yaml.safe_load_all(pathlib.Path("deploy/k8s/statefulset.yaml").read_text())
pod = next(d for d in docs if d and d["kind"] == "StatefulSet")["spec"]["template"]["spec"]
server = next(c for c in pod["containers"] if c["name"] == "grail-server")
for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
    argv = [a.replace("localhost:50051", f"localhost:{port}") for a in server[probe]["exec"]["command"]]
    (tmp / "run" / f"probe-{probe}.argv").write_text("".join(a + "\n" for a in argv))
init = next(c for c in pod["initContainers"] if c["name"] == "model")
(tmp / "init.json").write_text(json.dumps(init["command"]))
EOF
)
chown 10001:10001 "$tmp"/run/*

smoke_run() {  # phase
  local ctr
  ctr=$(buildah from --pull=never --quiet "$tag")
  containers+=("$ctr")
  # No --user: the image's own USER runs it, and smoke.sh checks it is 10001:10001.
  buildah run --isolation chroot "${env_args[@]}" \
    -v "$tmp/data:/data" -v "$tmp/models:/models" -v "$tmp/run:/run/smoke" \
    -v "$tmp/tls:/etc/grail/tls:ro" -v "$tmp/tokens:/etc/grail/tokens:ro" \
    -v "$PWD/deploy/docker:/smoke:ro" "$ctr" -- bash /smoke/smoke.sh "$1" "$port" "$metrics_port"
  buildah rm "$ctr" > /dev/null
}
say "smoke test, first container: train, serve, call, stop"
smoke_run first
say "smoke test, second container on the same /data"
smoke_run second
report+=("$tag: smoke test passed in $(elapsed "$t0" "$(seconds)") s")

# --- 4. the model image ----------------------------------------------------------------
say "$model_tag: deploy/docker/Dockerfile.model from the model trained in the image"
mkdir -p "$tmp/model-context"
cp "$tmp/models/model.pt" "$tmp/model-context/model.pt"
buildah bud --isolation chroot --format docker --pull=never --quiet --build-arg "BASE=$busybox" \
  -f deploy/docker/Dockerfile.model -t "$model_tag" "$tmp/model-context" > /dev/null
mkdir -p "$tmp/pod-models"
chown 10001:10001 "$tmp/pod-models"
mapfile -t init_command < <(python3 -c 'import json,sys; print(*json.load(open(sys.argv[1])), sep="\n")' "$tmp/init.json")
ctr=$(buildah from --pull=never --quiet "$model_tag")
containers+=("$ctr")
echo "init container: ${init_command[*]}"
buildah run --isolation chroot --user 10001:10001 -v "$tmp/pod-models:/models" "$ctr" -- \
  "${init_command[@]}"
cmp "$tmp/models/model.pt" "$tmp/pod-models/model.pt" ||
  { echo "the init container's copy differs from the model" >&2; exit 1; }
echo "the init container copied model.pt unchanged ($(stat -c %s "$tmp/pod-models/model.pt") bytes)"
report+=("$model_tag: $(podman image inspect --format '{{.Size}}' "$model_tag" | numfmt --to=iec) bytes; init-container copy checked")

say "summary"
printf '%s\n' "${report[@]}"
