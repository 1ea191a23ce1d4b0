# grail-kg image: grail-server by default, with grail-client, grail-train, grail-kge-train,
# grail-fuse, grail-eval, grail-tools and grail-tune beside it. Multi-stage: the build stage
# runs the very scripts the README and CI use (scripts/setup.sh, scripts/build.sh), so the package
# list and the build steps live in one place and are tested there; the run stage installs
# only the shared libraries the binaries load (scripts/setup.sh --runtime) and runs as a
# non-root user (uid 10001, which deploy/k8s/statefulset.yaml's securityContext names too).
#
#   docker build -t grail-kg .
#   docker run -d --name grail -p 50051:50051 -p 9090:9090 \
#     -v "$PWD/models:/models:ro" -v grail-data:/data grail-kg          # serves /models/model.pt
#   docker stop -t 30 grail                        # SIGTERM: drains for GRAIL_DRAIN_SECONDS
#   docker run --rm --entrypoint grail-client grail-kg --target HOST:50051 stats
#
# Flags come from the environment (every grail-server flag is GRAIL_<FLAG>, e.g.
# GRAIL_MAX_BATCH_SIZE=512, GRAIL_SYNC_WRITES=true); arguments after the image name are
# passed to grail-server and win over the environment. GPU serving: deploy/docker/Dockerfile.cuda
# (Debian's LibTorch is CPU-only). deploy/README.md has the rest.

FROM debian:12 AS build
WORKDIR /src
# setup.sh alone first, so the package layer is cached across source changes.
COPY scripts/setup.sh scripts/setup.sh
RUN scripts/setup.sh && rm -rf /var/lib/apt/lists/*
COPY . .
# A build directory copied in from a checkout would carry that machine's CMake cache.
RUN rm -rf build && scripts/build.sh -DGRAIL_BUILD_TESTS=OFF -DGRAIL_BUILD_BENCHMARKS=OFF

FROM debian:12 AS run
COPY scripts/setup.sh /tmp/setup.sh
RUN /tmp/setup.sh --runtime && rm -rf /var/lib/apt/lists/* /tmp/setup.sh \
 && groupadd --system --gid 10001 grail \
 && useradd --system --uid 10001 --gid 10001 --create-home --home-dir /var/lib/grail grail \
 && mkdir -p /data /models && chown grail:grail /data /models
COPY --from=build /src/build/bin/grail-server /src/build/bin/grail-client \
     /src/build/bin/grail-train /src/build/bin/grail-kge-train /src/build/bin/grail-fuse \
     /src/build/bin/grail-eval /src/build/bin/grail-tools /src/build/bin/grail-tune \
     /usr/local/bin/

# GRAIL_HOST=0.0.0.0: reachable through the container's published ports. On a network that
# is not trusted, also set GRAIL_TLS_CERT/GRAIL_TLS_KEY and GRAIL_AUTH_TOKENS (files mounted
# into the container; deploy/README.md, "TLS and tokens"); the server warns without them.
ENV GRAIL_MODEL=/models/model.pt \
    GRAIL_DATA_DIR=/data \
    GRAIL_HOST=0.0.0.0 \
    GRAIL_PORT=50051 \
    GRAIL_METRICS_PORT=9090 \
    GRAIL_DRAIN_SECONDS=20
# /data: the RocksDB triple store (the graph's source of truth; keep it on a volume).
# /models: the TorchScript model written by grail-train, read-only is enough.
VOLUME ["/data", "/models"]
EXPOSE 50051 9090

# Ready = GET /readyz answers 200 (the model is loaded and the graph index rebuilt; 503 while
# loading and while draining). The run stage has no curl: bash's /dev/tcp sends a plain
# HTTP/1.0 GET and the status line is matched, so the check needs nothing beyond bash and
# coreutils, which every Debian image has. The start period covers the model load and the
# index rebuild of a large graph; probes that fail inside it are not counted. With
# GRAIL_METRICS_PORT=-1 (endpoint off) the check fails: drop it with --no-healthcheck.
HEALTHCHECK --interval=15s --timeout=5s --start-period=10m --retries=3 \
  CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/${GRAIL_METRICS_PORT} && printf 'GET /readyz HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n' >&3 && timeout 4 head -n 1 <&3 | grep -q '^HTTP/1\\.[01] 200'"]

USER 10001:10001
WORKDIR /var/lib/grail
# grail-server waits for SIGTERM itself (sigwait), so it can run as PID 1 without an init.
STOPSIGNAL SIGTERM
ENTRYPOINT ["grail-server"]
