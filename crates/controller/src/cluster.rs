//! The controller's narrow access to the cluster: the reads the observe step makes on demand
//! (pods, Services, AnalysisRuns, templates) and every write. The observe and apply layers
//! speak only this, so the real API server ([`KubeCluster`]) and the deterministic simulator
//! can both stand behind it.

use std::fmt::Debug;
use std::future::Future;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, EvictParams, ListParams, Patch, PatchParams,
    PostParams, Preconditions,
};
use kube::{Api, Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use sluice_api::Rollout;
use sluice_api::analysis::{
    AnalysisRun, AnalysisTemplate, AnalysisTemplateSpec, ClusterAnalysisTemplate,
};
use sluice_api::experiment::Experiment;
use sluice_engine::observed::TemplateKey;
use sluice_routers::kinds::{ApiVersions, ObjectRef, RouterKind};

use crate::leader::fence::{Fenced, WriteGate};
use crate::loops::driver::{Requeue, requeue_after_error};

/// Why a write did not happen.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The object changed since it was observed (HTTP 409): observe again and re-decide.
    #[error("conflict: the object changed since it was read")]
    Conflict,
    #[error("not found")]
    NotFound,
    /// This instance does not hold the leader lease (or lost it since the plan was decided):
    /// nothing was written. Not an error of the Rollout; the leader handles it.
    #[error("not the leader: write refused")]
    NotLeader,
    #[error("{0}")]
    Api(String),
}

impl WriteError {
    /// How a reconcile goes on after this failure when it is an expected one rather than an
    /// error: a stale view (409, or the object gone) is observed again shortly; a lost
    /// leadership leaves the object to the new leader, who re-decides from what was written.
    pub fn expected_outcome(&self) -> Option<kube::runtime::controller::Action> {
        match self {
            WriteError::Api(_) => None,
            expected => Some(requeue_after_error(expected).into()),
        }
    }
}

impl From<Requeue> for kube::runtime::controller::Action {
    fn from(requeue: Requeue) -> Self {
        match requeue {
            Requeue::After(after) => Self::requeue(after),
            Requeue::AwaitChange => Self::await_change(),
        }
    }
}

impl From<kube::Error> for WriteError {
    fn from(e: kube::Error) -> Self {
        match &e {
            kube::Error::Api(status) if status.is_conflict() => WriteError::Conflict,
            kube::Error::Api(status) if status.is_already_exists() => WriteError::Conflict,
            kube::Error::Api(status) if status.is_not_found() => WriteError::NotFound,
            kube::Error::Service(inner) if inner.is::<Fenced>() => WriteError::NotLeader,
            _ => WriteError::Api(e.to_string()),
        }
    }
}

/// The writes a Rollout reconcile can make. Patches are JSON merge patches that carry the
/// `metadata.resourceVersion` they were computed from, so a stale decision is refused.
pub trait ClusterAccess: Send + Sync {
    /// Whether a write may be made now. The apply layer asks right before each write, so a
    /// controller that lost its leader lease stops at once, even in the middle of a plan.
    fn may_write(&self) -> Result<(), WriteError> {
        Ok(())
    }

    fn create_replica_set(
        &self,
        namespace: &str,
        rs: &ReplicaSet,
    ) -> impl Future<Output = Result<(), WriteError>> + Send;

    fn patch_replica_set(
        &self,
        namespace: &str,
        name: &str,
        merge_patch: &Value,
    ) -> impl Future<Output = Result<(), WriteError>> + Send;

    fn delete_replica_set(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
    ) -> impl Future<Output = Result<(), WriteError>> + Send;

