//! Which Rollouts (and Experiments) a change of a watched object concerns: the keys the
//! Rollout cache files each Rollout under (the Services and templates it names), the mappings
//! from a Service or template to the Rollouts to reconcile, and the Experiments told of their
//! ReplicaSets' changes.

use k8s_openapi::api::core::v1::Service;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use sluice_api::Rollout;
use sluice_api::experiment::Experiment;
use sluice_engine::Observed;
use sluice_engine::config_rollout::ConfigRef;
use sluice_engine::daemonset::daemon_set_name;
use sluice_engine::labels::MANAGED_BY;
use sluice_engine::observed::TemplateKey;
use sluice_engine::statefulset::stateful_set_name;
use sluice_engine::workload::{WORKLOAD_GENERATION, WorkloadKind};

use crate::cache::{CachedReplicaSet, CachedRollout, IndexedStore};

/// Where the Rollout loop's ReplicaSet watch sends the Experiments whose ReplicaSets changed
/// (the Experiment loop reconciles them).
pub type ExperimentTriggers = futures::channel::mpsc::UnboundedSender<ObjectRef<Experiment>>;

/// Tells the Experiment loop of a changed ReplicaSet that an Experiment controls.
pub(super) fn tell_experiments(to_experiments: &ExperimentTriggers, rs: &CachedReplicaSet) {
    let Some(ns) = rs.meta().namespace.as_deref() else {
        return;
    };
    for owner in rs.meta().owner_references.iter().flatten() {
        if owner.controller == Some(true)
            && owner.kind == "Experiment"
            && owner.api_version.starts_with("argoproj.io/")
        {
            // Only a stopped Experiment loop closes the channel: nothing to tell then.
            let _ = to_experiments.unbounded_send(ObjectRef::new(&owner.name).within(ns));
        }
    }
}

/// The keys a Rollout is filed under in the Rollout cache: the Services ([`service_key`]) and
/// analysis templates ([`template_key`]) it names, so that a change of one finds the Rollouts
/// to reconcile without looking at every Rollout.
pub(super) fn rollout_keys(ro: &CachedRollout) -> Vec<String> {
    // The spec is kept as text; a Rollout that does not decode (none that the watch decoded)
    // is filed under no key and still reconciled on its own changes.
    ro.to_rollout().map(|ro| keys_of(&ro)).unwrap_or_default()
}

fn keys_of(ro: &Rollout) -> Vec<String> {
    let ns = ro.metadata.namespace.as_deref().unwrap_or_default();
    let services = Observed::service_names(ro);
    let templates = Observed::analysis_template_refs(ro);
    let workload = sluice_engine::workload::target(ro);
    services
        .iter()
        .map(|name| service_key(ns, name))
        .chain(templates.iter().map(|key| template_key(ns, key)))
        .chain(workload.map(|t| workload_key(t.kind, &t.namespace, &t.name)))
        .chain(stateful_set_name(ro).map(|name| driven_key("StatefulSet", ns, name)))
        .chain(daemon_set_name(ro).map(|name| driven_key("DaemonSet", ns, name)))
        .chain(config_sources(ro).map(|r| driven_key(r.kind.name(), ns, &r.name)))
        .collect()
}

/// The ConfigMaps and Secrets whose changes are the new revisions of a Rollout with config
/// rollouts on (those of its own template; a workload's are read when it reconciles).
fn config_sources(ro: &Rollout) -> impl Iterator<Item = ConfigRef> {
    let template = sluice_engine::config_rollout::enabled(ro)
        .then_some(ro.spec.template.as_ref())
        .flatten()
        .and_then(|t| serde_json::to_value(t).ok());
    template
        .map(|t| sluice_engine::config_rollout::references(&t))
        .unwrap_or_default()
        .into_iter()
}

/// The key of the Rollouts driving the StatefulSet or DaemonSet (`kind`) `name` of
/// `namespace`.
pub(super) fn driven_key(kind: &str, namespace: &str, name: &str) -> String {
    format!("{kind}/{namespace}/{name}")
}

/// Maps a StatefulSet or DaemonSet (`kind`; only its metadata is watched) to the Rollouts
/// that drive it: any change, of its template or of its status (a pod replaced, ready), may
/// move a step on.
pub(super) fn rollouts_of_driven<T>(
    rollouts: IndexedStore<CachedRollout>,
    kind: &'static str,
) -> impl Fn(T) -> Vec<ObjectRef<CachedRollout>> + Send + Sync + 'static
where
    T: Resource,
{
    move |workload: T| {
        let namespace = workload.namespace().unwrap_or_default();
        rollouts.refs(&driven_key(kind, &namespace, &workload.name_any()))
    }
}

/// The key of the Rollouts whose `workloadRef` names this object.
pub(super) fn workload_key(kind: WorkloadKind, namespace: &str, name: &str) -> String {
    format!("{}/{namespace}/{name}", kind.name())
}

