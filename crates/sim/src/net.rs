//! The controller's side of the network: a [`ClusterAccess`] whose calls become requests that
//! the scheduler carries to the API model and back, with whatever delay or failure the seed
//! picks. Each controller replica runs one reconcile at a time, so one request slot suffices.
//! The future of a call is pending until the scheduler delivers the reply; that is where
//! other replicas, the ReplicaSet controller and the clock get to move in between.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, Service};
use serde_json::Value;
use sluice_api::analysis::{AnalysisRun, AnalysisTemplateSpec};
use sluice_api::experiment::Experiment;
use sluice_controller::cluster::{ClusterAccess, WriteError};
use sluice_engine::observed::TemplateKey;
use sluice_routers::kinds::ObjectRef;

use crate::api_model::{ApiError, ApiServer, Endpoint, Kind};

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
}

impl Request {
    /// Whether the request changes anything (a list does not).
    pub fn is_write(&self) -> bool {
        !matches!(
            self,
            Request::ListPods { .. }
                | Request::GetService { .. }
                | Request::ListServices
                | Request::ListAnalysisRuns
                | Request::GetAnalysisTemplate { .. }
                | Request::GetRouterObject { .. }
                | Request::ListExperiments
                | Request::ListReplicaSets
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
            Request::ListPods { .. }
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
        }
    }
}

#[derive(Debug)]
pub enum Reply {
    Done,
    ResourceVersion(Option<String>),
    Pods(Vec<Pod>),
    Service(Option<Box<Service>>),
    Services(Vec<Service>),
    AnalysisRuns(Vec<AnalysisRun>),
    Template(Option<Box<AnalysisTemplateSpec>>),
    RouterObject(Option<Box<Value>>),
    Experiments(Vec<Experiment>),
    ReplicaSets(Vec<ReplicaSet>),
}

pub type Response = Result<Reply, WriteError>;

#[derive(Debug, Default)]
struct Slot {
    outgoing: Option<Request>,
    incoming: Option<Response>,
}

/// The leadership term a replica currently holds (`None`: not leading), set by the scheduler
/// from the elector, read by the writer's fence. Mirrors the controller's `WriteGate`.
#[derive(Debug, Clone, Default)]
pub struct Gate(Arc<Mutex<Option<u64>>>);

impl Gate {
    pub fn set(&self, term: Option<u64>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = term;
    }

    pub fn term(&self) -> Option<u64> {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The simulated client. Cheap to clone; clones share the one request slot.
#[derive(Debug, Clone, Default)]
pub struct SimWriter {
    slot: Arc<Mutex<Slot>>,
    gate: Gate,
    /// The term the plan was decided in: writes stop if leadership moved on since.
    pinned: Option<u64>,
}

impl SimWriter {
    pub fn new(gate: Gate, pinned: Option<u64>) -> Self {
        Self {
            slot: Arc::default(),
            gate,
            pinned,
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Slot) -> T) -> T {
        let mut guard = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut guard)
    }

    /// The request the pending call is waiting on, for the scheduler to carry.
    pub fn take_request(&self) -> Option<Request> {
        self.with(|s| s.outgoing.take())
    }

    /// Hands the reply to the pending call.
    pub fn deliver(&self, response: Response) {
        self.with(|s| s.incoming = Some(response));
    }

    async fn call(&self, request: Request) -> Response {
        self.with(|s| {
            s.incoming = None;
            s.outgoing = Some(request);
        });
        AwaitReply { writer: self }.await
    }
}

struct AwaitReply<'a> {
    writer: &'a SimWriter,
}

impl Future for AwaitReply<'_> {
    type Output = Response;

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Response> {
        // The scheduler polls again after it delivered a reply, so no waker is needed.
        match self.writer.with(|s| s.incoming.take()) {
            Some(r) => Poll::Ready(r),
            None => Poll::Pending,
        }
    }
}

fn unexpected(r: Reply) -> WriteError {
    WriteError::Api(format!("unexpected reply {r:?}"))
}

