# Image of the Sluice controller.
#
#   docker build -t sluice-controller:0.1.0 .
#
# Multi-stage: the workspace is compiled in a Rust image, and only the binary goes into a slim
# Debian runtime that runs as a non-root user (the manifests also make the root filesystem
# read-only). This file needs base images from a container registry; where none is reachable,
# `make image` (scripts/build-image.sh) builds the same image without a Docker daemon, from
# Debian's packages and the binaries the tests build, into podman, and an end-to-end test runs
# it (crates/e2e/tests/e2e/container_image_runs_the_controller.rs). Keep the two in step: user,
# ports, entry point and the binaries in /usr/local/bin. The script's image also works in
# /home/argo-rollouts, as Argo's does: `--plugin-dir` defaults to plugin-bin in the working
# directory, and that is where the manifests mount a writable volume for plugins (here the
# working directory is /, read-only under the manifests).

FROM rust:1.95-slim-bookworm AS builder
WORKDIR /src
# Manifests first, so that dependency downloads are cached while only sources change.
COPY Cargo.toml Cargo.lock ./
COPY crates ./crates
RUN cargo build --profile dist --locked -p sluice-controller --bin sluice-controller \
        -p kubectl-sluice --bin kubectl-sluice \
    && strip target/dist/sluice-controller target/dist/kubectl-sluice

# The plugin bridge that runs Argo's RPC plugins (docs/plugins.md), built in a copy of Argo's Go
# module by the same script the tests use (it builds Argo's sample plugins too; only the bridge
# is kept).
FROM golang:1.25-bookworm AS bridge
WORKDIR /src
COPY tools ./tools
COPY scripts/build-plugins.sh ./scripts/
RUN out=$(SLUICE_CACHE_DIR=/cache scripts/build-plugins.sh) \
    && cp "$out/bin/sluice-plugin-bridge" /sluice-plugin-bridge

FROM debian:bookworm-slim
# TLS to the API server uses the cluster CA from the service account (rustls, no system
# OpenSSL); ca-certificates is only for out-of-cluster API servers named in a kubeconfig.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 65532 sluice \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin sluice
COPY --from=builder /src/target/dist/sluice-controller /usr/local/bin/sluice-controller
COPY --from=bridge /sluice-plugin-bridge /usr/local/bin/sluice-plugin-bridge
# The shared dashboard's Deployment runs `kubectl-sluice dashboard` from this image.
COPY --from=builder /src/target/dist/kubectl-sluice /usr/local/bin/kubectl-sluice
USER 65532:65532
# Argo's working directory: the manifests mount the plugin-bin volume here, where the default
# `--plugin-dir plugin-bin` installs plugins (the root filesystem is read-only).
WORKDIR /home/argo-rollouts
# 8080: /healthz and /readyz; 8090: /metrics.
EXPOSE 8080 8090
ENTRYPOINT ["/usr/local/bin/sluice-controller"]
