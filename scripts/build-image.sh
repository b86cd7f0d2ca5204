#!/usr/bin/env bash
# Builds the controller's container image without a container daemon or a base image from a
# container registry: the root filesystem is made from Debian bookworm's packages by
# mmdebstrap, the controller, the plugin bridge and the CLI (whose `dashboard` the shared
# dashboard's Deployment runs) go to /usr/local/bin, and the tree is
# imported into podman with the Dockerfile's settings (user 65532:65532, ports 8080 and 8090,
# the controller as entry point). Prints the image's name on stdout; progress goes to stderr.
#
#   scripts/build-image.sh                   release build, tagged sluice-controller:<version>
#   scripts/build-image.sh --profile debug   the debug build the tests use
#   scripts/build-image.sh --controller PATH --bridge PATH --cli PATH [--tag NAME:TAG]
#                                            binaries built already (no cargo run)
#   scripts/build-image.sh --install-tools   only install podman, runc, mmdebstrap and uidmap
#
# Without --controller or --cli the script builds them with cargo in the given profile; without
# --bridge it takes the bridge from scripts/build-plugins.sh (cached).
#
# Two caches keep a rebuild quick. The base root filesystem is a tarball under the project's
# cache directory keyed by the suite, the package list and the trimming below; `--fresh-base`
# makes it again (for Debian's latest security updates). The image itself is labelled with a
# digest of the base and of both binaries: when the tag already names an image with the same
# digest, it is reused as it is.
#
# Environment:
#   SLUICE_IMAGE_MIRROR   a Debian mirror's URL for mmdebstrap, instead of Debian's own archive
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/lib/cargo.sh"
CACHE_ROOT="${SLUICE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}"
SUITE=bookworm
# What the binaries need at run time, and nothing to run a shell or a package manager: the C
# library and libgcc_s the Rust binary links (see `ldd`; the bridge is static), the CA bundle
# for API servers outside the cluster (rustls reads the system's roots; in a pod the cluster
# CA comes from the service account), /etc/services and /etc/protocols, and Debian's
# base-files (os-release, which scanners read); gcc-12-base holds libgcc's copyright notice.
PACKAGES=(base-files libc6 libgcc-s1 gcc-12-base ca-certificates netbase)
UID_GID=65532
# Argo's image runs in /home/argo-rollouts: --plugin-dir defaults to plugin-bin there, which is
# where the install manifests mount a writable volume beside the read-only root filesystem.
WORKDIR=/home/argo-rollouts
LABEL_KEY=io.sluice.build-digest

if [[ -t 2 ]]; then
  log() { printf '\033[1m[image]\033[0m %s\n' "$*" >&2; }
else
  log() { printf '[image] %s\n' "$*" >&2; }
fi
die() { log "error: $*"; exit 1; }

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
  exit "${1:-2}"
}

profile=release controller="" bridge="" cli="" tag="" install_only=false fresh_base=false
while (($#)); do
  case $1 in
  --profile) profile=${2:?--profile needs release or debug}; shift 2 ;;
  --controller) controller=${2:?--controller needs a path}; shift 2 ;;
  --bridge) bridge=${2:?--bridge needs a path}; shift 2 ;;
  --cli) cli=${2:?--cli needs a path}; shift 2 ;;
  --tag) tag=${2:?--tag needs NAME:TAG}; shift 2 ;;
  --install-tools) install_only=true; shift ;;
  --fresh-base) fresh_base=true; shift ;;
  -h | --help) usage 0 ;;
  *) log "unknown argument: $1"; usage ;;
  esac
done
[[ $profile == release || $profile == debug ]] || die "--profile is release or debug, not '$profile'"

