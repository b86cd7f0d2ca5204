#!/usr/bin/env bash
# Starts a local Kubernetes control plane for tests and demos: etcd, kube-apiserver and
# kube-controller-manager (versions in scripts/build-control-plane.sh), and the project's fake kubelet (there is no container runtime
# and no scheduler). Everything listens on 127.0.0.1 on free ports; state, logs and pids live in
# .dev/. Idempotent: when the recorded processes are alive and the API server is ready it only
# says so, after restarting the fake kubelet if it is gone or has been rebuilt.
#
#   KUBECONFIG=.dev/kubeconfig             admin (group system:masters)
#   KUBECONFIG=.dev/kubeconfig-controller  user sluice-e2e-controller, no rights until granted
#
# Environment:
#   SLUICE_DEV_DIR        the state directory instead of .dev/: a second control plane, on
#                         ports of its own (cluster-down.sh takes the same variable)
#   SLUICE_FAKE_KUBELET   fake kubelet binary to run instead of building it with cargo
#   SLUICE_READY_DELAY    default readiness delay of pods (fake kubelet --ready-delay, 1s)
#
# `cluster-up.sh --check` only tells whether the control plane is up (exit 0) or not (exit 1).
# `cluster-up.sh --restart kube-apiserver` starts the API server again, with the flags, port and
# certificates it had, on the running etcd (stopping it first with SIGTERM if it is alive), and
# waits until it is ready: what a test that killed it needs. Nothing else is touched.
set -euo pipefail
LOG_TAG=cluster-up
source "$(dirname "${BASH_SOURCE[0]}")/lib/cluster-common.sh"
source "$(dirname "${BASH_SOURCE[0]}")/lib/cargo.sh"

NODE_NAME=fake-node-1
SECONDS=0

api_get() { # path -> body on success
  curl -sfk --max-time 5 -H "Authorization: Bearer $ADMIN_TOKEN" "https://127.0.0.1:$APISERVER_PORT$1"
}

# The control plane proper: the fake kubelet can be restarted on its own. With processes all
# alive, /readyz is asked again for up to $1 seconds (default: once): a plane that is only slow
# to answer, on a loaded machine, may be serving tests at that moment, and is waited for rather
# than taken for a stale one and removed under them.
control_plane_healthy() {
  local patience=${1:-0}
  [[ -f $DEV/cluster.env ]] || return 1
  # shellcheck source=/dev/null
  source "$DEV/cluster.env"
  local name
  for name in etcd kube-apiserver kube-controller-manager; do
    live_pid "$name" >/dev/null || return 1
  done
  local deadline=$((SECONDS + patience))
  until [[ $(api_get /readyz) == ok ]]; do
    ((SECONDS < deadline)) || return 1
    log "the running API server does not answer /readyz yet; asking again"
    sleep 2
  done
}

