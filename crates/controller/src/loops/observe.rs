//! The observe step: gather one Rollout's world into an [`Observed`] value for the engine.
//! Shared by the controller and the simulator, so both decide on the same inputs.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use sluice_api::Rollout;
use sluice_api::analysis::AnalysisRun;
use sluice_engine::Observed;
use sluice_engine::observed::{AnalysisTemplates, TemplateKey, nested_template_refs};
use sluice_routers::kinds::{ApiVersions, ObjectRef};

use crate::cluster::{ClusterAccess, WriteError};

/// Builds the engine's input from cached ReplicaSets plus what `writer` reads (from watch
/// caches in the controller): pods only while a restart is pending or pods are to get a new
/// role's ephemeral metadata, the Services the Rollout names or carries the managed-by
/// annotation of, its AnalysisRuns and templates, Experiments, and its router objects.
pub async fn observe<W: ClusterAccess>(
    writer: &W,
    rollout: &Rollout,
    replica_sets: Vec<ReplicaSet>,
    now: Timestamp,
) -> Result<Observed, WriteError> {
    let ns = rollout.metadata.namespace.clone().unwrap_or_default();
    let workload = match sluice_engine::workload::target(rollout) {
        Some(target) => writer.get_workload(&target).await?,
        None => None,
    };
    // A Rollout driving a StatefulSet reads it (and its revisions) fresh: they decide the
    // steps.
    let stateful_set = match sluice_engine::statefulset::stateful_set_name(rollout) {
        Some(name) if !name.is_empty() => Some(writer.get_stateful_set(&ns, name).await?),
        Some(_) => Some(Default::default()),
        None => None,
    };
    // So does a Rollout driving a DaemonSet, and its pods: which node runs which revision
    // decides each step.
    let daemon_set = match sluice_engine::daemonset::daemon_set_name(rollout) {
        Some(name) if !name.is_empty() => Some(writer.get_daemon_set(&ns, name).await?),
        Some(_) => Some(Default::default()),
        None => None,
    };
    // What pods are needed, and which, is decided on the template the Rollout takes from its
    // workload.
    let resolved = sluice_engine::workload::resolve(rollout, workload.as_ref())
        .ok()
        .flatten();
    let pods_of = resolved.as_ref().unwrap_or(rollout);
    // A Rollout with config rollouts on: its copies, and the hashes of what its template
    // (its workload's, with a workloadRef) references.
    let config = if sluice_engine::config_rollout::enabled(rollout) {
        writer.observe_config(pods_of).await?
    } else {
        None
    };
    // A StatefulSet's pods are read while an abort rolls them back, a DaemonSet's always.
    let driven_pods = stateful_set
        .as_ref()
        .and_then(|observed| sluice_engine::statefulset::pods_wanted(rollout, observed))
        .or_else(|| {
            daemon_set
                .as_ref()
                .and_then(sluice_engine::daemonset::pods_wanted)
        });
    let pods = if Observed::needs_pods(pods_of, &replica_sets, now) {
        let selector = pods_of
            .spec
            .selector
            .as_ref()
            .map(sluice_engine::selector::format_selector)
            .unwrap_or_default();
        writer.list_pods(&ns, &selector).await?
    } else if let Some(selector) = driven_pods {
        writer.list_pods(&ns, &selector).await?
    } else {
        Vec::new()
    };
    // Both the Services the Rollout names and those it has to give back.
    let services = writer.rollout_services(rollout).await?;
    let (analysis_runs, analysis_templates) = observe_analysis(writer, rollout, &ns).await?;
    // Router objects are read fresh: the weight they route now decides what may scale down.
    let router_versions = writer.router_versions();
    let router_objects = match observe_routers(writer, rollout, &router_versions).await {
        Ok(objects) => objects,
        // Argo checks the spec before it looks up anything the Rollout names: an invalid spec
        // is reported (and nothing else done) even when its router objects cannot be read,
        // their kind not served, say.
        Err(_)
            if sluice_api::validation::check_rollout(rollout)
                .blocking()
                .is_some() =>
        {
            Default::default()
        }
        Err(e) => return Err(e),
    };
    let target_registration = match sluice_engine::target_registration::wanted(rollout, &services) {
        Some(service)
            if router_versions.aws_verify_target_group && older_pods_up(rollout, &replica_sets) =>
        {
            writer.target_registration(service).await
        }
        _ => None,
    };
    // An experiment step's verdict is read like an analysis run's.
    let experiments = if Observed::has_experiment_steps(rollout) {
        writer.rollout_experiments(rollout).await?
    } else {
        Vec::new()
    };
    Ok(Observed {
        rollout: rollout.clone(),
        replica_sets,
        pods,
        services,
        analysis_runs,
        analysis_templates,
        router_objects,
        router_versions,
        experiments,
        workload,
        stateful_set,
        daemon_set,
        config,
        progress_held_since: None,
        step_plugin_answers: Vec::new(),
        target_registration,
        now,
    })
}

