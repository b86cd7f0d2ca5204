#!/usr/bin/env bash
# Builds the conformance oracle (tools/argo-oracle, see crates/conformance) against Argo
# Rollouts' own packages at $ARGO_VERSION (1.9.1 by default) and caches the binary outside the
# checkout, keyed by the version and the oracle's source. Idempotent: a cached build is reused in
# well under a second. Prints the binary's path on stdout; progress goes to stderr.
#
#   ARGO_VERSION=1.10.1 scripts/build-argo-oracle.sh   # another release, cached beside the first
#
# Why inside a copy of Argo's module, as for the plugin bridge: only Argo's own go.mod (its
# `replace` directives and complete go.sum) gives the very versions Argo releases with, and the
# metric verdict is unexported, so a one-function file (export_analysis.go.in) is added to
# Argo's `analysis` package in the copy. The copy compiles with the same flags as the
# controller and plugin builds, so the three share Go's build cache: the packages they have in
# common compile once.
set -euo pipefail

ARGO_VERSION="${ARGO_VERSION:-1.9.1}"
ARGO_VERSION="${ARGO_VERSION#v}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SRC_DIR="$ROOT/tools/argo-oracle"
CACHE_ROOT="${SLUICE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}"

log() { printf '[argo-oracle] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
# shellcheck source=lib/argo-module.sh
source "$ROOT/scripts/lib/argo-module.sh"

[[ $ARGO_VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$ ]] ||
  die "ARGO_VERSION must look like 1.9.1, not '$ARGO_VERSION'"
[[ -f $SRC_DIR/main.go && -f $SRC_DIR/export_analysis.go.in ]] || die "missing $SRC_DIR"

key=$( (cat "$SRC_DIR/main.go" "$SRC_DIR/export_analysis.go.in"; echo "$ARGO_VERSION") |
  sha256sum | cut -c1-12)
OUT="$CACHE_ROOT/argo-oracle-v$ARGO_VERSION-$key"
BIN="$OUT/bin/sluice-argo-oracle"

if [[ -x $BIN ]]; then
  log "using cached build $BIN"
  echo "$BIN"
  exit 0
fi

mkdir -p "$CACHE_ROOT"
exec 9>"$CACHE_ROOT/argo-oracle-v$ARGO_VERSION.lock"
if ! flock -n 9; then
  log "waiting for another build of the oracle to finish"
  flock 9
  if [[ -x $BIN ]]; then
    log "using cached build $BIN"
    echo "$BIN"
    exit 0
  fi
fi

argo_require_go "the oracle"

WORK="$CACHE_ROOT/build-argo-oracle-v$ARGO_VERSION"
argo_module_copy "$WORK"
mkdir -p "$WORK/cmd/sluice-argo-oracle"
cp "$SRC_DIR/main.go" "$WORK/cmd/sluice-argo-oracle/main.go"
cp "$SRC_DIR/export_analysis.go.in" "$WORK/analysis/export_for_oracle.go"
cd "$WORK"

log "building the oracle against Argo Rollouts v$ARGO_VERSION (a few minutes on 2 cores, once)"
mkdir -p "$OUT/bin"
pkg=$ARGO_MODULE/utils/version
go build -trimpath -ldflags "-s -w -X $pkg.version=$ARGO_VERSION -X $pkg.gitTag=v$ARGO_VERSION" \
  -o "$BIN.tmp" ./cmd/sluice-argo-oracle
# Moved into place in one step, so an interrupted build never looks like a finished one.
mv "$BIN.tmp" "$BIN"
cd "$CACHE_ROOT"
rm -rf "$WORK"
log "cached in $OUT"
echo "$BIN"
