#!/usr/bin/env bash
# Installs moto's server (the AWS API emulator from PyPI: CloudWatch, ELBv2, EC2, ...) into a
# virtual environment cached outside the checkout, keyed by version, for the tests of the
# cloudWatch metric provider and the ALB target-group checks. Idempotent: a cached install is
# reused at once. Prints the path of `moto_server` on stdout; progress goes to stderr.
set -euo pipefail

MOTO_VERSION="5.2.1"
CACHE_ROOT="${SLUICE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}"
OUT="$CACHE_ROOT/moto-$MOTO_VERSION"
BIN="$OUT/bin/moto_server"
DONE="$OUT/.installed"

log() { printf '[moto] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

if [[ -e $DONE ]]; then
  echo "$BIN"
  exit 0
fi
command -v python3 >/dev/null || die "python3 is needed for moto's server"
mkdir -p "$CACHE_ROOT"
# One install at a time (tests may ask side by side); a waiter finds it installed.
exec 9>"$OUT.lock"
flock 9
if [[ -e $DONE ]]; then
  echo "$BIN"
  exit 0
fi
# A venv's scripts name its own path, so it is made in place; the marker says it is whole.
rm -rf "$OUT"
log "installing moto[server]==$MOTO_VERSION into $OUT (once)"
python3 -m venv "$OUT" >&2
"$OUT/bin/pip" install --quiet --disable-pip-version-check "moto[server]==$MOTO_VERSION" >&2
"$BIN" --help >/dev/null 2>&1 || die "moto_server does not start"
touch "$DONE"
echo "$BIN"
