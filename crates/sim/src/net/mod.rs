//! The controller's side of the network: a [`ClusterAccess`] whose calls become requests that
//! the scheduler carries to the API model and back, with whatever delay or failure the seed
//! picks. Each controller replica runs one reconcile at a time, so one request slot suffices.
//! The future of a call is pending until the scheduler delivers the reply; that is where
//! other replicas, the ReplicaSet controller and the clock get to move in between.

mod config;
mod serve;
#[cfg(test)]
mod tests;
mod writer;

pub use config::{content_hash, kind_of};
pub use serve::{NAMESPACE, serve};
pub use writer::{Gate, SimWriter};

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, Service};
use serde_json::Value;
use sluice_api::Rollout;
use sluice_api::analysis::{AnalysisRun, AnalysisTemplateSpec};
use sluice_api::experiment::Experiment;
use sluice_controller::cluster::WriteError;
use sluice_engine::config_rollout::{ConfigCopy, ConfigKind, ConfigRef};
use sluice_engine::observed::TemplateKey;
use sluice_routers::kinds::ObjectRef;

use crate::api_model::{ApiError, Kind};

#[derive(Debug, Clone)]
pub enum Request {
    CreateReplicaSet(Box<ReplicaSet>),
    PatchReplicaSet {
        name: String,
        patch: Value,
    },
    DeleteReplicaSet {
        name: String,
        uid: Option<String>,
    },
    EvictPod {
        name: String,
        uid: Option<String>,
    },
    PatchPod {
        name: String,
        patch: Value,
    },
    ListPods {
        selector: String,
    },
    GetService {
        name: String,
    },
    ListServices,
    PatchService {
        name: String,
        patch: Value,
    },
    /// The notifications driver reads the Rollout afresh before it sends.
    GetRollout {
        name: String,
    },
    PatchRollout {
        name: String,
        patch: Value,
    },
    PatchRolloutStatus {
        name: String,
        patch: Value,
    },
    ListAnalysisRuns,
    GetAnalysisTemplate {
        key: TemplateKey,
    },
    CreateAnalysisRun(Box<AnalysisRun>),
    PatchAnalysisRun {
        name: String,
        patch: Value,
    },
    DeleteAnalysisRun {
        name: String,
        uid: Option<String>,
    },
    GetRouterObject {
        target: ObjectRef,
    },
    CreateRouterObject {
        target: ObjectRef,
        object: Value,
    },
    ReplaceRouterObject {
        target: ObjectRef,
        object: Value,
    },
    DeleteRouterObject {
        target: ObjectRef,
        uid: Option<String>,
    },
    ListExperiments,
    CreateExperiment(Box<Experiment>),
    /// A merge patch of the main resource: the Rollout's `spec.terminate`, the Experiment
    /// controller's status (the kind has no status subresource).
    PatchExperiment {
        name: String,
        patch: Value,
    },
    DeleteExperiment {
        name: String,
        uid: Option<String>,
    },
    /// The Experiment controller reads ReplicaSets from the API server, not from a cache.
    ListReplicaSets,
    CreateService(Box<Service>),
    DeleteService {
        name: String,
        uid: Option<String>,
    },
    /// A Rollout driving a StatefulSet reads it and its ControllerRevisions.
    GetStatefulSet {
        name: String,
    },
    /// A whole-object update carrying the resourceVersion it was read at.
    ReplaceStatefulSet {
        name: String,
        object: Value,
    },
    /// A Rollout driving a DaemonSet reads it and its ControllerRevisions.
    GetDaemonSet {
        name: String,
    },
    /// A whole-object update carrying the resourceVersion it was read at (an abort's template).
    ReplaceDaemonSet {
        name: String,
        object: Value,
    },
    /// Config rollouts: the ConfigMaps and Secrets labelled as copies made for the Rollout
    /// with this uid, by their metadata.
    ListConfigCopies {
        uid: String,
    },
    /// The hash of a referenced ConfigMap's or Secret's content.
    GetConfigHash {
        source: ConfigRef,
    },
    /// Makes the copy `object` (its metadata) of `source`, if that still hashes to `hash`.
    CopyConfig {
        kind: ConfigKind,
        source: String,
        hash: String,
        object: Value,
    },
    /// A merge patch of a copy's ownerReferences, at the resourceVersion read.
    SetConfigOwners {
        kind: ConfigKind,
        name: String,
        patch: Value,
    },
}

