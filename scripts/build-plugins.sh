#!/usr/bin/env bash
# Builds the plugin bridge (tools/plugin-bridge, see docs/plugins.md) and Argo Rollouts' sample
# RPC plugins (the metric, step and traffic-router plugins under test/cmd/ of the Go module
# github.com/argoproj/argo-rollouts at $ARGO_VERSION, 1.9.1 by default) and caches them outside
# the checkout, keyed by the version and the bridge's source. The controller runs the bridge;
# the end-to-end tests run the sample plugins through it. Idempotent: a cached build is reused in
# well under a second. Prints the directory holding the binaries on stdout; progress on stderr.
#
#   bin/sluice-plugin-bridge       the bridge
#   bin/metrics-plugin-sample      Argo's sample metric plugin (argoproj/sample-prometheus)
#   bin/step-plugin-sample         Argo's sample step plugin
#   bin/step-plugin-e2e            the step plugin of Argo's own e2e tests (step/e2e-test)
#   bin/trafficrouter-plugin-sample Argo's sample traffic-router plugin
#
# Why inside a copy of Argo's module: the bridge links Argo's RPC types and go-plugin, and only
# Argo's own go.mod (with its `replace` directives and complete go.sum) gives the very versions
# Argo releases with; the module cache is read-only, so the build runs in a writable copy.
set -euo pipefail

ARGO_VERSION="${ARGO_VERSION:-1.9.1}"
ARGO_VERSION="${ARGO_VERSION#v}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SRC="$ROOT/tools/plugin-bridge/main.go"
CACHE_ROOT="${SLUICE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}"

log() { printf '[plugins] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
# shellcheck source=lib/argo-module.sh
source "$ROOT/scripts/lib/argo-module.sh"

[[ $ARGO_VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$ ]] ||
  die "ARGO_VERSION must look like 1.9.1, not '$ARGO_VERSION'"
[[ -f $SRC ]] || die "missing $SRC"

key=$( (cat "$SRC"; echo "$ARGO_VERSION") | sha256sum | cut -c1-12)
OUT="$CACHE_ROOT/plugins-v$ARGO_VERSION-$key"
BINS=(sluice-plugin-bridge metrics-plugin-sample step-plugin-sample step-plugin-e2e trafficrouter-plugin-sample)

cached() {
  for b in "${BINS[@]}"; do [[ -x $OUT/bin/$b ]] || return 1; done
}
if cached; then
  log "using cached build $OUT"
  echo "$OUT"
  exit 0
fi

mkdir -p "$CACHE_ROOT"
exec 9>"$CACHE_ROOT/plugins-v$ARGO_VERSION.lock"
if ! flock -n 9; then
  log "waiting for another build of the plugins to finish"
  flock 9
  if cached; then
    log "using cached build $OUT"
    echo "$OUT"
    exit 0
  fi
fi

argo_require_go "the plugin bridge"

WORK="$CACHE_ROOT/build-plugins-v$ARGO_VERSION"
argo_module_copy "$WORK"
mkdir -p "$WORK/cmd/sluice-plugin-bridge"
cp "$SRC" "$WORK/cmd/sluice-plugin-bridge/main.go"
cd "$WORK"

log "building the plugin bridge and Argo's sample plugins (a few minutes on 2 cores, once)"
mkdir -p "$OUT/bin"
build() { # name package
  go build -trimpath -ldflags "-s -w" -o "$OUT/bin/$1.tmp" "$2"
  mv "$OUT/bin/$1.tmp" "$OUT/bin/$1"
}
build sluice-plugin-bridge ./cmd/sluice-plugin-bridge
build metrics-plugin-sample ./test/cmd/metrics-plugin-sample
build step-plugin-sample ./test/cmd/step-plugin-sample
build step-plugin-e2e ./test/cmd/step-plugin-e2e
build trafficrouter-plugin-sample ./test/cmd/trafficrouter-plugin-sample
cd "$CACHE_ROOT"
rm -rf "$WORK"
log "cached in $OUT"
echo "$OUT"
