//! Support for the traffic-routing scenarios: the routers' CRDs (Istio, SMI and APISIX as
//! Argo's own end-to-end suite installs them, the Gateway API v1.6.1, and minimal structural
//! definitions of Traefik's, Ambassador's and App Mesh's kinds from `crates/e2e/crds`),
//! reading router objects, and a recorder of what a router object routed over time.

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;
use sluice_testenv::harness::{TestEnv, TestNamespace, gateway_api_crds_dir};
use tokio::task::JoinHandle;

/// Installs the router CRDs: Argo's e2e CRDs (Istio, SMI, APISIX), the Gateway API's, and
/// this crate's minimal ones for the routers whose projects' CRDs the corpus lacks.
pub async fn install_router_crds(env: &TestEnv) {
    let own = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crds");
    env.install_crds(&own)
        .await
        .expect("Traefik, Ambassador and App Mesh CRDs");
    let argo = sluice_api::corpus::require_argo_corpus_dir()
        .unwrap_or_else(|e| panic!("{e}"))
        .join("test/e2e/crds");
    env.install_crds(&argo).await.expect("Argo's router CRDs");
    env.install_crds(&gateway_api_crds_dir().expect("Gateway API CRDs"))
        .await
        .expect("Gateway API CRDs");
}

/// The API of one router kind in the test namespace.
pub fn router_api(
    ns: &TestNamespace,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
) -> Api<DynamicObject> {
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    Api::namespaced_with(ns.env().client(), ns.name(), &resource)
}

pub fn virtual_services(ns: &TestNamespace) -> Api<DynamicObject> {
    router_api(
        ns,
        "networking.istio.io",
        "v1alpha3",
        "VirtualService",
        "virtualservices",
    )
}

pub fn ingresses(ns: &TestNamespace) -> Api<DynamicObject> {
    router_api(ns, "networking.k8s.io", "v1", "Ingress", "ingresses")
}

pub fn traffic_splits(ns: &TestNamespace) -> Api<DynamicObject> {
    router_api(
        ns,
        "split.smi-spec.io",
        "v1alpha4",
        "TrafficSplit",
        "trafficsplits",
    )
}

pub fn http_routes(ns: &TestNamespace) -> Api<DynamicObject> {
    router_api(
        ns,
        "gateway.networking.k8s.io",
        "v1",
        "HTTPRoute",
        "httproutes",
    )
}

/// The object as plain JSON.
pub fn json_of(o: &DynamicObject) -> Value {
    serde_json::to_value(o).unwrap_or(Value::Null)
}

/// Records `extract(object)` every time one router object changes, keeping each value once in
/// a row: the sequence of weights a router was given.
pub struct Recorder<T> {
    seen: Arc<Mutex<Vec<T>>>,
    /// The resourceVersion of the last version the watch delivered.
    version: Arc<Mutex<Option<String>>>,
    api: Api<DynamicObject>,
    name: String,
    task: JoinHandle<()>,
}

impl<T: Clone + PartialEq + Send + 'static> Recorder<T> {
    pub fn start(
        api: Api<DynamicObject>,
        name: &str,
        extract: impl Fn(&Value) -> Option<T> + Send + 'static,
    ) -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let version = Arc::new(Mutex::new(None));
        let (sink, last_version) = (seen.clone(), version.clone());
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let task = tokio::spawn({
            let api = api.clone();
            async move {
                let mut stream = watcher(api, config).applied_objects().boxed();
                while let Some(item) = stream.next().await {
                    let Ok(object) = item else { continue };
                    *last_version.lock().expect("recorder lock") =
                        object.metadata.resource_version.clone();
                    if let Some(value) = extract(&json_of(&object)) {
                        let mut seen = sink.lock().expect("recorder lock");
                        if seen.last() != Some(&value) {
                            seen.push(value);
                        }
                    }
                }
            }
        });
        Self {
            seen,
            version,
            api,
            name: name.to_string(),
            task,
        }
    }

    /// The values recorded, once the watch has delivered the object as it is now (for up to
    /// 30 s): a test that has just read the final weights would otherwise race the watch,
    /// which lags on a loaded machine, and miss the last value.
    pub async fn values(&self) -> Vec<T> {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
        if let Ok(now) = self.api.get(&self.name).await {
            let want = now.metadata.resource_version;
            let caught_up = || {
                let have = self.version.lock().expect("recorder lock").clone();
                // etcd's revisions: a later version of the object counts too.
                match (
                    have.as_deref().map(str::parse::<u64>),
                    want.as_deref().map(str::parse::<u64>),
                ) {
                    (Some(Ok(h)), Some(Ok(w))) => h >= w,
                    _ => have == want,
                }
            };
            while !caught_up() && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
        self.seen.lock().expect("recorder lock").clone()
    }
}

impl<T> Drop for Recorder<T> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `(canary weight, stable weight)` of the first HTTP route of a VirtualService, by host.
pub fn vs_weights(vs: &Value, canary_host: &str, stable_host: &str) -> Option<(i64, i64)> {
    let route = vs.pointer("/spec/http/0/route")?.as_array()?;
    let weight = |host: &str| {
        route
            .iter()
            .find(|d| d.pointer("/destination/host").and_then(Value::as_str) == Some(host))
            .map(|d| d.get("weight").and_then(Value::as_i64).unwrap_or(0))
    };
    Some((weight(canary_host)?, weight(stable_host)?))
}

/// The API resource of Istio's VirtualService (v1alpha3), for watches and reflectors.
pub fn virtual_services_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("networking.istio.io", "v1alpha3", "VirtualService"),
        "virtualservices",
    )
}

/// Waits until the VirtualService `name` gives `(canary, stable)` to the two hosts.
pub async fn wait_vs_weights(
    ns: &TestNamespace,
    name: &str,
    hosts: (&str, &str),
    expected: (i64, i64),
) {
    sluice_testenv::harness::wait_for(
        &format!("VirtualService {name} at {expected:?}"),
        crate::TIMEOUT,
        || async {
            let vs = json_of(&virtual_services(ns).get(name).await?);
            let w = vs_weights(&vs, hosts.0, hosts.1);
            anyhow::ensure!(w == Some(expected), "{w:?}");
            Ok(())
        },
    )
    .await
    .unwrap();
}

/// A test namespace with every router CRD installed and a controller running for it.
pub async fn setup_routed(prefix: &str) -> (TestEnv, TestNamespace, crate::RunningController) {
    let env = TestEnv::with_crds().await.expect("local control plane");
    install_router_crds(&env).await;
    let ns = TestNamespace::create(&env, prefix)
        .await
        .expect("namespace");
    let controller = crate::start_controller(&env, &ns);
    (env, ns, controller)
}
