use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::Value;
use sluice_api::Rollout;
use sluice_api::analysis::{AnalysisRun, AnalysisTemplate, AnalysisTemplateSpec};

use crate::cache::Caches;
use sluice_api::experiment::Experiment;
use sluice_engine::observed::TemplateKey;

use super::api_server::*;
use super::*;
use crate::cache::{self, listed};
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use serde_json::json;
use sluice_engine::labels::MANAGED_BY;
use std::sync::{Arc, Mutex};

/// A client that records every request it is asked to send and answers each with 404.
pub(crate) fn recording_client() -> (Client, Arc<Mutex<Vec<String>>>) {
    let sent = Arc::new(Mutex::new(Vec::new()));
    let record = sent.clone();
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        record
            .lock()
            .unwrap()
            .push(format!("{} {}", req.method(), req.uri().path()));
        async {
            let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "reason": "NotFound", "code": 404});
            let response = http::Response::builder()
                .status(404)
                .header("content-type", "application/json")
                .body(kube::client::Body::from(status.to_string().into_bytes()))
                .unwrap();
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    (Client::new(service, "default"), sent)
}

fn object<K: DeserializeOwned>(value: Value) -> K {
    serde_json::from_value(value).unwrap()
}

fn plain<K>(objects: Vec<K>) -> Store<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default,
{
    let (store, mut writer) = reflector::store();
    writer.apply_watcher_event(&watcher::Event::Init);
    for o in objects {
        writer.apply_watcher_event(&watcher::Event::InitApply(o));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
    store
}

fn rollout() -> Rollout {
    object(json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
        "metadata": {"name": "web", "namespace": "a", "uid": "u-web"},
        "spec": {"strategy": {"blueGreen": {
            "activeService": "active", "previewService": "preview",
            "prePromotionAnalysis": {"templates": [{"templateName": "t"}]}
        }}}
    }))
}

fn service(ns: &str, name: &str, managed_by: Option<&str>) -> Service {
    object(json!({"metadata": {"name": name, "namespace": ns,
        "annotations": managed_by.map(|m| json!({MANAGED_BY: m}))}}))
}

fn owned_by<K: DeserializeOwned>(ns: &str, name: &str, uid: &str, controller: bool) -> K {
    object(json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "metadata": {"name": name, "namespace": ns, "ownerReferences": [{
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": "web",
            "uid": uid, "controller": controller
        }]},
        "spec": {}
    }))
}

fn names<K: Resource>(objects: &[K]) -> Vec<&str> {
    objects
        .iter()
        .map(|o| o.meta().name.as_deref().unwrap_or_default())
        .collect()
}

fn caches(cluster_templates: bool) -> Caches {
    let template = |ns: &str, metric: &str| -> AnalysisTemplate {
        object(json!({"metadata": {"name": "t", "namespace": ns},
                      "spec": {"metrics": [{"name": metric}]}}))
    };
    Caches {
        services: listed(
            cache::managed_by_keys,
            vec![
                service("a", "preview", None),
                service("a", "active", Some("web")),
                service("a", "given-back", Some("web")),
                service("a", "someone-elses", Some("api")),
                service("a", "unrelated", None),
                service("b", "active", None),
                service("b", "given-back-elsewhere", Some("web")),
            ],
        ),
        analysis_runs: listed(
            cache::controller_uids,
            vec![
                owned_by("a", "web-2", "u-web", true),
                owned_by("a", "web-1", "u-web", true),
                owned_by("a", "namesake", "u-other", true),
                owned_by("a", "not-controlled", "u-web", false),
            ],
        ),
        analysis_templates: plain(vec![template("a", "in-a"), template("b", "in-b")]),
        cluster_analysis_templates: cluster_templates.then(|| {
            plain(vec![object(json!({"metadata": {"name": "ct"},
                                     "spec": {"metrics": [{"name": "cluster"}]}}))])
        }),
        experiments: listed(
            cache::controller_uids,
            vec![
                owned_by("a", "web-exp", "u-web", true),
                owned_by("a", "api-exp", "u-api", true),
            ],
        ),
    }
}

fn metric_names(spec: Option<AnalysisTemplateSpec>) -> Vec<String> {
    spec.unwrap()
        .metrics
        .unwrap()
        .into_iter()
        .filter_map(|m| m.name)
        .collect()
}

#[tokio::test]
async fn with_caches_a_rollouts_reads_send_no_request() {
    let (client, sent) = recording_client();
    let cluster = KubeCluster::new(client).with_caches(caches(true));
    let ro = rollout();

    let services = cluster.rollout_services(&ro).await.unwrap();
    assert_eq!(
        names(&services),
        ["active", "given-back", "preview"],
        "those it names and those it manages, of its namespace, in name order"
    );
    let runs = cluster.rollout_analysis_runs(&ro).await.unwrap();
    assert_eq!(names(&runs), ["web-1", "web-2"]);
    let experiments = cluster.rollout_experiments(&ro).await.unwrap();
    assert_eq!(names(&experiments), ["web-exp"]);
    let in_a = TemplateKey {
        cluster_scope: false,
        name: "t".into(),
    };
    let spec = cluster.get_analysis_template("a", &in_a).await.unwrap();
    assert_eq!(metric_names(spec), ["in-a"]);
    let cluster_key = TemplateKey {
        cluster_scope: true,
        name: "ct".into(),
    };
    let spec = cluster.get_analysis_template("a", &cluster_key).await;
    assert_eq!(metric_names(spec.unwrap()), ["cluster"]);
    let missing = TemplateKey {
        cluster_scope: false,
        name: "missing".into(),
    };
    assert!(
        cluster
            .get_analysis_template("a", &missing)
            .await
            .unwrap()
            .is_none()
    );
    let listed = cluster.list_services("b").await.unwrap();
    assert_eq!(names(&listed), ["active", "given-back-elsewhere"]);
    assert_eq!(cluster.list_analysis_runs("a").await.unwrap().len(), 4);
    assert_eq!(cluster.list_experiments("b").await.unwrap().len(), 0);

    assert!(
        sent.lock().unwrap().is_empty(),
        "{:?}",
        sent.lock().unwrap()
    );
}