    /// Evicts a pod through the Eviction API (PodDisruptionBudgets apply).
    fn evict_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
    ) -> impl Future<Output = Result<(), WriteError>> + Send;

    /// Merge-patches a pod's labels and annotations (ephemeral metadata of its role).
    fn patch_pod(
        &self,
        namespace: &str,
        name: &str,
        merge_patch: &Value,
    ) -> impl Future<Output = Result<(), WriteError>> + Send;

    /// Reads a Service (blue-green Rollouts route through theirs); `None` when it is absent.
    fn get_service(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<Service>, WriteError>> + Send;

    /// Lists the Services of a namespace (those a Rollout names or manages are kept).
    fn list_services(
        &self,
        namespace: &str,
    ) -> impl Future<Output = Result<Vec<Service>, WriteError>> + Send;

    /// Merge-patches a Service (its selector and managed-by annotation).
    fn patch_service(
        &self,
        namespace: &str,
        name: &str,
        merge_patch: &Value,
    ) -> impl Future<Output = Result<(), WriteError>> + Send;

    /// Lists the pods a label selector matches (only read when a decision needs them).
    fn list_pods(
        &self,
        namespace: &str,
        selector: &str,
    ) -> impl Future<Output = Result<Vec<Pod>, WriteError>> + Send;

    /// Patches Rollout metadata; returns the new resourceVersion.
    fn patch_rollout(
        &self,
        namespace: &str,
        name: &str,
        merge_patch: &Value,
    ) -> impl Future<Output = Result<Option<String>, WriteError>> + Send;

    /// Patches the Rollout's status subresource; returns the new resourceVersion.
    fn patch_rollout_status(
        &self,
        namespace: &str,
        name: &str,
        merge_patch: &Value,
    ) -> impl Future<Output = Result<Option<String>, WriteError>> + Send;

    /// Lists the AnalysisRuns of a namespace that a Rollout created (they carry the
    /// `rollout-type` label). Read from the API server, not a cache: an analysis verdict
    /// decides whether an update goes on.
    fn list_analysis_runs(
        &self,
        namespace: &str,
    ) -> impl Future<Output = Result<Vec<AnalysisRun>, WriteError>> + Send;

    /// Reads an AnalysisTemplate (in `namespace`) or ClusterAnalysisTemplate; `None` when absent.
    fn get_analysis_template(
        &self,
        namespace: &str,
        key: &TemplateKey,
    ) -> impl Future<Output = Result<Option<AnalysisTemplateSpec>, WriteError>> + Send;

    fn create_analysis_run(
        &self,
        namespace: &str,
        run: &AnalysisRun,
    ) -> impl Future<Output = Result<(), WriteError>> + Send;

    /// Merge-patches an AnalysisRun (terminate, annotations).
    fn patch_analysis_run(
        &self,
        namespace: &str,
        name: &str,
        merge_patch: &Value,
    ) -> impl Future<Output = Result<(), WriteError>> + Send;

    fn delete_analysis_run(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
    ) -> impl Future<Output = Result<(), WriteError>> + Send;

    /// Which API versions of the router kinds to speak (`--istio-api-version`,
    /// `--traffic-split-api-version`).
    fn router_versions(&self) -> ApiVersions {
        ApiVersions::default()
    }

    /// Reads a router object (a VirtualService, an Ingress, ...); `None` when it is absent.
    fn get_router_object(
        &self,
        _target: &ObjectRef,
    ) -> impl Future<Output = Result<Option<Value>, WriteError>> + Send {
        async { Ok(None) }
    }

    /// Lists the router objects of one kind in `namespace` that `label_selector` selects.
    fn list_router_objects(
        &self,
        _kind: RouterKind,
        _namespace: &str,
        _label_selector: &str,
    ) -> impl Future<Output = Result<Vec<Value>, WriteError>> + Send {
        async { Ok(Vec::new()) }
    }

    /// Creates a router object the Rollout owns (a canary Ingress, a TrafficSplit).
    fn create_router_object(
        &self,
        target: &ObjectRef,
        _object: &Value,
    ) -> impl Future<Output = Result<(), WriteError>> + Send {
        let message = format!("{target}: router objects are not supported here");
        async move { Err(WriteError::Api(message)) }
    }

    /// Replaces a router object; refused with a conflict when its resourceVersion is stale.
    fn replace_router_object(
        &self,
        target: &ObjectRef,
        _object: &Value,
    ) -> impl Future<Output = Result<(), WriteError>> + Send {
        let message = format!("{target}: router objects are not supported here");
        async move { Err(WriteError::Api(message)) }
    }

    /// Lists the Experiments of a namespace (a Rollout's experiment steps).
    fn list_experiments(
        &self,
        _namespace: &str,
    ) -> impl Future<Output = Result<Vec<Experiment>, WriteError>> + Send {
        async { Ok(Vec::new()) }
    }

    /// Creates the Experiment of an experiment step.
    fn create_experiment(
        &self,
        _namespace: &str,
        experiment: &Experiment,
    ) -> impl Future<Output = Result<(), WriteError>> + Send {
        let message = format!(
            "Experiment {}: not supported here",
            experiment.metadata.name.as_deref().unwrap_or_default()
        );
        async move { Err(WriteError::Api(message)) }
    }

    /// Merge-patches an Experiment (`spec.terminate`).
    fn patch_experiment_spec(
        &self,
        _namespace: &str,
        name: &str,
        _merge_patch: &Value,
    ) -> impl Future<Output = Result<(), WriteError>> + Send {
        let message = format!("Experiment {name}: not supported here");
        async move { Err(WriteError::Api(message)) }
    }

    /// Deletes an Experiment with a uid precondition; an absent one is not an error.
    fn delete_experiment(
        &self,
        _namespace: &str,
        name: &str,
        _uid: Option<&str>,
    ) -> impl Future<Output = Result<(), WriteError>> + Send {
        let message = format!("Experiment {name}: not supported here");
        async move { Err(WriteError::Api(message)) }
    }

    /// Deletes a router object with a uid precondition; an absent object is not an error.
    fn delete_router_object(
        &self,
        target: &ObjectRef,
        _uid: Option<&str>,
    ) -> impl Future<Output = Result<(), WriteError>> + Send {
        let message = format!("{target}: router objects are not supported here");
        async move { Err(WriteError::Api(message)) }
    }
}

