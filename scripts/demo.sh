#!/usr/bin/env bash
# `make demo`: runs Sluice against a cluster and shows a canary Rollout progressing to Healthy.
#
# By default it starts the project's own local control plane (scripts/cluster-up.sh) and never
# touches any other cluster. Set TARGET_KUBECONFIG=path to use a cluster you name instead.
#
# It stops what it started, on success, on failure and on Ctrl-C: the controller, and the local
# control plane if this run started it. Start the control plane first (`make cluster-up`) to keep
# it running after the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
NS=${DEMO_NAMESPACE:-sluice-demo}
if [[ -t 1 ]]; then
  log() { printf '\033[1m[demo %s]\033[0m %s\n' "$(date +%H:%M:%S)" "$*"; }
else
  log() { printf '[demo %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
fi
die() { log "error: $*"; exit 1; }

CTRL=""
CLI=""
CTRL_LOG=.dev/logs/demo-controller.log
STARTED_CLUSTER=0
cleanup() {
  local status=$?
  # Further INT and TERM are ignored until everything is stopped: `make demo` sends its child
  # the TERM it receives, so a TERM to the whole process group reaches this script twice, and
  # the second one used to end the cleanup half-way, with the control plane left running.
  trap - EXIT
  trap '' INT TERM
  # Stop everything even when the terminal or a pipe reading our output is already gone
  # (`make demo | tee log` and Ctrl-C ends tee too): with SIGPIPE ignored a write to a gone
  # pipe fails instead of killing us, and once one fails everything, the scripts called
  # below included, writes to /dev/null instead of failing on each line.
  trap '' PIPE
  set +e
  if ! { printf '\n'; } 2>/dev/null; then
    exec >/dev/null 2>&1
  fi
  if [[ -n $CLI ]]; then
    kill -TERM "$CLI" 2>/dev/null || true
  fi
  if [[ -n $CTRL ]] && kill -0 "$CTRL" 2>/dev/null; then
    kill -TERM "$CTRL" 2>/dev/null || true
    # The controller stops within 5 s of SIGTERM; never hang on it.
    for _ in $(seq 50); do kill -0 "$CTRL" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$CTRL" 2>/dev/null || true
    wait "$CTRL" 2>/dev/null || true
    log "controller stopped"
  fi
  if ((STARTED_CLUSTER)); then
    log "stopping the local control plane this demo started"
    scripts/cluster-down.sh || true
  fi
  if ((status != 0)); then
    log "stopped with exit $status; controller log (if it ran): $CTRL_LOG"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

BIN=${CARGO_TARGET_DIR:-$ROOT/target}/debug
# The demo's binaries in one cargo run: the dependencies they share are compiled once, with one
# set of features (built one package at a time, a dependency whose features differ between
# them is compiled once per set), and the links run side by side. Arguments: further
# package:binary pairs.
build_binaries() {
  local args=(-p sluice-controller --bin sluice-controller -p kubectl-sluice --bin kubectl-sluice)
  local pair
  for pair in "$@"; do
    args+=(-p "${pair%%:*}" --bin "${pair#*:}")
  done
  cargo build "${args[@]}"
}

if [[ -n "${TARGET_KUBECONFIG:-}" ]]; then
  KCFG=$(realpath "$TARGET_KUBECONFIG")
  log "step 1/4: building sluice-controller and kubectl-sluice"
  build_binaries
  log "step 2/4: using the cluster named by TARGET_KUBECONFIG=$KCFG"
else
  log "step 1/4: building the fake kubelet, sluice-controller and kubectl-sluice (the first build compiles the dependencies: a few minutes)"
  build_binaries sluice-testenv:sluice-fake-kubelet
  if ! scripts/cluster-up.sh --check 2>/dev/null; then
    STARTED_CLUSTER=1
  fi
  log "step 2/4: starting the local control plane (the first run builds Kubernetes from Go modules: 4 to 10 minutes)"
  SLUICE_FAKE_KUBELET=$BIN/sluice-fake-kubelet scripts/cluster-up.sh
  KCFG=$ROOT/.dev/kubeconfig
fi
export KUBECONFIG=$KCFG
kc() { kubectl --kubeconfig "$KCFG" "$@"; }

log "step 3/4: installing the CRDs and waiting until they are served"
kc apply --server-side --force-conflicts -k manifests/crds >/dev/null
# Polled rather than `kubectl wait`, which fails at once on a CRD whose status has no
# conditions yet (the moment after it is created).
for crd in rollouts analysisruns analysistemplates clusteranalysistemplates experiments; do
  for ((i = 0; ; i++)); do
    established=$(kc get "crd/$crd.argoproj.io" \
      -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>/dev/null || true)
    [[ $established == True ]] && break
    ((i < 300)) || die "the CRD $crd.argoproj.io was not Established within 60 s"
    sleep 0.2
  done
done
kc create namespace "$NS" --dry-run=client -o yaml | kc apply -f - >/dev/null

mkdir -p .dev/logs
log "starting sluice-controller for namespace $NS (log: $CTRL_LOG)"
"$BIN/sluice-controller" --kubeconfig "$KCFG" --namespaced --namespace "$NS" \
  --leader-elect=false --healthzPort 0 --metricsPort 0 >"$CTRL_LOG" 2>&1 &
CTRL=$!

# Each CLI call runs in the background and is waited for, so that a signal to this script
# (Ctrl-C, or a TERM from whatever runs it) stops the demo at once rather than when the call
# ends; cleanup stops the call.
sluice() {
  "$BIN/kubectl-sluice" --kubeconfig "$KCFG" -n "$NS" "$@" &
  CLI=$!
  local rc=0
  wait "$CLI" || rc=$?
  CLI=""
  return "$rc"
}
kc -n "$NS" delete rollout demo --ignore-not-found --wait=true >/dev/null
kc -n "$NS" apply -f examples/demo-rollout.yaml >/dev/null
log "step 4/4: the first revision comes up"
sluice status demo --timeout 120s
log "changing the image: the canary walks through its steps (20%, 60%, 80%, then 100%)"
sluice set image demo app=example.invalid/demo:green >/dev/null
sluice status demo --timeout 300s
sluice get rollout demo
log "done: the update is Healthy"
