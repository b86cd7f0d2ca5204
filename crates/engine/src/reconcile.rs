//! One reconcile of a Rollout: from the observed world to a [`Plan`].
//!
//! Order of decisions: validate; identify the new, stable and older ReplicaSets; carry the
//! status over a template or step-list change; settle abort and pause; size every ReplicaSet;
//! advance the step machine; then compute counts, conditions and phase; last, bring the
//! ephemeral pod metadata of ReplicaSets whose role changed up to date.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use sluice_api::rollout::{
    BlueGreenStrategy, CanaryStepAction, CanaryStrategy, PauseCondition, PauseReason,
    ReplicaProgressThresholdType, Rollout, RolloutConditionType as Cond, RolloutStatus,
};

use crate::conditions::{self as c, FALSE, TRUE, UNKNOWN};
use crate::ephemeral::PodMetadata;
use crate::labels::{DESIRED_REPLICAS, REVISION, REVISION_HISTORY};
use crate::observed::{Observed, ReplicaSetExt};
use crate::plan::{Action, Event, Plan};
use crate::replicas::{self, BasicCanaryInputs, RsCounts, SurgeLimits};
use crate::{phase, replicaset, steps};

/// Decides what to do for one Rollout.
pub fn reconcile(observed: &Observed) -> Plan {
    let now = truncate_to_seconds(observed.now);
    let ro = &observed.rollout;
    let old_status = ro.status.clone().unwrap_or_default();
    let mut plan = Plan {
        status: old_status.clone(),
        ..Default::default()
    };
    plan.status.observed_generation = ro.metadata.generation.map(|g| g.to_string());

    match prepare(ro) {
        Ok(mut prepared) => {
            adopt_equal_template(&mut prepared, observed);
            let mut conds = plan.status.conditions.take().unwrap_or_default();
            c::remove(&mut conds, Cond::InvalidSpec);
            plan.status.conditions = Some(conds);
            let mut world = World::new(observed, &prepared, now);
            if let Err(message) = world.run(&mut plan) {
                let mut conds = plan.status.conditions.take().unwrap_or_default();
                c::set(
                    &mut conds,
                    Cond::InvalidSpec,
                    TRUE,
                    c::INVALID_SPEC,
                    message,
                    now,
                    false,
                );
                plan.status.conditions = Some(conds);
            }
        }
        Err(message) => {
            let mut conds = plan.status.conditions.take().unwrap_or_default();
            c::set(
                &mut conds,
                Cond::InvalidSpec,
                TRUE,
                c::INVALID_SPEC,
                message,
                now,
                false,
            );
            plan.status.conditions = Some(conds);
        }
    }

    let (phase, message) = phase::calculate(ro, &plan.status);
    plan.status.phase = Some(phase);
    // Go omits an empty message; writing "" would also be refused by some API servers.
    plan.status.message = (!message.is_empty()).then_some(message);
    if plan.status.conditions.as_ref().is_some_and(Vec::is_empty) {
        plan.status.conditions = None;
    }
    plan
}

