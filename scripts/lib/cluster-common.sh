# Shared by cluster-up.sh and cluster-down.sh: where the local control plane keeps its state and
# how its processes are recorded and stopped. Sourced, not run.
#
# The state lives in .dev/, or in $SLUICE_DEV_DIR: a test that kills or stops components runs a
# control plane of its own there, beside the shared one (each picks free ports at start).

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DEV="${SLUICE_DEV_DIR:-$ROOT/.dev}"
# Absolute: the processes and the kubeconfigs name files in it from wherever they run.
[[ $DEV == /* ]] || DEV="$PWD/$DEV"
PIDS="$DEV/pids"
LOGS="$DEV/logs"
# Stopped in this order, started in the reverse one.
COMPONENTS=(fake-kubelet kube-controller-manager kube-apiserver etcd)

if [[ -t 2 ]]; then
  log() { printf '\033[1m[%s]\033[0m %s\n' "$LOG_TAG" "$*" >&2; }
else
  log() { printf '[%s] %s\n' "$LOG_TAG" "$*" >&2; }
fi
die() { log "error: $*"; exit 1; }

# cluster-down empties the state directory: one given from outside must be empty or one of ours.
if [[ -n ${SLUICE_DEV_DIR:-} && -d $DEV && ! -e $DEV/cluster.lock && -n $(ls -A "$DEV") ]]; then
  die "SLUICE_DEV_DIR=$DEV holds files but no control plane; give an empty or new directory"
fi

# Serialises cluster-up and cluster-down of one state directory, also across test processes.
# The lock file stays in it when the state is removed.
take_lock() {
  mkdir -p "$DEV"
  exec 9>"$DEV/cluster.lock"
  if ! flock -n 9; then
    log "waiting for another cluster-up/cluster-down to finish"
    flock 9
  fi
}

# The executable a component runs as, to tell its pid from a recycled one.
component_binary() {
  case "$1" in
    fake-kubelet) echo sluice-fake-kubelet ;;
    *) echo "$1" ;;
  esac
}

# Prints the recorded pid of a component when that process is still the component.
live_pid() {
  local file="$PIDS/$1.pid" pid
  [[ -f $file ]] || return 1
  pid=$(<"$file")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  [[ -r /proc/$pid/cmdline ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "$(component_binary "$1")" || return 1
  echo "$pid"
}

# Stops one recorded process: SIGTERM, then SIGKILL after 10 s.
stop_component() {
  local name=$1 pid i
  pid=$(live_pid "$name") || return 0
  log "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  log "$name did not stop in 10 s; killing it"
  kill -KILL "$pid" 2>/dev/null || true
}

# Stops the recorded processes: SIGTERM to everything but etcd at once, then to etcd (an API
# server whose etcd is gone first hangs in its shutdown). Each wave gets 5 s before SIGKILL:
# the state is thrown away anyway.
stop_components() {
  stop_wave fake-kubelet kube-controller-manager kube-apiserver
  stop_wave etcd
}

stop_wave() {
  local name pid pids=() i alive
  for name in "$@"; do
    pid=$(live_pid "$name") || continue
    log "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
  done
  for ((i = 0; i < 50; i++)); do
    alive=()
    for pid in "${pids[@]}"; do
      kill -0 "$pid" 2>/dev/null && alive+=("$pid")
    done
    ((${#alive[@]} == 0)) && return 0
    pids=("${alive[@]}")
    sleep 0.1
  done
  log "not stopped in 5 s, killing: ${pids[*]}"
  kill -KILL "${pids[@]}" 2>/dev/null || true
}

# Removes everything in the state directory but the lock file.
remove_state() {
  find "$DEV" -mindepth 1 -maxdepth 1 ! -name cluster.lock -exec rm -rf {} +
}
