#!/usr/bin/env bash
# Builds kube-apiserver and kube-controller-manager v1.20.2 from Debian's `kubernetes` source
# package and caches them outside the checkout, keyed by version. Idempotent: a cached build is
# reused in well under a second. Installs the apt packages it needs (as root, non-interactive).
#
# Why from source: no container engine or prebuilt Kubernetes download is reachable here, but
# Debian's orig tarball carries the full tree with vendor/.
set -euo pipefail

KUBE_VERSION="1.20.2"
DEB_VERSION="1.20.5+really1.20.2"
CACHE_ROOT="${SLUICE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}"
OUT="$CACHE_ROOT/kube-v$KUBE_VERSION"
BIN="$OUT/bin"

if [[ -t 2 ]]; then
  log() { printf '\033[1m[control-plane]\033[0m %s\n' "$*" >&2; }
else
  log() { printf '[control-plane] %s\n' "$*" >&2; }
fi

if [[ -x "$BIN/kube-apiserver" && -x "$BIN/kube-controller-manager" ]]; then
  log "using cached build in $BIN"
  echo "$BIN"
  exit 0
fi

need_pkgs=()
for p in golang-go rsync jq golang-github-modern-go-reflect2-dev etcd-server openssl dpkg-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need_pkgs+=("$p")
done

# deb-src entry so `apt-get source` can fetch the kubernetes orig tarball.
SRC_LIST=/etc/apt/sources.list.d/sluice-deb-src.sources
if [[ ! -f $SRC_LIST ]]; then
  log "adding a deb-src entry for bookworm main"
  base=$(ls /etc/apt/sources.list.d/*.sources | grep -v sluice | head -n1)
  # Copy the first bookworm stanza, switching it to deb-src.
  awk 'BEGIN{RS="";ORS="\n\n"} /Suites:[^\n]*bookworm/ && !done {sub(/Types: deb/,"Types: deb-src"); print; done=1}' "$base" > "$SRC_LIST"
  apt_update=1
fi
if [[ ${#need_pkgs[@]} -gt 0 || ${apt_update:-0} -eq 1 ]]; then
  log "apt-get update"
  apt-get update -qq >&2
fi
if [[ ${#need_pkgs[@]} -gt 0 ]]; then
  log "installing ${need_pkgs[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}" >&2
fi

WORK="$CACHE_ROOT/build"
mkdir -p "$WORK"
cd "$WORK"
TARBALL="kubernetes_${DEB_VERSION}.orig.tar.gz"
if [[ ! -f $TARBALL ]]; then
  log "downloading the kubernetes source package (about 34 MB)"
  # Pinned to bookworm: other deb-src entries may offer a newer kubernetes without vendor/.
  apt-get source -o APT::Sandbox::User=root --download-only kubernetes/bookworm >&2
fi
SRC="$WORK/kubernetes-$KUBE_VERSION"
if [[ ! -d $SRC ]]; then
  log "unpacking"
  tar xzf "$TARBALL"
fi
cd "$SRC"
# reflect2 v1.0.1 crashes (SIGSEGV in mapiterinit) on Go >= 1.18 as soon as the API server
# decodes a custom resource; Debian ships the fixed v1.0.2.
if ! grep -q "1.0.2" vendor/github.com/modern-go/reflect2/go.mod 2>/dev/null && [[ ! -f vendor/github.com/modern-go/reflect2/.sluice-1.0.2 ]]; then
  log "swapping vendored modern-go/reflect2 for v1.0.2"
  rm -rf vendor/github.com/modern-go/reflect2
  cp -r /usr/share/gocode/src/github.com/modern-go/reflect2 vendor/github.com/modern-go/
  rm -f vendor/github.com/modern-go/reflect2/go.mod
  touch vendor/github.com/modern-go/reflect2/.sluice-1.0.2
fi
export GOPATH="$SRC/.go" CGO_ENABLED=0 GO111MODULE=off HOME="${HOME:-/root}" GOFLAGS=
mkdir -p .go/src/k8s.io
[[ -e .go/src/k8s.io/kubernetes ]] || ln -s ../../.. .go/src/k8s.io/kubernetes
log "building kube-apiserver and kube-controller-manager (about 5 minutes on 2 cores, once)"
( cd .go/src/k8s.io/kubernetes && make WHAT="cmd/kube-apiserver cmd/kube-controller-manager" ) >&2
# Moved into place in one step, so an interrupted copy never looks like a finished build.
rm -rf "$BIN.tmp" && mkdir -p "$BIN.tmp"
cp _output/bin/kube-apiserver _output/bin/kube-controller-manager "$BIN.tmp/"
rm -rf "$BIN" && mv "$BIN.tmp" "$BIN"
log "cached in $BIN"
# The unpacked tree with its build output takes about 2 GB; the tarball stays for a rebuild.
cd "$WORK" && rm -rf "$SRC"
echo "$BIN"