impl ClusterAccess for SimWriter {
    fn may_write(&self) -> Result<(), WriteError> {
        match (self.gate.term(), self.pinned) {
            (Some(now), Some(pinned)) if now == pinned => Ok(()),
            _ => Err(WriteError::NotLeader),
        }
    }

    async fn create_replica_set(&self, _ns: &str, rs: &ReplicaSet) -> Result<(), WriteError> {
        self.call(Request::CreateReplicaSet(Box::new(rs.clone())))
            .await
            .map(|_| ())
    }

    async fn patch_replica_set(
        &self,
        _ns: &str,
        name: &str,
        patch: &Value,
    ) -> Result<(), WriteError> {
        self.call(Request::PatchReplicaSet {
            name: name.into(),
            patch: patch.clone(),
        })
        .await
        .map(|_| ())
    }

    async fn delete_replica_set(
        &self,
        _ns: &str,
        name: &str,
        uid: Option<&str>,
    ) -> Result<(), WriteError> {
        self.call(Request::DeleteReplicaSet {
            name: name.into(),
            uid: uid.map(str::to_string),
        })
        .await
        .map(|_| ())
    }

    async fn evict_pod(&self, _ns: &str, name: &str, uid: Option<&str>) -> Result<(), WriteError> {
        self.call(Request::EvictPod {
            name: name.into(),
            uid: uid.map(str::to_string),
        })
        .await
        .map(|_| ())
    }

    async fn patch_pod(&self, _ns: &str, name: &str, patch: &Value) -> Result<(), WriteError> {
        self.done(Request::PatchPod {
            name: name.into(),
            patch: patch.clone(),
        })
        .await
    }

    async fn get_service(&self, _ns: &str, name: &str) -> Result<Option<Service>, WriteError> {
        match self.call(Request::GetService { name: name.into() }).await? {
            Reply::Service(s) => Ok(s.map(|s| *s)),
            other => Err(unexpected(other)),
        }
    }

    async fn list_services(&self, _ns: &str) -> Result<Vec<Service>, WriteError> {
        match self.call(Request::ListServices).await? {
            Reply::Services(s) => Ok(s),
            other => Err(unexpected(other)),
        }
    }

    async fn patch_service(&self, _ns: &str, name: &str, patch: &Value) -> Result<(), WriteError> {
        self.call(Request::PatchService {
            name: name.into(),
            patch: patch.clone(),
        })
        .await
        .map(|_| ())
    }

    async fn list_pods(&self, _ns: &str, selector: &str) -> Result<Vec<Pod>, WriteError> {
        match self
            .call(Request::ListPods {
                selector: selector.into(),
            })
            .await?
        {
            Reply::Pods(p) => Ok(p),
            other => Err(unexpected(other)),
        }
    }

    async fn patch_rollout(
        &self,
        _ns: &str,
        name: &str,
        patch: &Value,
    ) -> Result<Option<String>, WriteError> {
        match self
            .call(Request::PatchRollout {
                name: name.into(),
                patch: patch.clone(),
            })
            .await?
        {
            Reply::ResourceVersion(rv) => Ok(rv),
            other => Err(unexpected(other)),
        }
    }

    async fn patch_rollout_status(
        &self,
        _ns: &str,
        name: &str,
        patch: &Value,
    ) -> Result<Option<String>, WriteError> {
        match self
            .call(Request::PatchRolloutStatus {
                name: name.into(),
                patch: patch.clone(),
            })
            .await?
        {
            Reply::ResourceVersion(rv) => Ok(rv),
            other => Err(unexpected(other)),
        }
    }

    async fn list_analysis_runs(&self, _ns: &str) -> Result<Vec<AnalysisRun>, WriteError> {
        match self.call(Request::ListAnalysisRuns).await? {
            Reply::AnalysisRuns(runs) => Ok(runs),
            other => Err(unexpected(other)),
        }
    }

