//! Canary `experiment` steps: the Rollout creates an Experiment from the step (templates from
//! the canary's or the stable's pod template), waits on its phase, and winds down the
//! Experiments it no longer waits on.
//!
//! - The Experiment is named `<rollout>-<podHash>-<revision>-<stepIndex>` (then `-1`, `-2`, ...
//!   when that name holds an Experiment that cannot be used again), labelled with the Rollout's
//!   labels and the pod-template hash, annotated with the revision, controlled by the Rollout.
//! - Successful completes the step; Failed or Error aborts the update with Argo's message;
//!   Inconclusive pauses it (`InconclusiveExperiment`); anything else records it as
//!   `status.canary.currentExperiment`.
//! - On abort or full promotion every unfinished Experiment is terminated, and so is any
//!   Experiment that is not the current step's; Experiments whose ReplicaSet is gone are
//!   deleted, as are finished ones beyond the Rollout's history limits.
//!
//! Unlike Argo, an Experiment that finished while its record in the Rollout's status was lost
//! (a conflict) is found again by name and its verdict used, instead of starting another.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sluice_api::common::AnalysisPhase;
use sluice_api::experiment::{
    Experiment, ExperimentAnalysisTemplateRef, ExperimentSpec, TemplateSpec,
};
use sluice_api::rollout::{
    CanaryStatus, PauseReason, ReplicaSetSpecRef, RolloutExperimentStep, RolloutStatus,
};
use sluice_routers::Destination;

use super::World;
use super::analysis::{AnalysisState, Verdict};
use crate::labels::{POD_TEMPLATE_HASH, REVISION};
use crate::observed::ReplicaSetExt;
use crate::pause::{add_pause, has_pause};
use crate::plan::{Action, Event, Plan};
use crate::steps;

/// Argo's default history limits for finished Experiments.
const DEFAULT_HISTORY_LIMIT: usize = 5;

fn phase_of(e: &Experiment) -> Option<&AnalysisPhase> {
    e.status.as_ref().and_then(|s| s.phase.as_ref())
}

fn finished(e: &Experiment) -> bool {
    matches!(
        phase_of(e),
        Some(
            AnalysisPhase::Successful
                | AnalysisPhase::Failed
                | AnalysisPhase::Error
                | AnalysisPhase::Inconclusive
        )
    )
}

fn name_of(e: &Experiment) -> &str {
    e.metadata.name.as_deref().unwrap_or_default()
}

