#!/usr/bin/env bash
# Stops the local control plane started by cluster-up.sh (exactly the processes it recorded in
# .dev/pids) and removes its state. With SLUICE_DEV_DIR, the control plane of that state
# directory instead (see cluster-up.sh).
set -euo pipefail
LOG_TAG=cluster-down
source "$(dirname "${BASH_SOURCE[0]}")/lib/cluster-common.sh"

take_lock
if [[ ! -d $PIDS ]]; then
  log "no control plane recorded in $DEV"
else
  stop_components
fi
remove_state
log "stopped; state removed"
