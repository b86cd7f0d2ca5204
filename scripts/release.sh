#!/usr/bin/env bash
# Writes a release's artifacts into one directory, with their checksums:
#
#   sluice-controller-linux-<arch>      the controller (dist build, stripped)
#   sluice-plugin-bridge-linux-<arch>   the bridge that runs Argo's Go plugins beside it
#   kubectl-sluice-linux-<arch>         the CLI, a kubectl plugin (dist build, stripped)
#   sluice-controller-<version>.tar     the container image (scripts/build-image.sh), as
#                                       `podman save` writes it; `docker load`, `podman load`
#                                       and `ctr images import` take it
#   sluice-<version>.tgz                the Helm chart (`helm package`, after `helm lint`)
#   install.yaml, namespace-install.yaml
#   SHA256SUMS                          `sha256sum -c SHA256SUMS` checks all of the above
#
#   scripts/release.sh                       into target/release-artifacts/<version>
#   scripts/release.sh --out DIR             into DIR (emptied first)
#   scripts/release.sh --profile release     release binaries (the `dist` profile of
#                                            Cargo.toml optimises the whole program and
#                                            takes about 25 minutes on two cores)
#   scripts/release.sh --profile debug       debug binaries
#   scripts/release.sh --controller PATH --cli PATH [--image-tag NAME:TAG]
#                                            binaries built already (no cargo run), the image
#                                            built in podman under another name (the tests)
#
# The version is the workspace's (Cargo.toml); the chart's version and appVersion and the
# image the manifests name must agree with it, or nothing is written. Progress goes to stderr;
# the directory is printed on stdout.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/scripts/lib/cargo.sh"
log() { echo "[release] $*" >&2; }
die() { log "error: $*"; exit 1; }
usage() { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//' >&2; exit "${1:-2}"; }

profile=dist out="" controller="" cli="" image_tag=""
while (($#)); do
  case $1 in
  --controller) controller=${2:?--controller needs a path}; shift 2 ;;
  --cli) cli=${2:?--cli needs a path}; shift 2 ;;
  --image-tag) image_tag=${2:?--image-tag needs NAME:TAG}; shift 2 ;;
  --profile) profile=${2:?--profile needs dist, release or debug}; shift 2 ;;
  --out) out=${2:?--out needs a directory}; shift 2 ;;
  -h | --help) usage 0 ;;
  *) log "unknown argument: $1"; usage ;;
  esac
done
[[ $profile == dist || $profile == release || $profile == debug ]] ||
  die "--profile is dist, release or debug, not '$profile'"

version=$(sed -nE '/^\[workspace\.package\]/,/^\[/ s/^version = "(.*)"/\1/p' "$ROOT/Cargo.toml")
[[ -n $version ]] || die "no workspace version in Cargo.toml"
chart="$ROOT/charts/sluice"
chart_version=$(sed -nE 's/^version: *"?([^"]*)"?$/\1/p' "$chart/Chart.yaml")
app_version=$(sed -nE 's/^appVersion: *"?([^"]*)"?$/\1/p' "$chart/Chart.yaml")
[[ $chart_version == "$version" && $app_version == "$version" ]] ||
  die "charts/sluice/Chart.yaml has version $chart_version and appVersion $app_version, the workspace $version"
for manifest in install.yaml namespace-install.yaml; do
  grep -q "image: sluice-controller:$version\$" "$ROOT/manifests/$manifest" ||
    die "manifests/$manifest does not run sluice-controller:$version (make manifests renders it)"
done

arch=$(uname -m)
case $arch in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; esac
out=${out:-"${CARGO_TARGET_DIR:-$ROOT/target}/release-artifacts/$version"}
rm -rf "$out"
mkdir -p "$out"
out=$(cd "$out" && pwd)
SECONDS=0

if [[ -z $controller || -z $cli ]]; then
  cargo_flags=()
  [[ $profile == debug ]] || cargo_flags=(--profile "$profile")
  log "building sluice-controller and kubectl-sluice ($profile)"
  (cd "$ROOT" && workspace_cargo build -q "${cargo_flags[@]}" -p sluice-controller --bin sluice-controller \
    -p kubectl-sluice --bin kubectl-sluice)
  bin="${CARGO_TARGET_DIR:-$ROOT/target}/$profile"
  controller=${controller:-$bin/sluice-controller} cli=${cli:-$bin/kubectl-sluice}
fi
[[ -x $controller && -x $cli ]] || die "$controller and $cli must be executable files"
log "building the plugin bridge (cached)"
bridge="$("$ROOT/scripts/build-plugins.sh")/bin/sluice-plugin-bridge"
[[ -x $bridge ]] || die "scripts/build-plugins.sh left no bridge at $bridge"

strip -o "$out/sluice-controller-linux-$arch" "$controller"
strip -o "$out/kubectl-sluice-linux-$arch" "$cli"
cp "$bridge" "$out/sluice-plugin-bridge-linux-$arch"
chmod 0755 "$out"/*-linux-"$arch"

log "building the image"
image=$("$ROOT/scripts/build-image.sh" --controller "$controller" --bridge "$bridge" --cli "$cli" \
  --tag "${image_tag:-sluice-controller:$version}")
# The manifests name the image `sluice-controller:<version>`, which a container runtime reads
# as docker.io/library/sluice-controller: the archive carries that name, so that a cluster
# loading it (kind load image-archive, ctr images import) runs it without a registry.
published="docker.io/library/sluice-controller:$version"
podman tag "$image" "$published" >&2
podman save --quiet --format docker-archive -o "$out/sluice-controller-$version.tar" "$published" >&2
# The name was only for the archive: podman keeps the image under the one it was built as.
podman untag "$published" "$published" >&2

log "packaging the chart (helm from scripts/build-helm.sh, cached)"
helm=$("$ROOT/scripts/build-helm.sh")
"$helm" lint --quiet "$chart" >&2 || die "helm lint found errors in charts/sluice"
"$helm" package "$chart" --destination "$out" >&2
[[ -s $out/sluice-$version.tgz ]] || die "helm package wrote no sluice-$version.tgz"
cp "$ROOT/manifests/install.yaml" "$ROOT/manifests/namespace-install.yaml" "$out/"

(cd "$out" && files=(*) && sha256sum -- "${files[@]}" >SHA256SUMS)
log "wrote $(ls "$out" | wc -l) files to $out in ${SECONDS}s:"
(cd "$out" && ls -l --block-size=K -- * | awk '{print "  " $5 "\t" $9}' >&2)
echo "$out"