impl World<'_> {
    /// `<rollout>-<podHash>-<revision>-<stepIndex>`.
    fn experiment_base_name(&self, revision: i64, step_index: i32) -> String {
        format!(
            "{}-{}-{revision}-{step_index}",
            self.rollout_name(),
            self.spec.pod_hash
        )
    }

    /// The Experiments of this revision's step `step_index`: the base name and its `-N`
    /// successors, with their suffix.
    fn step_experiments(&self, revision: i64, step_index: i32) -> Vec<(u32, &Experiment)> {
        let base = self.experiment_base_name(revision, step_index);
        let mut found: Vec<(u32, &Experiment)> = self
            .experiments
            .iter()
            .filter_map(|e| {
                let name = name_of(e);
                if name == base {
                    return Some((0, e));
                }
                let n = name.strip_prefix(&base)?.strip_prefix('-')?.parse().ok()?;
                Some((n, e))
            })
            .collect();
        found.sort_by_key(|(n, _)| *n);
        found
    }

    /// The Experiment the current experiment step waits on, if it exists: the one recorded in
    /// the status, else the newest of the step's, unless that one was Inconclusive and the
    /// update has been resumed since (a new Experiment measures again).
    pub(super) fn current_experiment(
        &self,
        status: &RolloutStatus,
        revision: i64,
        step_index: i32,
    ) -> Option<&Experiment> {
        let candidates = self.step_experiments(revision, step_index);
        let recorded = status
            .canary
            .as_ref()
            .and_then(|c| c.current_experiment.as_deref());
        if let Some((_, e)) = candidates
            .iter()
            .find(|(_, e)| Some(name_of(e)) == recorded)
        {
            return Some(e);
        }
        let (_, newest) = candidates.last()?;
        let resumed = phase_of(newest) == Some(&AnalysisPhase::Inconclusive)
            && !has_pause(status, &PauseReason::InconclusiveExperiment);
        (!resumed).then_some(*newest)
    }

    /// The verdict of the current experiment step: an abort (with Argo's message) for a
    /// Failed or Errored Experiment, a pause for an Inconclusive one.
    pub(super) fn experiment_verdict(
        &self,
        revision: i64,
        status: &mut RolloutStatus,
        events: &mut Vec<Event>,
        state: &mut AnalysisState,
    ) -> Verdict {
        let index = status.current_step_index.unwrap_or(0);
        let at_step =
            steps::current_step(self.spec.canary(), index).is_some_and(|s| s.experiment.is_some());
        if !at_step {
            return Verdict::Missing;
        }
        let Some(e) = self.current_experiment(status, revision, index) else {
            return Verdict::Missing;
        };
        let message = e
            .status
            .as_ref()
            .and_then(|s| s.message.clone())
            .filter(|m| !m.is_empty());
        match phase_of(e) {
            Some(AnalysisPhase::Successful) => Verdict::Passed,
            Some(AnalysisPhase::Failed | AnalysisPhase::Error) => {
                if status.abort != Some(true) {
                    status.abort = Some(true);
                }
                let mut why = "Experiment analysis phase is error/failed".to_string();
                if let Some(m) = message {
                    why.push_str(": ");
                    why.push_str(&m);
                }
                state.abort_message = Some(why);
                Verdict::Failed
            }
            Some(AnalysisPhase::Inconclusive) => {
                let reason = PauseReason::InconclusiveExperiment;
                if !has_pause(status, &reason) {
                    events.push(add_pause(status, reason, self.now));
                }
                Verdict::Inconclusive
            }
            _ => Verdict::Pending,
        }
    }

    /// Runs the current experiment step: creates its Experiment once a stable ReplicaSet
    /// exists, records it while it runs; returns whether the step is complete.
    pub(super) fn experiment_step(
        &self,
        step: &RolloutExperimentStep,
        status: &mut RolloutStatus,
        plan: &mut Plan,
        events: &mut Vec<Event>,
        revision: i64,
    ) -> bool {
        let index = status.current_step_index.unwrap_or(0);
        let current = self.current_experiment(status, revision, index);
        let canary = status.canary.get_or_insert_with(CanaryStatus::default);
        match current {
            Some(e) if phase_of(e) == Some(&AnalysisPhase::Successful) => {
                canary.current_experiment = None;
                true
            }
            Some(e) => {
                canary.current_experiment = (!finished(e)).then(|| name_of(e).to_string());
                false
            }
            None => {
                if self.stable_rs.is_none() || self.new_rs.is_none() {
                    return false;
                }
                let next = self
                    .step_experiments(revision, index)
                    .last()
                    .map(|(n, _)| n + 1);
                let base = self.experiment_base_name(revision, index);
                let name = next.map_or(base.clone(), |n| format!("{base}-{n}"));
                match self.build_experiment(step, &name, revision) {
                    Ok(experiment) => {
                        plan.actions.push(Action::CreateExperiment {
                            experiment: Box::new(experiment),
                        });
                        events.push(Event::normal(
                            "ExperimentCreated",
                            format!("Created Experiment '{name}'"),
                        ));
                        canary.current_experiment = Some(name);
                    }
                    Err(message) => {
                        events.push(Event::warning("ExperimentCreateError", message));
                    }
                }
                false
            }
        }
    }

    /// Terminates the Experiments the update no longer waits on, and deletes those of gone
    /// ReplicaSets and finished ones beyond the history limits.
    pub(super) fn wind_down_experiments(
        &self,
        status: &RolloutStatus,
        revision: i64,
        aborted_or_promoted: bool,
        plan: &mut Plan,
    ) {
        let index = status.current_step_index.unwrap_or(0);
        let at_step =
            steps::current_step(self.spec.canary(), index).is_some_and(|s| s.experiment.is_some());
        let current = (at_step && !aborted_or_promoted)
            .then(|| self.current_experiment(status, revision, index))
            .flatten()
            .map(name_of);
        let hashes: Vec<&str> = self
            .all
            .iter()
            .filter(|rs| !rs.is_being_deleted())
            .filter_map(|rs| rs.pod_hash())
            .collect();
        let mut others: Vec<&Experiment> = self
            .experiments
            .iter()
            .filter(|e| Some(name_of(e)) != current)
            .collect();
        others
            .sort_by_key(|e| std::cmp::Reverse(e.metadata.creation_timestamp.clone().map(|t| t.0)));
        let history = self.ro.spec.analysis.as_ref();
        let limit = |v: Option<i32>| v.map_or(DEFAULT_HISTORY_LIMIT, |n| n.max(0) as usize);
        let successful_limit = limit(history.and_then(|a| a.successful_run_history_limit));
        let unsuccessful_limit = limit(history.and_then(|a| a.unsuccessful_run_history_limit));
        let (mut successful, mut unsuccessful) = (0, 0);
        for e in others {
            let hash = e
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(POD_TEMPLATE_HASH));
            let orphaned = hash.is_none_or(|h| !hashes.contains(&h.as_str()));
            let over_limit = match phase_of(e) {
                Some(AnalysisPhase::Successful) => {
                    successful += 1;
                    successful > successful_limit
                }
                Some(
                    AnalysisPhase::Failed | AnalysisPhase::Error | AnalysisPhase::Inconclusive,
                ) => {
                    unsuccessful += 1;
                    unsuccessful > unsuccessful_limit
                }
                _ => false,
            };
            if orphaned || over_limit {
                plan.actions.push(Action::DeleteExperiment {
                    name: name_of(e).to_string(),
                    uid: e.metadata.uid.clone(),
                });
            } else if !finished(e) && e.spec.terminate != Some(true) {
                plan.actions.push(Action::TerminateExperiment {
                    name: name_of(e).to_string(),
                });
            }
        }
    }

    /// Weights of the current Experiment's templates that ask for one, while it runs: the
    /// routers send them traffic beside the canary and the stable.
    pub(super) fn experiment_destinations(
        &self,
        status: &RolloutStatus,
        revision: i64,
    ) -> Vec<Destination> {
        let index = status.current_step_index.unwrap_or(0);
        let Some(step) =
            steps::current_step(self.spec.canary(), index).and_then(|s| s.experiment.as_ref())
        else {
            return Vec::new();
        };
        let Some(e) = self.current_experiment(status, revision, index) else {
            return Vec::new();
        };
        if phase_of(e) != Some(&AnalysisPhase::Running) {
            return Vec::new();
        }
        let exp_status = e.status.clone().unwrap_or_default();
        step.templates
            .iter()
            .flatten()
            .filter_map(|t| {
                let weight = t.weight?;
                let ts = exp_status.template_status(t.name.as_deref()?)?;
                Some(Destination {
                    service_name: ts.service_name.clone()?,
                    pod_template_hash: ts.pod_template_hash.clone().unwrap_or_default(),
                    weight,
                })
            })
            .collect()
    }

    /// The Experiment of an experiment step, as Argo makes it.
    fn build_experiment(
        &self,
        step: &RolloutExperimentStep,
        name: &str,
        revision: i64,
    ) -> Result<Experiment, String> {
        let ro = self.ro;
        let mut labels = ro.metadata.labels.clone().unwrap_or_default();
        labels.insert(POD_TEMPLATE_HASH.to_string(), self.spec.pod_hash.clone());
        let mut templates = Vec::new();
        for t in step.templates.iter().flatten() {
            let rs: Option<&ReplicaSet> = match t.spec_ref {
                Some(ReplicaSetSpecRef::Canary) => self.new_rs,
                Some(ReplicaSetSpecRef::Stable) => self.stable_rs,
                _ => return Err("Invalid template step SpecRef: must be canary or stable".into()),
            };
            let rs_spec = rs.and_then(|r| r.spec.clone()).unwrap_or_default();
            let mut template = rs_spec.template.clone().unwrap_or_default();
            let mut selector = t.selector.clone().unwrap_or(rs_spec.selector.clone());
            // The Experiment's ReplicaSet gets its own hash (the Experiment controller adds
            // it); the one of the Rollout's ReplicaSet goes.
            if let Some(m) = selector.match_labels.as_mut() {
                m.remove(POD_TEMPLATE_HASH);
            }
            if let Some(meta) = &t.metadata {
                let pod_meta = template.metadata.get_or_insert_with(ObjectMeta::default);
                for (k, v) in meta.labels.iter().flatten() {
                    pod_meta
                        .labels
                        .get_or_insert_with(BTreeMap::new)
                        .insert(k.clone(), v.clone());
                    selector
                        .match_labels
                        .get_or_insert_with(BTreeMap::new)
                        .insert(k.clone(), v.clone());
                }
                for (k, v) in meta.annotations.iter().flatten() {
                    pod_meta
                        .annotations
                        .get_or_insert_with(BTreeMap::new)
                        .insert(k.clone(), v.clone());
                }
            }
            let service = (t.weight.is_some() || t.service.is_some())
                .then(|| t.service.clone().unwrap_or_default());
            templates.push(TemplateSpec {
                name: t.name.clone(),
                replicas: Some(t.replicas.unwrap_or(1)),
                min_ready_seconds: rs_spec.min_ready_seconds,
                selector: Some(selector),
                template: Some(template),
                service,
            });
        }
        let stable_hash = self.stable_hash().map(str::to_string);
        let mut analyses = Vec::new();
        for a in step.analyses.iter().flatten() {
            let args = crate::analysis::resolve_rollout_args(
                ro,
                a.args.as_deref().unwrap_or_default(),
                &self.spec.pod_hash,
                stable_hash.as_deref(),
            )?;
            analyses.push(ExperimentAnalysisTemplateRef {
                name: a.name.clone(),
                template_name: a.template_name.clone(),
                cluster_scope: a.cluster_scope,
                args: (!args.is_empty()).then_some(args),
                required_for_completion: a.required_for_completion,
            });
        }
        let mut annotations = BTreeMap::new();
        annotations.insert(REVISION.to_string(), revision.to_string());
        Ok(Experiment {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: ro.metadata.namespace.clone(),
                labels: Some(labels),
                annotations: Some(annotations),
                owner_references: Some(vec![crate::replicaset::controller_ref(ro)]),
                ..Default::default()
            },
            spec: ExperimentSpec {
                templates: Some(templates),
                duration: step.duration.clone(),
                progress_deadline_seconds: Some(ro.spec.progress_deadline_seconds.unwrap_or(600)),
                analyses: (!analyses.is_empty()).then_some(analyses),
                scale_down_delay_seconds: step.scale_down_delay_seconds,
                dry_run: step.dry_run.clone(),
                analysis_run_metadata: step.analysis_run_metadata.clone(),
                ..Default::default()
            },
            status: None,
        })
    }
}
