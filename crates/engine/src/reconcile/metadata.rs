//! Ephemeral pod metadata in a reconcile: a new ReplicaSet starts with the metadata of its
//! role, and a ReplicaSet whose role changed gets the new role's metadata on its running pods
//! (patched in place, no restart) and then in its pod template, with the record of what was
//! injected. The roles are read from the observed status, exactly as the observe step decided
//! whether to list pods ([`crate::observed::Observed::needs_pods`]), so the pods are always there.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use sluice_api::rollout::AntiAffinity;

use super::world::World;
use crate::ephemeral::{self, PodMetadata, Role};
use crate::labels::POD_TEMPLATE_HASH;
use crate::observed::ReplicaSetExt;
use crate::plan::{Action, Event, Plan};
use crate::replicaset;

impl World<'_> {
    /// Plans the creation of the new ReplicaSet ([`Self::new_replica_set`]) at `replicas`,
    /// with Argo's `NewReplicaSetCreated` event. Returns the `ScalingReplicaSet` event of its
    /// scale-up from 0, for the caller to publish where Argo does: after what Argo does between
    /// creating a ReplicaSet and scaling it (routing the preview Service to it, announcing the
    /// update with `RolloutNotCompleted`).
    #[must_use]
    pub(super) fn create_new_replica_set(
        &self,
        plan: &mut Plan,
        events: &mut Vec<Event>,
        revision: i64,
        replicas: i32,
        anti_affinity: Option<(&AntiAffinity, &str)>,
        new_is_stable: bool,
    ) -> Event {
        let rs = self.new_replica_set(revision, replicas, anti_affinity, new_is_stable);
        events.push(Event::normal(
            "NewReplicaSetCreated",
            format!(
                "Created ReplicaSet {} (revision {revision})",
                self.new_rs_name()
            ),
        ));
        plan.actions.push(Action::CreateReplicaSet {
            replica_set: Box::new(rs),
        });
        Event::normal(
            "ScalingReplicaSet",
            format!(
                "Scaled up ReplicaSet {} (revision {revision}) from 0 to {replicas}",
                self.new_rs_name(),
            ),
        )
    }

    /// The new ReplicaSet for the current template, its pods carrying the metadata of the role
    /// it starts in: stable when it is stable at once, the update's otherwise.
    pub(super) fn new_replica_set(
        &self,
        revision: i64,
        replicas: i32,
        anti_affinity: Option<(&AntiAffinity, &str)>,
        new_is_stable: bool,
    ) -> ReplicaSet {
        let mut rs = replicaset::build(
            self.ro,
            &self.spec.pod_hash,
            revision,
            replicas,
            anti_affinity,
        );
        let role = if new_is_stable {
            Role::Stable
        } else {
            Role::Update
        };
        let metadata = PodMetadata::for_role(self.ro, role);
        if let Some(record) = metadata.record() {
            let template_meta = rs
                .spec
                .as_mut()
                .and_then(|s| s.template.as_mut())
                .map(|t| t.metadata.get_or_insert_with(Default::default));
            if let Some(meta) = template_meta {
                metadata.inject(meta);
            }
            rs.metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(crate::labels::EPHEMERAL_METADATA.into(), record);
        }
        rs
    }

    /// Brings every ReplicaSet whose recorded metadata is not its role's up to date: its pods
    /// first, then its template and record, so that a failure part-way leaves the record
    /// unchanged and the next reconcile does it again. A ReplicaSet this plan already writes
    /// waits for the next reconcile, whose observation has that write's resourceVersion.
    pub(super) fn sync_pod_metadata(&self, plan: &mut Plan) {
        let written = written_replica_sets(plan);
        let stale = ephemeral::out_of_date(self.ro, self.all.iter().copied(), &self.spec.pod_hash);
        let mut actions = Vec::new();
        for (rs, want) in stale {
            if written.contains(rs.name()) {
                continue;
            }
            let had = PodMetadata::recorded(rs);
            for pod in self.live_pods_of(rs) {
                let c = ephemeral::changes(&had, &want, &pod.metadata);
                if !c.is_empty() {
                    actions.push(Action::PatchPodMetadata {
                        name: pod.metadata.name.clone().unwrap_or_default(),
                        resource_version: pod.metadata.resource_version.clone(),
                        labels: c.labels,
                        annotations: c.annotations,
                    });
                }
            }
            let template_meta = rs
                .spec
                .as_ref()
                .and_then(|s| s.template.as_ref())
                .and_then(|t| t.metadata.clone())
                .unwrap_or_default();
            let c = ephemeral::changes(&had, &want, &template_meta);
            actions.push(Action::SetReplicaSetPodMetadata {
                name: rs.name().to_string(),
                resource_version: rs.metadata.resource_version.clone(),
                labels: c.labels,
                annotations: c.annotations,
                record: want.record(),
            });
        }
        plan.actions.extend(actions);
    }

    /// Pods of `rs` (by their pod-template hash) that are not on their way out.
    fn live_pods_of<'p>(&'p self, rs: &'p ReplicaSet) -> impl Iterator<Item = &'p Pod> + 'p {
        let hash = rs.pod_hash();
        self.pods.iter().filter(move |p| {
            p.metadata.deletion_timestamp.is_none()
                && hash.is_some()
                && p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(POD_TEMPLATE_HASH))
                    .map(String::as_str)
                    == hash
        })
    }
}

/// ReplicaSets a plan changes (a precondition-only confirmation changes nothing).
fn written_replica_sets(plan: &Plan) -> BTreeSet<&str> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::ScaleReplicaSet { name, .. }
            | Action::AnnotateReplicaSet { name, .. }
            | Action::DeleteReplicaSet { name, .. }
            | Action::SetReplicaSetPodMetadata { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect()
}