impl Request {
    /// Whether the request changes anything (a list does not).
    pub fn is_write(&self) -> bool {
        !matches!(
            self,
            Request::ListPods { .. }
                | Request::GetRollout { .. }
                | Request::GetService { .. }
                | Request::ListServices
                | Request::ListAnalysisRuns
                | Request::GetAnalysisTemplate { .. }
                | Request::GetRouterObject { .. }
                | Request::ListExperiments
                | Request::ListReplicaSets
                | Request::GetStatefulSet { .. }
                | Request::GetDaemonSet { .. }
                | Request::ListConfigCopies { .. }
                | Request::GetConfigHash { .. }
        )
    }

    /// The object it writes: kind and name.
    pub fn target(&self) -> Option<(Kind, String)> {
        match self {
            Request::CreateReplicaSet(rs) => Some((
                Kind::ReplicaSet,
                rs.metadata.name.clone().unwrap_or_default(),
            )),
            Request::PatchReplicaSet { name, .. } | Request::DeleteReplicaSet { name, .. } => {
                Some((Kind::ReplicaSet, name.clone()))
            }
            Request::EvictPod { name, .. } | Request::PatchPod { name, .. } => {
                Some((Kind::Pod, name.clone()))
            }
            Request::PatchRollout { name, .. } | Request::PatchRolloutStatus { name, .. } => {
                Some((Kind::Rollout, name.clone()))
            }
            Request::PatchService { name, .. } => Some((Kind::Service, name.clone())),
            Request::CreateAnalysisRun(run) => Some((
                Kind::AnalysisRun,
                run.metadata.name.clone().unwrap_or_default(),
            )),
            Request::PatchAnalysisRun { name, .. } | Request::DeleteAnalysisRun { name, .. } => {
                Some((Kind::AnalysisRun, name.clone()))
            }
            Request::CreateRouterObject { target, .. }
            | Request::ReplaceRouterObject { target, .. }
            | Request::DeleteRouterObject { target, .. } => {
                Some((Kind::Router(target.kind), target.name.clone()))
            }
            Request::CreateExperiment(e) => Some((
                Kind::Experiment,
                e.metadata.name.clone().unwrap_or_default(),
            )),
            Request::PatchExperiment { name, .. } | Request::DeleteExperiment { name, .. } => {
                Some((Kind::Experiment, name.clone()))
            }
            Request::CreateService(svc) => {
                Some((Kind::Service, svc.metadata.name.clone().unwrap_or_default()))
            }
            Request::DeleteService { name, .. } => Some((Kind::Service, name.clone())),
            Request::ReplaceStatefulSet { name, .. } => Some((Kind::StatefulSet, name.clone())),
            Request::ReplaceDaemonSet { name, .. } => Some((Kind::DaemonSet, name.clone())),
            Request::CopyConfig { kind, object, .. } => Some((
                kind_of(*kind),
                crate::api_model::name_of(object).to_string(),
            )),
            Request::SetConfigOwners { kind, name, .. } => Some((kind_of(*kind), name.clone())),
            Request::ListConfigCopies { .. } | Request::GetConfigHash { .. } => None,
            Request::ListPods { .. }
            | Request::GetStatefulSet { .. }
            | Request::GetDaemonSet { .. }
            | Request::GetRollout { .. }
            | Request::GetService { .. }
            | Request::ListServices
            | Request::ListAnalysisRuns
            | Request::GetAnalysisTemplate { .. }
            | Request::GetRouterObject { .. }
            | Request::ListExperiments
            | Request::ListReplicaSets => None,
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Request::CreateReplicaSet(rs) => {
                format!(
                    "create rs/{}",
                    rs.metadata.name.as_deref().unwrap_or_default()
                )
            }
            Request::PatchReplicaSet { name, patch } => format!("patch rs/{name} {patch}"),
            Request::DeleteReplicaSet { name, .. } => format!("delete rs/{name}"),
            Request::EvictPod { name, .. } => format!("evict pod/{name}"),
            Request::PatchPod { name, patch } => format!("patch pod/{name} {patch}"),
            Request::ListPods { selector } => format!("list pods {selector}"),
            Request::GetService { name } => format!("get service/{name}"),
            Request::ListServices => "list services".into(),
            Request::PatchService { name, patch } => format!("patch service/{name} {patch}"),
            Request::GetRollout { name } => format!("get rollout/{name}"),
            Request::PatchRollout { name, patch } => format!("patch rollout/{name} {patch}"),
            Request::PatchRolloutStatus { name, .. } => format!("patch rollout/{name}/status"),
            Request::ListAnalysisRuns => "list analysisruns".into(),
            Request::GetAnalysisTemplate { key } => format!("get {key}"),
            Request::CreateAnalysisRun(run) => format!(
                "create analysisrun/{}",
                run.metadata.name.as_deref().unwrap_or_default()
            ),
            Request::PatchAnalysisRun { name, patch } => {
                format!("patch analysisrun/{name} {patch}")
            }
            Request::DeleteAnalysisRun { name, .. } => format!("delete analysisrun/{name}"),
            Request::GetRouterObject { target } => format!("get {target}"),
            Request::CreateRouterObject { target, object } => {
                format!(
                    "create {target} {}",
                    object.get("spec").unwrap_or(&Value::Null)
                )
            }
            Request::ReplaceRouterObject { target, object } => {
                let rv = crate::api_model::rv_of(object).unwrap_or("-");
                let spec = object.get("spec").unwrap_or(&Value::Null);
                format!("replace {target} at rv {rv} {spec}")
            }
            Request::DeleteRouterObject { target, .. } => format!("delete {target}"),
            Request::ListExperiments => "list experiments".into(),
            Request::CreateExperiment(e) => format!(
                "create experiment/{}",
                e.metadata.name.as_deref().unwrap_or_default()
            ),
            Request::PatchExperiment { name, patch } => {
                // A status patch is long; what it changes is the phase.
                match patch.pointer("/status") {
                    Some(status) => format!(
                        "patch experiment/{name} status (phase {})",
                        status.get("phase").unwrap_or(&Value::Null)
                    ),
                    None => format!("patch experiment/{name} {patch}"),
                }
            }
            Request::DeleteExperiment { name, .. } => format!("delete experiment/{name}"),
            Request::ListReplicaSets => "list replicasets".into(),
            Request::CreateService(svc) => format!(
                "create service/{}",
                svc.metadata.name.as_deref().unwrap_or_default()
            ),
            Request::DeleteService { name, .. } => format!("delete service/{name}"),
            Request::GetStatefulSet { name } => format!("get statefulset/{name}"),
            Request::ReplaceStatefulSet { name, object } => {
                let rv = crate::api_model::rv_of(object).unwrap_or("-");
                let strategy = object
                    .pointer("/spec/updateStrategy")
                    .unwrap_or(&Value::Null);
                let image = object
                    .pointer("/spec/template/spec/containers/0/image")
                    .unwrap_or(&Value::Null);
                format!("replace statefulset/{name} at rv {rv} {strategy} image {image}")
            }
            Request::GetDaemonSet { name } => format!("get daemonset/{name}"),
            Request::ReplaceDaemonSet { name, object } => {
                let rv = crate::api_model::rv_of(object).unwrap_or("-");
                let image = object
                    .pointer("/spec/template/spec/containers/0/image")
                    .unwrap_or(&Value::Null);
                format!("replace daemonset/{name} at rv {rv} image {image}")
            }
            Request::ListConfigCopies { uid } => format!("list config copies of {uid}"),
            Request::GetConfigHash { source } => {
                format!("get {}/{}", source.kind.name(), source.name)
            }
            Request::CopyConfig {
                kind,
                source,
                hash,
                object,
            } => format!(
                "copy {}/{source} (hash {hash}) to {}",
                kind.name(),
                crate::api_model::name_of(object)
            ),
            Request::SetConfigOwners { kind, name, patch } => {
                let owners: Vec<&str> = patch
                    .pointer("/metadata/ownerReferences")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|o| o.get("name").and_then(Value::as_str))
                    .collect();
                format!("own {}/{name} by {owners:?}", kind.name())
            }
        }
    }
}

#[derive(Debug)]
pub enum Reply {
    Done,
    ResourceVersion(Option<String>),
    Pods(Vec<Pod>),
    Service(Option<Box<Service>>),
    Rollout(Option<Box<Rollout>>),
    Services(Vec<Service>),
    AnalysisRuns(Vec<AnalysisRun>),
    Template(Option<Box<AnalysisTemplateSpec>>),
    RouterObject(Option<Box<Value>>),
    Experiments(Vec<Experiment>),
    ReplicaSets(Vec<ReplicaSet>),
    StatefulSet(Box<sluice_engine::observed::StatefulSetObserved>),
    DaemonSet(Box<sluice_engine::observed::DaemonSetObserved>),
    ConfigCopies(BTreeMap<ConfigRef, ConfigCopy>),
    ConfigHash(Option<String>),
}

pub type Response = Result<Reply, WriteError>;

/// An API error as the controller's writer reports it.
fn to_write_error(e: ApiError) -> WriteError {
    // As the real writer maps them: AlreadyExists is a conflict too.
    match e {
        ApiError::Conflict | ApiError::AlreadyExists => WriteError::Conflict,
        ApiError::NotFound => WriteError::NotFound,
        ApiError::Invalid(m) => WriteError::Api(m),
    }
}