    async fn get_analysis_template(
        &self,
        _ns: &str,
        key: &TemplateKey,
    ) -> Result<Option<AnalysisTemplateSpec>, WriteError> {
        match self
            .call(Request::GetAnalysisTemplate { key: key.clone() })
            .await?
        {
            Reply::Template(t) => Ok(t.map(|t| *t)),
            other => Err(unexpected(other)),
        }
    }

    async fn create_analysis_run(&self, _ns: &str, run: &AnalysisRun) -> Result<(), WriteError> {
        self.done(Request::CreateAnalysisRun(Box::new(run.clone())))
            .await
    }

    async fn patch_analysis_run(
        &self,
        _ns: &str,
        name: &str,
        patch: &Value,
    ) -> Result<(), WriteError> {
        self.done(Request::PatchAnalysisRun {
            name: name.into(),
            patch: patch.clone(),
        })
        .await
    }

    async fn delete_analysis_run(
        &self,
        _ns: &str,
        name: &str,
        uid: Option<&str>,
    ) -> Result<(), WriteError> {
        self.done(Request::DeleteAnalysisRun {
            name: name.into(),
            uid: uid.map(str::to_string),
        })
        .await
    }

    async fn get_router_object(&self, target: &ObjectRef) -> Result<Option<Value>, WriteError> {
        match self
            .call(Request::GetRouterObject {
                target: target.clone(),
            })
            .await?
        {
            Reply::RouterObject(o) => Ok(o.map(|o| *o)),
            other => Err(unexpected(other)),
        }
    }

    async fn create_router_object(
        &self,
        target: &ObjectRef,
        object: &Value,
    ) -> Result<(), WriteError> {
        self.done(Request::CreateRouterObject {
            target: target.clone(),
            object: object.clone(),
        })
        .await
    }

    async fn replace_router_object(
        &self,
        target: &ObjectRef,
        object: &Value,
    ) -> Result<(), WriteError> {
        self.done(Request::ReplaceRouterObject {
            target: target.clone(),
            object: object.clone(),
        })
        .await
    }

    async fn delete_router_object(
        &self,
        target: &ObjectRef,
        uid: Option<&str>,
    ) -> Result<(), WriteError> {
        self.done(Request::DeleteRouterObject {
            target: target.clone(),
            uid: uid.map(str::to_string),
        })
        .await
    }

    async fn list_experiments(&self, _ns: &str) -> Result<Vec<Experiment>, WriteError> {
        match self.call(Request::ListExperiments).await? {
            Reply::Experiments(e) => Ok(e),
            other => Err(unexpected(other)),
        }
    }

    async fn create_experiment(
        &self,
        _ns: &str,
        experiment: &Experiment,
    ) -> Result<(), WriteError> {
        self.done(Request::CreateExperiment(Box::new(experiment.clone())))
            .await
    }

    async fn patch_experiment_spec(
        &self,
        ns: &str,
        name: &str,
        patch: &Value,
    ) -> Result<(), WriteError> {
        self.patch_experiment(ns, name, patch).await
    }

    async fn delete_experiment(
        &self,
        _ns: &str,
        name: &str,
        uid: Option<&str>,
    ) -> Result<(), WriteError> {
        self.done(Request::DeleteExperiment {
            name: name.into(),
            uid: uid.map(str::to_string),
        })
        .await
    }
}

impl SimWriter {
    async fn done(&self, request: Request) -> Result<(), WriteError> {
        self.call(request).await.map(|_| ())
    }
}

/// The Experiment controller's calls beyond [`ClusterAccess`], as `KubeCluster` has them.
impl SimWriter {
    pub async fn list_replica_sets(&self) -> Result<Vec<ReplicaSet>, WriteError> {
        match self.call(Request::ListReplicaSets).await? {
            Reply::ReplicaSets(r) => Ok(r),
            other => Err(unexpected(other)),
        }
    }