/// Maps a workload (only its metadata is watched) to the Rollouts that take their template
/// from it and have not yet recorded its generation, as Argo does: a change of the template
/// is a new generation; a change of its status alone concerns no Rollout.
pub(super) fn rollouts_of_workload<T>(
    rollouts: IndexedStore<CachedRollout>,
    kind: WorkloadKind,
) -> impl Fn(T) -> Vec<ObjectRef<CachedRollout>> + Send + Sync + 'static
where
    T: Resource,
{
    move |workload: T| {
        let namespace = workload.namespace().unwrap_or_default();
        let generation = workload.meta().generation.unwrap_or(0).to_string();
        let mut found = rollouts.refs(&workload_key(kind, &namespace, &workload.name_any()));
        found.retain(|r| {
            rollouts
                .store()
                .get(r)
                .is_none_or(|ro| ro.annotations().get(WORKLOAD_GENERATION) != Some(&generation))
        });
        found
    }
}

/// The key of the Rollouts naming a template: an AnalysisTemplate of `namespace`, or a
/// ClusterAnalysisTemplate (whatever the namespace).
pub(super) fn template_key(namespace: &str, key: &TemplateKey) -> String {
    if key.cluster_scope {
        format!("ClusterAnalysisTemplate/{}", key.name)
    } else {
        format!("AnalysisTemplate/{namespace}/{}", key.name)
    }
}

/// The key of the Rollouts naming Service `name` of `namespace`.
pub(super) fn service_key(namespace: &str, name: &str) -> String {
    format!("Service/{namespace}/{name}")
}

/// Maps a Service to the Rollouts that name it and to the one its managed-by annotation names
/// (which may have to give it back).
pub(super) fn rollouts_of_service(
    rollouts: IndexedStore<CachedRollout>,
) -> impl Fn(Service) -> Vec<ObjectRef<CachedRollout>> + Send + Sync + 'static {
    move |svc: Service| {
        let ns = svc.namespace().unwrap_or_default();
        let mut found = rollouts.refs(&service_key(&ns, &svc.name_any()));
        let managed_by = svc.annotations().get(MANAGED_BY);
        if let Some(owner) = managed_by.filter(|o| !o.is_empty()) {
            found.push(ObjectRef::new(owner).within(&ns));
        }
        found
    }
}

