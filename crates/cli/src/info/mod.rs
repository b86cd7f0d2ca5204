//! What `get` and `list` show about a Rollout, distilled from the Rollout, its ReplicaSets and
//! their pods. Pure: the objects and the current time go in, plain values come out.

use std::borrow::Borrow;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sluice_api::analysis::AnalysisRun;
use sluice_api::experiment::Experiment;
use sluice_api::rollout::{DEFAULT_MAX_TRAFFIC_WEIGHT, Rollout, RolloutPhase, RolloutStatus};
use sluice_engine::labels::{POD_TEMPLATE_HASH, REVISION, SCALE_DOWN_DEADLINE};

pub use replica_set::ReplicaSetFacts;

use crate::phase::rollout_phase;
use experiment::ExperimentInfo;

/// Tags of a ReplicaSet's role, in the order they are shown.
pub const TAG_STABLE: &str = "stable";
pub const TAG_CANARY: &str = "canary";
pub const TAG_ACTIVE: &str = "active";
pub const TAG_PREVIEW: &str = "preview";

/// A Rollout as shown to a user.
#[derive(Debug, Clone, PartialEq)]
pub struct RolloutInfo {
    pub name: String,
    pub namespace: String,
    pub created: Option<Timestamp>,
    pub phase: RolloutPhase,
    pub message: String,
    pub strategy: Strategy,
    /// `current/total` canary steps, when the canary has steps and a current index.
    pub step: Option<String>,
    /// Weight the current canary step asks for.
    pub set_weight: Option<i32>,
    /// Weight the canary actually gets: by traffic routing, or by available pods.
    pub actual_weight: Option<i32>,
    pub images: Vec<ImageInfo>,
    pub replicas: ReplicaCounts,
    /// Newest revision first.
    pub revisions: Vec<RevisionInfo>,
}

/// The update strategy of a Rollout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    Canary,
    BlueGreen,
    /// Neither (an invalid spec).
    Unset,
}

impl Strategy {
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Canary => "Canary",
            Strategy::BlueGreen => "BlueGreen",
            Strategy::Unset => "-",
        }
    }
}

/// Replica counts of the Rollout's status, and the desired count of its spec.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplicaCounts {
    pub desired: i32,
    pub current: i32,
    pub updated: i32,
    pub ready: i32,
    pub available: i32,
}

/// An image in use and the roles of the ReplicaSets running it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    pub image: String,
    pub tags: Vec<&'static str>,
}

/// The ReplicaSets, Experiments and AnalysisRuns of one revision.
#[derive(Debug, Clone, PartialEq)]
pub struct RevisionInfo {
    pub revision: i64,
    pub replica_sets: Vec<ReplicaSetInfo>,
    pub experiments: Vec<ExperimentInfo>,
    pub analysis_runs: Vec<AnalysisRunInfo>,
}

impl RevisionInfo {
    fn new(revision: i64) -> Self {
        Self {
            revision,
            replica_sets: Vec::new(),
            experiments: Vec::new(),
            analysis_runs: Vec::new(),
        }
    }
}

