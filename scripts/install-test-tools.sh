#!/usr/bin/env bash
# Installs the Debian packages only the tests use, not the demo: Prometheus and graphite-web
# (real servers the analysis tests query), tmux (the terminal the --watch views are tested in)
# and Chromium (the browser the dashboard is tested in). `make test` runs it first; it returns at
# once when they are installed. Needs root or password-less sudo.
set -euo pipefail
LOG_TAG=test-tools
if [[ -t 2 ]]; then
  log() { printf '\033[1m[%s]\033[0m %s\n' "$LOG_TAG" "$*" >&2; }
else
  log() { printf '[%s] %s\n' "$LOG_TAG" "$*" >&2; }
fi

missing=()
for pkg in prometheus graphite-web tmux chromium; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
((${#missing[@]} == 0)) && exit 0
sudo=()
((EUID == 0)) || sudo=(sudo -n)
log "installing ${missing[*]} (used by the tests only)"
"${sudo[@]}" apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
  "${missing[@]}" >&2
