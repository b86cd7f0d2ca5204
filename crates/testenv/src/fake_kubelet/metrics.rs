//! The resource metrics API (`metrics.k8s.io/v1beta1`) for the pods the fake kubelet runs,
//! served as metrics-server serves it in a real cluster, so that kube-controller-manager's
//! HorizontalPodAutoscaler controller scales on metrics rather than a test writing `/scale`.
//!
//! The pods run nothing, so their usage is what a test declares, per namespace, in a
//! ConfigMap named [`LOAD_CONFIG_MAP`]:
//!
//! - `cpu`: the namespace's CPU load in all (a quantity: `600m`, `0.6`), shared evenly by the
//!   ready pods `selector` picks, as a Service spreads requests over its ready endpoints: more
//!   pods, less each;
//! - `selector` (optional): the label selector of the pods that take the load (all the
//!   namespace's pods without it); the others use none.
//!
//! A namespace without that ConfigMap has no pod metrics at all, so an HPA there cannot
//! compute a utilization and leaves its target as it is: the other tests' HPAs stay inert.
//!
//! The API server reaches this server through an `APIService` whose Service is an
//! `ExternalName` of `localhost` (`scripts/cluster-up.sh`), over TLS with a certificate made
//! at start. It asks for no client certificate: it listens on loopback only, for the local
//! control plane's API server, and serves nothing but these made-up numbers.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::runtime::reflector::Store;
use kube::{Api, Client, ResourceExt};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tracing::{info, warn};

mod selector;

pub use selector::Selector;

/// The ConfigMap that declares a namespace's load.
pub const LOAD_CONFIG_MAP: &str = "sluice-fake-load";
const GROUP_VERSION: &str = "metrics.k8s.io/v1beta1";
/// The memory each pod reports: constant, so that only CPU moves an HPA.
const POD_MEMORY: &str = "16Mi";

#[derive(Clone)]
struct Served {
    client: Client,
    pods: Store<Pod>,
}

/// Serves the metrics API on `127.0.0.1:port` until the process ends.
pub async fn serve(client: Client, pods: Store<Pod>, port: u16) -> anyhow::Result<()> {
    let listener = TlsListener {
        tcp: TcpListener::bind(("127.0.0.1", port)).await?,
        tls: acceptor()?,
    };
    info!(port, "serving the resource metrics API ({GROUP_VERSION})");
    let base = "/apis/metrics.k8s.io/v1beta1";
    let app = Router::new()
        .route(base, get(resources))
        .route(&format!("{base}/pods"), get(all_pods))
        .route(
            &format!("{base}/namespaces/{{ns}}/pods"),
            get(namespace_pods),
        )
        .route(
            &format!("{base}/namespaces/{{ns}}/pods/{{name}}"),
            get(one_pod),
        )
        .route(&format!("{base}/nodes"), get(nodes))
        .with_state(Served { client, pods });
    axum::serve(listener, app).await?;
    Ok(())
}

fn acceptor() -> anyhow::Result<TlsAcceptor> {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])?;
    let cert = certified.cert.der().clone();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)?;
    // axum here speaks HTTP/1.1 only; the API server's proxy falls back to it.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