    pub async fn create_service(&self, svc: &Service) -> Result<(), WriteError> {
        self.done(Request::CreateService(Box::new(svc.clone())))
            .await
    }

    pub async fn delete_service(&self, name: &str, uid: Option<&str>) -> Result<(), WriteError> {
        self.done(Request::DeleteService {
            name: name.into(),
            uid: uid.map(str::to_string),
        })
        .await
    }

    /// A merge patch of an Experiment's main resource (its spec or its status).
    pub async fn patch_experiment(
        &self,
        _ns: &str,
        name: &str,
        patch: &Value,
    ) -> Result<(), WriteError> {
        self.done(Request::PatchExperiment {
            name: name.into(),
            patch: patch.clone(),
        })
        .await
    }
}

fn to_write_error(e: ApiError) -> WriteError {
    // As the real writer maps them: AlreadyExists is a conflict too.
    match e {
        ApiError::Conflict | ApiError::AlreadyExists => WriteError::Conflict,
        ApiError::NotFound => WriteError::NotFound,
        ApiError::Invalid(m) => WriteError::Api(m),
    }
}

fn rv_reply(v: &Value) -> Reply {
    Reply::ResourceVersion(crate::api_model::rv_of(v).map(str::to_string))
}

/// The one namespace of the simulated cluster: router objects elsewhere do not exist.
pub const NAMESPACE: &str = "default";

/// Whether `labels` satisfy a `k=v,k2=v2` selector (the only form the engine produces here).
fn matches_selector(labels: Option<&Value>, selector: &str) -> bool {
    selector.split(',').filter(|s| !s.is_empty()).all(|term| {
        let Some((k, v)) = term.split_once('=') else {
            return false;
        };
        labels.and_then(|l| l.get(k)).and_then(Value::as_str) == Some(v)
    })
}

