# Multi-stage image. The build stage runs the very scripts the README and CI use, so the
# package list and build steps live in one place (scripts/). The run stage installs only
# the shared libraries the binaries load (scripts/setup.sh --runtime) and runs as non-root.
#
#   docker build -t grail-kg .
#   docker run --rm grail-kg wordnet --out /tmp/wn
FROM debian:12 AS build
WORKDIR /src
COPY scripts/setup.sh scripts/setup.sh
RUN scripts/setup.sh
COPY . .
RUN BUILD_DIR=/src/build scripts/build.sh -DGRAIL_BUILD_TESTS=OFF -DGRAIL_BUILD_BENCHMARKS=OFF

FROM debian:12 AS run
COPY scripts/setup.sh /tmp/setup.sh
RUN /tmp/setup.sh --runtime && rm -rf /var/lib/apt/lists/* /tmp/setup.sh \
 && useradd --system --uid 10001 --create-home --home-dir /var/lib/grail grail
COPY --from=build /src/build/bin/ /usr/local/bin/
USER grail
WORKDIR /var/lib/grail
ENTRYPOINT ["grail-tools"]