/// An AnalysisRun of the Rollout: its phase and how its measurements went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnalysisRunInfo {
    pub name: String,
    pub created: Option<Timestamp>,
    /// The run's phase (`Pending` before the controller has seen it).
    pub status: String,
    pub successful: i32,
    pub failed: i32,
    pub inconclusive: i32,
    pub error: i32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ReplicaSetInfo {
    pub name: String,
    pub created: Option<Timestamp>,
    /// `Healthy`, `Progressing` or `ScaledDown`.
    pub status: &'static str,
    /// Roles (`stable`, `canary`, `active`, `preview`) then `delay:…` while a scale-down waits.
    pub tags: Vec<String>,
    pub images: Vec<String>,
    pub desired: i32,
    pub current: i32,
    pub available: i32,
    pub pods: Vec<PodInfo>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodInfo {
    pub name: String,
    pub created: Option<Timestamp>,
    /// What `kubectl get pods` shows in STATUS (`Running`, `ContainerCreating`, …).
    pub status: String,
    pub ready_containers: usize,
    pub containers: usize,
    pub restarts: i32,
}

impl RolloutInfo {
    /// Describes `rollout` from its own status only (a list of Rollouts reads nothing else).
    pub fn alone(rollout: &Rollout, now: Timestamp) -> Self {
        Self::new::<ReplicaSet, Pod>(rollout, &[], &[], now)
    }

    /// Describes `rollout` with the ReplicaSets it controls among `replica_sets` and their pods
    /// among `pods` (matched by the pod-template-hash label).
    /// The objects may be owned or borrowed (a dashboard passes references into its caches
    /// rather than copies).
    pub fn new<R: ReplicaSetFacts, P: Borrow<Pod>>(
        rollout: &Rollout,
        replica_sets: &[R],
        pods: &[P],
        now: Timestamp,
    ) -> Self {
        let default_status = RolloutStatus::default();
        let status = rollout.status.as_ref().unwrap_or(&default_status);
        let (phase, message) = rollout_phase(rollout);
        let strategy = if rollout.canary().is_some() {
            Strategy::Canary
        } else if rollout.blue_green().is_some() {
            Strategy::BlueGreen
        } else {
            Strategy::Unset
        };

        let mut owned: Vec<ReplicaSetInfo> = Vec::new();
        let mut revisions: Vec<RevisionInfo> = Vec::new();
        let mut sorted: Vec<&R> = replica_sets
            .iter()
            .filter(|rs| is_controlled_by(rs.metadata(), &rollout.metadata))
            .collect();
        sorted.sort_by(|a, b| {
            b.revision()
                .unwrap_or(0)
                .cmp(&a.revision().unwrap_or(0))
                .then_with(|| a.name().cmp(b.name()))
        });
        for rs in sorted {
            let info = replica_set_info(rollout, status, rs, pods, now);
            let revision = rs.revision().unwrap_or(0);
            match revisions.last_mut() {
                Some(last) if last.revision == revision => last.replica_sets.push(info.clone()),
                _ => revisions.push(RevisionInfo {
                    replica_sets: vec![info.clone()],
                    ..RevisionInfo::new(revision)
                }),
            }
            owned.push(info);
        }

        let (step, set_weight, actual_weight) = match strategy {
            Strategy::Canary => canary_progress(rollout, status, &owned),
            _ => (None, None, None),
        };

        Self {
            name: rollout.metadata.name.clone().unwrap_or_default(),
            namespace: rollout.metadata.namespace.clone().unwrap_or_default(),
            created: created(&rollout.metadata),
            phase,
            message,
            strategy,
            step,
            set_weight,
            actual_weight,
            images: images_in_use(&owned),
            replicas: ReplicaCounts {
                desired: rollout.desired_replicas(),
                current: status.replicas.unwrap_or(0),
                updated: status.updated_replicas.unwrap_or(0),
                ready: status.ready_replicas.unwrap_or(0),
                available: status.available_replicas.unwrap_or(0),
            },
            revisions,
        }
    }
}

impl RolloutInfo {
    /// Adds the AnalysisRuns `rollout` controls among `runs` to their revisions (by the
    /// `rollout.argoproj.io/revision` annotation), oldest first.
    pub fn with_analysis_runs(mut self, rollout: &Rollout, runs: &[AnalysisRun]) -> Self {
        let mut owned: Vec<&AnalysisRun> = runs
            .iter()
            .filter(|r| is_controlled_by(&r.metadata, &rollout.metadata))
            .collect();
        owned.sort_by_key(|r| (created(&r.metadata), r.metadata.name.clone()));
        for run in owned {
            let info = analysis_run_info(run);
            self.revision_mut(revision_of(&run.metadata))
                .analysis_runs
                .push(info);
        }
        self
    }

    /// Adds the Experiments `rollout` controls among `experiments` to their revisions, oldest
    /// first, each with its own ReplicaSets (and their pods) and AnalysisRuns.
    pub fn with_experiments<R: ReplicaSetFacts>(
        mut self,
        rollout: &Rollout,
        experiments: &[Experiment],
        replica_sets: &[R],
        pods: &[Pod],
        runs: &[AnalysisRun],
        now: Timestamp,
    ) -> Self {
        let mut owned: Vec<&Experiment> = experiments
            .iter()
            .filter(|e| is_controlled_by(&e.metadata, &rollout.metadata))
            .collect();
        owned.sort_by_key(|e| (created(&e.metadata), e.metadata.name.clone()));
        for exp in owned {
            let info = ExperimentInfo::new(exp, replica_sets, pods, runs, now);
            self.revision_mut(revision_of(&exp.metadata))
                .experiments
                .push(info);
        }
        self
    }

    /// The entry of `revision`, added in order (newest first) when there is none yet.
    fn revision_mut(&mut self, revision: i64) -> &mut RevisionInfo {
        let at = match self.revisions.iter().position(|r| r.revision <= revision) {
            Some(at) if self.revisions[at].revision == revision => at,
            Some(at) => {
                self.revisions.insert(at, RevisionInfo::new(revision));
                at
            }
            None => {
                self.revisions.push(RevisionInfo::new(revision));
                self.revisions.len() - 1
            }
        };
        &mut self.revisions[at]
    }
}

/// The `rollout.argoproj.io/revision` annotation of an object made for a Rollout (0 without).
fn revision_of(meta: &ObjectMeta) -> i64 {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(REVISION))
        .and_then(|r| r.parse::<i64>().ok())
        .unwrap_or(0)
}