/// Maps a template to the Rollouts that name it: in its namespace for an AnalysisTemplate,
/// in every namespace for a ClusterAnalysisTemplate.
pub(super) fn referencing_rollouts<T>(
    rollouts: IndexedStore<CachedRollout>,
    cluster_scope: bool,
) -> impl Fn(T) -> Vec<ObjectRef<CachedRollout>> + Send + Sync + 'static
where
    T: Resource,
{
    move |template: T| {
        let key = TemplateKey {
            cluster_scope,
            name: template.name_any(),
        };
        let namespace = template.namespace().unwrap_or_default();
        rollouts.refs(&template_key(&namespace, &key))
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
    use kube::core::PartialObjectMeta;
    use kube::runtime::watcher;
    use serde_json::json;
    use sluice_api::analysis::{AnalysisTemplate, ClusterAnalysisTemplate};

    use super::*;
    use crate::cache;

    #[test]
    fn a_replica_set_change_is_told_to_the_experiment_that_controls_it() {
        let rs = |owners: serde_json::Value| {
            let rs: ReplicaSet = serde_json::from_value(json!({
                "metadata": {"name": "rs", "namespace": "ns", "ownerReferences": owners}
            }))
            .unwrap();
            CachedReplicaSet::from_replica_set(&rs).unwrap()
        };
        let owner = |kind: &str, name: &str, controller: bool| {
            json!({"apiVersion": "argoproj.io/v1alpha1", "kind": kind, "name": name,
                   "uid": "u", "controller": controller})
        };
        let (tx, mut rx) = futures::channel::mpsc::unbounded();
        tell_experiments(&tx, &rs(json!([owner("Experiment", "exp", true)])));
        tell_experiments(&tx, &rs(json!([owner("Rollout", "ro", true)])));
        tell_experiments(
            &tx,
            &rs(json!([owner("Experiment", "not-controller", false)])),
        );
        drop(tx);
        let told: Vec<_> = futures::executor::block_on_stream(&mut rx).collect();
        assert_eq!(told, [ObjectRef::<Experiment>::new("exp").within("ns")]);
    }

    fn rollout(ns: &str, name: &str, strategy: serde_json::Value) -> Rollout {
        serde_json::from_value(json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
            "metadata": {"name": name, "namespace": ns, "uid": format!("{ns}-{name}")},
            "spec": {"strategy": strategy}
        }))
        .unwrap()
    }

    fn cached(rollouts: Vec<Rollout>) -> Vec<CachedRollout> {
        rollouts
            .into_iter()
            .map(|ro| CachedRollout::new(ro).unwrap())
            .collect()
    }

    fn service(ns: &str, name: &str, managed_by: Option<&str>) -> Service {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": ns,
            "annotations": managed_by.map(|m| json!({MANAGED_BY: m}))}}))
        .unwrap()
    }

    fn names(mut refs: Vec<ObjectRef<CachedRollout>>) -> Vec<String> {
        refs.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        refs.into_iter()
            .map(|r| format!("{}/{}", r.namespace.unwrap_or_default(), r.name))
            .collect()
    }

    #[test]
    fn a_service_change_reaches_the_rollouts_that_name_or_manage_it() {
        let rollouts = cache::listed(
            rollout_keys,
            cached(vec![
                rollout(
                    "a",
                    "bg",
                    json!({"blueGreen": {"activeService": "web", "previewService": "web-preview"}}),
                ),
                rollout(
                    "a",
                    "canary",
                    json!({"canary": {"stableService": "web", "canaryService": "web-canary"}}),
                ),
                rollout("b", "bg", json!({"blueGreen": {"activeService": "web"}})),
                rollout("a", "plain", json!({"canary": {}})),
            ]),
        );
        let map = rollouts_of_service(rollouts);
        assert_eq!(names(map(service("a", "web", None))), ["a/bg", "a/canary"]);
        assert_eq!(names(map(service("a", "web-canary", None))), ["a/canary"]);
        assert_eq!(names(map(service("b", "web", None))), ["b/bg"]);
        assert!(map(service("a", "unnamed", None)).is_empty());
        // A Service a Rollout no longer names, still carrying its managed-by annotation.
        assert_eq!(names(map(service("a", "old-active", Some("bg")))), ["a/bg"]);
    }

    #[test]
    fn a_template_change_reaches_the_rollouts_that_name_it() {
        let analysis = |name: &str, kind: Option<&str>| {
            json!({"canary": {"analysis": {"templates": [
                {"templateName": name, "clusterScope": kind == Some("cluster")}
            ]}}})
        };
        let rollouts = cache::listed(
            rollout_keys,
            cached(vec![
                rollout("a", "uses-t", analysis("t", None)),
                rollout("b", "uses-t", analysis("t", None)),
                rollout("a", "uses-cluster-t", analysis("t", Some("cluster"))),
                rollout("b", "uses-cluster-t", analysis("t", Some("cluster"))),
                rollout(
                    "a",
                    "in-a-step",
                    json!({"canary": {"steps": [{"analysis": {"templates": [{"templateName": "t"}]}}]}}),
                ),
                rollout("a", "none", json!({"canary": {}})),
            ]),
        );
        let template: AnalysisTemplate = serde_json::from_value(
            json!({"metadata": {"name": "t", "namespace": "a"}, "spec": {}}),
        )
        .unwrap();
        let map = referencing_rollouts::<AnalysisTemplate>(rollouts.clone(), false);
        assert_eq!(names(map(template)), ["a/in-a-step", "a/uses-t"]);
        let cluster_template: ClusterAnalysisTemplate =
            serde_json::from_value(json!({"metadata": {"name": "t"}, "spec": {}})).unwrap();
        let map = referencing_rollouts::<ClusterAnalysisTemplate>(rollouts, true);
        assert_eq!(
            names(map(cluster_template)),
            ["a/uses-cluster-t", "b/uses-cluster-t"]
        );
    }

    #[test]
    fn a_new_generation_of_a_workload_reaches_the_rollouts_that_have_not_seen_it() {
        let referencing = |ns: &str, name: &str, kind: &str, seen: Option<&str>| {
            let mut ro = rollout(ns, name, json!({"canary": {}}));
            ro.spec.workload_ref = Some(
                serde_json::from_value(
                    json!({"apiVersion": "apps/v1", "kind": kind, "name": "web"}),
                )
                .unwrap(),
            );
            ro.metadata.annotations =
                seen.map(|g| [(WORKLOAD_GENERATION.to_string(), g.to_string())].into());
            ro
        };
        let rollouts = cache::listed(
            rollout_keys,
            cached(vec![
                referencing("a", "new", "Deployment", None),
                referencing("a", "stale", "Deployment", Some("1")),
                referencing("a", "current", "Deployment", Some("2")),
                referencing("a", "pod-template", "PodTemplate", None),
                referencing("b", "elsewhere", "Deployment", None),
            ]),
        );
        let deployment: PartialObjectMeta<Deployment> = serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "a", "generation": 2}
        }))
        .unwrap();
        let map = rollouts_of_workload(rollouts.clone(), WorkloadKind::Deployment);
        assert_eq!(names(map(deployment)), ["a/new", "a/stale"]);
    }

    #[test]
    fn a_rollout_is_filed_again_when_the_services_it_names_change() {
        let (store, writer) = cache::indexed(rollout_keys);
        let before = rollout("a", "bg", json!({"blueGreen": {"activeService": "old"}}));
        let after = rollout("a", "bg", json!({"blueGreen": {"activeService": "new"}}));
        let events = futures::stream::iter([
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(
                CachedRollout::new(before).unwrap(),
            )),
            Ok(watcher::Event::InitDone),
            Ok(watcher::Event::Apply(CachedRollout::new(after).unwrap())),
        ]);
        let _: Vec<_> = futures::executor::block_on(cache::reflect(events, writer).collect());
        let map = rollouts_of_service(store);
        assert!(map(service("a", "old", None)).is_empty());
        assert_eq!(names(map(service("a", "new", None))), ["a/bg"]);
    }
}
