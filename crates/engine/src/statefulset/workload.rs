//! The StatefulSet as a driven workload: a step writes the partition, the StatefulSet
//! controller replaces the pods at and above it; an abort puts the stable template back with
//! the partition where it was, so exactly the updated ordinals roll back.

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;
use sluice_api::rollout::Rollout;

use super::model::{Sts, partition_for};
use super::{StatefulSetObserved, UPDATED_STATEFUL_SET, stateful_set_name};
use crate::controller_revision::{REVISION_LABEL, pod_is_ready};
use crate::driven::{Checked, Counts, Driven, Target, check_spec};
use crate::plan::{Action, Event, Plan};

/// The StatefulSet's fields a reconcile changes; all go in one write (two writes at the same
/// resourceVersion would make the second conflict).
#[derive(Debug, Default)]
struct Edit {
    partition: Option<i32>,
    /// The stable revision's template, with the hash of that revision (an abort).
    template: Option<(Value, String)>,
}

/// A StatefulSet a Rollout drives, as read, with what this reconcile changes of it.
pub(super) struct StsWorkload<'a> {
    sts: Sts<'a>,
    /// Its pods, read only while an abort rolls them back ([`super::pods_wanted`]).
    pods: &'a [Pod],
    edit: Edit,
}

/// What this version can drive: a valid spec and an existing StatefulSet with the
/// `RollingUpdate` strategy. `Err` is the InvalidSpec message.
pub(super) fn check<'a>(
    ro: &'a Rollout,
    observed: Option<&'a StatefulSetObserved>,
    pods: &'a [Pod],
) -> Checked<'a, StsWorkload<'a>> {
    let canary = check_spec(ro, StsWorkload::KIND)?;
    let name = stateful_set_name(ro).unwrap_or_default();
    let Some(object) = observed.and_then(|o| o.stateful_set.as_ref()) else {
        return Err(format!("statefulsets.apps \"{name}\" not found"));
    };
    let sts = Sts(object);
    if sts.strategy_type() != "RollingUpdate" {
        return Err(format!(
            "StatefulSet \"{name}\": spec.updateStrategy.type: Unsupported value: \"{}\": \
             supported values: \"RollingUpdate\" (a partition means nothing to {0})",
            sts.strategy_type()
        ));
    }
    let revisions = observed.map_or(&[][..], |o| o.revisions.as_slice());
    let workload = StsWorkload {
        sts,
        pods,
        edit: Edit::default(),
    };
    Ok((workload, revisions, canary))
}

impl StsWorkload<'_> {
    fn partition_for(&self, target: Target) -> i32 {
        let replicas = self.sts.replicas();
        match target {
            Target::Weight(weight) => partition_for(replicas, weight),
            Target::Count(count) => (replicas - count.clamp(0, replicas)).max(0),
        }
    }

    /// With the stable template back, the StatefulSet controller replaces the aborted
    /// revision's pods one by one, but it waits for a pod that is not Ready before it touches
    /// any other (Kubernetes' "forced rollback": the pods of a template that never got ready
    /// have to be deleted by hand). Those pods are evicted, so the rollback goes on.
    fn evict_stuck_pods(&self, aborted: &str, plan: &mut Plan, events: &mut Vec<Event>) {
        let revision = format!("{}-{aborted}", self.sts.name());
        for pod in self.pods {
            let on_aborted = pod
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(REVISION_LABEL))
                == Some(&revision);
            if !on_aborted || pod.metadata.deletion_timestamp.is_some() || pod_is_ready(pod) {
                continue;
            }
            let name = pod.metadata.name.clone().unwrap_or_default();
            events.push(Event::normal(
                "EvictedStuckPod",
                format!(
                    "Evicted pod {name}: it runs the aborted revision {aborted} and is not ready, \
                     and the StatefulSet controller waits for it before rolling back"
                ),
            ));
            plan.actions.push(Action::EvictPod {
                name,
                uid: pod.metadata.uid.clone(),
            });
        }
    }
}

impl Driven for StsWorkload<'_> {
    const KIND: &'static str = "StatefulSet";

    fn object(&self) -> &Value {
        self.sts.0
    }

    fn size(&self) -> i32 {
        self.sts.replicas()
    }

    fn revisions(&self) -> Option<(String, String)> {
        self.sts
            .revisions()
            .map(|(update, current)| (update.to_string(), current.to_string()))
    }

    fn counts(&self, pod_hash: &str, revisions: Option<(&str, &str)>) -> Counts {
        let sts = self.sts;
        Counts {
            replicas: sts.status_replicas(),
            ready: sts.ready(),
            available: sts.available(),
            updated: match revisions {
                Some((update, _)) if update == pod_hash => sts.updated(),
                Some((_, current)) if current == pod_hash => sts.current(),
                _ => 0,
            },
        }
    }

    fn all_updated(&self) -> bool {
        self.sts.all_updated()
    }

    fn advance(&mut self, _update: &str, target: Target) -> bool {
        let wanted = self.partition_for(target);
        if self.edit.partition.is_none() && self.sts.partition() != Some(wanted) {
            self.edit.partition = Some(wanted);
        }
        self.edit.partition.is_none() && self.sts.at_partition(wanted)
    }

    fn waiting_for(&self, target: Target) -> String {
        format!(
            "StatefulSet {} (ordinals {} and above on the update revision)",
            self.sts.name(),
            self.partition_for(target)
        )
    }

    /// Once every pod runs the current revision, the partition goes back to the replica count:
    /// the next template edit then updates no pod before a step asks for it.
    fn settle(&mut self) -> bool {
        let settled = self.sts.all_updated();
        let replicas = self.sts.replicas();
        if settled && self.sts.partition().unwrap_or(0) < replicas {
            self.edit.partition = Some(replicas);
        }
        settled
    }

    fn roll_back(
        &mut self,
        aborted: &str,
        _stable: &str,
        plan: &mut Plan,
        events: &mut Vec<Event>,
    ) -> bool {
        if self.settle() {
            return true;
        }
        self.evict_stuck_pods(aborted, plan, events);
        false
    }

    fn restore_template(&mut self, template: Value, hash: String) {
        self.edit.template = Some((template, hash));
    }

    /// The plan's one write of the StatefulSet: the object as read, with the partition and
    /// template changed, carrying the resourceVersion it was read at.
    fn write(&mut self, plan: &mut Plan, events: &mut Vec<Event>) {
        let edit = std::mem::take(&mut self.edit);
        if edit.partition.is_none() && edit.template.is_none() {
            return;
        }
        let mut object = self.sts.0.clone();
        let name = self.sts.name().to_string();
        // The status is not the Rollout's to write, and the API server ignores it here.
        if let Some(fields) = object.as_object_mut() {
            fields.remove("status");
        }
        if let Some(partition) = edit.partition {
            let from = self
                .sts
                .partition()
                .map_or("unset".to_string(), |p| p.to_string());
            object["spec"]["updateStrategy"]["type"] = "RollingUpdate".into();
            object["spec"]["updateStrategy"]["rollingUpdate"]["partition"] = partition.into();
            events.push(Event::normal(
                UPDATED_STATEFUL_SET,
                format!("Set the partition of StatefulSet {name} to {partition} (from {from})"),
            ));
        }
        if let Some((template, hash)) = edit.template {
            object["spec"]["template"] = template;
            events.push(Event::normal(
                UPDATED_STATEFUL_SET,
                format!("Restored the template of StatefulSet {name} to revision {hash}"),
            ));
        }
        plan.actions.push(Action::UpdateStatefulSet {
            name,
            object: Box::new(object),
        });
    }
}
