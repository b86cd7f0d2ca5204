//! The controller's narrow access to the cluster: the reads the observe step makes (pods,
//! Services, AnalysisRuns, templates, Experiments, router objects) and every write. The observe
//! and apply layers speak only this, so the real API server ([`KubeCluster`], reading from watch
//! caches where it has them) and the deterministic simulator can both stand behind it.

use std::fmt::Debug;
use std::future::Future;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, EvictParams, ListParams, Patch, PatchParams,
    PostParams, Preconditions,
};
use kube::runtime::reflector::ObjectRef as StoreRef;
use kube::{Api, Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use sluice_api::Rollout;
use sluice_api::analysis::{
    AnalysisRun, AnalysisTemplate, AnalysisTemplateSpec, ClusterAnalysisTemplate,
};
use sluice_api::experiment::Experiment;
use sluice_engine::Observed;
use sluice_engine::observed::TemplateKey;
use sluice_routers::kinds::{ApiVersions, ObjectRef, RouterKind};

use crate::cache::{Caches, managed_by_key};
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

    /// Lists the Services of a namespace.
    fn list_services(
        &self,
        namespace: &str,
    ) -> impl Future<Output = Result<Vec<Service>, WriteError>> + Send;

    /// The Services of the Rollout's namespace that the Rollout names or that carry its
    /// managed-by annotation ([`Observed::wants_service`]), in name order. By default, those
    /// of [`ClusterAccess::list_services`].
    fn rollout_services(
        &self,
        rollout: &Rollout,
    ) -> impl Future<Output = Result<Vec<Service>, WriteError>> + Send {
        async move {
            let ns = rollout.metadata.namespace.as_deref().unwrap_or_default();
            Ok(self
                .list_services(ns)
                .await?
                .into_iter()
                .filter(|svc| Observed::wants_service(rollout, svc))
                .collect())
        }
    }

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
    /// `rollout-type` label).
    ///
    /// A watch cache may answer: a run's verdict only ever moves from running to final, so a
    /// view that lags holds the update back rather than moving it on, and a run missing from
    /// it is created again under the same name (the names follow from the runs seen), which
    /// the API server refuses as a conflict.
    fn list_analysis_runs(
        &self,
        namespace: &str,
    ) -> impl Future<Output = Result<Vec<AnalysisRun>, WriteError>> + Send;

    /// The AnalysisRuns of [`ClusterAccess::list_analysis_runs`] that `rollout` controls.
    fn rollout_analysis_runs(
        &self,
        rollout: &Rollout,
    ) -> impl Future<Output = Result<Vec<AnalysisRun>, WriteError>> + Send {
        async move {
            let ns = rollout.metadata.namespace.as_deref().unwrap_or_default();
            Ok(self
                .list_analysis_runs(ns)
                .await?
                .into_iter()
                .filter(|run| controlled_by(&run.metadata, rollout))
                .collect())
        }
    }

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

    /// The Experiments of [`ClusterAccess::list_experiments`] that `rollout` controls.
    fn rollout_experiments(
        &self,
        rollout: &Rollout,
    ) -> impl Future<Output = Result<Vec<Experiment>, WriteError>> + Send {
        async move {
            let ns = rollout.metadata.namespace.as_deref().unwrap_or_default();
            Ok(self
                .list_experiments(ns)
                .await?
                .into_iter()
                .filter(|e| controlled_by(&e.metadata, rollout))
                .collect())
        }
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

/// Whether `rollout` (by uid) is the controller owner of the object with `meta`.
pub fn controlled_by(meta: &ObjectMeta, rollout: &Rollout) -> bool {
    let uid = rollout.metadata.uid.as_deref();
    meta.owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && Some(o.uid.as_str()) == uid)
}

/// [`ClusterAccess`] against a real API server.
#[derive(Clone)]
pub struct KubeCluster {
    client: Client,
    gate: WriteGate,
    /// The leadership term the current plan was decided in, when pinned.
    term: Option<u64>,
    versions: ApiVersions,
    /// Watch caches to read Services, AnalysisRuns, templates and Experiments from; without
    /// them these are read from the API server.
    caches: Option<Caches>,
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
            caches: None,
        }
    }

    /// This writer, reading from `caches` instead of the API server. The caller waits for
    /// them to be ready ([`Caches::ready`]) before deciding on what they hold.
    pub fn with_caches(self, caches: Caches) -> Self {
        Self {
            caches: Some(caches),
            ..self
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
        let body = serde_json::to_vec(object).map_err(|e| WriteError::Api(e.to_string()))?;
        let request = kube::core::Request::new(K::url_path(&Default::default(), Some(namespace)))
            .create(&post_params(), body)
            .map_err(|e| WriteError::Api(e.to_string()))?;
        self.client.request::<Written>(request).await?;
        Ok(())
    }

    /// A merge patch of `name` (or of its `subresource`); the new resourceVersion.
    async fn merge_patch<K>(
        &self,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<Option<String>, WriteError>
    where
        K: Resource<Scope = NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        self.merge_patch_of::<K>(namespace, name, None, patch).await
    }

    async fn merge_patch_of<K>(
        &self,
        namespace: &str,
        name: &str,
        subresource: Option<&str>,
        patch: &Value,
    ) -> Result<Option<String>, WriteError>
    where
        K: Resource<Scope = NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        let request = kube::core::Request::new(K::url_path(&Default::default(), Some(namespace)));
        let patch = Patch::Merge(patch);
        let request = match subresource {
            Some(sub) => request.patch_subresource(sub, name, &Self::params(), &patch),
            None => request.patch(name, &Self::params(), &patch),
        }
        .map_err(|e| WriteError::Api(e.to_string()))?;
        let written: Written = self.client.request(request).await?;
        Ok(written.metadata.resource_version)
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
            .map(drop)
    }
}