fn truncate_to_seconds(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

/// What validation and hashing established about the spec.
struct Prepared {
    pod_hash: String,
    strategy: Strategy,
    replicas: i32,
    limits: SurgeLimits,
}

enum Strategy {
    Canary(Box<CanaryStrategy>),
    BlueGreen(Box<BlueGreenStrategy>),
}

impl Prepared {
    /// The canary strategy; an empty one for blue-green (no steps).
    fn canary(&self) -> &CanaryStrategy {
        static NONE: std::sync::OnceLock<CanaryStrategy> = std::sync::OnceLock::new();
        match &self.strategy {
            Strategy::Canary(c) => c,
            Strategy::BlueGreen(_) => NONE.get_or_init(CanaryStrategy::default),
        }
    }
}

fn prepare(ro: &Rollout) -> Result<Prepared, String> {
    let problems = sluice_api::validation::validate_rollout(ro);
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    let strategy = ro.spec.strategy.clone().unwrap_or_default();
    if let Some(bg) = strategy.blue_green {
        return prepare_blue_green(ro, bg);
    }
    let Some(canary) = strategy.canary else {
        return Err("a canary or blueGreen strategy is required".into());
    };
    if canary.traffic_routing.is_some() {
        return Err(
            "canary trafficRouting is not supported by this version of Sluice; remove it to use replica-weighted canary"
                .into(),
        );
    }
    for (i, step) in steps::steps(&canary).iter().enumerate() {
        match step.action() {
            Some(
                CanaryStepAction::SetWeight(_)
                | CanaryStepAction::Pause(_)
                | CanaryStepAction::Analysis(_),
            ) => {}
            Some(other) => {
                return Err(format!(
                    "step {i}: {} steps are not supported by this version of Sluice",
                    step_kind(&other)
                ));
            }
            None => return Err(format!("step {i}: no action set")),
        }
    }
    let (pod_hash, replicas) = hash_and_replicas(ro)?;
    let limits = replicas::resolve_surge_limits(
        canary.max_surge.as_ref(),
        canary.max_unavailable.as_ref(),
        replicas,
    )
    .map_err(|e| e.to_string())?;
    Ok(Prepared {
        pod_hash,
        strategy: Strategy::Canary(Box::new(canary)),
        replicas,
        limits,
    })
}

fn prepare_blue_green(ro: &Rollout, bg: BlueGreenStrategy) -> Result<Prepared, String> {
    let (pod_hash, replicas) = hash_and_replicas(ro)?;
    // maxUnavailable only paces restarts in blue-green; nothing surges.
    let limits = replicas::resolve_surge_limits(
        Some(&k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(0)),
        bg.max_unavailable.as_ref(),
        replicas,
    )
    .map_err(|e| e.to_string())?;
    Ok(Prepared {
        pod_hash,
        strategy: Strategy::BlueGreen(Box::new(bg)),
        replicas,
        limits,
    })
}

fn hash_and_replicas(ro: &Rollout) -> Result<(String, i32), String> {
    let template = ro
        .spec
        .template
        .as_ref()
        .ok_or("spec.template is required")?;
    let collision = ro.status.as_ref().and_then(|s| s.collision_count);
    let pod_hash = sluice_api::pod_template_hash::compute_pod_template_hash(template, collision)
        .map_err(|e| format!("cannot hash the pod template: {e}"))?;
    let replicas = ro
        .spec
        .replicas
        .unwrap_or(sluice_api::rollout::DEFAULT_REPLICAS)
        .max(0);
    Ok((pod_hash, replicas))
}

/// A ReplicaSet whose pod template equals the Rollout's (ignoring the hash label) is the
/// Rollout's current one even when its name carries another hash: that is how a rollback to a
/// template copied from a ReplicaSet (with the API server's defaults filled in) re-uses that
/// ReplicaSet instead of starting a new one.
fn adopt_equal_template(p: &mut Prepared, observed: &Observed) {
    p.pod_hash = adopted_hash(
        &observed.rollout,
        &observed.replica_sets,
        std::mem::take(&mut p.pod_hash),
    );
}

/// The hash of the ReplicaSet the Rollout's current template belongs to, as a reconcile finds
/// it: the template's own hash, or that of a ReplicaSet with an equal template. `None` when the
/// template cannot be hashed.
pub fn current_pod_hash(rollout: &Rollout, replica_sets: &[ReplicaSet]) -> Option<String> {
    let (pod_hash, _) = hash_and_replicas(rollout).ok()?;
    Some(adopted_hash(rollout, replica_sets, pod_hash))
}

fn adopted_hash(rollout: &Rollout, replica_sets: &[ReplicaSet], pod_hash: String) -> String {
    let by_name = replica_sets
        .iter()
        .any(|rs| rs.pod_hash() == Some(pod_hash.as_str()) && !rs.is_being_deleted());
    if by_name {
        return pod_hash;
    }
    let Some(template) = rollout.spec.template.as_ref() else {
        return pod_hash;
    };
    let equal = replica_sets.iter().find(|rs| {
        if rs.is_being_deleted() {
            return false;
        }
        let Some(mut rs_template) = rs.spec.as_ref().and_then(|s| s.template.clone()) else {
            return false;
        };
        // What the ReplicaSet adds to the Rollout's template: its hash and ephemeral metadata.
        // A template copied back from the ReplicaSet (a rollback) carries that metadata too.
        let injected = PodMetadata::recorded(rs);
        let mut wanted = template.clone();
        if let Some(meta) = wanted.metadata.as_mut() {
            injected.strip(meta);
        }
        if let Some(meta) = rs_template.metadata.as_mut() {
            injected.strip(meta);
            if let Some(labels) = meta.labels.as_mut() {
                labels.remove(crate::labels::POD_TEMPLATE_HASH);
            }
        }
        comparable(rs_template) == comparable(wanted)
    });
    match equal.and_then(|rs| rs.pod_hash()) {
        Some(hash) => hash.to_string(),
        None => pod_hash,
    }
}

/// A template with empty label and annotation maps read as absent ones.
fn comparable(mut template: PodTemplateSpec) -> PodTemplateSpec {
    if let Some(meta) = template.metadata.as_mut() {
        if meta.labels.as_ref().is_some_and(BTreeMap::is_empty) {
            meta.labels = None;
        }
        if meta.annotations.as_ref().is_some_and(BTreeMap::is_empty) {
            meta.annotations = None;
        }
    }
    template
}

fn step_kind(action: &CanaryStepAction<'_>) -> &'static str {
    match action {
        CanaryStepAction::SetWeight(_) => "setWeight",
        CanaryStepAction::Pause(_) => "pause",
        CanaryStepAction::Experiment(_) => "experiment",
        CanaryStepAction::Analysis(_) => "analysis",
        CanaryStepAction::SetCanaryScale(_) => "setCanaryScale",
        CanaryStepAction::SetHeaderRoute(_) => "setHeaderRoute",
        CanaryStepAction::SetMirrorRoute(_) => "setMirrorRoute",
        CanaryStepAction::Plugin(_) => "plugin",
    }
}

/// Human description of a step for `RolloutStepCompleted` events.
fn describe_step(action: Option<CanaryStepAction<'_>>) -> String {
    match action {
        Some(CanaryStepAction::SetWeight(w)) => format!("setWeight: {w}"),
        Some(CanaryStepAction::Pause(p)) => match &p.duration {
            Some(d) => format!(
                "pause: {}",
                match d {
                    k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(i) =>
                        i.to_string(),
                    k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(s) =>
                        s.clone(),
                }
            ),
            None => "pause".into(),
        },
        Some(other) => step_kind(&other).into(),
        None => "empty".into(),
    }
}

/// The ReplicaSets of one reconcile, sorted into their roles.
struct World<'a> {
    ro: &'a Rollout,
    p: &'a Prepared,
    now: Timestamp,
    new_rs: Option<&'a ReplicaSet>,
    stable_rs: Option<&'a ReplicaSet>,
    /// Neither new nor stable, oldest revision first.
    older: Vec<&'a ReplicaSet>,
    all: Vec<&'a ReplicaSet>,
    pods: &'a [k8s_openapi::api::core::v1::Pod],
    services: &'a [k8s_openapi::api::core::v1::Service],
    analysis_runs: &'a [sluice_api::analysis::AnalysisRun],
    analysis_templates: &'a crate::observed::AnalysisTemplates,
}

impl<'a> World<'a> {
    fn new(observed: &'a Observed, p: &'a Prepared, now: Timestamp) -> Self {
        let status = observed.rollout.status.as_ref();
        let stable_hash = status.and_then(|s| s.stable_rs.as_deref());
        let all: Vec<&ReplicaSet> = observed
            .replica_sets
            .iter()
            .filter(|rs| !rs.is_being_deleted())
            .collect();
        let new_rs = all
            .iter()
            .copied()
            .find(|rs| rs.pod_hash() == Some(p.pod_hash.as_str()));
        let stable_rs =
            stable_hash.and_then(|h| all.iter().copied().find(|rs| rs.pod_hash() == Some(h)));
        let mut older: Vec<&ReplicaSet> = all
            .iter()
            .copied()
            .filter(|rs| {
                let h = rs.pod_hash();
                h != Some(p.pod_hash.as_str()) && (stable_hash.is_none() || h != stable_hash)
            })
            .collect();
        older.sort_by_key(|rs| (rs.revision().unwrap_or(0), rs.name().to_string()));
        Self {
            ro: &observed.rollout,
            p,
            now,
            new_rs,
            stable_rs,
            older,
            all,
            pods: &observed.pods,
            services: &observed.services,
            analysis_runs: &observed.analysis_runs,
            analysis_templates: &observed.analysis_templates,
        }
    }

    /// Hash of the stable ReplicaSet, when there is one to keep new pods away from.
    fn stable_hash(&self) -> Option<&str> {
        self.stable_rs.and_then(|rs| rs.pod_hash())
    }

    fn rollout_name(&self) -> &str {
        self.ro.metadata.name.as_deref().unwrap_or_default()
    }

    fn new_rs_name(&self) -> String {
        replicaset::replica_set_name(self.rollout_name(), &self.p.pod_hash)
    }

    fn max_revision(&self, excluding_new: bool) -> i64 {
        self.all
            .iter()
            .filter(|rs| !(excluding_new && rs.pod_hash() == Some(self.p.pod_hash.as_str())))
            .filter_map(|rs| rs.revision())
            .max()
            .unwrap_or(0)
    }

    fn run(&mut self, plan: &mut Plan) -> Result<(), String> {
        let services = self.blue_green_services()?;
        self.check_analysis_templates()?;
        let old = plan.status.clone();
        let mut status_value = std::mem::take(&mut plan.status);
        let status = &mut status_value;
        let is_canary = matches!(self.p.strategy, Strategy::Canary(_));
        let steps_len = steps::steps(self.p.canary()).len() as i32;
        let mut events = Vec::new();

        // A new pod template starts a new update: steps from the beginning, no abort, no pause.
        let template_changed = status.current_pod_hash.as_deref() != Some(self.p.pod_hash.as_str());
        let step_hash = is_canary.then(|| steps::step_hash(self.p.canary()));
        let steps_changed = status.current_step_hash != step_hash;
        if template_changed || steps_changed {
            status.current_step_index = is_canary.then_some(0);
            status.pause_conditions = None;
            status.controller_pause = None;
        }
        if template_changed {
            status.abort = None;
            status.aborted_at = None;
            status.promote_full = None;
            status.current_pod_hash = Some(self.p.pod_hash.clone());
            if let Some(bg) = status.blue_green.as_mut() {
                bg.scale_up_preview_check_point = None;
            }
        }
        status.current_step_hash = step_hash;

        // The first revision of a Rollout, or one whose stable ReplicaSet is gone, has nothing
        // to roll from: it becomes stable at once and skips the steps.
        if self.stable_rs.is_none() && self.older.iter().all(|rs| rs.spec_replicas() == 0) {
            status.stable_rs = Some(self.p.pod_hash.clone());
            self.stable_rs = self.new_rs;
        }
        let new_is_stable = status.stable_rs.as_deref() == Some(self.p.pod_hash.as_str());
        if new_is_stable && is_canary {
            status.current_step_index = Some(steps_len);
        }
        // Revision bookkeeping: a re-used ReplicaSet (rollback) gets the next revision.
        let revision = match self.new_rs {
            Some(rs) => {
                let current = rs.revision().unwrap_or(0);
                let max_other = self.max_revision(true);
                if current <= max_other {
                    let next = max_other + 1;
                    let mut history: Vec<String> = rs
                        .annotation(REVISION_HISTORY)
                        .map(|h| h.split(',').map(str::to_string).collect())
                        .unwrap_or_default();
                    if current > 0 {
                        history.push(current.to_string());
                    }
                    let mut annotations = BTreeMap::new();
                    annotations.insert(REVISION.to_string(), Some(next.to_string()));
                    annotations.insert(REVISION_HISTORY.to_string(), Some(history.join(",")));
                    plan.actions.push(Action::AnnotateReplicaSet {
                        name: rs.name().to_string(),
                        resource_version: rs.metadata.resource_version.clone(),
                        annotations,
                    });
                    next
                } else {
                    current
                }
            }
            None => self.max_revision(false) + 1,
        };
        let rollout_revision = self
            .ro
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(REVISION))
            .cloned();
        if rollout_revision.as_deref() != Some(revision.to_string().as_str()) {
            let mut annotations = BTreeMap::new();
            annotations.insert(REVISION.to_string(), Some(revision.to_string()));
            plan.actions.push(Action::AnnotateRollout {
                resource_version: self.ro.metadata.resource_version.clone(),
                annotations,
            });
            if template_changed && !new_is_stable {
                events.push(Event::normal(
                    "RolloutUpdated",
                    format!("Rollout updated to revision {revision}"),
                ));
            }
        }

        // Analysis verdicts come first: a Failed run aborts, an Inconclusive one pauses.
        let mut analysis = AnalysisState::default();
        let verdicts = if status.abort == Some(true) || new_is_stable {
            Verdicts::default()
        } else {
            self.read_verdicts(revision, status, plan, &mut events, &mut analysis)
        };

        // Abort: back to the stable pods, no pause; `abortedAt` records the first moment.
        let aborted = status.abort == Some(true) && !new_is_stable;
        if aborted {
            status.pause_conditions = None;
            status.controller_pause = None;
            status.current_step_index = Some(0);
            if status.aborted_at.is_none() {
                status.aborted_at = Some(Time(self.now));
            }
        } else {
            status.aborted_at = None;
            if new_is_stable {
                status.abort = None;
            }
        }
        let manually_paused = self.ro.spec.paused == Some(true);
        if status.promote_full == Some(true) && !aborted {
            // Promote-full skips whatever the rollout was waiting for.
            status.pause_conditions = None;
            status.controller_pause = None;
        }

        let update = Update {
            revision,
            new_is_stable,
            aborted,
            manually_paused,
            verdicts,
        };
        let (scaled, advanced, completed) = match &self.p.strategy {
            Strategy::Canary(_) => {
                let (scaled, advanced) =
                    self.canary(status, plan, &mut events, &update, &mut analysis);
                let completed = status.stable_rs.as_deref() == Some(self.p.pod_hash.as_str())
                    && status.updated_replicas.unwrap_or(0) == self.p.replicas
                    && status.replicas.unwrap_or(0) == self.p.replicas
                    && self.new_rs.map_or(0, |rs| rs.available_replicas()) >= self.p.replicas;
                (scaled, advanced, completed)
            }
            Strategy::BlueGreen(_) => {
                let (scaled, advanced) =
                    self.blue_green(&services, status, plan, &mut events, &update, &mut analysis);
                let active = status
                    .blue_green
                    .as_ref()
                    .and_then(|b| b.active_selector.as_deref());
                let completed = status.stable_rs.as_deref() == Some(self.p.pod_hash.as_str())
                    && active == Some(self.p.pod_hash.as_str())
                    && self.new_rs.map_or(0, |rs| rs.available_replicas()) >= self.p.replicas;
                (scaled, advanced, completed)
            }
        };
        if analysis.accepted_now && status.pause_conditions.as_ref().is_none_or(Vec::is_empty) {
            // The promote that accepted an Inconclusive verdict has been acted on.
            status.controller_pause = None;
        }
        self.settle_analysis_runs(plan, &analysis);
        let progressed = scaled || advanced || counts_of_status(status) != counts_of_status(&old);
        self.conditions(
            status,
            &mut events,
            &mut plan.requeue_after,
            Progress {
                aborted,
                abort_message: analysis.abort_message.take(),
                created: self.new_rs.is_none() && !manually_paused,
                progressed,
                completed,
                revision,
            },
        );
        plan.events.extend(events);
        plan.status = status_value;
        self.sync_pod_metadata(plan);
        self.confirm_counted_replica_sets(plan);
        Ok(())
    }

    /// A scale-down spends availability counted on other ReplicaSets. Those counts may come from
    /// a cache that has not yet seen this controller's last write, so the plan first confirms
    /// that every ReplicaSet it counted is still at the observed resourceVersion.
    fn confirm_counted_replica_sets(&self, plan: &mut Plan) {
        let scales_down = plan
            .actions
            .iter()
            .any(|a| matches!(a, Action::ScaleReplicaSet { from, to, .. } if to < from));
        if !scales_down {
            return;
        }
        let confirms: Vec<Action> = self
            .all
            .iter()
            .filter(|rs| rs.available_replicas() > 0)
            .map(|rs| Action::ConfirmReplicaSet {
                name: rs.name().to_string(),
                resource_version: rs.metadata.resource_version.clone(),
            })
            .collect();
        plan.actions.splice(0..0, confirms);
    }

    /// Canary sizing and the step machine. Returns (scaled, step advanced).
    fn canary(
        &mut self,
        status: &mut RolloutStatus,
        plan: &mut Plan,
        events: &mut Vec<Event>,
        u: &Update,
        analysis: &mut AnalysisState,
    ) -> (bool, bool) {
        let (revision, new_is_stable, aborted, manually_paused) =
            (u.revision, u.new_is_stable, u.aborted, u.manually_paused);
        let steps_len = steps::steps(self.p.canary()).len() as i32;
        // Size every ReplicaSet.
        let step_index = status.current_step_index.unwrap_or(0);
        let weight = if aborted {
            0
        } else if new_is_stable || status.promote_full == Some(true) {
            100
        } else {
            steps::weight_at(self.p.canary(), step_index)
        };
        let other_spec_total: i32 = self.older.iter().map(|rs| rs.spec_replicas()).sum();
        let counts = replicas::basic_canary_counts(BasicCanaryInputs {
            replicas: self.p.replicas,
            weight,
            limits: self.p.limits,
            new_rs: self.new_rs.map(counts_of),
            stable_rs: self.stable_rs.map(counts_of),
            new_is_stable,
            other_spec_total,
        });

        let mut scaled = false;
        match self.new_rs {
            None if !manually_paused => {
                let anti = self
                    .p
                    .canary()
                    .anti_affinity
                    .as_ref()
                    .zip(self.stable_hash());
                let rs = self.new_replica_set(revision, counts.canary, anti, new_is_stable);
                events.push(Event::normal(
                    "ScalingReplicaSet",
                    format!(
                        "Scaled up ReplicaSet {} (revision {revision}) from 0 to {}",
                        self.new_rs_name(),
                        counts.canary
                    ),
                ));
                plan.actions.push(Action::CreateReplicaSet {
                    replica_set: Box::new(rs),
                });
                scaled = true;
            }
            None => {}
            Some(rs) => {
                scaled |= self.scale(plan, events, rs, counts.canary, revision);
            }
        }
        // While manually paused before the new ReplicaSet exists, nothing moves.
        if let Some(stable) = self.stable_rs
            && !new_is_stable
            && (self.new_rs.is_some() || !manually_paused)
        {
            let rev = stable.revision().unwrap_or(0);
            scaled |= self.scale(plan, events, stable, counts.stable, rev);
        }
        scaled |= self.scale_down_older(plan, events);
        self.clean_up_history(plan);
        if !aborted {
            scaled |= self.restart(status, plan, events);
        }

        // Step machine.
        let mut step_advanced = false;
        let new_counts = self.new_rs.map(counts_of).unwrap_or_default();
        let target = replicas::approximate_weighted_counts(
            self.p.replicas,
            weight,
            100,
            self.p.limits.max_surge,
        );
        let at_desired = self.new_rs.is_some_and(|rs| {
            rs.status_is_current()
                && rs.spec_replicas() == target.0
                && new_counts.available >= self.progress_threshold(target.0)
        }) && self.stable_rs.is_none_or(|rs| {
            new_is_stable || (rs.spec_replicas() == target.1 && rs.available_replicas() >= target.1)
        }) && self.older.iter().all(|rs| rs.spec_replicas() == 0);

        // Paused on an Inconclusive analysis: the pods stay as they are, no step completes and
        // the update does not complete, until a user promotes or aborts.
        let held_by_analysis = has_pause(status, &PauseReason::InconclusiveAnalysisRun);
        if !aborted
            && !manually_paused
            && !held_by_analysis
            && !new_is_stable
            && self.new_rs.is_some()
        {
            let promote_full = status.promote_full == Some(true);
            if !promote_full && let Some(step) = steps::current_step(self.p.canary(), step_index) {
                let complete = match step.action() {
                    Some(CanaryStepAction::SetWeight(_)) => at_desired,
                    Some(CanaryStepAction::Pause(pause)) => {
                        self.pause_step(status, events, &mut plan.requeue_after, pause)
                    }
                    Some(CanaryStepAction::Analysis(a)) => match &u.verdicts.step {
                        Verdict::Missing => {
                            let unpaused =
                                status.pause_conditions.as_ref().is_none_or(Vec::is_empty);
                            if unpaused {
                                self.start_analysis(
                                    Role::Step(step_index),
                                    a,
                                    revision,
                                    plan,
                                    events,
                                    analysis,
                                );
                            }
                            false
                        }
                        v => v.passed(),
                    },
                    _ => false,
                };
                if complete {
                    remove_pause(status, &PauseReason::CanaryPauseStep);
                    status.controller_pause = None;
                    status.current_step_index = Some(step_index + 1);
                    step_advanced = true;
                    events.push(Event::normal(
                        "RolloutStepCompleted",
                        format!(
                            "Rollout step {}/{} completed ({})",
                            step_index + 1,
                            steps_len,
                            describe_step(step.action())
                        ),
                    ));
                }
            }
            // Background analysis, from its starting step on, until the update completes.
            if let Some(bga) = &self.p.canary().analysis
                && u.verdicts.background == Verdict::Missing
                && !promote_full
                && status.current_step_index.unwrap_or(0) >= bga.starting_step.unwrap_or(0)
                && status.pause_conditions.as_ref().is_none_or(Vec::is_empty)
            {
                self.start_analysis(
                    Role::Background,
                    &bga.analysis,
                    revision,
                    plan,
                    events,
                    analysis,
                );
            }
            // All steps done (or skipped by promote-full) and the new pods all up: it is stable.
            let past_steps = status.current_step_index.unwrap_or(0) >= steps_len || promote_full;
            if past_steps && !step_advanced && at_desired {
                status.stable_rs = Some(self.p.pod_hash.clone());
                status.promote_full = None;
                status.current_step_index = Some(steps_len);
                events.push(Event::normal(
                    "RolloutCompleted",
                    format!(
                        "Rollout completed update to revision {revision} ({}): Completed all {steps_len} canary steps",
                        self.p.pod_hash
                    ),
                ));
                step_advanced = true;
            }
        }

        self.fill_counts(status, None);
        (scaled, step_advanced)
    }

    fn progress_threshold(&self, desired: i32) -> i32 {
        let Some(t) = &self.p.canary().replica_progress_threshold else {
            return desired;
        };
        let value = t.value.unwrap_or(100).max(0);
        match t.type_.as_ref() {
            Some(ReplicaProgressThresholdType::Pods) => value.min(desired),
            _ => {
                let v = (i64::from(desired) * i64::from(value) + 99) / 100;
                (v as i32).min(desired)
            }
        }
    }

    /// Handles a pause step; returns whether it is complete.
    fn pause_step(
        &self,
        status: &mut RolloutStatus,
        events: &mut Vec<Event>,
        requeue: &mut Option<Duration>,
        pause: &sluice_api::rollout::RolloutPause,
    ) -> bool {
        let existing = status
            .pause_conditions
            .iter()
            .flatten()
            .find(|p| p.reason.as_ref() == Some(&PauseReason::CanaryPauseStep))
            .cloned();
        let any_pause = status
            .pause_conditions
            .as_ref()
            .is_some_and(|p| !p.is_empty());
        if status.controller_pause == Some(true) && !any_pause {
            // The controller paused and somebody cleared the pause conditions: promoted.
            return true;
        }
        let Some(existing) = existing else {
            status
                .pause_conditions
                .get_or_insert_with(Vec::new)
                .push(PauseCondition {
                    reason: Some(PauseReason::CanaryPauseStep),
                    start_time: Some(Time(self.now)),
                });
            status.controller_pause = Some(true);
            events.push(Event::normal(
                "RolloutPaused",
                "Rollout is paused (CanaryPauseStep)",
            ));
            if let Some(Ok(d)) = pause.duration() {
                set_requeue(requeue, d);
            }
            return false;
        };
        let Some(Ok(duration)) = pause.duration() else {
            return false;
        };
        // Paused on an Inconclusive analysis: only a user moves on, never the clock.
        if has_pause(status, &PauseReason::InconclusiveAnalysisRun) {
            return false;
        }
        let started = existing.start_time.map(|t| t.0).unwrap_or(self.now);
        let elapsed = self.now.duration_since(started);
        let elapsed = Duration::try_from(elapsed).unwrap_or_default();
        if elapsed >= duration {
            true
        } else {
            set_requeue(requeue, duration - elapsed);
            false
        }
    }

    /// Scales `rs` to `to` if it is not there; returns whether it wrote.
    fn scale(
        &self,
        plan: &mut Plan,
        events: &mut Vec<Event>,
        rs: &ReplicaSet,
        to: i32,
        revision: i64,
    ) -> bool {
        self.scale_with(plan, events, rs, to, revision, BTreeMap::new())
    }

    /// Scales `rs` to `to`, also setting (or, with `None`, removing) `extra` annotations in the
    /// same write. Writes nothing when all is already so.
    fn scale_with(
        &self,
        plan: &mut Plan,
        events: &mut Vec<Event>,
        rs: &ReplicaSet,
        to: i32,
        revision: i64,
        extra: BTreeMap<String, Option<String>>,
    ) -> bool {
        let from = rs.spec_replicas();
        let desired = self.p.replicas.to_string();
        let extra_pending = extra.iter().any(|(k, v)| rs.annotation(k) != v.as_deref());
        if from == to && rs.annotation(DESIRED_REPLICAS) == Some(desired.as_str()) && !extra_pending
        {
            return false;
        }
        let mut annotations = extra;
        annotations.insert(DESIRED_REPLICAS.to_string(), Some(desired));
        plan.actions.push(Action::ScaleReplicaSet {
            name: rs.name().to_string(),
            resource_version: rs.metadata.resource_version.clone(),
            from,
            to,
            annotations,
        });
        if from != to {
            events.push(Event::normal(
                "ScalingReplicaSet",
                format!(
                    "Scaled {} ReplicaSet {} (revision {revision}) from {from} to {to}",
                    if to > from { "up" } else { "down" },
                    rs.name()
                ),
            ));
        }
        from != to
    }

    /// Older ReplicaSets (neither new nor stable) go to zero, oldest first, as fast as
    /// availability allows. Pods that are not available can always go: removing them never
    /// costs availability, and it is what unsticks a superseded bad revision.
    fn scale_down_older(&self, plan: &mut Plan, events: &mut Vec<Event>) -> bool {
        let total_available: i32 = self
            .all
            .iter()
            .map(|rs| rs.available_replicas().min(rs.spec_replicas()))
            .sum();
        let min_available = self.p.replicas - self.p.limits.max_unavailable;
        let mut budget = (total_available - min_available).max(0);
        let mut wrote = false;
        for rs in &self.older {
            let spec = rs.spec_replicas();
            if spec == 0 {
                continue;
            }
            let available = rs.available_replicas().clamp(0, spec);
            let unavailable = spec - available;
            let from_available = available.min(budget);
            budget -= from_available;
            let reduce = unavailable + from_available;
            if reduce > 0 {
                let rev = rs.revision().unwrap_or(0);
                wrote |= self.scale(plan, events, rs, spec - reduce, rev);
            }
        }
        wrote
    }

    /// `spec.restartAt`: evicts pods created before it, at most `max(maxUnavailable, 1)` pods
    /// unavailable at a time, then records `status.restartedAt`. Returns whether it evicted.
    fn restart(
        &self,
        status: &mut RolloutStatus,
        plan: &mut Plan,
        events: &mut Vec<Event>,
    ) -> bool {
        let Some(at) = self.ro.spec.restart_at.clone() else {
            return false;
        };
        if status.restarted_at.as_ref() == Some(&at) {
            return false;
        }
        if self.now < at.0 {
            let wait = Duration::try_from(at.0.duration_since(self.now)).unwrap_or_default();
            set_requeue(&mut plan.requeue_after, wait);
            return false;
        }
        let current: Vec<&str> = [self.new_rs, self.stable_rs]
            .into_iter()
            .flatten()
            .filter_map(|rs| rs.pod_hash())
            .collect();
        let mut stale: Vec<&k8s_openapi::api::core::v1::Pod> = self
            .pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| {
                p.metadata
                    .creation_timestamp
                    .as_ref()
                    .is_some_and(|t| t.0 < at.0)
            })
            .filter(|p| {
                p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(crate::labels::POD_TEMPLATE_HASH))
                    .is_some_and(|h| current.contains(&h.as_str()))
            })
            .collect();
        if stale.is_empty() {
            status.restarted_at = Some(at);
            events.push(Event::normal(
                "RolloutRestarted",
                "Rollout restarted all pods",
            ));
            return false;
        }
        stale.sort_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0));
        let unavailable: i32 = [self.new_rs, self.stable_rs]
            .into_iter()
            .flatten()
            .map(|rs| (rs.spec_replicas() - rs.available_replicas()).max(0))
            .sum();
        let budget = (self.p.limits.max_unavailable.max(1) - unavailable).max(0) as usize;
        for pod in stale.iter().take(budget) {
            let name = pod.metadata.name.clone().unwrap_or_default();
            events.push(Event::normal(
                "RolloutRestarted",
                format!("Restarting pod {name}"),
            ));
            plan.actions.push(Action::EvictPod {
                name,
                uid: pod.metadata.uid.clone(),
            });
        }
        // Pods are not watched: look again soon.
        set_requeue(&mut plan.requeue_after, Duration::from_secs(2));
        budget > 0
    }

    /// Deletes scaled-down older ReplicaSets beyond `revisionHistoryLimit`, oldest first.
    fn clean_up_history(&self, plan: &mut Plan) {
        let limit = self
            .ro
            .spec
            .revision_history_limit
            .unwrap_or(sluice_api::rollout::DEFAULT_REVISION_HISTORY_LIMIT)
            .max(0) as usize;
        let idle: Vec<&&ReplicaSet> = self
            .older
            .iter()
            .filter(|rs| rs.spec_replicas() == 0 && rs.status_replicas() == 0)
            .collect();
        if idle.len() <= limit {
            return;
        }
        for rs in &idle[..idle.len() - limit] {
            plan.actions.push(Action::DeleteReplicaSet {
                name: rs.name().to_string(),
                uid: rs.metadata.uid.clone(),
            });
        }
    }

    /// Status counts. Canary: HPA replicas and selector cover every ReplicaSet; blue-green
    /// (`active` given): those of the active ReplicaSet, which is what an HPA should scale.
    fn fill_counts(&self, status: &mut RolloutStatus, active: Option<&ReplicaSet>) {
        let sum = |f: fn(&ReplicaSet) -> i32| self.all.iter().map(|rs| f(rs)).sum::<i32>();
        let replicas = sum(ReplicaSetExt::status_replicas);
        status.replicas = Some(replicas);
        status.updated_replicas = Some(self.new_rs.map(|rs| rs.status_replicas()).unwrap_or(0));
        status.ready_replicas = Some(sum(ReplicaSetExt::ready_replicas));
        status.available_replicas = Some(sum(ReplicaSetExt::available_replicas));
        match active {
            None => {
                status.hpa_replicas = Some(replicas);
                status.selector = self.ro.spec.selector.as_ref().map(format_selector);
            }
            Some(rs) => {
                status.hpa_replicas = Some(rs.status_replicas());
                status.selector = rs.spec.as_ref().map(|spec| format_selector(&spec.selector));
            }
        }
    }

    fn conditions(
        &self,
        status: &mut RolloutStatus,
        events: &mut Vec<Event>,
        requeue: &mut Option<Duration>,
        progress: Progress,
    ) {
        let now = self.now;
        let mut conds = status.conditions.take().unwrap_or_default();
        let rs_name = self.new_rs_name();
        let r = self.p.replicas;
        let available = status.available_replicas.unwrap_or(0);
        let completed = progress.completed;
        let paused = self.ro.spec.paused == Some(true)
            || status
                .pause_conditions
                .as_ref()
                .is_some_and(|p| !p.is_empty());

        // Available.
        if available >= r - self.p.limits.max_unavailable {
            c::set(
                &mut conds,
                Cond::Available,
                TRUE,
                c::AVAILABLE_REASON,
                "Rollout has minimum availability",
                now,
                false,
            );
        } else {
            c::set(
                &mut conds,
                Cond::Available,
                FALSE,
                c::AVAILABLE_REASON,
                "Rollout does not have minimum availability",
                now,
                false,
            );
        }

        // Progressing, and the progress deadline.
        let was_aborted = c::has_reason(&conds, Cond::Progressing, c::ROLLOUT_ABORTED);
        if progress.aborted {
            let generic = format!("Rollout aborted update to revision {}", progress.revision);
            if !was_aborted {
                events.push(Event::warning("RolloutAborted", generic.clone()));
            }
            // Keep the reason an earlier reconcile recorded (an analysis verdict, a deadline).
            let message = match (&progress.abort_message, c::find(&conds, Cond::Progressing)) {
                (Some(detail), _) => format!("{generic}: {detail}"),
                (None, Some(cond))
                    if was_aborted
                        && cond
                            .message
                            .as_deref()
                            .is_some_and(|m| m.starts_with(generic.as_str())) =>
                {
                    cond.message.clone().unwrap_or(generic)
                }
                _ => generic,
            };
            c::set(
                &mut conds,
                Cond::Progressing,
                FALSE,
                c::ROLLOUT_ABORTED,
                message,
                now,
                false,
            );
        } else if paused {
            c::set(
                &mut conds,
                Cond::Progressing,
                UNKNOWN,
                c::ROLLOUT_PAUSED,
                "Rollout is paused",
                now,
                false,
            );
        } else if completed {
            c::set(
                &mut conds,
                Cond::Progressing,
                TRUE,
                c::NEW_RS_AVAILABLE,
                format!("ReplicaSet \"{rs_name}\" has successfully progressed."),
                now,
                false,
            );
        } else if progress.created {
            c::set(
                &mut conds,
                Cond::Progressing,
                TRUE,
                c::NEW_RS_CREATED,
                format!("Created new replica set \"{rs_name}\""),
                now,
                true,
            );
        } else if progress.progressed
            || was_aborted
            || c::has_reason(&conds, Cond::Progressing, c::ROLLOUT_PAUSED)
            || c::find(&conds, Cond::Progressing).is_none()
        {
            // Fresh progress, or the first reconcile after a resume or retry: the deadline
            // counts from now.
            c::set(
                &mut conds,
                Cond::Progressing,
                TRUE,
                c::RS_UPDATED,
                format!("ReplicaSet \"{rs_name}\" is progressing."),
                now,
                true,
            );
        } else {
            self.check_deadline(status, &mut conds, events, requeue, progress.revision);
        }

        // Paused.
        if paused {
            c::set(
                &mut conds,
                Cond::Paused,
                TRUE,
                c::ROLLOUT_PAUSED,
                "Rollout is paused",
                now,
                false,
            );
        } else if c::find(&conds, Cond::Paused).is_some() {
            c::set(
                &mut conds,
                Cond::Paused,
                FALSE,
                c::ROLLOUT_RESUMED,
                "Rollout is resumed",
                now,
                false,
            );
        }

        // Completed and Healthy.
        let completed_status = if completed { TRUE } else { FALSE };
        c::set(
            &mut conds,
            Cond::Completed,
            completed_status,
            c::ROLLOUT_COMPLETED,
            c::ROLLOUT_COMPLETED,
            now,
            false,
        );
        if completed && available >= r {
            c::set(
                &mut conds,
                Cond::Healthy,
                TRUE,
                c::ROLLOUT_HEALTHY,
                "Rollout is healthy",
                now,
                false,
            );
        } else {
            c::set(
                &mut conds,
                Cond::Healthy,
                FALSE,
                c::ROLLOUT_HEALTHY,
                "Rollout is not healthy",
                now,
                false,
            );
        }
        status.conditions = Some(conds);
    }

    /// Progressing with no progress since `lastUpdateTime`: past the deadline it becomes
    /// `ProgressDeadlineExceeded`, and with `progressDeadlineAbort` the update is aborted. Only
    /// the condition's own time and `now` decide; no annotation on another ReplicaSet can
    /// postpone it.
    fn check_deadline(
        &self,
        status: &mut RolloutStatus,
        conds: &mut Vec<sluice_api::rollout::RolloutCondition>,
        events: &mut Vec<Event>,
        requeue: &mut Option<Duration>,
        revision: i64,
    ) {
        let Some(cond) = c::find(conds, Cond::Progressing).cloned() else {
            return;
        };
        let is_true = cond.status.as_ref().is_some_and(|s| s.as_str() == TRUE);
        if !is_true || cond.reason.as_deref() == Some(c::NEW_RS_AVAILABLE) {
            return;
        }
        let deadline_secs = self
            .ro
            .spec
            .progress_deadline_seconds
            .unwrap_or(sluice_api::rollout::DEFAULT_PROGRESS_DEADLINE_SECONDS)
            .max(0);
        let last = cond.last_update_time.map(|t| t.0).unwrap_or(self.now);
        let elapsed = Duration::try_from(self.now.duration_since(last)).unwrap_or_default();
        let deadline = Duration::from_secs(deadline_secs as u64);
        if elapsed < deadline {
            set_requeue(requeue, deadline - elapsed);
            return;
        }
        let rs_name = self.new_rs_name();
        c::set(
            conds,
            Cond::Progressing,
            FALSE,
            c::PROGRESS_DEADLINE_EXCEEDED,
            format!("ReplicaSet \"{rs_name}\" has timed out progressing."),
            self.now,
            false,
        );
        events.push(Event::warning(
            "RolloutTimedOut",
            format!("ReplicaSet \"{rs_name}\" has timed out progressing."),
        ));
        if self.ro.spec.progress_deadline_abort == Some(true) {
            status.abort = Some(true);
            status.aborted_at = Some(Time(self.now));
            status.pause_conditions = None;
            status.controller_pause = None;
            events.push(Event::warning(
                "RolloutAborted",
                format!("Rollout aborted update to revision {revision}"),
            ));
            c::set(
                conds,
                Cond::Progressing,
                FALSE,
                c::ROLLOUT_ABORTED,
                format!(
                    "Rollout aborted update to revision {revision}: ReplicaSet \"{rs_name}\" has timed out progressing."
                ),
                self.now,
                false,
            );
            // Scale back on the next pass.
            set_requeue(requeue, Duration::from_secs(1));
        }
    }
}