/// [`ClusterAccess`] against a real API server.
#[derive(Clone)]
pub struct KubeCluster {
    client: Client,
    gate: WriteGate,
    /// The leadership term the current plan was decided in, when pinned.
    term: Option<u64>,
    versions: ApiVersions,
}

/// Field manager recorded on every write.
pub const FIELD_MANAGER: &str = "sluice-controller";

impl KubeCluster {
    /// A writer that always may write.
    pub fn new(client: Client) -> Self {
        Self::with_gate(client, WriteGate::open())
    }

    /// A writer that writes only while `gate` is open.
    pub fn with_gate(client: Client, gate: WriteGate) -> Self {
        Self {
            client,
            gate,
            term: None,
            versions: ApiVersions::default(),
        }
    }

    /// This writer, speaking these API versions of the router kinds.
    pub fn with_router_versions(self, versions: ApiVersions) -> Self {
        Self { versions, ..self }
    }

    fn router_api(&self, target: &ObjectRef) -> Api<DynamicObject> {
        let kind = target.kind;
        let version = kind.version(&self.versions);
        let resource = ApiResource {
            group: kind.group().to_string(),
            version: version.to_string(),
            api_version: kind.api_version(&self.versions),
            kind: kind.kind().to_string(),
            plural: kind.plural().to_string(),
        };
        Api::namespaced_with(self.client.clone(), &target.namespace, &resource)
    }

    /// This writer, writing only while the leadership term is still `term`.
    pub fn for_term(&self, term: u64) -> Self {
        Self {
            term: Some(term),
            ..self.clone()
        }
    }

    fn params() -> PatchParams {
        PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        }
    }

    fn api<K>(&self, namespace: &str) -> Api<K>
    where
        K: Resource<Scope = NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), namespace)
    }

    async fn create<K>(&self, namespace: &str, object: &K) -> Result<(), WriteError>
    where
        K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + Serialize + Debug,
        K::DynamicType: Default,
    {
        self.api::<K>(namespace)
            .create(&post_params(), object)
            .await?;
        Ok(())
    }

    async fn merge_patch<K>(
        &self,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<K, WriteError>
    where
        K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + Debug,
        K::DynamicType: Default,
    {
        Ok(self
            .api::<K>(namespace)
            .patch(name, &Self::params(), &Patch::Merge(patch))
            .await?)
    }

    /// Deletes `name` if it is still the object with `uid`; already gone counts as done.
    async fn delete<K>(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
    ) -> Result<(), WriteError>
    where
        K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + Debug,
        K::DynamicType: Default,
    {
        match self
            .api::<K>(namespace)
            .delete(name, &uid_precondition(uid))
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => match WriteError::from(e) {
                WriteError::NotFound => Ok(()),
                other => Err(other),
            },
        }
    }
}

