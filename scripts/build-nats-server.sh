#!/usr/bin/env bash
# Builds the NATS server (`nats-server`, the Go module github.com/nats-io/nats-server/v2) and
# caches it outside the checkout, keyed by version. The notification tests publish to it through
# the `nats` service. Idempotent: a cached build is reused in well under a second. Prints the
# binary's path on stdout; progress goes to stderr.
#
# Built with `go install module@version`: the module has no `replace` directives, so its own
# go.mod decides every dependency's version, as in its releases.
set -euo pipefail

NATS_VERSION="2.15.3"
CACHE_ROOT="${SLUICE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}"
OUT="$CACHE_ROOT/nats-server-v$NATS_VERSION"
BIN="$OUT/bin/nats-server"

if [[ -t 2 ]]; then
  log() { printf '\033[1m[nats-server]\033[0m %s\n' "$*" >&2; }
else
  log() { printf '[nats-server] %s\n' "$*" >&2; }
fi
die() { log "error: $*"; exit 1; }

if [[ -x $BIN ]]; then
  log "using cached build $BIN"
  echo "$BIN"
  exit 0
fi

# Test processes running side by side build it once: the others wait here, then find it cached.
mkdir -p "$CACHE_ROOT"
exec 9>"$CACHE_ROOT/nats-server-v$NATS_VERSION.lock"
if ! flock -n 9; then
  log "waiting for another build of v$NATS_VERSION to finish"
  flock 9
  if [[ -x $BIN ]]; then
    log "using cached build $BIN"
    echo "$BIN"
    exit 0
  fi
fi

# The machine's own Go (never a toolchain download), a static binary.
command -v go >/dev/null || die "Go is needed to build nats-server (go 1.25 or newer on PATH)"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
minor=$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')
[[ $minor =~ ^[0-9]+$ && $minor -ge 25 ]] ||
  die "building nats-server needs Go 1.25 or newer; $(command -v go) is $(go env GOVERSION)"

WORK="$CACHE_ROOT/build-nats-server-v$NATS_VERSION"
rm -rf "$WORK"
mkdir -p "$WORK" "$OUT/bin"
log "building nats-server v$NATS_VERSION from its Go module (about a minute, once)"
start=$SECONDS
GOBIN="$WORK" go install -trimpath -ldflags "-s -w" \
  "github.com/nats-io/nats-server/v2@v$NATS_VERSION" &
pid=$!
trap 'kill "$pid" 2>/dev/null' INT TERM
while kill -0 "$pid" 2>/dev/null; do
  for _ in $(seq 30); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 1
  done
  kill -0 "$pid" 2>/dev/null && log "  still building nats-server ($((SECONDS - start)) s)"
done
trap - INT TERM
wait "$pid" || die "go install github.com/nats-io/nats-server/v2@v$NATS_VERSION failed"
# Moved into place in one step, so an interrupted build never looks like a finished one.
mv "$WORK/nats-server" "$BIN"
rm -rf "$WORK"
log "cached in $BIN"
echo "$BIN"
