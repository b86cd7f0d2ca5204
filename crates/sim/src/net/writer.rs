//! The controller side: a [`ClusterAccess`] whose calls wait for the scheduler to deliver
//! their replies.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, Service};
use serde_json::Value;
use sluice_api::Rollout;
use sluice_api::analysis::{AnalysisRun, AnalysisTemplateSpec};
use sluice_api::experiment::Experiment;
use sluice_controller::cluster::config_copies::{copy_meta, owners_patch};
use sluice_controller::cluster::{ClusterAccess, WriteError};
use sluice_engine::config_rollout::{ConfigKind, ConfigObserved, Owner, sources_to_read};
use sluice_engine::observed::TemplateKey;
use sluice_routers::kinds::ObjectRef;

use super::{Reply, Request, Response};
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
        // Told in the span of whatever code is making the request (nothing is formatted
        // unless a subscriber listens): a test checks the Experiment loop's writes this way.
        tracing::trace!(request = %request.describe(), "request");
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

    async fn get_rollout(&self, _ns: &str, name: &str) -> Result<Option<Rollout>, WriteError> {
        match self.call(Request::GetRollout { name: name.into() }).await? {
            Reply::Rollout(r) => Ok(r.map(|r| *r)),
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

    /// A merge patch of an Experiment's main resource (its spec or its status).
    async fn patch_experiment(
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

    async fn list_replica_sets(&self, _ns: &str) -> Result<Vec<ReplicaSet>, WriteError> {
        match self.call(Request::ListReplicaSets).await? {
            Reply::ReplicaSets(r) => Ok(r),
            other => Err(unexpected(other)),
        }
    }

    /// The same request as [`ClusterAccess::list_analysis_runs`]: the simulated API server
    /// lists every run (no `rollout-type` selector), which the Rollout loop filters anyway.
    async fn list_every_analysis_run(&self, _ns: &str) -> Result<Vec<AnalysisRun>, WriteError> {
        match self.call(Request::ListAnalysisRuns).await? {
            Reply::AnalysisRuns(runs) => Ok(runs),
            other => Err(unexpected(other)),
        }
    }

    async fn create_service(&self, _ns: &str, svc: &Service) -> Result<(), WriteError> {
        self.done(Request::CreateService(Box::new(svc.clone())))
            .await
    }

    async fn delete_service(
        &self,
        _ns: &str,
        name: &str,
        uid: Option<&str>,
    ) -> Result<(), WriteError> {
        self.done(Request::DeleteService {
            name: name.into(),
            uid: uid.map(str::to_string),
        })
        .await
    }

    async fn get_stateful_set(
        &self,
        _ns: &str,
        name: &str,
    ) -> Result<sluice_engine::observed::StatefulSetObserved, WriteError> {
        let name = name.to_string();
        match self.call(Request::GetStatefulSet { name }).await? {
            Reply::StatefulSet(observed) => Ok(*observed),
            other => Err(unexpected(other)),
        }
    }

    async fn replace_stateful_set(
        &self,
        _ns: &str,
        name: &str,
        object: &Value,
    ) -> Result<(), WriteError> {
        self.may_write()?;
        let request = Request::ReplaceStatefulSet {
            name: name.to_string(),
            object: object.clone(),
        };
        self.done(request).await
    }

    async fn get_daemon_set(
        &self,
        _ns: &str,
        name: &str,
    ) -> Result<sluice_engine::observed::DaemonSetObserved, WriteError> {
        let name = name.to_string();
        match self.call(Request::GetDaemonSet { name }).await? {
            Reply::DaemonSet(observed) => Ok(*observed),
            other => Err(unexpected(other)),
        }
    }

    async fn replace_daemon_set(
        &self,
        _ns: &str,
        name: &str,
        object: &Value,
    ) -> Result<(), WriteError> {
        self.may_write()?;
        let request = Request::ReplaceDaemonSet {
            name: name.to_string(),
            object: object.clone(),
        };
        self.done(request).await
    }

    async fn observe_config(
        &self,
        rollout: &Rollout,
    ) -> Result<Option<ConfigObserved>, WriteError> {
        let uid = rollout.metadata.uid.clone().unwrap_or_default();
        let copies = match self.call(Request::ListConfigCopies { uid }).await? {
            Reply::ConfigCopies(copies) => copies,
            other => return Err(unexpected(other)),
        };
        let mut sources = BTreeMap::new();
        for source in sources_to_read(rollout, &copies) {
            let request = Request::GetConfigHash {
                source: source.clone(),
            };
            match self.call(request).await? {
                Reply::ConfigHash(hash) => sources.insert(source, hash),
                other => return Err(unexpected(other)),
            };
        }
        Ok(Some(ConfigObserved { sources, copies }))
    }

    async fn copy_config(
        &self,
        rollout: &Rollout,
        kind: ConfigKind,
        source: &str,
        hash: &str,
        copy: &str,
    ) -> Result<(), WriteError> {
        // The copy's metadata as the controller makes it; the API server fills in the content.
        let meta = serde_json::to_value(copy_meta(rollout, source, copy))
            .map_err(|e| WriteError::Api(e.to_string()))?;
        let object = serde_json::json!({"apiVersion": "v1", "kind": kind.name(), "metadata": meta});
        self.done(Request::CopyConfig {
            kind,
            source: source.to_string(),
            hash: hash.to_string(),
            object,
        })
        .await
    }

    async fn set_config_owners(
        &self,
        _ns: &str,
        kind: ConfigKind,
        name: &str,
        resource_version: Option<&str>,
        owners: &[Owner],
    ) -> Result<(), WriteError> {
        self.done(Request::SetConfigOwners {
            kind,
            name: name.to_string(),
            patch: owners_patch(resource_version, owners),
        })
        .await
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