struct Progress {
    aborted: bool,
    /// Why an analysis aborted the update, when one did in this reconcile.
    abort_message: Option<String>,
    created: bool,
    progressed: bool,
    completed: bool,
    revision: i64,
}

/// What the common part of a reconcile settled, for the strategy-specific part.
struct Update {
    revision: i64,
    new_is_stable: bool,
    aborted: bool,
    manually_paused: bool,
    verdicts: Verdicts,
}

fn counts_of(rs: &ReplicaSet) -> RsCounts {
    RsCounts::new(rs.spec_replicas(), rs.available_replicas())
}

fn counts_of_status(s: &RolloutStatus) -> (Option<i32>, Option<i32>, Option<i32>, Option<i32>) {
    (
        s.replicas,
        s.updated_replicas,
        s.ready_replicas,
        s.available_replicas,
    )
}

fn set_requeue(requeue: &mut Option<Duration>, after: Duration) {
    let after = after.max(Duration::from_secs(1));
    *requeue = Some(requeue.map_or(after, |r| r.min(after)));
}

fn has_pause(status: &RolloutStatus, reason: &PauseReason) -> bool {
    status
        .pause_conditions
        .iter()
        .flatten()
        .any(|p| p.reason.as_ref() == Some(reason))
}

fn remove_pause(status: &mut RolloutStatus, reason: &PauseReason) {
    if let Some(p) = status.pause_conditions.as_mut() {
        p.retain(|c| c.reason.as_ref() != Some(reason));
        if p.is_empty() {
            status.pause_conditions = None;
        }
    }
}