/// The API server handling one request. Deleting or evicting something already gone
/// succeeds, as the real writer treats it.
pub fn serve(api: &mut ApiServer, request: Request, now: Timestamp) -> Response {
    match request {
        Request::CreateReplicaSet(rs) => {
            let v = serde_json::to_value(&*rs).map_err(|e| WriteError::Api(e.to_string()))?;
            api.create(Kind::ReplicaSet, v, now)
                .map(|_| Reply::Done)
                .map_err(to_write_error)
        }
        Request::PatchReplicaSet { name, patch } => api
            .patch(Kind::ReplicaSet, &name, &patch, Endpoint::Main)
            .map(|_| Reply::Done)
            .map_err(to_write_error),
        Request::DeleteReplicaSet { name, uid } => {
            match api.delete(Kind::ReplicaSet, &name, uid.as_deref()) {
                Ok(_) | Err(ApiError::NotFound) => Ok(Reply::Done),
                Err(e) => Err(to_write_error(e)),
            }
        }
        Request::EvictPod { name, uid } => match api.delete(Kind::Pod, &name, uid.as_deref()) {
            Ok(_) | Err(ApiError::NotFound) => Ok(Reply::Done),
            Err(e) => Err(to_write_error(e)),
        },
        Request::PatchPod { name, patch } => api
            .patch(Kind::Pod, &name, &patch, Endpoint::Main)
            .map(|_| Reply::Done)
            .map_err(to_write_error),
        Request::ListPods { selector } => Ok(Reply::Pods(
            api.list(Kind::Pod)
                .into_iter()
                .filter(|p| matches_selector(p.pointer("/metadata/labels"), &selector))
                .filter_map(|p| serde_json::from_value(p).ok())
                .collect(),
        )),
        Request::GetService { name } => Ok(Reply::Service(
            api.get(Kind::Service, &name)
                .and_then(|v| serde_json::from_value(v.clone()).ok())
                .map(Box::new),
        )),
        Request::ListServices => Ok(Reply::Services(
            api.list(Kind::Service)
                .into_iter()
                .filter_map(|v| serde_json::from_value(v).ok())
                .collect(),
        )),
        Request::PatchService { name, patch } => api
            .patch(Kind::Service, &name, &patch, Endpoint::Main)
            .map(|_| Reply::Done)
            .map_err(to_write_error),
        Request::PatchRollout { name, patch } => api
            .patch(Kind::Rollout, &name, &patch, Endpoint::Main)
            .map(|v| rv_reply(&v))
            .map_err(to_write_error),
        Request::PatchRolloutStatus { name, patch } => api
            .patch(Kind::Rollout, &name, &patch, Endpoint::Status)
            .map(|v| rv_reply(&v))
            .map_err(to_write_error),
        Request::ListAnalysisRuns => Ok(Reply::AnalysisRuns(
            api.list(Kind::AnalysisRun)
                .into_iter()
                .filter_map(|v| serde_json::from_value(v).ok())
                .collect(),
        )),
        Request::GetAnalysisTemplate { key } => {
            let (kind, spec) = if key.cluster_scope {
                (Kind::ClusterAnalysisTemplate, "/spec")
            } else {
                (Kind::AnalysisTemplate, "/spec")
            };
            Ok(Reply::Template(
                api.get(kind, &key.name)
                    .and_then(|v| v.pointer(spec))
                    .and_then(|v| serde_json::from_value(v.clone()).ok())
                    .map(Box::new),
            ))
        }
        Request::CreateAnalysisRun(run) => {
            let v = serde_json::to_value(&*run).map_err(|e| WriteError::Api(e.to_string()))?;
            api.create(Kind::AnalysisRun, v, now)
                .map(|_| Reply::Done)
                .map_err(to_write_error)
        }
        Request::PatchAnalysisRun { name, patch } => api
            .patch(Kind::AnalysisRun, &name, &patch, Endpoint::Main)
            .map(|_| Reply::Done)
            .map_err(to_write_error),
        Request::DeleteAnalysisRun { name, uid } => {
            match api.delete(Kind::AnalysisRun, &name, uid.as_deref()) {
                Ok(_) | Err(ApiError::NotFound) => Ok(Reply::Done),
                Err(e) => Err(to_write_error(e)),
            }
        }
        Request::GetRouterObject { target } => Ok(Reply::RouterObject(
            (target.namespace == NAMESPACE)
                .then(|| api.get(Kind::Router(target.kind), &target.name).cloned())
                .flatten()
                .map(Box::new),
        )),
        // The object is created or replaced under the name the request is addressed to.
        Request::CreateRouterObject { target, object } => {
            let object = addressed(&target, object)?;
            api.create(Kind::Router(target.kind), object, now)
                .map(|_| Reply::Done)
                .map_err(to_write_error)
        }
        Request::ReplaceRouterObject { target, object } => {
            let object = addressed(&target, object)?;
            api.replace(Kind::Router(target.kind), &object)
                .map(|_| Reply::Done)
                .map_err(to_write_error)
        }
        Request::DeleteRouterObject { target, uid } => {
            if target.namespace != NAMESPACE {
                return Ok(Reply::Done);
            }
            match api.delete(Kind::Router(target.kind), &target.name, uid.as_deref()) {
                Ok(_) | Err(ApiError::NotFound) => Ok(Reply::Done),
                Err(e) => Err(to_write_error(e)),
            }
        }
        Request::ListExperiments => Ok(Reply::Experiments(list_typed(api, Kind::Experiment))),
        Request::CreateExperiment(e) => create(api, Kind::Experiment, &*e, now),
        Request::PatchExperiment { name, patch } => api
            .patch(Kind::Experiment, &name, &patch, Endpoint::Main)
            .map(|_| Reply::Done)
            .map_err(to_write_error),
        Request::DeleteExperiment { name, uid } => {
            delete(api, Kind::Experiment, &name, uid.as_deref())
        }
        Request::ListReplicaSets => Ok(Reply::ReplicaSets(list_typed(api, Kind::ReplicaSet))),
        Request::CreateService(svc) => create(api, Kind::Service, &*svc, now),
        Request::DeleteService { name, uid } => delete(api, Kind::Service, &name, uid.as_deref()),
    }
}