/// Whether pods of another version than the current one are still wanted: only then is there
/// something the target registration check could hold back (Argo asks AWS on every
/// reconcile after a promotion; Sluice stops once the old pods are gone).
fn older_pods_up(rollout: &Rollout, replica_sets: &[ReplicaSet]) -> bool {
    let current = rollout
        .status
        .as_ref()
        .and_then(|s| s.current_pod_hash.as_deref());
    replica_sets.iter().any(|rs| {
        let hash = rs
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(sluice_engine::labels::POD_TEMPLATE_HASH))
            .map(String::as_str);
        hash != current && rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0) > 0
    })
}

/// The router objects the Rollout names, those named inside them, and those it selects.
async fn observe_routers<W: ClusterAccess>(
    writer: &W,
    rollout: &Rollout,
    router_versions: &ApiVersions,
) -> Result<BTreeMap<ObjectRef, serde_json::Value>, WriteError> {
    let mut router_objects = BTreeMap::new();
    for target in sluice_engine::router_references(rollout, router_versions) {
        if let Some(object) = writer.get_router_object(&target).await? {
            router_objects.insert(target, object);
        }
    }
    // Objects named inside others (App Mesh's VirtualRouter, named by its VirtualService).
    for target in
        sluice_engine::router_dependent_references(rollout, router_versions, &router_objects)
    {
        if let Some(object) = writer.get_router_object(&target).await? {
            router_objects.insert(target, object);
        }
    }
    for (kind, namespace, selector) in sluice_engine::router_selections(rollout) {
        for object in writer
            .list_router_objects(kind, &namespace, &selector)
            .await?
        {
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            let target = ObjectRef::new(kind, &namespace, name);
            router_objects.insert(target, object);
        }
    }
    Ok(router_objects)
}

/// How deep templates may nest (`templates` within templates); deeper is reported as missing.
const MAX_TEMPLATE_NESTING: usize = 8;

/// The templates `refs` name, and those they nest (to a bounded depth); a missing one is
/// simply absent, for the engine to report.
pub async fn fetch_templates<W: ClusterAccess>(
    writer: &W,
    ns: &str,
    refs: Vec<TemplateKey>,
) -> Result<AnalysisTemplates, WriteError> {
    let mut pending = refs;
    let mut templates = AnalysisTemplates::new();
    for _ in 0..MAX_TEMPLATE_NESTING {
        let mut next = Vec::new();
        for key in pending.drain(..) {
            if templates.contains_key(&key) {
                continue;
            }
            if let Some(spec) = writer.get_analysis_template(ns, &key).await? {
                next.extend(nested_template_refs(&spec));
                templates.insert(key, spec);
            }
        }
        if next.is_empty() {
            break;
        }
        pending = next;
    }
    Ok(templates)
}

/// The Rollout's AnalysisRuns and every template its analyses name, nested ones included.
/// Nothing is read for a Rollout without analysis.
async fn observe_analysis<W: ClusterAccess>(
    writer: &W,
    rollout: &Rollout,
    ns: &str,
) -> Result<(Vec<AnalysisRun>, AnalysisTemplates), WriteError> {
    let pending = Observed::analysis_template_refs(rollout);
    if pending.is_empty() {
        return Ok(Default::default());
    }
    let templates = fetch_templates(writer, ns, pending).await?;
    let runs = writer.rollout_analysis_runs(rollout).await?;
    Ok((runs, templates))
}
