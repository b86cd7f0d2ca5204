//! Argo's `RolloutInfo` JSON (pkg/apiclient/rollout/rollout.proto, as grpc-gateway writes it:
//! lowerCamelCase names, int64 as numbers, the weights and step as strings) from the
//! `RolloutInfo` model, so that scripts and UIs written against Argo's dashboard read it.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};
use sluice_api::Rollout;
use sluice_api::analysis::AnalysisRun;

use crate::info::experiment::ExperimentInfo;
use crate::info::{
    AnalysisRunInfo, PodInfo, ReplicaSetInfo, RolloutInfo, TAG_ACTIVE, TAG_CANARY, TAG_PREVIEW,
    TAG_STABLE,
};

/// One Rollout. `runs` are the namespace's AnalysisRuns, read for their measurements.
pub fn rollout_info(rollout: &Rollout, info: &RolloutInfo, runs: &[AnalysisRun]) -> Value {
    // Argo's objectMeta carries no labels or annotations: they can be large (kubectl's
    // last-applied-configuration) and would be sent to every tab for each Rollout.
    let meta = &rollout.metadata;
    let status = rollout.status.as_ref();
    let mut replica_sets = Vec::new();
    let mut analysis_runs = Vec::new();
    let mut experiments = Vec::new();
    for revision in &info.revisions {
        for rs in &revision.replica_sets {
            replica_sets.push(replica_set(
                rs,
                revision.revision,
                &info.name,
                &info.namespace,
            ));
        }
        for run in &revision.analysis_runs {
            analysis_runs.push(analysis_run(run, revision.revision, &info.namespace, runs));
        }
        for exp in &revision.experiments {
            experiments.push(experiment(exp, revision.revision, runs));
        }
    }
    let template_spec = rollout.spec.template.as_ref().and_then(|t| t.spec.as_ref());
    let containers: Vec<Value> = template_spec
        .map(|s| s.containers.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|c| json!({"name": c.name, "image": c.image.clone().unwrap_or_default()}))
        .collect();
    let steps = rollout
        .canary()
        .map(|_| serde_json::to_value(rollout.steps()).unwrap_or(Value::Null))
        .unwrap_or_else(|| json!([]));
    json!({
        "objectMeta": {
            "name": info.name,
            "namespace": info.namespace,
            "uid": meta.uid.clone().unwrap_or_default(),
            "resourceVersion": meta.resource_version.clone().unwrap_or_default(),
            "generation": meta.generation.unwrap_or(0),
            "creationTimestamp": time(info.created),
        },
        "status": info.phase.as_str(),
        "message": info.message,
        "icon": phase_icon(info.phase.as_str()),
        "strategy": info.strategy.as_str(),
        // Argo's step is the current index alone; the model's is `index/total`.
        "step": info.step.as_deref().and_then(|s| s.split('/').next()).unwrap_or_default(),
        "setWeight": info.set_weight.map(|w| w.to_string()).unwrap_or_default(),
        "actualWeight": info.actual_weight.map(|w| w.to_string()).unwrap_or_default(),
        "ready": info.replicas.ready,
        "current": info.replicas.current,
        "desired": info.replicas.desired,
        "updated": info.replicas.updated,
        "available": info.replicas.available,
        "restartedAt": rollout.spec.restart_at.as_ref().map_or_else(|| "Never".to_owned(), |t| t.0.to_string()),
        "generation": status.and_then(|s| s.observed_generation.clone()).unwrap_or_default(),
        "replicaSets": replica_sets,
        "experiments": experiments,
        "analysisRuns": analysis_runs,
        "containers": containers,
        "steps": steps,
    })
}

fn time(at: Option<Timestamp>) -> Value {
    at.map_or(Value::Null, |t| Value::String(t.to_string()))
}

fn meta(name: &str, namespace: &str, created: Option<Timestamp>) -> Value {
    json!({"name": name, "namespace": namespace, "creationTimestamp": time(created)})
}

fn replica_set(rs: &ReplicaSetInfo, revision: i64, rollout: &str, namespace: &str) -> Value {
    let tagged = |tag: &str| rs.tags.iter().any(|t| t == tag);
    // A Rollout's ReplicaSets are named `<rollout>-<pod-template-hash>`.
    let hash = rs
        .name
        .strip_prefix(rollout)
        .and_then(|rest| rest.strip_prefix('-'))
        .unwrap_or_default();
    json!({
        "objectMeta": meta(&rs.name, namespace, rs.created),
        "status": rs.status,
        "icon": phase_icon(rs.status),
        "revision": revision,
        "stable": tagged(TAG_STABLE),
        "canary": tagged(TAG_CANARY),
        "active": tagged(TAG_ACTIVE),
        "preview": tagged(TAG_PREVIEW),
        "replicas": rs.desired,
        "available": rs.available,
        "template": hash,
        "images": rs.images,
        "pods": rs.pods.iter().map(|p| pod(p, namespace)).collect::<Vec<_>>(),
    })
}

fn pod(pod: &PodInfo, namespace: &str) -> Value {
    json!({
        "objectMeta": meta(&pod.name, namespace, pod.created),
        "status": pod.status,
        "icon": pod_icon(&pod.status),
        "ready": format!("{}/{}", pod.ready_containers, pod.containers),
        "restarts": pod.restarts,
    })
}