# Whether a process this script started is still alive. Unlike live_pid, it does not look at
# the command line, which may not show the binary yet between fork and exec on a busy machine.
started_alive() {
  local pid
  pid=$(cat "$PIDS/$1.pid" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null
}

# Waits up to $2 seconds for the command "$3..." to succeed; fails naming $1 and the log of the
# component $4 when it does not, or when that component exits.
wait_until() {
  local what=$1 timeout=$2 component=$3
  shift 3
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if ! started_alive "$component"; then
      tail -n 30 "$LOGS/$component.log" >&2 || true
      die "$component exited while waiting for $what; log: $LOGS/$component.log"
    fi
    if ((SECONDS >= deadline)); then
      tail -n 30 "$LOGS/$component.log" >&2 || true
      die "timed out after ${timeout}s waiting for $what; log: $LOGS/$component.log"
    fi
    sleep 0.2
  done
}

# A port nothing listens on and not handed out yet by this run.
TAKEN=" "
free_port() {
  local port
  while :; do
    port=$((20000 + RANDOM % 12000))
    [[ $TAKEN == *" $port "* ]] && continue
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      TAKEN+="$port "
      echo "$port"
      return
    fi
  done
}

ensure_packages() {
  local missing=() pkg
  # What the control plane itself needs; the tests' own tools (Prometheus, graphite-web, tmux,
  # Chromium) are scripts/install-test-tools.sh's, so that the demo does not install them.
  for pkg in openssl jq curl util-linux; do
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

fake_kubelet_binary() {
  if [[ -n ${SLUICE_FAKE_KUBELET:-} ]]; then
    [[ -x $SLUICE_FAKE_KUBELET ]] || die "SLUICE_FAKE_KUBELET=$SLUICE_FAKE_KUBELET is not executable"
    echo "$SLUICE_FAKE_KUBELET"
    return
  fi
  log "building sluice-fake-kubelet"
  local built
  built=$(cd "$ROOT" && workspace_cargo build --quiet -p sluice-testenv --bin sluice-fake-kubelet \
    --message-format=json-render-diagnostics |
    jq -r 'select(.reason == "compiler-artifact" and .target.name == "sluice-fake-kubelet") | .executable')
  [[ -n $built && -x $built ]] || die "cargo did not produce sluice-fake-kubelet"
  echo "$built"
}

start() { # name command...
  local name=$1
  shift
  # A session of its own: a Ctrl-C in the terminal that started it does not reach it.
  # fd 9 holds the cluster lock, which must not outlive this script.
  setsid "$@" </dev/null >"$LOGS/$name.log" 2>&1 9>&- &
  echo $! >"$PIDS/$name.pid"
}

write_kubeconfig() { # file user token
  cat >"$1" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: sluice-dev
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    insecure-skip-tls-verify: true
users:
- name: $2
  user:
    token: $3
contexts:
- name: $2@sluice-dev
  context:
    cluster: sluice-dev
    user: $2
current-context: $2@sluice-dev
KUBECONFIG
  chmod 600 "$1"
}

start_fake_kubelet() {
  start fake-kubelet "$DEV/bin/sluice-fake-kubelet" \
    --kubeconfig "$DEV/pki/kubeconfig-fake-kubelet" --node-name "$NODE_NAME" \
    --ready-delay "${SLUICE_READY_DELAY:-1s}" ${METRICS_PORT:+--metrics-port "$METRICS_PORT"}
}

# On a running control plane, restarts the fake kubelet when it is gone, or when it has been
# built again since it was started (so that tests never run against old rules).
refresh_fake_kubelet() {
  local built="${SLUICE_FAKE_KUBELET:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/sluice-fake-kubelet}"
  if [[ -x $built && $built -nt $DEV/bin/sluice-fake-kubelet ]]; then
    log "restarting the fake kubelet with the newer $built"
    stop_component fake-kubelet
    cp "$built" "$DEV/bin/sluice-fake-kubelet"
  elif live_pid fake-kubelet >/dev/null; then
    return 0
  else
    log "the fake kubelet is not running; starting it"
  fi
  start_fake_kubelet
  wait_until "the fake kubelet to start" 10 fake-kubelet grep -q "node registered" "$LOGS/fake-kubelet.log"
}

# Everything it needs is in cluster.env and the state directory, so that --restart starts it
# exactly as it was.
start_kube_apiserver() {
  log "starting kube-apiserver on https://127.0.0.1:$APISERVER_PORT"
  start kube-apiserver "$KUBE_BIN/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 127.0.0.1 --secure-port "$APISERVER_PORT" --cert-dir "$DEV/pki/apiserver" \
    --token-auth-file "$DEV/pki/tokens.csv" --authorization-mode RBAC \
    --service-account-key-file "$DEV/pki/sa.pub" --service-account-signing-key-file "$DEV/pki/sa.key" \
    --service-account-issuer https://kubernetes.default.svc \
    --service-cluster-ip-range 10.0.0.0/24 --allow-privileged \
    --disable-admission-plugins=ServiceAccount
  wait_until "kube-apiserver /readyz" 120 kube-apiserver bash -c "[[ \$(curl -sfk --max-time 5 \
    -H 'Authorization: Bearer $ADMIN_TOKEN' https://127.0.0.1:$APISERVER_PORT/readyz) == ok ]]"
}

restart_kube_apiserver() {
  [[ -f $DEV/cluster.env ]] || die "no control plane recorded in $DEV"
  # shellcheck source=/dev/null
  source "$DEV/cluster.env"
  [[ -n ${KUBE_BIN:-} ]] || die "$DEV/cluster.env does not name the binaries (written by an older cluster-up.sh); start the control plane again"
  live_pid etcd >/dev/null || die "etcd is not running: the API server would have no state to serve"
  stop_component kube-apiserver
  # The earlier run's log is kept beside the new one: it tells how that run ended.
  local n=1
  while [[ -e $LOGS/kube-apiserver.$n.log ]]; do n=$((n + 1)); done
  if [[ -f $LOGS/kube-apiserver.log ]]; then
    mv "$LOGS/kube-apiserver.log" "$LOGS/kube-apiserver.$n.log"
  fi
  start_kube_apiserver
  log "kube-apiserver ready again in ${SECONDS}s (pid $(<"$PIDS/kube-apiserver.pid"))"
}

start_kube_controller_manager() {
  log "starting kube-controller-manager"
  start kube-controller-manager "$KUBE_BIN/kube-controller-manager" \
    --kubeconfig "$DEV/pki/kubeconfig-kube-controller-manager" \
    --leader-elect=false --secure-port=0 \
    --controllers=replicaset,endpoint,endpointslice,job,garbagecollector,namespace,serviceaccount,deployment,statefulset,daemonset,horizontalpodautoscaling \
    --horizontal-pod-autoscaler-sync-period=2s \
    --kube-api-qps=200 --kube-api-burst=400 \
    --concurrent-replicaset-syncs=10 --concurrent-endpoint-syncs=10 --concurrent-gc-syncs=20
}

# kube-controller-manager gives up for good (exits) when the API server's health or discovery
# is not complete within its own short start-up window, which a freshly started API server on
# a loaded machine can miss. Such an exit is retried a few times; its fatal line is shown.
wait_for_kube_controller_manager() {
  local attempt deadline
  for attempt in 1 2 3 4; do
    deadline=$((SECONDS + 60))
    until api_get /api/v1/namespaces/default/serviceaccounts/default >/dev/null 2>&1; do
      if ! started_alive kube-controller-manager; then
        log "kube-controller-manager exited (attempt $attempt): $(grep -m1 -E '^F[0-9]{4}' \
          "$LOGS/kube-controller-manager.log" || tail -n 1 "$LOGS/kube-controller-manager.log")"
        cp "$LOGS/kube-controller-manager.log" "$LOGS/kube-controller-manager.attempt-$attempt.log"
        break
      fi
      if ((SECONDS >= deadline)); then
        tail -n 30 "$LOGS/kube-controller-manager.log" >&2 || true
        die "timed out after 60s waiting for the default ServiceAccount (kube-controller-manager at work); log: $LOGS/kube-controller-manager.log"
      fi
      sleep 0.2
    done
    started_alive kube-controller-manager && return 0
    sleep $((attempt * 2))
    start_kube_controller_manager
  done
  tail -n 30 "$LOGS/kube-controller-manager.log" >&2 || true
  die "kube-controller-manager kept exiting; logs: $LOGS/kube-controller-manager*.log"
}

api_post() { # path body: created, or already there
  local code
  code=$(curl -sk --max-time 5 -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $ADMIN_TOKEN" \
    -H 'Content-Type: application/json' --data "$2" "https://127.0.0.1:$APISERVER_PORT$1")
  [[ $code == 201 || $code == 409 ]] || die "POST $1 answered $code"
}

# The fake kubelet serves the resource metrics API (metrics.k8s.io) that the HPA controller
# reads, as metrics-server does in a real cluster. The API server reaches it through an
# ExternalName Service of localhost (there is no kube-proxy to route a ClusterIP), over TLS with
# the certificate the fake kubelet makes at start. Registered once the fake kubelet serves it:
# an aggregated API that does not answer holds up discovery, and namespace deletion with it.
register_metrics_api() {
  api_post /api/v1/namespaces/kube-system/services '{"apiVersion":"v1","kind":"Service",
    "metadata":{"name":"sluice-fake-metrics","namespace":"kube-system"},
    "spec":{"type":"ExternalName","externalName":"localhost","ports":[{"port":'"$METRICS_PORT"'}]}}'
  api_post /apis/apiregistration.k8s.io/v1/apiservices '{"apiVersion":"apiregistration.k8s.io/v1",
    "kind":"APIService","metadata":{"name":"v1beta1.metrics.k8s.io"},
    "spec":{"group":"metrics.k8s.io","version":"v1beta1","insecureSkipTLSVerify":true,
      "groupPriorityMinimum":100,"versionPriority":100,
      "service":{"namespace":"kube-system","name":"sluice-fake-metrics","port":'"$METRICS_PORT"'}}}'
  wait_until "the resource metrics API to be available" 60 fake-kubelet bash -c "curl -sfk --max-time 5 \
    -H 'Authorization: Bearer $ADMIN_TOKEN' https://127.0.0.1:$APISERVER_PORT/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.metrics.k8s.io |
    jq -e '.status.conditions[] | select(.type == \"Available\" and .status == \"True\")'"
}

case ${1:-} in
  --check)
    # Only says whether the control plane is up (exit 0) or not (exit 1); starts nothing.
    control_plane_healthy
    exit
    ;;
  --restart)
    # Only the API server: etcd keeps the state, and the others reconnect on their own.
    if [[ ${2:-} != kube-apiserver ]]; then
      echo "cluster-up.sh: --restart takes kube-apiserver (the only component it restarts)" >&2
      exit 2
    fi
    take_lock
    restart_kube_apiserver
    exit
    ;;
  -h | --help)
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
    exit 0
    ;;
  "") ;;
  *)
    echo "cluster-up.sh: unknown argument '$1' (try --help)" >&2
    exit 2
    ;;
