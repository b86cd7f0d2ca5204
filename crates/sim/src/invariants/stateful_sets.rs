//! The checks of Rollouts driving a StatefulSet (`rollouts.sluice.dev/statefulset`): an
//! analysis step holds the partition until its run for that revision is Successful, and at
//! quiescence the StatefulSet has settled on the revision the inputs dictate, its partition
//! closed.

use serde_json::Value;
use sluice_api::Rollout;
use sluice_engine::analysis::STEP_INDEX;
use sluice_engine::labels::POD_TEMPLATE_HASH;
use sluice_engine::statefulset::{partition_for, stateful_set_name};

use super::Expect;
use super::analysis::Found;
use crate::api_model::{ApiServer, Kind, name_of};
use crate::kubelet::image_of_template;
use crate::stateful_sets::{partition, replicas, status_revision};

/// No more pods run an update revision than the weight before its analysis step allows,
/// unless that step's run for the revision is Successful.
pub const ANALYSIS_GATES_THE_PARTITION: &str = "statefulset-analysis-gates-the-partition";
/// At quiescence every pod runs one revision, the one the inputs dictate, which is the
/// Rollout's stable one, and the partition is closed again.
pub const SETTLED: &str = "statefulset-settled-at-quiescence";

/// The Rollouts driving a StatefulSet, with it.
fn driving(api: &ApiServer) -> Vec<(Rollout, Value)> {
    api.list(Kind::Rollout)
        .into_iter()
        .filter_map(|ro| serde_json::from_value::<Rollout>(ro).ok())
        .filter_map(|ro| {
            let sts = api.get(Kind::StatefulSet, stateful_set_name(&ro)?)?.clone();
            Some((ro, sts))
        })
        .collect()
}

pub fn after_change(api: &ApiServer) -> Found {
    let mut found = Found::new();
    for (ro, sts) in driving(api) {
        let (Some(update), Some(current)) = (
            status_revision(&sts, "updateRevision"),
            status_revision(&sts, "currentRevision"),
        ) else {
            continue;
        };
        if update == current {
            continue;
        }
        let Some(canary) = ro.spec.strategy.as_ref().and_then(|s| s.canary.as_ref()) else {
            continue;
        };
        let steps = sluice_engine::steps::steps(canary);
        let Some(gate) = steps.iter().position(|s| s.analysis.is_some()) else {
            continue;
        };
        let replicas = replicas(&sts) as i32;
        let weight = sluice_engine::steps::weight_at(canary, gate as i32);
        let allowed = replicas - partition_for(replicas, weight);
        let updated = sts
            .pointer("/status/updatedReplicas")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if updated <= i64::from(allowed) {
            continue;
        }
        let passed = api.list(Kind::AnalysisRun).iter().any(|run| {
            let label = |key: &str| run.pointer(&format!("/metadata/labels/{key}"))?.as_str();
            label(POD_TEMPLATE_HASH) == Some(update)
                && label(STEP_INDEX) == Some(gate.to_string().as_str())
                && run.pointer("/status/phase").and_then(Value::as_str) == Some("Successful")
        });
        if !passed {
            found.push((
                ANALYSIS_GATES_THE_PARTITION,
                format!(
                    "statefulset/{}: {updated} pods on revision {update}, above the {allowed} of \
                     step {gate}'s weight {weight}%, without a Successful run of that step",
                    name_of(&sts)
                ),
            ));
        }
    }
    found
}

pub fn at_quiescence(api: &ApiServer, expect: &Expect) -> Found {
    let mut found = Found::new();
    for (ro, sts) in driving(api) {
        let name = name_of(&sts);
        let count = |field: &str| {
            sts.pointer(&format!("/status/{field}"))
                .and_then(Value::as_i64)
                .unwrap_or(0)
        };
        let replicas = replicas(&sts);
        let update = status_revision(&sts, "updateRevision").unwrap_or_default();
        let current = status_revision(&sts, "currentRevision").unwrap_or_default();
        let image = sts
            .pointer("/spec/template")
            .map(image_of_template)
            .unwrap_or_default();
        let stable = ro
            .status
            .as_ref()
            .and_then(|s| s.stable_rs.as_deref())
            .unwrap_or_default();
        let settled = update == current
            && count("updatedReplicas") == replicas
            && count("readyReplicas") == replicas;
        if !settled
            || partition(&sts) != replicas
            || image != expect.stable_image
            || stable != update
        {
            found.push((
                SETTLED,
                format!(
                    "statefulset/{name}: revisions update {update} current {current}, {} updated, \
                     {} ready of {replicas}, partition {}, image {image} (expected {}), the \
                     Rollout's stable {stable}",
                    count("updatedReplicas"),
                    count("readyReplicas"),
                    partition(&sts),
                    expect.stable_image,
                ),
            ));
        }
    }
    found
}