fn analysis_run(
    run: &AnalysisRunInfo,
    revision: i64,
    namespace: &str,
    runs: &[AnalysisRun],
) -> Value {
    let raw = runs.iter().find(|r| {
        r.metadata.name.as_deref() == Some(run.name.as_str())
            && r.metadata.namespace.as_deref() == Some(namespace)
    });
    let metric = raw.and_then(|r| r.spec.metrics.as_ref()?.first());
    json!({
        "objectMeta": meta(&run.name, namespace, run.created),
        "icon": phase_icon(&run.status),
        "revision": revision,
        "status": run.status,
        "successful": run.successful,
        "failed": run.failed,
        "inconclusive": run.inconclusive,
        "error": run.error,
        "nonJobInfo": raw.map(measurements).unwrap_or_default(),
        "successCondition": metric.and_then(|m| m.success_condition.clone()).unwrap_or_default(),
        "count": int(metric.and_then(|m| m.count.as_ref())),
        "failureLimit": int(metric.and_then(|m| m.failure_limit.as_ref())),
        "inconclusiveLimit": int(metric.and_then(|m| m.inconclusive_limit.as_ref())),
    })
}

/// An int-or-string limit of a metric as the number it stands for (0 when unset or not a
/// number: an unresolved argument).
fn int(value: Option<&IntOrString>) -> i32 {
    match value {
        Some(IntOrString::Int(n)) => *n,
        Some(IntOrString::String(s)) => s.parse().unwrap_or(0),
        None => 0,
    }
}

/// Every measurement of every metric, in Argo's `NonJobInfo` shape, plus the metric's name
/// (an addition, so that a chart can draw one line per metric).
fn measurements(run: &AnalysisRun) -> Vec<Value> {
    let results = run
        .status
        .as_ref()
        .and_then(|s| s.metric_results.as_deref())
        .unwrap_or_default();
    results
        .iter()
        .flat_map(|result| {
            let metric = result.name.clone().unwrap_or_default();
            result.measurements.iter().flatten().map(move |m| {
                json!({
                    "metricName": metric,
                    "value": m.value.clone().unwrap_or_default(),
                    "status": m.phase.as_ref().map(|p| p.as_str()).unwrap_or_default(),
                    "startedAt": m.started_at.as_ref().map(|t| t.0.to_string()),
                })
            })
        })
        .collect()
}

fn experiment(exp: &ExperimentInfo, revision: i64, runs: &[AnalysisRun]) -> Value {
    json!({
        "objectMeta": meta(&exp.name, &exp.namespace, exp.created),
        "icon": phase_icon(&exp.phase),
        "revision": revision,
        "status": exp.phase,
        "message": exp.message,
        "replicaSets": exp.replica_sets.iter().map(|rs| replica_set(rs, revision, &exp.name, &exp.namespace)).collect::<Vec<_>>(),
        "analysisRuns": exp.analysis_runs.iter().map(|r| analysis_run(r, revision, &exp.namespace, runs)).collect::<Vec<_>>(),
    })
}

/// The Font Awesome class Argo's info gives a phase.
fn phase_icon(phase: &str) -> &'static str {
    match phase {
        "Healthy" | "Successful" => "fa-check-circle",
        "Progressing" | "Running" | "Pending" => "fa-circle-notch",
        "Paused" | "Inconclusive" => "fa-pause-circle",
        "Degraded" | "Failed" | "Error" => "fa-times-circle",
        "ScaledDown" => "fa-dot-circle",
        _ => "fa-question-circle",
    }
}

fn pod_icon(status: &str) -> &'static str {
    match status {
        "Running" | "Completed" => "fa-check",
        "Pending" | "ContainerCreating" | "Terminating" => "fa-circle-notch",
        _ if status.contains("Err") || status.contains("BackOff") || status == "Failed" => {
            "fa-times"
        }
        _ => "fa-question-circle",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::info::fixtures::{canary_world, now};

    #[test]
    fn a_paused_canary_in_argos_shape() {
        let (rollout, replica_sets, pods) = canary_world();
        let info = RolloutInfo::new(&rollout, &replica_sets, &pods, now());
        let json = rollout_info(&rollout, &info, &[]);
        assert_eq!(json["objectMeta"]["name"], "demo");
        assert_eq!(json["objectMeta"]["namespace"], "shop");
        assert_eq!(json["status"], "Paused");
        assert_eq!(json["strategy"], "Canary");
        assert_eq!(json["step"], "1");
        assert_eq!(json["setWeight"], "20");
        assert_eq!(json["desired"], 4);
        assert_eq!(json["generation"], "2");
        assert_eq!(json["restartedAt"], "Never");
        assert_eq!(
            json["containers"],
            json!([{"name": "app", "image": "demo:v2"}])
        );
        assert_eq!(json["steps"].as_array().map(Vec::len), Some(3));
        assert_eq!(json["steps"][0], json!({"setWeight": 20}));
        let sets = json["replicaSets"].as_array().unwrap();
        assert_eq!(sets.len(), replica_sets.len());
        let canary = sets.iter().find(|rs| rs["canary"] == true).unwrap();
        assert_eq!(canary["template"], "h2");
        assert_eq!(canary["stable"], false);
        let stable = sets.iter().find(|rs| rs["stable"] == true).unwrap();
        assert_eq!(stable["template"], "h1");
        let pod = &stable["pods"][0];
        assert_eq!(pod["ready"], "1/1");
        assert_eq!(pod["icon"], "fa-check");
    }
}