/// `metav1.FormatLabelSelector`-style string for `status.selector` (used by the scale
/// subresource and HPA).
pub fn format_selector(selector: &LabelSelector) -> String {
    let mut parts: Vec<String> = selector
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for expr in selector.match_expressions.iter().flatten() {
        let values = expr.values.clone().unwrap_or_default();
        let part = match expr.operator.as_str() {
            "In" => format!("{} in ({})", expr.key, values.join(",")),
            "NotIn" => format!("{} notin ({})", expr.key, values.join(",")),
            "Exists" => expr.key.clone(),
            "DoesNotExist" => format!("!{}", expr.key),
            other => format!("{} {other}", expr.key),
        };
        parts.push(part);
    }
    parts.join(",")
}

mod analysis;
mod bluegreen;
mod metadata;
#[cfg(test)]
mod tests;

use analysis::{AnalysisState, Role, Verdict};

/// The verdicts of the runs the update may wait on; `Missing` where there is none.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Verdicts {
    step: Verdict,
    background: Verdict,
    pre_promotion: Verdict,
    post_promotion: Verdict,
}

impl Default for Verdicts {
    fn default() -> Self {
        Self {
            step: Verdict::Missing,
            background: Verdict::Missing,
            pre_promotion: Verdict::Missing,
            post_promotion: Verdict::Missing,
        }
    }
}