esac

take_lock
if control_plane_healthy 60; then
  refresh_fake_kubelet
  log "already running: API server https://127.0.0.1:$APISERVER_PORT (KUBECONFIG=$DEV/kubeconfig)"
  exit 0
fi
if [[ -d $PIDS ]]; then
  log "found a stale or partial control plane; stopping what is left of it"
  stop_components
fi
remove_state

ensure_packages
KUBE_BIN=$("$ROOT/scripts/build-control-plane.sh")
KUBELET_BIN=$(fake_kubelet_binary)

mkdir -p "$PIDS" "$LOGS" "$DEV/bin" "$DEV/pki" "$DEV/etcd"
# A copy, so that rebuilding the workspace does not touch the running binary. Its time stamp is
# the start time, against which later builds are compared.
cp "$KUBELET_BIN" "$DEV/bin/sluice-fake-kubelet"

ETCD_PORT=$(free_port)
ETCD_PEER_PORT=$(free_port)
APISERVER_PORT=$(free_port)
METRICS_PORT=$(free_port)
ADMIN_TOKEN=$(openssl rand -hex 24)
CONTROLLER_TOKEN=$(openssl rand -hex 24)
KCM_TOKEN=$(openssl rand -hex 24)
KUBELET_TOKEN=$(openssl rand -hex 24)
cat >"$DEV/cluster.env" <<ENV
ETCD_PORT=$ETCD_PORT
APISERVER_PORT=$APISERVER_PORT
METRICS_PORT=$METRICS_PORT
ADMIN_TOKEN=$ADMIN_TOKEN
KUBE_BIN=$(printf %q "$KUBE_BIN")
ENV
# token,user,uid,"groups"
cat >"$DEV/pki/tokens.csv" <<TOKENS
$ADMIN_TOKEN,admin,admin,"system:masters"
$CONTROLLER_TOKEN,sluice-e2e-controller,sluice-e2e-controller
$KCM_TOKEN,system:kube-controller-manager,system:kube-controller-manager,"system:masters"
$KUBELET_TOKEN,sluice-fake-kubelet,sluice-fake-kubelet,"system:masters"
TOKENS
chmod 600 "$DEV/pki/tokens.csv" "$DEV/cluster.env"
openssl genrsa -out "$DEV/pki/sa.key" 2048 2>/dev/null
openssl rsa -in "$DEV/pki/sa.key" -pubout -out "$DEV/pki/sa.pub" 2>/dev/null