pub(crate) fn analysis_run_info(run: &AnalysisRun) -> AnalysisRunInfo {
    let status = run.status.as_ref();
    let phase = status
        .and_then(|s| s.phase.as_ref())
        .map_or("Pending", |p| p.as_str());
    let sum = |f: fn(&sluice_api::analysis::MetricResult) -> Option<i32>| {
        status
            .and_then(|s| s.metric_results.as_ref())
            .map_or(0, |results| results.iter().filter_map(f).sum())
    };
    AnalysisRunInfo {
        name: run.metadata.name.clone().unwrap_or_default(),
        created: created(&run.metadata),
        status: phase.to_string(),
        successful: sum(|m| m.successful),
        failed: sum(|m| m.failed),
        inconclusive: sum(|m| m.inconclusive),
        error: sum(|m| m.error),
    }
}

/// Whether `child` names the Rollout `owner` as its controller. Without a UID on the owner (an
/// object not read from a cluster) the name decides.
pub fn is_controlled_by(child: &ObjectMeta, owner: &ObjectMeta) -> bool {
    is_controlled_by_kind(child, "Rollout", owner)
}

/// Whether `child` names `owner`, of kind `kind`, as its controller (by UID, else by name).
pub fn is_controlled_by_kind(child: &ObjectMeta, kind: &str, owner: &ObjectMeta) -> bool {
    child.owner_references.iter().flatten().any(|r| {
        r.controller == Some(true)
            && r.kind == kind
            && match &owner.uid {
                Some(uid) => &r.uid == uid,
                None => Some(&r.name) == owner.name.as_ref(),
            }
    })
}

pub(crate) fn created(meta: &ObjectMeta) -> Option<Timestamp> {
    meta.creation_timestamp.as_ref().map(|t| t.0)
}

/// Step `i/n`, the weight set by the current step, and the weight the canary really gets.
///
/// The set weight is the last `setWeight` at or before the current step (0 before any, 0 once
/// aborted, 100 without steps or past the last one). The actual weight is the router's weight
/// recorded in `status.canary.weights` under traffic routing, else the share of available pods
/// that are canary pods; past the last step it is the full weight. Weights are shown as they are,
/// in the scale of `maxTrafficWeight`.
fn canary_progress(
    rollout: &Rollout,
    status: &RolloutStatus,
    replica_sets: &[ReplicaSetInfo],
) -> (Option<String>, Option<i32>, Option<i32>) {
    let steps = rollout.steps();
    let step = match status.current_step_index {
        Some(index) if !steps.is_empty() => Some(format!("{index}/{}", steps.len())),
        _ => None,
    };
    let index = usize::try_from(status.current_step_index.unwrap_or(0)).unwrap_or(0);
    let in_steps = !steps.is_empty() && index < steps.len();
    let set_weight = if status.is_aborted() {
        0
    } else if !in_steps {
        100
    } else {
        steps[..=index]
            .iter()
            .rev()
            .find_map(|s| s.set_weight)
            .unwrap_or(0)
    };
    let routing = rollout.canary().and_then(|c| c.traffic_routing.as_ref());
    let available = status.available_replicas.unwrap_or(0);
    let actual_weight = if !in_steps {
        routing.map_or(DEFAULT_MAX_TRAFFIC_WEIGHT, |r| r.max_traffic_weight())
    } else if available <= 0 {
        0
    } else if routing.is_some() {
        routed_weight(status).unwrap_or(set_weight)
    } else {
        replica_sets
            .iter()
            .find(|rs| rs.tags.iter().any(|t| t == TAG_CANARY))
            .map(|rs| rs.available * 100 / available)
            .unwrap_or(0)
    };
    (step, Some(set_weight), Some(actual_weight))
}

/// The canary weight the traffic router was last set to, once the controller has recorded
/// weights (a recorded entry without a canary weight counts as 0).
fn routed_weight(status: &RolloutStatus) -> Option<i32> {
    let weights = status.canary.as_ref()?.weights.as_ref()?;
    Some(weights.canary.as_ref().and_then(|d| d.weight).unwrap_or(0))
}