/// The writes of the Experiment controller beyond those of [`ClusterAccess`]: a template's
/// Service, and the Experiment's status (a merge patch of the main resource: the kind has no
/// status subresource).
impl KubeCluster {
    pub async fn create_service(&self, namespace: &str, svc: &Service) -> Result<(), WriteError> {
        self.create(namespace, svc).await
    }

    pub async fn delete_service(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
    ) -> Result<(), WriteError> {
        self.delete::<Service>(namespace, name, uid).await
    }

    pub async fn patch_experiment(
        &self,
        namespace: &str,
        name: &str,
        merge_patch: &Value,
    ) -> Result<(), WriteError> {
        self.merge_patch::<Experiment>(namespace, name, merge_patch)
            .await
            .map(|_| ())
    }
}

/// Create and replace options naming the field manager.
fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    }
}

/// A router object as the dynamic client sends it.
fn dynamic_object(object: &Value) -> Result<DynamicObject, WriteError> {
    serde_json::from_value(object.clone()).map_err(|e| WriteError::Api(e.to_string()))
}

/// Delete options that refuse to delete a newer object of the same name.
fn uid_precondition(uid: Option<&str>) -> DeleteParams {
    DeleteParams {
        preconditions: uid.map(|u| Preconditions {
            uid: Some(u.to_string()),
            resource_version: None,
        }),
        ..Default::default()
    }
}

impl ClusterAccess for KubeCluster {
    fn may_write(&self) -> Result<(), WriteError> {
        self.gate
            .check(self.term)
            .map_err(|_| WriteError::NotLeader)
    }

    async fn create_replica_set(&self, namespace: &str, rs: &ReplicaSet) -> Result<(), WriteError> {
        self.create(namespace, rs).await
    }

    async fn patch_replica_set(
        &self,
        namespace: &str,
        name: &str,
        merge_patch: &Value,
    ) -> Result<(), WriteError> {
        self.merge_patch::<ReplicaSet>(namespace, name, merge_patch)
            .await
            .map(drop)
    }

    async fn delete_replica_set(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
    ) -> Result<(), WriteError> {
        self.delete::<ReplicaSet>(namespace, name, uid).await
    }