log "starting etcd on 127.0.0.1:$ETCD_PORT"
start etcd "$KUBE_BIN/etcd" --name sluice --data-dir "$DEV/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "sluice=http://127.0.0.1:$ETCD_PEER_PORT"
wait_until "etcd to be healthy" 30 etcd \
  bash -c "curl -sf --max-time 2 http://127.0.0.1:$ETCD_PORT/health | grep -q '\"health\":\"true\"'"

start_kube_apiserver

# kube-controller-manager checks /healthz and reads discovery once at start and exits if
# either is incomplete: start it only when both answer.
wait_until "kube-apiserver /healthz and discovery" 60 kube-apiserver bash -c "[[ \$(curl -sfk \
  --max-time 5 -H 'Authorization: Bearer $ADMIN_TOKEN' https://127.0.0.1:$APISERVER_PORT/healthz) == ok ]] &&
  for g in /api/v1 /apis/apps/v1 /apis/batch/v1 /apis/discovery.k8s.io/v1 /apis/coordination.k8s.io/v1; do
    curl -sfk --max-time 5 -o /dev/null -H 'Authorization: Bearer $ADMIN_TOKEN' https://127.0.0.1:$APISERVER_PORT\$g || exit 1
  done"

write_kubeconfig "$DEV/kubeconfig" admin "$ADMIN_TOKEN"
write_kubeconfig "$DEV/kubeconfig-controller" sluice-e2e-controller "$CONTROLLER_TOKEN"
write_kubeconfig "$DEV/pki/kubeconfig-kube-controller-manager" system:kube-controller-manager "$KCM_TOKEN"
write_kubeconfig "$DEV/pki/kubeconfig-fake-kubelet" sluice-fake-kubelet "$KUBELET_TOKEN"

start_kube_controller_manager
log "starting the fake kubelet (node $NODE_NAME)"
start_fake_kubelet

wait_for_kube_controller_manager
wait_until "node $NODE_NAME to be Ready" 60 fake-kubelet bash -c "curl -sfk --max-time 5 \
  -H 'Authorization: Bearer $ADMIN_TOKEN' https://127.0.0.1:$APISERVER_PORT/api/v1/nodes/$NODE_NAME |
  jq -e '.status.conditions[] | select(.type == \"Ready\" and .status == \"True\")'"

register_metrics_api
log "control plane ready in ${SECONDS}s: export KUBECONFIG=$DEV/kubeconfig (logs in $LOGS)"