fn replica_set_info<P: Borrow<Pod>>(
    rollout: &Rollout,
    status: &RolloutStatus,
    rs: &impl ReplicaSetFacts,
    pods: &[P],
    now: Timestamp,
) -> ReplicaSetInfo {
    let hash = rs.pod_hash().unwrap_or_default();
    let mut tags: Vec<String> = Vec::new();
    let stable = !hash.is_empty() && status.stable_rs.as_deref() == Some(hash);
    if stable {
        tags.push(TAG_STABLE.into());
    }
    if rollout.canary().is_some() && !stable && status.current_pod_hash.as_deref() == Some(hash) {
        tags.push(TAG_CANARY.into());
    }
    if rollout.blue_green().is_some() {
        let selectors = status.blue_green.as_ref();
        let active = selectors.and_then(|b| b.active_selector.as_deref());
        let preview = selectors.and_then(|b| b.preview_selector.as_deref());
        if !hash.is_empty() && active == Some(hash) {
            tags.push(TAG_ACTIVE.into());
        } else if !hash.is_empty() && preview == Some(hash) {
            tags.push(TAG_PREVIEW.into());
        }
    }
    replica_set_summary(rs, tags, pods, now)
}

/// A ReplicaSet with the role `tags` given, then `delay:…` while a scale-down waits: its
/// status, images, counts and the pods of its pod-template hash among `pods`.
pub(crate) fn replica_set_summary<P: Borrow<Pod>>(
    rs: &impl ReplicaSetFacts,
    mut tags: Vec<String>,
    pods: &[P],
    now: Timestamp,
) -> ReplicaSetInfo {
    let hash = rs.pod_hash().unwrap_or_default();
    if let Some(deadline) = rs.annotation(SCALE_DOWN_DEADLINE).filter(|d| !d.is_empty()) {
        tags.push(match deadline.parse::<Timestamp>() {
            Ok(at) if at > now => format!("delay:{}s", at.as_second() - now.as_second()),
            _ => "delay:passed".into(),
        });
    }

    let desired = rs.desired();
    let current = rs.current();
    let available = rs.available();
    let rs_status = if desired == 0 && current == 0 {
        "ScaledDown"
    } else if available >= desired && current == desired {
        "Healthy"
    } else {
        "Progressing"
    };

    let mut rs_pods: Vec<PodInfo> = pods
        .iter()
        .map(Borrow::borrow)
        .filter(|p| !hash.is_empty() && label(&p.metadata, POD_TEMPLATE_HASH) == Some(hash))
        .map(pod_info)
        .collect();
    rs_pods.sort_by(|a, b| a.name.cmp(&b.name));

    ReplicaSetInfo {
        name: rs.name().to_owned(),
        created: created(rs.metadata()),
        status: rs_status,
        tags,
        images: rs.images(),
        desired,
        current,
        available,
        pods: rs_pods,
    }
}

fn label<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels.as_ref()?.get(key).map(String::as_str)
}

pub(crate) fn container_images(template: &PodTemplateSpec) -> Vec<String> {
    template
        .spec
        .iter()
        .flat_map(|s| &s.containers)
        .filter_map(|c| c.image.clone())
        .collect()
}

/// Images of the ReplicaSets that run or want pods, each with the roles it serves. Stable
/// images come first, then active, canary, preview, then untagged ones.
fn images_in_use(replica_sets: &[ReplicaSetInfo]) -> Vec<ImageInfo> {
    let mut images: Vec<ImageInfo> = Vec::new();
    for rs in replica_sets
        .iter()
        .filter(|rs| rs.desired > 0 || rs.current > 0)
    {
        let roles: Vec<&'static str> = [TAG_STABLE, TAG_CANARY, TAG_ACTIVE, TAG_PREVIEW]
            .into_iter()
            .filter(|role| rs.tags.iter().any(|t| t == role))
            .collect();
        for image in &rs.images {
            let at = match images.iter().position(|i| &i.image == image) {
                Some(at) => at,
                None => {
                    images.push(ImageInfo {
                        image: image.clone(),
                        tags: Vec::new(),
                    });
                    images.len() - 1
                }
            };
            let entry = &mut images[at];
            for role in &roles {
                if !entry.tags.contains(role) {
                    entry.tags.push(role);
                }
            }
        }
    }
    let rank = |info: &ImageInfo| {
        [TAG_STABLE, TAG_ACTIVE, TAG_CANARY, TAG_PREVIEW]
            .iter()
            .position(|role| info.tags.contains(role))
            .unwrap_or(usize::MAX)
    };
    images.sort_by_key(rank);
    images
}

pub mod experiment;
pub(crate) mod pods;
pub(crate) mod replica_set;

use pods::pod_info;
#[cfg(test)]
use pods::pod_status;

#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
mod tests;