struct TlsListener {
    tcp: TcpListener,
    tls: TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (tcp, addr) = match self.tcp.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    warn!("metrics API: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            // One client (the API server) on loopback: a handshake in line is quick, and one
            // that hangs is given up rather than holding the next.
            match tokio::time::timeout(Duration::from_secs(5), self.tls.accept(tcp)).await {
                Ok(Ok(tls)) => return (tls, addr),
                Ok(Err(e)) => warn!("metrics API: TLS handshake with {addr}: {e}"),
                Err(_) => warn!("metrics API: TLS handshake with {addr} timed out"),
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

async fn resources() -> Json<Value> {
    let resource = |name: &str, namespaced: bool, kind: &str| {
        json!({"name": name, "singularName": "", "namespaced": namespaced, "kind": kind,
               "verbs": ["get", "list"]})
    };
    Json(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": GROUP_VERSION,
        "resources": [resource("nodes", false, "NodeMetrics"), resource("pods", true, "PodMetrics")],
    }))
}

#[derive(Deserialize)]
struct ListQuery {
    #[serde(rename = "labelSelector", default)]
    label_selector: String,
}

async fn all_pods(State(served): State<Served>, Query(q): Query<ListQuery>) -> Response {
    pod_list(&served, None, &q.label_selector).await
}

async fn namespace_pods(
    State(served): State<Served>,
    Path(ns): Path<String>,
    Query(q): Query<ListQuery>,
) -> Response {
    pod_list(&served, Some(&ns), &q.label_selector).await
}

async fn one_pod(
    State(served): State<Served>,
    Path((ns, name)): Path<(String, String)>,
) -> Response {
    let usage = match usage_in(&served, &ns).await {
        Ok(usage) => usage,
        Err(e) => return unavailable(e),
    };
    let found = usage.and_then(|usage| usage.pod(&name).map(|m| pod_metrics(&usage, m)));
    match found {
        Some(item) => Json(item).into_response(),
        None => status(
            StatusCode::NOT_FOUND,
            "NotFound",
            &format!("podmetrics.metrics.k8s.io \"{name}\" not found"),
        ),
    }
}

async fn pod_list(served: &Served, ns: Option<&str>, selector: &str) -> Response {
    let selector = match Selector::parse(selector) {
        Ok(selector) => selector,
        Err(e) => return status(StatusCode::BAD_REQUEST, "BadRequest", &e),
    };
    let mut namespaces: Vec<String> = match ns {
        Some(ns) => vec![ns.to_string()],
        None => served
            .pods
            .state()
            .iter()
            .filter_map(|p| p.namespace())
            .collect(),
    };
    namespaces.sort();
    namespaces.dedup();
    let mut items = Vec::new();
    for ns in namespaces {
        match usage_in(served, &ns).await {
            Ok(Some(usage)) => items.extend(
                usage
                    .pods
                    .iter()
                    .filter(|m| selector.matches(m.pod.labels()))
                    .map(|m| pod_metrics(&usage, m)),
            ),
            Ok(None) => {}
            Err(e) => return unavailable(e),
        }
    }
    Json(json!({"kind": "PodMetricsList", "apiVersion": GROUP_VERSION, "metadata": {}, "items": items}))
        .into_response()
}

async fn nodes(State(served): State<Served>) -> Json<Value> {
    // Nodes report no usage of their own: `kubectl top node` shows them, HPAs never read them.
    let mut names: Vec<String> = served
        .pods
        .state()
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    names.sort();
    names.dedup();
    let now = Timestamp::now().to_string();
    let items: Vec<Value> = names
        .into_iter()
        .map(|name| {
            json!({"metadata": {"name": name}, "timestamp": now, "window": "1s",
                   "usage": {"cpu": "0", "memory": "0"}})
        })
        .collect();
    Json(
        json!({"kind": "NodeMetricsList", "apiVersion": GROUP_VERSION, "metadata": {}, "items": items}),
    )
}

fn status(code: StatusCode, reason: &str, message: &str) -> Response {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "reason": reason, "message": message, "code": code.as_u16()});
    (code, Json(body)).into_response()
}

fn unavailable(e: anyhow::Error) -> Response {
    warn!("metrics API: {e:#}");
    status(
        StatusCode::SERVICE_UNAVAILABLE,
        "ServiceUnavailable",
        &format!("{e:#}"),
    )
}

/// A running pod and the CPU it uses, in millicores.
struct PodUsage {
    pod: Arc<Pod>,
    millicores: u64,
}

struct NamespaceUsage {
    pods: Vec<PodUsage>,
    at: Timestamp,
}

impl NamespaceUsage {
    fn pod(&self, name: &str) -> Option<&PodUsage> {
        self.pods.iter().find(|m| m.pod.name_any() == name)
    }
}

