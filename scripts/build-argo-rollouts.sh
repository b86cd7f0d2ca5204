#!/usr/bin/env bash
# Builds Argo Rollouts' own controller (`cmd/rollouts-controller` of the Go module
# github.com/argoproj/argo-rollouts at $ARGO_VERSION, 1.9.1 by default) and caches the binary
# outside the checkout, keyed by version. The end-to-end tests that hand Rollouts back and forth
# between Argo and Sluice run it. Idempotent: a cached build is reused in well under a second.
# Prints the binary's path on stdout; progress goes to stderr.
#
#   ARGO_VERSION=1.10.0 scripts/build-argo-rollouts.sh   # another release, cached beside the first
#
# Why from the module's own directory: its go.mod pins k8s.io/* with `replace` directives, which
# only apply in the main module, so `go install ...@version` refuses it and a wrapper module would
# build it against other versions of client-go and apimachinery than Argo releases with (and the
# pod-template hash depends on apimachinery's encoding). The module cache is read-only, so the
# build runs in a writable copy of the module directory.
set -euo pipefail

ARGO_VERSION="${ARGO_VERSION:-1.9.1}"
ARGO_VERSION="${ARGO_VERSION#v}"
CACHE_ROOT="${SLUICE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}"
OUT="$CACHE_ROOT/argo-rollouts-v$ARGO_VERSION"
BIN="$OUT/bin/rollouts-controller"

if [[ -t 2 ]]; then
  log() { printf '\033[1m[argo-rollouts]\033[0m %s\n' "$*" >&2; }
else
  log() { printf '[argo-rollouts] %s\n' "$*" >&2; }
fi
die() { log "error: $*"; exit 1; }
# shellcheck source=lib/argo-module.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/argo-module.sh"

[[ $ARGO_VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$ ]] ||
  die "ARGO_VERSION must look like 1.9.1, not '$ARGO_VERSION'"

if [[ -x $BIN ]]; then
  log "using cached build $BIN"
  echo "$BIN"
  exit 0
fi

# Test processes running side by side build it once: the others wait here, then find it cached.
mkdir -p "$CACHE_ROOT"
exec 9>"$CACHE_ROOT/argo-rollouts-v$ARGO_VERSION.lock"
if ! flock -n 9; then
  log "waiting for another build of v$ARGO_VERSION to finish"
  flock 9
  if [[ -x $BIN ]]; then
    log "using cached build $BIN"
    echo "$BIN"
    exit 0
  fi
fi

argo_require_go "Argo Rollouts"

# Prints a line every 30 s while the command runs, so that a long, quiet build shows it is alive.
with_heartbeat() { # what command...
  local what=$1 start=$SECONDS
  shift
  "$@" &
  local pid=$!
  trap 'kill "$pid" 2>/dev/null' INT TERM
  while kill -0 "$pid" 2>/dev/null; do
    for _ in $(seq 30); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 1
    done
    kill -0 "$pid" 2>/dev/null && log "  still $what ($((SECONDS - start)) s)"
  done
  trap - INT TERM
  wait "$pid"
}

WORK="$CACHE_ROOT/build-argo-rollouts-v$ARGO_VERSION"
argo_module_copy "$WORK"
# The release's commit, as its own build stamps it (the controller logs it at start). The proxy
# records it for some releases only; without it Argo reports its version as v<version>+unknown.
commit=$(sed -nE 's/^\s*"Hash": "([0-9a-f]{40})",?$/\1/p' <<<"$ARGO_MODULE_JSON")
cd "$WORK"

log "fetching the modules Argo Rollouts v$ARGO_VERSION depends on"
with_heartbeat "fetching modules" go mod download

pkg=$ARGO_MODULE/utils/version
ldflags="-s -w -X $pkg.version=$ARGO_VERSION -X $pkg.gitTag=v$ARGO_VERSION"
ldflags+=" -X $pkg.gitCommit=$commit -X $pkg.gitTreeState=clean -X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"

mkdir -p "$OUT/bin"
log "building rollouts-controller v$ARGO_VERSION (about 5 minutes on 2 cores, once)"
with_heartbeat "building rollouts-controller" go build -trimpath -ldflags "$ldflags" \
  -o "$BIN.tmp" ./cmd/rollouts-controller
# Moved into place in one step, so an interrupted build never looks like a finished one.
mv "$BIN.tmp" "$BIN"
cd "$CACHE_ROOT"
rm -rf "$WORK"
log "cached in $BIN"
echo "$BIN"