/// Deletes `name` of `kind`, if it is still the object with `uid`; already gone is done.
fn delete(api: &mut ApiServer, kind: Kind, name: &str, uid: Option<&str>) -> Response {
    match api.delete(kind, name, uid) {
        Ok(_) | Err(ApiError::NotFound) => Ok(Reply::Done),
        Err(e) => Err(to_write_error(e)),
    }
}

/// Creates a typed object as it goes over the wire.
fn create<T: serde::Serialize>(
    api: &mut ApiServer,
    kind: Kind,
    obj: &T,
    now: Timestamp,
) -> Response {
    let v = serde_json::to_value(obj).map_err(|e| WriteError::Api(e.to_string()))?;
    api.create(kind, v, now)
        .map(|_| Reply::Done)
        .map_err(to_write_error)
}

/// Every object of a kind, typed; one that does not parse is left out.
fn list_typed<T: serde::de::DeserializeOwned>(api: &ApiServer, kind: Kind) -> Vec<T> {
    api.list(kind)
        .into_iter()
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect()
}

/// A router object written to `target`: refused outside the cluster's namespace (404) or when
/// its name is not the target's (the API server's 400 for a body naming another object).
fn addressed(target: &ObjectRef, object: Value) -> Result<Value, WriteError> {
    if target.namespace != NAMESPACE {
        return Err(WriteError::NotFound);
    }
    if crate::api_model::name_of(&object) != target.name {
        return Err(WriteError::Api(format!(
            "{target}: the body names {:?}",
            crate::api_model::name_of(&object)
        )));
    }
    Ok(object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use sluice_routers::kinds::RouterKind;

    fn now() -> Timestamp {
        Timestamp::from_second(1_800_000_000).unwrap()
    }

    fn vs_ref(namespace: &str) -> ObjectRef {
        ObjectRef::new(RouterKind::VirtualService, namespace, "vs")
    }

    fn get(api: &mut ApiServer, target: ObjectRef) -> Option<Value> {
        match serve(api, Request::GetRouterObject { target }, now()) {
            Ok(Reply::RouterObject(o)) => o.map(|o| *o),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn router_objects_are_created_once_read_and_replaced_at_their_version() {
        let mut api = ApiServer::new();
        let object = json!({"metadata": {"name": "vs"}, "spec": {"http": []}});
        let create = |object: &Value| Request::CreateRouterObject {
            target: vs_ref(NAMESPACE),
            object: object.clone(),
        };
        assert!(serve(&mut api, create(&object), now()).is_ok());
        assert!(matches!(
            serve(&mut api, create(&object), now()),
            Err(WriteError::Conflict)
        ));
        let read = get(&mut api, vs_ref(NAMESPACE)).unwrap();
        assert_eq!(get(&mut api, vs_ref("elsewhere")), None);
        let mut changed = read.clone();
        changed["spec"]["http"] = json!([{"name": "primary"}]);
        let replace = |object: &Value| Request::ReplaceRouterObject {
            target: vs_ref(NAMESPACE),
            object: object.clone(),
        };
        assert!(serve(&mut api, replace(&changed), now()).is_ok());
        let stored = get(&mut api, vs_ref(NAMESPACE)).unwrap();
        assert_eq!(stored.pointer("/spec/http/0/name"), Some(&json!("primary")));
        assert_ne!(
            crate::api_model::rv_of(&stored),
            crate::api_model::rv_of(&read)
        );
        // Written from the first read, it is stale now.
        assert!(matches!(
            serve(&mut api, replace(&read), now()),
            Err(WriteError::Conflict)
        ));
        let elsewhere = Request::ReplaceRouterObject {
            target: vs_ref("elsewhere"),
            object: changed,
        };
        assert!(matches!(
            serve(&mut api, elsewhere, now()),
            Err(WriteError::NotFound)
        ));
    }
}