impl World<'_> {
    /// Reads (and acts on) the verdict of every run the update currently uses.
    fn read_verdicts(
        &self,
        revision: i64,
        status: &mut RolloutStatus,
        plan: &mut Plan,
        events: &mut Vec<Event>,
        state: &mut AnalysisState,
    ) -> Verdicts {
        let mut v = Verdicts::default();
        match &self.p.strategy {
            Strategy::Canary(canary) => {
                let index = status.current_step_index.unwrap_or(0);
                let at_analysis_step = steps::current_step(canary, index)
                    .is_some_and(|s| matches!(s.action(), Some(CanaryStepAction::Analysis(_))));
                if at_analysis_step {
                    v.step = self.analysis_verdict(
                        Role::Step(index),
                        revision,
                        status,
                        plan,
                        events,
                        state,
                    );
                } else if let Some(c) = status.canary.as_mut() {
                    c.current_step_analysis_run_status = None;
                }
                if canary.analysis.is_some() {
                    v.background = self.analysis_verdict(
                        Role::Background,
                        revision,
                        status,
                        plan,
                        events,
                        state,
                    );
                }
            }
            Strategy::BlueGreen(bg) => {
                if bg.pre_promotion_analysis.is_some() {
                    v.pre_promotion = self.analysis_verdict(
                        Role::PrePromotion,
                        revision,
                        status,
                        plan,
                        events,
                        state,
                    );
                }
                if bg.post_promotion_analysis.is_some() {
                    v.post_promotion = self.analysis_verdict(
                        Role::PostPromotion,
                        revision,
                        status,
                        plan,
                        events,
                        state,
                    );
                }
            }
        }
        v
    }
}
