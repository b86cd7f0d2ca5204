#!/usr/bin/env bash
# Builds the local control plane's binaries from Go modules and caches them outside the checkout,
# keyed by version: kube-apiserver and kube-controller-manager of Kubernetes $KUBE_VERSION, and
# etcd $ETCD_VERSION. Idempotent: a cached build is reused in well under a second. Prints the bin
# directory on stdout; progress goes to stderr.
#
# Why these versions:
# - Kubernetes 1.35.4: the newest patch of the newest minor that users run in production
#   (1.30-1.35). It serves everything the project needs to exercise: CEL validation
#   (`x-kubernetes-validations`) of CRDs, the Gateway API v1.6 CRDs, server-side apply field
#   managers and consistent lists. Its go.mod asks for Go 1.25, so the machine's Go builds it.
# - etcd 3.6.6: the version kubeadm installs with Kubernetes 1.35 (cmd/kubeadm constants).
#
# Why from Go modules: no container engine and no prebuilt download is reachable here, but the Go
# module proxy is. k8s.io/kubernetes used as a module refers to its staging modules (k8s.io/api,
# k8s.io/apiserver, ...) at v0.0.0 and points them at its own ./staging tree with `replace`
# directives, which do not apply to a dependency; a small wrapper module pins each of them to the
# matching v0.<minor>.<patch> instead.
set -euo pipefail

KUBE_VERSION="1.35.4"
ETCD_VERSION="3.6.6"
CACHE_ROOT="${SLUICE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}"
OUT="$CACHE_ROOT/kube-v$KUBE_VERSION-etcd-v$ETCD_VERSION"
BIN="$OUT/bin"

if [[ -t 2 ]]; then
  log() { printf '\033[1m[control-plane]\033[0m %s\n' "$*" >&2; }
else
  log() { printf '[control-plane] %s\n' "$*" >&2; }
fi
die() { log "error: $*"; exit 1; }

if [[ -x "$BIN/kube-apiserver" && -x "$BIN/kube-controller-manager" && -x "$BIN/etcd" ]]; then
  log "using cached build in $BIN"
  echo "$BIN"
  exit 0
fi

command -v go >/dev/null || die "Go is needed to build the control plane (go 1.25 or newer on PATH)"
# The machine's own Go, never a toolchain download.
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
go_minor=$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')
[[ $go_minor =~ ^[0-9]+$ && $go_minor -ge 25 ]] ||
  die "Kubernetes $KUBE_VERSION needs Go 1.25 or newer; $(command -v go) is $(go env GOVERSION)"

WORK="$CACHE_ROOT/build-kube-v$KUBE_VERSION"
mkdir -p "$WORK"
cd "$WORK"

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

log "fetching k8s.io/kubernetes v$KUBE_VERSION and etcd v$ETCD_VERSION from the Go module proxy"
kube_mod=$(go mod download -json "k8s.io/kubernetes@v$KUBE_VERSION" | sed -nE 's/^\s*"GoMod": "(.*)",?$/\1/p')
[[ -f $kube_mod ]] || die "could not download k8s.io/kubernetes v$KUBE_VERSION"
staging_version="v0.${KUBE_VERSION#1.}"
{
  echo "module sluice.local/control-plane"
  echo
  echo "go 1.25.0"
  echo
  echo "require ("
  echo "	k8s.io/kubernetes v$KUBE_VERSION"
  echo "	go.etcd.io/etcd/server/v3 v$ETCD_VERSION"
  echo ")"
  echo
  # Every staging module the kubernetes module requires at v0.0.0, at the matching release.
  sed -nE 's/^\s+(k8s\.io\/[a-z0-9-]+) v0\.0\.0\s*$/\1/p' "$kube_mod" | sort -u |
    while read -r m; do echo "replace $m => $m $staging_version"; done
} >go.mod.new
mv go.mod.new go.mod
cat >tools.go <<'GO'
//go:build tools

// Package tools only anchors the wrapper module; the binaries are built by package path.
package tools
GO

ldflags="-s -w"
# The version the API server reports (/version, kubectl's skew check): without it, v0.0.0.
for kv in "gitVersion=v$KUBE_VERSION" "gitMajor=1" "gitMinor=$(cut -d. -f2 <<<"$KUBE_VERSION")" \
  "gitTreeState=clean" "buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"; do
  ldflags+=" -X k8s.io/client-go/pkg/version.$kv -X k8s.io/component-base/version.$kv"
done

rm -rf "$BIN.tmp" && mkdir -p "$BIN.tmp"
log "building etcd v$ETCD_VERSION (about a minute on 2 cores, once)"
with_heartbeat "building etcd" go build -trimpath -ldflags "-s -w" -o "$BIN.tmp/etcd" \
  go.etcd.io/etcd/server/v3
log "building kube-apiserver v$KUBE_VERSION (two to six minutes on 2 cores, once)"
with_heartbeat "building kube-apiserver" go build -trimpath -ldflags "$ldflags" \
  -o "$BIN.tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
log "building kube-controller-manager v$KUBE_VERSION (one to three minutes more, once)"
with_heartbeat "building kube-controller-manager" go build -trimpath -ldflags "$ldflags" \
  -o "$BIN.tmp/kube-controller-manager" k8s.io/kubernetes/cmd/kube-controller-manager
# Moved into place in one step, so an interrupted build never looks like a finished one.
rm -rf "$BIN" && mv "$BIN.tmp" "$BIN"
log "cached in $BIN"
echo "$BIN"