    async fn evict_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
    ) -> Result<(), WriteError> {
        let params = EvictParams {
            delete_options: Some(uid_precondition(uid)),
            ..Default::default()
        };
        match self.api::<Pod>(namespace).evict(name, &params).await {
            Ok(_) => Ok(()),
            // A PodDisruptionBudget said not now: try again later.
            Err(kube::Error::Api(s)) if s.code == 429 => Err(WriteError::Conflict),
            Err(e) => match WriteError::from(e) {
                WriteError::NotFound => Ok(()),
                other => Err(other),
            },
        }
    }

    async fn patch_pod(
        &self,
        namespace: &str,
        name: &str,
        merge_patch: &Value,
    ) -> Result<(), WriteError> {
        self.merge_patch::<Pod>(namespace, name, merge_patch)
            .await
            .map(drop)
    }

    async fn get_service(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Service>, WriteError> {
        Ok(self.api::<Service>(namespace).get_opt(name).await?)
    }

    async fn list_services(&self, namespace: &str) -> Result<Vec<Service>, WriteError> {
        let lp = ListParams::default();
        Ok(self.api::<Service>(namespace).list(&lp).await?.items)
    }

    async fn patch_service(
        &self,
        namespace: &str,
        name: &str,
        merge_patch: &Value,
    ) -> Result<(), WriteError> {
        self.merge_patch::<Service>(namespace, name, merge_patch)
            .await
            .map(drop)
    }

    async fn list_pods(&self, namespace: &str, selector: &str) -> Result<Vec<Pod>, WriteError> {
        let lp = ListParams::default().labels(selector);
        Ok(self.api::<Pod>(namespace).list(&lp).await?.items)
    }

    async fn patch_rollout(
        &self,
        namespace: &str,
        name: &str,
        merge_patch: &Value,
    ) -> Result<Option<String>, WriteError> {
        let ro: Rollout = self.merge_patch(namespace, name, merge_patch).await?;
        Ok(ro.metadata.resource_version)
    }

    async fn patch_rollout_status(
        &self,
        namespace: &str,
        name: &str,
        merge_patch: &Value,
    ) -> Result<Option<String>, WriteError> {
        let ro = self
            .api::<Rollout>(namespace)
            .patch_status(name, &Self::params(), &Patch::Merge(merge_patch))
            .await?;
        Ok(ro.metadata.resource_version)
    }

    async fn list_analysis_runs(&self, namespace: &str) -> Result<Vec<AnalysisRun>, WriteError> {
        let lp = ListParams::default().labels(sluice_engine::analysis::ROLLOUT_TYPE);
        Ok(self.api::<AnalysisRun>(namespace).list(&lp).await?.items)
    }

    async fn get_analysis_template(
        &self,
        namespace: &str,
        key: &TemplateKey,
    ) -> Result<Option<AnalysisTemplateSpec>, WriteError> {
        if key.cluster_scope {
            let api: Api<ClusterAnalysisTemplate> = Api::all(self.client.clone());
            Ok(api.get_opt(&key.name).await?.map(|t| t.spec.0))
        } else {
            let api = self.api::<AnalysisTemplate>(namespace);
            Ok(api.get_opt(&key.name).await?.map(|t| t.spec))
        }
    }

    async fn create_analysis_run(
        &self,
        namespace: &str,
        run: &AnalysisRun,
    ) -> Result<(), WriteError> {
        self.create(namespace, run).await
    }

    async fn patch_analysis_run(
        &self,
        namespace: &str,
        name: &str,
        merge_patch: &Value,
    ) -> Result<(), WriteError> {
        self.merge_patch::<AnalysisRun>(namespace, name, merge_patch)
            .await
            .map(drop)
    }

    async fn delete_analysis_run(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
    ) -> Result<(), WriteError> {
        self.delete::<AnalysisRun>(namespace, name, uid).await
    }

    fn router_versions(&self) -> ApiVersions {
        self.versions.clone()
    }

    async fn get_router_object(&self, target: &ObjectRef) -> Result<Option<Value>, WriteError> {
        let found = self.router_api(target).get_opt(&target.name).await?;
        found
            .map(|o| serde_json::to_value(o).map_err(|e| WriteError::Api(e.to_string())))
            .transpose()
    }

    async fn list_router_objects(
        &self,
        kind: RouterKind,
        namespace: &str,
        label_selector: &str,
    ) -> Result<Vec<Value>, WriteError> {
        let api = self.router_api(&ObjectRef::new(kind, namespace, ""));
        let listed = api
            .list(&ListParams::default().labels(label_selector))
            .await?;
        listed
            .items
            .into_iter()
            .map(|o| serde_json::to_value(o).map_err(|e| WriteError::Api(e.to_string())))
            .collect()
    }

    async fn create_router_object(
        &self,
        target: &ObjectRef,
        object: &Value,
    ) -> Result<(), WriteError> {
        let object = dynamic_object(object)?;
        self.router_api(target)
            .create(&post_params(), &object)
            .await?;
        Ok(())
    }

    async fn replace_router_object(
        &self,
        target: &ObjectRef,
        object: &Value,
    ) -> Result<(), WriteError> {
        let object = dynamic_object(object)?;
        self.router_api(target)
            .replace(&target.name, &post_params(), &object)
            .await?;
        Ok(())
    }

    async fn list_experiments(&self, namespace: &str) -> Result<Vec<Experiment>, WriteError> {
        Ok(self
            .api::<Experiment>(namespace)
            .list(&ListParams::default())
            .await?
            .items)
    }

    async fn create_experiment(
        &self,
        namespace: &str,
        experiment: &Experiment,
    ) -> Result<(), WriteError> {
        self.create(namespace, experiment).await
    }

    async fn patch_experiment_spec(
        &self,
        namespace: &str,
        name: &str,
        merge_patch: &Value,
    ) -> Result<(), WriteError> {
        self.patch_experiment(namespace, name, merge_patch).await
    }

    async fn delete_experiment(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
    ) -> Result<(), WriteError> {
        self.delete::<Experiment>(namespace, name, uid).await
    }

    async fn delete_router_object(
        &self,
        target: &ObjectRef,
        uid: Option<&str>,
    ) -> Result<(), WriteError> {
        let params = uid_precondition(uid);
        match self.router_api(target).delete(&target.name, &params).await {
            Ok(_) => Ok(()),
            Err(e) => match WriteError::from(e) {
                WriteError::NotFound => Ok(()),
                other => Err(other),
            },
        }
    }
}