/// The usage of the namespace's running pods, or None when it declares no load.
async fn usage_in(served: &Served, ns: &str) -> anyhow::Result<Option<NamespaceUsage>> {
    let maps: Api<ConfigMap> = Api::namespaced(served.client.clone(), ns);
    let Some(load) = maps.get_opt(LOAD_CONFIG_MAP).await? else {
        return Ok(None);
    };
    let data = load.data.unwrap_or_default();
    let total = match data.get("cpu") {
        Some(q) => {
            parse_millicores(q).map_err(|e| anyhow::anyhow!("{ns}/{LOAD_CONFIG_MAP}: cpu: {e}"))?
        }
        None => 0,
    };
    let takers = Selector::parse(data.get("selector").map_or("", String::as_str))
        .map_err(|e| anyhow::anyhow!("{ns}/{LOAD_CONFIG_MAP}: selector: {e}"))?;
    let running: Vec<Arc<Pod>> = served
        .pods
        .state()
        .into_iter()
        .filter(|p| p.namespace().as_deref() == Some(ns) && is_running(p))
        .collect();
    Ok(Some(NamespaceUsage {
        pods: share(total, running, |pod| {
            is_ready(pod) && takers.matches(pod.labels())
        }),
        at: Timestamp::now(),
    }))
}

/// `total` millicores shared evenly by the pods `takes` picks (the first ones get the
/// remainder's millicores); the others use none.
fn share(total: u64, pods: Vec<Arc<Pod>>, takes: impl Fn(&Pod) -> bool) -> Vec<PodUsage> {
    let takers = pods.iter().filter(|p| takes(p)).count() as u64;
    let mut given = 0;
    pods.into_iter()
        .map(|pod| {
            let millicores = if takers > 0 && takes(&pod) {
                let each = total / takers + u64::from(given < total % takers);
                given += 1;
                each
            } else {
                0
            };
            PodUsage { pod, millicores }
        })
        .collect()
}

fn pod_metrics(usage: &NamespaceUsage, m: &PodUsage) -> Value {
    let containers = m.pod.spec.as_ref().map_or(&[][..], |s| &s.containers[..]);
    // The pod's usage is its first container's; any others use nothing.
    let containers: Vec<Value> = containers
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let cpu = if i == 0 { m.millicores } else { 0 };
            json!({"name": c.name, "usage": {"cpu": format!("{cpu}m"), "memory": POD_MEMORY}})
        })
        .collect();
    json!({
        "metadata": {
            "name": m.pod.name_any(),
            "namespace": m.pod.namespace(),
            "labels": m.pod.labels(),
            "creationTimestamp": Timestamp::now().to_string(),
        },
        // Now, with a window of a second: the HPA counts a pod's CPU once the window starts
        // after the pod became ready.
        "timestamp": usage.at.to_string(),
        "window": "1s",
        "containers": containers,
    })
}

fn is_running(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// A CPU quantity in millicores: `250m`, `2`, `0.5`.
pub fn parse_millicores(q: &str) -> Result<u64, String> {
    let q = q.trim();
    let bad = || format!("{q:?} is not a CPU quantity (such as 250m or 0.5)");
    if let Some(milli) = q.strip_suffix('m') {
        return milli.parse().map_err(|_| bad());
    }
    let cores: f64 = q.parse().map_err(|_| bad())?;
    if !cores.is_finite() || cores < 0.0 {
        return Err(bad());
    }
    Ok((cores * 1000.0).round() as u64)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn pod(name: &str, labels: &[(&str, &str)]) -> Arc<Pod> {
        let mut pod = Pod::default();
        pod.metadata.name = Some(name.to_string());
        pod.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        );
        Arc::new(pod)
    }

    #[test]
    fn the_load_is_shared_by_the_pods_that_take_it() {
        let pods = vec![
            pod("a", &[("role", "web")]),
            pod("b", &[("role", "web")]),
            pod("c", &[("role", "web")]),
            pod("d", &[("role", "batch")]),
        ];
        let takers = Selector::parse("role=web").unwrap();
        let usage = share(1000, pods, |p| takers.matches(p.labels()));
        let got: Vec<u64> = usage.iter().map(|m| m.millicores).collect();
        assert_eq!(got, vec![334, 333, 333, 0]);
        assert_eq!(share(500, vec![pod("x", &[])], |_| false)[0].millicores, 0);
    }

    #[test]
    fn cpu_quantities() {
        assert_eq!(parse_millicores("250m"), Ok(250));
        assert_eq!(parse_millicores("0.5"), Ok(500));
        assert_eq!(parse_millicores("2"), Ok(2000));
        assert!(parse_millicores("lots").is_err());
        assert!(parse_millicores("-1").is_err());
    }
}
