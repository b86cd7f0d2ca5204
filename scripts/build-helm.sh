#!/usr/bin/env bash
# Builds the `helm` binary (Helm 3) from its Go module and caches it outside the checkout, keyed
# by version, as build-control-plane.sh does for the control plane. Debian has no helm package and
# no prebuilt download is reachable, but the Go module proxy is. Idempotent: a cached build is
# reused at once. Prints the binary's path on stdout; progress goes to stderr.
set -euo pipefail

HELM_VERSION="3.22.0"
CACHE_ROOT="${SLUICE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}"
OUT="$CACHE_ROOT/helm-v$HELM_VERSION"
BIN="$OUT/bin/helm"

log() { printf '[helm] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

if [[ -x $BIN ]]; then
  echo "$BIN"
  exit 0
fi

command -v go >/dev/null || die "Go is needed to build helm (go 1.25 or newer on PATH)"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod

WORK="$CACHE_ROOT/build-helm-v$HELM_VERSION"
mkdir -p "$WORK" "$OUT/bin"
# One build at a time (tests ask for helm side by side); a waiter finds the binary built.
exec 9>"$WORK.lock"
flock 9
if [[ -x $BIN ]]; then
  echo "$BIN"
  exit 0
fi
cd "$WORK"
cat >go.mod <<GOMOD
module sluice.local/helm

go 1.25.0

require helm.sh/helm/v3 v$HELM_VERSION
GOMOD
cat >tools.go <<'GO'
//go:build tools

// Package tools only anchors the wrapper module; the binary is built by package path.
package tools
GO

log "building helm v$HELM_VERSION from its Go module (a few minutes on 2 cores, once)"
go mod download helm.sh/helm/v3
go get "helm.sh/helm/v3/cmd/helm@v$HELM_VERSION" >&2
start=$SECONDS
go build -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION" \
  -o "$BIN.tmp" helm.sh/helm/v3/cmd/helm &
pid=$!
trap 'kill "$pid" 2>/dev/null' INT TERM
while kill -0 "$pid" 2>/dev/null; do
  sleep 30
  kill -0 "$pid" 2>/dev/null && log "  still building helm ($((SECONDS - start)) s)"
done
wait "$pid"
# Moved into place in one step, so an interrupted build never looks like a finished one.
mv "$BIN.tmp" "$BIN"
log "cached in $BIN"
echo "$BIN"