# The tools, from the machine's Debian archive when missing, as cluster-up.sh installs its own
# packages: podman holds and runs the image, runc is the runtime the image's test runs it with
# (crun, podman's default, refuses hybrid cgroup layouts), mmdebstrap makes the root
# filesystem, uidmap gives podman and mmdebstrap the user namespaces they need when not root.
ensure_packages() {
  local missing=() pkg
  for pkg in podman runc mmdebstrap uidmap; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  ((${#missing[@]} == 0)) && return
  local sudo=()
  ((EUID == 0)) || sudo=(sudo -n)
  log "installing ${missing[*]}"
  "${sudo[@]}" apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >&2
}
ensure_packages
$install_only && exit 0
command -v strip >/dev/null || die "strip (binutils) is needed to strip the controller"

SECONDS=0
mkdir -p "$CACHE_ROOT"
exec 9>"$CACHE_ROOT/image.lock"
if ! flock -n 9; then
  log "waiting for another image build to finish"
  flock 9
fi

# --- the binaries ---
if [[ -z $controller ]]; then
  cargo_flags=()
  [[ $profile == release ]] && cargo_flags=(--release)
  log "building sluice-controller ($profile)"
  (cd "$ROOT" && workspace_cargo build -q "${cargo_flags[@]}" -p sluice-controller --bin sluice-controller)
  controller="${CARGO_TARGET_DIR:-$ROOT/target}/$profile/sluice-controller"
fi
if [[ -z $cli ]]; then
  cargo_flags=()
  [[ $profile == release ]] && cargo_flags=(--release)
  log "building kubectl-sluice ($profile)"
  (cd "$ROOT" && workspace_cargo build -q "${cargo_flags[@]}" -p kubectl-sluice --bin kubectl-sluice)
  cli="${CARGO_TARGET_DIR:-$ROOT/target}/$profile/kubectl-sluice"
fi
if [[ -z $bridge ]]; then
  bridge="$("$ROOT/scripts/build-plugins.sh")/bin/sluice-plugin-bridge"
fi
[[ -x $controller ]] || die "the controller $controller is not an executable file"
[[ -x $bridge ]] || die "the plugin bridge $bridge is not an executable file"
[[ -x $cli ]] || die "the CLI $cli is not an executable file"
if [[ -z $tag ]]; then
  version=$(sed -nE '/^\[workspace\.package\]/,/^\[/ s/^version = "(.*)"/\1/p' "$ROOT/Cargo.toml")
  [[ -n $version ]] || die "no workspace version in Cargo.toml"
  tag="sluice-controller:$version"
fi
# podman names a local image localhost/<name>; the full name is the one that inspects reliably.
[[ $tag == */* ]] || tag="localhost/$tag"

# --- the base root filesystem ---
# Run by mmdebstrap on the extracted tree ($1) before it is packed. Nothing is installed in
# the extract variant, so this does what the packages' scripts would have done and no more.
read -r -d '' TRIM_HOOK <<'HOOK' || true
set -eu
root=$1
wanted=" $WANTED "
archives=$root/var/cache/apt/archives
# Dependencies pulled in for maintainer scripts that never run here (openssl, debconf, ...):
# their files go, and only the requested packages are recorded for image scanners, in the
# status.d form distroless images use.
mkdir -p "$root/var/lib/dpkg/status.d"
for deb in "$archives"/*.deb; do
  pkg=$(dpkg-deb -f "$deb" Package)
  case $wanted in
  *" $pkg "*)
    { dpkg-deb -f "$deb"; echo "Status: install ok installed"; } >"$root/var/lib/dpkg/status.d/$pkg"
    ;;
  *)
    dpkg-deb --fsys-tarfile "$deb" | tar -t | while read -r f; do
      [ -d "$root/$f" ] && [ ! -L "$root/$f" ] || rm -f "$root/$f"
    done
    ;;
  esac
done
# The bundle update-ca-certificates writes: every certificate of ca-certificates, in the
# order of the /etc/ca-certificates.conf its postinst generates.
mkdir -p "$root/etc/ssl/certs"
find "$root/usr/share/ca-certificates" -name '*.crt' | LC_ALL=C sort | xargs cat \
  >"$root/etc/ssl/certs/ca-certificates.crt"
# Programs and what only serves people or other programs: no shell or tool runs in the image.
rm -rf "$root"/usr/bin/* "$root"/usr/sbin/* "$root"/usr/share/man "$root"/usr/share/info \
  "$root"/usr/share/lintian "$root"/usr/share/bash-completion "$root"/usr/share/pixmaps \
  "$root"/usr/lib/*-linux-gnu/gconv "$root"/etc/update-motd.d "$root"/etc/profile.d
# Documentation except the copyright notices.
find "$root/usr/share/doc" -type f ! -name copyright -delete
find "$root/usr/share/doc" -depth -type d -empty -delete
# The users and groups the Dockerfile's useradd makes, and root's and nobody's.
printf '%s\n' 'root:x:0:0:root:/root:/usr/sbin/nologin' \
  'nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin' \
  "sluice:x:$UID_GID:$UID_GID:sluice:$WORKDIR:/usr/sbin/nologin" >"$root/etc/passwd"
printf '%s\n' 'root:x:0:' 'nogroup:x:65534:' "sluice:x:$UID_GID:" >"$root/etc/group"
printf '%s\n' 'passwd: files' 'group: files' 'hosts: files dns' >"$root/etc/nsswitch.conf"
mkdir -p "$root/usr/local/bin" "$root$WORKDIR/plugin-bin"
chown -R "$UID_GID:$UID_GID" "$root$WORKDIR"
HOOK

base_key=$( (echo "$SUITE ${PACKAGES[*]} $UID_GID $WORKDIR"; echo "$TRIM_HOOK") | sha256sum | cut -c1-12)
BASE="$CACHE_ROOT/image-base-$SUITE-$base_key.tar"
if $fresh_base || [[ ! -s $BASE ]]; then
  log "making the $SUITE root filesystem from Debian's packages: ${PACKAGES[*]}"
  rm -f "$BASE.tmp"
  include=$(IFS=,; echo "${PACKAGES[*]}")
  mirrors=()
  [[ -n ${SLUICE_IMAGE_MIRROR:-} ]] && mirrors=("$SLUICE_IMAGE_MIRROR")
  WANTED="${PACKAGES[*]}" UID_GID=$UID_GID WORKDIR=$WORKDIR \
    mmdebstrap --quiet --variant=extract --include="$include" --format=tar \
    --extract-hook="$TRIM_HOOK" "$SUITE" "$BASE.tmp" "${mirrors[@]}" >&2 ||
    die "mmdebstrap failed: Debian's archive unreachable? (SLUICE_IMAGE_MIRROR names another)"
  # What the container runtime provides (device nodes, the host's name and resolver) and apt's
  # state, which mmdebstrap writes after the hook.
  tar --delete -f "$BASE.tmp" --wildcards './dev/?*' ./etc/hostname ./etc/resolv.conf \
    ./etc/apt ./var/lib/apt ./var/cache/apt ./var/log/apt
  # Renamed in one step, so an interrupted build never looks like a finished one.
  mv "$BASE.tmp" "$BASE"
  log "cached the root filesystem in $BASE ($(($(stat -c %s "$BASE") / 1024 / 1024)) MB)"
else
  log "using the cached root filesystem $BASE"
fi

# --- the image ---
digest=$( (sha256sum "$BASE" | cut -d' ' -f1; sha256sum <"$controller"; sha256sum <"$bridge"; sha256sum <"$cli") |
  sha256sum | cut -c1-16)
current=$(podman image inspect --format "{{index .Labels \"$LABEL_KEY\"}}" "$tag" 2>/dev/null || true)
if [[ $current == "$digest" ]]; then
  log "$tag is up to date (digest $digest)"
  echo "$tag"
  exit 0
fi

STAGE=$(mktemp -d "$CACHE_ROOT/image-stage.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
log "adding $controller and $cli (stripped) and $bridge"
mkdir -p "$STAGE/root/usr/local/bin"
strip -o "$STAGE/root/usr/local/bin/sluice-controller" "$controller"
cp "$bridge" "$STAGE/root/usr/local/bin/sluice-plugin-bridge"
strip -o "$STAGE/root/usr/local/bin/kubectl-sluice" "$cli"
chmod 0755 "$STAGE"/root/usr/local/bin/*
cp "$BASE" "$STAGE/rootfs.tar"
tar --append -f "$STAGE/rootfs.tar" --owner=0 --group=0 --numeric-owner -C "$STAGE/root" \
  ./usr/local/bin/sluice-controller ./usr/local/bin/sluice-plugin-bridge ./usr/local/bin/kubectl-sluice

previous=$(podman image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)
log "importing into podman as $tag"
podman import --quiet \
  --change "USER $UID_GID:$UID_GID" \
  --change "WORKDIR $WORKDIR" \
  --change "EXPOSE 8080" --change "EXPOSE 8090" \
  --change 'ENTRYPOINT ["/usr/local/bin/sluice-controller"]' \
  --change "LABEL $LABEL_KEY=$digest" \
  --change "LABEL org.opencontainers.image.title=sluice-controller" \
  --message "sluice-controller on Debian $SUITE (${PACKAGES[*]})" \
  "$STAGE/rootfs.tar" "$tag" >/dev/null
# The image the tag named before is left without a name; removed unless a container uses it.
if [[ -n $previous && $previous != "$(podman image inspect --format '{{.Id}}' "$tag")" ]]; then
  podman image rm "$previous" >/dev/null 2>&1 || true
fi
size=$(podman image inspect --format '{{.Size}}' "$tag")
log "built $tag ($((size / 1000 / 1000)) MB) in ${SECONDS}s"
echo "$tag"