/// What the controller needs of a write's response: the new resourceVersion. Reading just
/// that skips building the whole object (managed fields and all), which costs more CPU than
/// the rest of the write.
#[derive(serde::Deserialize)]
struct Written {
    #[serde(default)]
    metadata: WrittenMeta,
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WrittenMeta {
    resource_version: Option<String>,
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

/// The cached objects of `namespace`, in name order (as the API server lists them). A scan of
/// the whole cache: the Rollout loop reads through the indexed lookups instead.
fn in_namespace<K: Resource + Clone>(cached: Vec<std::sync::Arc<K>>, namespace: &str) -> Vec<K> {
    let mut found: Vec<K> = cached
        .iter()
        .filter(|o| o.meta().namespace.as_deref() == Some(namespace))
        .map(|o| (**o).clone())
        .collect();
    found.sort_by(|a, b| a.meta().name.cmp(&b.meta().name));
    found
}

/// Cached objects found by their owner's uid, kept when in the owner's namespace.
fn owned<K: Resource + Clone>(found: Vec<std::sync::Arc<K>>, namespace: &str) -> Vec<K> {
    found
        .iter()
        .filter(|o| o.meta().namespace.as_deref() == Some(namespace))
        .map(|o| (**o).clone())
        .collect()
}

/// The Services a Rollout wants, from the cache: those it names, by name, and those filed under
/// its managed-by annotation, in name order.
fn cached_rollout_services(caches: &Caches, rollout: &Rollout) -> Vec<Service> {
    let ns = rollout.metadata.namespace.as_deref().unwrap_or_default();
    let mut found = std::collections::BTreeMap::new();
    for name in Observed::service_names(rollout) {
        if let Some(svc) = caches
            .services
            .store()
            .get(&StoreRef::new(&name).within(ns))
        {
            found.insert(name, svc);
        }
    }
    if let Some(name) = rollout.metadata.name.as_deref() {
        for svc in caches.services.find(&managed_by_key(ns, name)) {
            let name = svc.metadata.name.clone().unwrap_or_default();
            found.entry(name).or_insert(svc);
        }
    }
    found
        .into_values()
        .filter(|svc| Observed::wants_service(rollout, svc))
        .map(|svc| (*svc).clone())
        .collect()
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
        if let Some(caches) = &self.caches {
            return Ok(in_namespace(caches.services.store().state(), namespace));
        }
        let lp = ListParams::default();
        Ok(self.api::<Service>(namespace).list(&lp).await?.items)
    }

    async fn rollout_services(&self, rollout: &Rollout) -> Result<Vec<Service>, WriteError> {
        let Some(caches) = &self.caches else {
            let ns = rollout.metadata.namespace.as_deref().unwrap_or_default();
            return Ok(self
                .list_services(ns)
                .await?
                .into_iter()
                .filter(|svc| Observed::wants_service(rollout, svc))
                .collect());
        };
        Ok(cached_rollout_services(caches, rollout))
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
        self.merge_patch::<Rollout>(namespace, name, merge_patch)
            .await
    }

    async fn patch_rollout_status(
        &self,
        namespace: &str,
        name: &str,
        merge_patch: &Value,
    ) -> Result<Option<String>, WriteError> {
        self.merge_patch_of::<Rollout>(namespace, name, Some("status"), merge_patch)
            .await
    }

    async fn list_analysis_runs(&self, namespace: &str) -> Result<Vec<AnalysisRun>, WriteError> {
        if let Some(caches) = &self.caches {
            return Ok(in_namespace(
                caches.analysis_runs.store().state(),
                namespace,
            ));
        }
        let lp = ListParams::default().labels(sluice_engine::analysis::ROLLOUT_TYPE);
        Ok(self.api::<AnalysisRun>(namespace).list(&lp).await?.items)
    }

    async fn rollout_analysis_runs(
        &self,
        rollout: &Rollout,
    ) -> Result<Vec<AnalysisRun>, WriteError> {
        let ns = rollout.metadata.namespace.as_deref().unwrap_or_default();
        let runs = match (&self.caches, rollout.metadata.uid.as_deref()) {
            (Some(caches), Some(uid)) => owned(caches.analysis_runs.find(uid), ns),
            (Some(_), None) => Vec::new(),
            (None, _) => self.list_analysis_runs(ns).await?,
        };
        Ok(runs
            .into_iter()
            .filter(|run| controlled_by(&run.metadata, rollout))
            .collect())
    }

    async fn get_analysis_template(
        &self,
        namespace: &str,
        key: &TemplateKey,
    ) -> Result<Option<AnalysisTemplateSpec>, WriteError> {
        if let Some(caches) = &self.caches {
            if !key.cluster_scope {
                let at = StoreRef::new(&key.name).within(namespace);
                return Ok(caches.analysis_templates.get(&at).map(|t| t.spec.clone()));
            }
            if let Some(cluster_templates) = &caches.cluster_analysis_templates {
                let cat = StoreRef::new(&key.name);
                return Ok(cluster_templates.get(&cat).map(|t| t.spec.0.clone()));
            }
        }
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
        if let Some(caches) = &self.caches {
            return Ok(in_namespace(caches.experiments.store().state(), namespace));
        }
        Ok(self
            .api::<Experiment>(namespace)
            .list(&ListParams::default())
            .await?
            .items)
    }

    async fn rollout_experiments(&self, rollout: &Rollout) -> Result<Vec<Experiment>, WriteError> {
        let ns = rollout.metadata.namespace.as_deref().unwrap_or_default();
        let experiments = match (&self.caches, rollout.metadata.uid.as_deref()) {
            (Some(caches), Some(uid)) => owned(caches.experiments.find(uid), ns),
            (Some(_), None) => Vec::new(),
            (None, _) => self.list_experiments(ns).await?,
        };
        Ok(experiments
            .into_iter()
            .filter(|e| controlled_by(&e.metadata, rollout))
            .collect())
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

#[cfg(test)]
pub(crate) mod tests {
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
            async fn patch_replica_set(
                &self,
                _: &str,
                _: &str,
                _: &Value,
            ) -> Result<(), WriteError> {
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
            async fn create_analysis_run(
                &self,
                _: &str,
                _: &AnalysisRun,
            ) -> Result<(), WriteError> {
                unreachable!()
            }
            async fn patch_analysis_run(
                &self,
                _: &str,
                _: &str,
                _: &Value,
            ) -> Result<(), WriteError> {
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
}