#[tokio::test]
async fn the_cached_answers_are_those_of_the_listing_defaults() {
    // The trait's defaults, which the simulator uses, filter what the list methods return:
    // from the same caches they must give what the indexed lookups give.
    struct Listing(KubeCluster);
    impl ClusterAccess for Listing {
        async fn create_replica_set(&self, _: &str, _: &ReplicaSet) -> Result<(), WriteError> {
            unreachable!()
        }
        async fn patch_replica_set(&self, _: &str, _: &str, _: &Value) -> Result<(), WriteError> {
            unreachable!()
        }
        async fn delete_replica_set(
            &self,
            _: &str,
            _: &str,
            _: Option<&str>,
        ) -> Result<(), WriteError> {
            unreachable!()
        }
        async fn evict_pod(&self, _: &str, _: &str, _: Option<&str>) -> Result<(), WriteError> {
            unreachable!()
        }
        async fn patch_pod(&self, _: &str, _: &str, _: &Value) -> Result<(), WriteError> {
            unreachable!()
        }
        async fn get_service(&self, _: &str, _: &str) -> Result<Option<Service>, WriteError> {
            unreachable!()
        }
        async fn list_services(&self, ns: &str) -> Result<Vec<Service>, WriteError> {
            self.0.list_services(ns).await
        }
        async fn patch_service(&self, _: &str, _: &str, _: &Value) -> Result<(), WriteError> {
            unreachable!()
        }
        async fn list_pods(&self, _: &str, _: &str) -> Result<Vec<Pod>, WriteError> {
            unreachable!()
        }
        async fn patch_rollout(
            &self,
            _: &str,
            _: &str,
            _: &Value,
        ) -> Result<Option<String>, WriteError> {
            unreachable!()
        }
        async fn patch_rollout_status(
            &self,
            _: &str,
            _: &str,
            _: &Value,
        ) -> Result<Option<String>, WriteError> {
            unreachable!()
        }
        async fn list_analysis_runs(&self, ns: &str) -> Result<Vec<AnalysisRun>, WriteError> {
            self.0.list_analysis_runs(ns).await
        }
        async fn get_analysis_template(
            &self,
            ns: &str,
            key: &TemplateKey,
        ) -> Result<Option<AnalysisTemplateSpec>, WriteError> {
            self.0.get_analysis_template(ns, key).await
        }
        async fn create_analysis_run(&self, _: &str, _: &AnalysisRun) -> Result<(), WriteError> {
            unreachable!()
        }
        async fn patch_analysis_run(&self, _: &str, _: &str, _: &Value) -> Result<(), WriteError> {
            unreachable!()
        }
        async fn delete_analysis_run(
            &self,
            _: &str,
            _: &str,
            _: Option<&str>,
        ) -> Result<(), WriteError> {
            unreachable!()
        }
        async fn list_experiments(&self, ns: &str) -> Result<Vec<Experiment>, WriteError> {
            self.0.list_experiments(ns).await
        }
    }

    let (client, _) = recording_client();
    let cached = KubeCluster::new(client).with_caches(caches(true));
    let listing = Listing(cached.clone());
    let ro = rollout();
    assert_eq!(
        cached.rollout_services(&ro).await.unwrap(),
        listing.rollout_services(&ro).await.unwrap()
    );
    assert_eq!(
        cached.rollout_analysis_runs(&ro).await.unwrap(),
        listing.rollout_analysis_runs(&ro).await.unwrap()
    );
    assert_eq!(
        cached.rollout_experiments(&ro).await.unwrap(),
        listing.rollout_experiments(&ro).await.unwrap()
    );
}

#[tokio::test]
async fn without_a_cluster_template_cache_cluster_templates_come_from_the_api() {
    let (client, sent) = recording_client();
    let cluster = KubeCluster::new(client).with_caches(caches(false));
    let key = TemplateKey {
        cluster_scope: true,
        name: "ct".into(),
    };
    assert!(
        cluster
            .get_analysis_template("a", &key)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        *sent.lock().unwrap(),
        ["GET /apis/argoproj.io/v1alpha1/clusteranalysistemplates/ct"]
    );
}

#[tokio::test]
async fn without_caches_reads_go_to_the_api() {
    let (client, sent) = recording_client();
    let cluster = KubeCluster::new(client);
    let _ = cluster.rollout_services(&rollout()).await;
    let _ = cluster.rollout_analysis_runs(&rollout()).await;
    assert_eq!(
        *sent.lock().unwrap(),
        [
            "GET /api/v1/namespaces/a/services",
            "GET /apis/argoproj.io/v1alpha1/namespaces/a/analysisruns"
        ]
    );
}
