#!/usr/bin/env bash
# `make demo`: runs Sluice against a cluster and shows a canary Rollout progressing.
#
# By default it starts the project's own local control plane (scripts/cluster-up.sh) and never
# touches any other cluster. Set TARGET_KUBECONFIG=path to use a cluster you name instead.
# Ctrl-C stops the controller it started (the local control plane stays up; `make
# cluster-down` stops it).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
NS=${DEMO_NAMESPACE:-sluice-demo}
log() { printf '\033[1m[demo]\033[0m %s\n' "$*"; }

if [[ -n "${TARGET_KUBECONFIG:-}" ]]; then
  KCFG=$(realpath "$TARGET_KUBECONFIG")
  log "using the cluster named by TARGET_KUBECONFIG=$KCFG"
else
  log "starting the local control plane (first run builds it: a few minutes)"
  cargo build -q -p sluice-testenv --bin sluice-fake-kubelet
  scripts/cluster-up.sh
  KCFG=$ROOT/.dev/kubeconfig
fi
export KUBECONFIG=$KCFG
kc() { kubectl --kubeconfig "$KCFG" "$@"; }

log "building sluice-controller and kubectl-sluice"
cargo build -q -p sluice-controller -p kubectl-sluice
BIN=$ROOT/target/debug

log "installing the CRDs"
for f in manifests/crds/*-crd.yaml; do kc apply --server-side --force-conflicts -f "$f" >/dev/null; done
kc create namespace "$NS" --dry-run=client -o yaml | kc apply -f - >/dev/null

mkdir -p .dev/logs
log "starting sluice-controller for namespace $NS (log: .dev/logs/demo-controller.log)"
"$BIN/sluice-controller" --kubeconfig "$KCFG" --namespaced --namespace "$NS" --leader-elect=false --healthzPort 0 --metricsPort 0 \
  > .dev/logs/demo-controller.log 2>&1 &
CTRL=$!
cleanup() { kill "$CTRL" 2>/dev/null || true; wait "$CTRL" 2>/dev/null || true; log "controller stopped"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

kc -n "$NS" delete rollout demo --ignore-not-found --wait=true >/dev/null
kc -n "$NS" apply -f examples/demo-rollout.yaml >/dev/null
log "waiting for the first revision to be Healthy"
"$BIN/kubectl-sluice" --kubeconfig "$KCFG" -n "$NS" status demo --timeout 120s
log "changing the image: watch the canary walk through its steps (Ctrl-C to stop)"
"$BIN/kubectl-sluice" --kubeconfig "$KCFG" -n "$NS" set image demo app=example.invalid/demo:green >/dev/null
if [[ -t 1 ]]; then
  "$BIN/kubectl-sluice" --kubeconfig "$KCFG" -n "$NS" get rollout demo --watch
else
  "$BIN/kubectl-sluice" --kubeconfig "$KCFG" -n "$NS" status demo --timeout 300s
  "$BIN/kubectl-sluice" --kubeconfig "$KCFG" -n "$NS" get rollout demo
fi
