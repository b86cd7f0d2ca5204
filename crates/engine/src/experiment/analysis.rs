//! The Experiment's AnalysisRuns. Before the templates are available, only the referenced
//! templates are checked (a missing one errs the analysis at once, rather than after the
//! pods came up). Once available, one run per analysis is started, unless the Experiment is
//! already terminating; its phase is copied into `status.analysisRuns` on every pass, with an
//! event per change; and once terminating, unfinished runs are told to stop.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sluice_api::analysis::{AnalysisRun, AnalysisRunSpec};
use sluice_api::common::{AnalysisPhase, AnalysisTemplateRef, DryRun, MeasurementRetention};
use sluice_api::experiment::{
    Experiment, ExperimentAnalysisRunStatus, ExperimentAnalysisTemplateRef, ExperimentStatus,
};

use super::args::{ArgFacts, resolve_args};
use super::observed::{ExperimentObserved, controlled_by, controller_ref, experiment_name};
use super::plan::{ExperimentAction, TERMINATING_RUN, transition_event};
use super::state::finished_at;
use crate::analysis::{collision_name, merge_args, merge_templates, resolve_nested, unique_rules};
use crate::labels::CONTROLLER_INSTANCE_ID;
use crate::observed::{AnalysisTemplates, ReplicaSetExt, TemplateKey};
use crate::plan::Event;

/// The key of the template an analysis names.
fn template_key(a: &ExperimentAnalysisTemplateRef) -> TemplateKey {
    TemplateKey {
        cluster_scope: a.cluster_scope.unwrap_or(false),
        name: a.template_name.clone().unwrap_or_default(),
    }
}

/// The error a lister gives for a template that is not there.
fn lister_not_found(key: &TemplateKey) -> String {
    let resource = if key.cluster_scope {
        "clusteranalysistemplate"
    } else {
        "analysistemplate"
    };
    format!("{resource}.argoproj.io \"{}\" not found", key.name)
}

/// Argo's message for an analysis whose template is missing before the pods are available.
pub(crate) fn verify_template(
    a: &ExperimentAnalysisTemplateRef,
    templates: &AnalysisTemplates,
) -> Result<(), String> {
    let key = template_key(a);
    if templates.contains_key(&key) {
        return Ok(());
    }
    let kind = if key.cluster_scope {
        "ClusterAnalysisTemplate"
    } else {
        "AnalysisTemplate"
    };
    Err(format!(
        "{kind} verification failed for analysis '{}': {}",
        a.name.as_deref().unwrap_or_default(),
        lister_not_found(&key)
    ))
}

/// The facts argument placeholders can name, from the claimed ReplicaSets and the observed
/// status.
pub(crate) fn arg_facts(e: &Experiment, claimed: &BTreeMap<&str, &ReplicaSet>) -> ArgFacts {
    let available_at = e
        .status
        .as_ref()
        .and_then(|s| s.available_at.as_ref())
        .map(|t| t.0);
    ArgFacts {
        templates: claimed
            .iter()
            .map(|(t, rs)| {
                (
                    (*t).to_owned(),
                    (
                        rs.pod_hash().unwrap_or_default().to_owned(),
                        rs.name().to_owned(),
                    ),
                )
            })
            .collect(),
        available_at,
        finished_at: finished_at(&e.spec, available_at),
    }
}

/// `<experiment>-<analysis>`.
pub fn run_base_name(experiment: &str, analysis: &str) -> String {
    format!("{experiment}-{analysis}")
}

/// The run to start for one analysis, under its base name (see [`place_run`] for the name it
/// finally gets).
pub fn build_run(
    e: &Experiment,
    uid: &str,
    a: &ExperimentAnalysisTemplateRef,
    templates: &AnalysisTemplates,
    facts: &ArgFacts,
) -> Result<AnalysisRun, String> {
    let incoming = resolve_args(a.args.as_deref().unwrap_or_default(), facts)?;
    let key = template_key(a);
    if !templates.contains_key(&key) {
        return Err(lister_not_found(&key));
    }
    let refs = [AnalysisTemplateRef {
        template_name: Some(key.name.clone()),
        cluster_scope: Some(key.cluster_scope),
    }];
    let resolved = resolve_nested(&refs, |r| templates.get(&TemplateKey::of(r)).cloned())?;
    let merged = merge_templates(&resolved)?;
    let args = merge_args(&incoming, merged.args.as_deref().unwrap_or_default())?;
    let dry_run = unique_rules(
        e.spec
            .dry_run
            .iter()
            .flatten()
            .chain(merged.dry_run.iter().flatten())
            .cloned(),
        |r: &DryRun| r.metric_name.clone(),
        "Dry-Run",
    )?;
    let retention = unique_rules(
        e.spec
            .measurement_retention
            .iter()
            .flatten()
            .chain(merged.measurement_retention.iter().flatten())
            .cloned(),
        |r: &MeasurementRetention| r.metric_name.clone(),
        "Measurement Retention",
    )?;

    let mut labels = BTreeMap::new();
    if let Some(id) = e
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(CONTROLLER_INSTANCE_ID))
        .filter(|id| !id.is_empty())
    {
        labels.insert(CONTROLLER_INSTANCE_ID.to_owned(), id.clone());
    }
    let metadata = e.spec.analysis_run_metadata.as_ref();
    labels.extend(metadata.and_then(|m| m.labels.clone()).unwrap_or_default());
    let annotations = metadata
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default();

    Ok(AnalysisRun {
        metadata: ObjectMeta {
            name: Some(run_base_name(
                experiment_name(e),
                a.name.as_deref().unwrap_or_default(),
            )),
            namespace: e.metadata.namespace.clone(),
            labels: (!labels.is_empty()).then_some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            owner_references: Some(vec![controller_ref(e, uid)]),
            ..Default::default()
        },
        spec: AnalysisRunSpec {
            metrics: merged.metrics,
            args: (!args.is_empty()).then_some(args),
            dry_run: (!dry_run.is_empty()).then_some(dry_run),
            measurement_retention: (!retention.is_empty()).then_some(retention),
            ..Default::default()
        },
        status: None,
    })
}

fn run_phase(run: &AnalysisRun) -> Option<&AnalysisPhase> {
    run.status
        .as_ref()
        .and_then(|s| s.phase.as_ref())
        .filter(|p| !p.as_str().is_empty())
}

/// Where a new run goes.
#[derive(Debug, PartialEq, Eq)]
pub enum Placement {
    /// No run has this name: create it.
    Create(String),
    /// An equal, unfinished run of this Experiment already has this name: use it.
    Reuse(String),
}

/// The name for `run`: its base name, else `.1`, `.2`, ... past names taken by other runs.
/// A taken name is reused when the run there is this Experiment's, unfinished, not asked to
/// stop, and measures the same things.
pub fn place_run(run: &AnalysisRun, existing: &[AnalysisRun], uid: &str) -> Placement {
    let base = run.metadata.name.clone().unwrap_or_default();
    let same = |other: &AnalysisRun| {
        let (a, b) = (&run.spec, &other.spec);
        controlled_by(&other.metadata, uid)
            && run_phase(other).is_none_or(|p| !p.is_completed())
            && other.spec.terminate != Some(true)
            && (&a.metrics, &a.args, &a.dry_run, &a.measurement_retention)
                == (&b.metrics, &b.args, &b.dry_run, &b.measurement_retention)
    };
    // Each name but the last free one is taken by some run: the loop ends.
    for n in 0..=existing.len() {
        let name = if n == 0 {
            base.clone()
        } else {
            collision_name(&base, n as u32)
        };
        match existing
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(name.as_str()))
        {
            None => return Placement::Create(name),
            Some(other) if same(other) => return Placement::Reuse(name),
            Some(_) => {}
        }
    }
    Placement::Create(collision_name(&base, existing.len() as u32 + 1))
}

/// The run a pass started for `a` whose status write was lost (a 409 when the Rollout
/// terminated the Experiment meanwhile): unfinished, still measuring what `a` measures. A
/// terminating Experiment starts no run, so without this one it would measure on unrecorded
/// and never be told to stop.
fn unrecorded_run<'o>(
    o: &'o ExperimentObserved,
    uid: &str,
    a: &ExperimentAnalysisTemplateRef,
    facts: &ArgFacts,
) -> Option<&'o AnalysisRun> {
    let run = build_run(&o.experiment, uid, a, &o.analysis_templates, facts).ok()?;
    let Placement::Reuse(name) = place_run(&run, &o.analysis_runs, uid) else {
        return None;
    };
    o.analysis_runs
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some(name.as_str()))
}

/// Reconciles every analysis into `status.analysisRuns`.
pub(crate) fn reconcile_analyses(
    o: &ExperimentObserved,
    uid: &str,
    claimed: &BTreeMap<&str, &ReplicaSet>,
    terminating: bool,
    status: &mut ExperimentStatus,
    actions: &mut Vec<ExperimentAction>,
    events: &mut Vec<Event>,
) {
    let e = &o.experiment;
    let available = e.status.as_ref().is_some_and(|s| s.available_at.is_some());
    let facts = arg_facts(e, claimed);
    for a in e.spec.analyses.iter().flatten() {
        let name = a.name.clone().unwrap_or_default();
        let previous = e
            .status
            .as_ref()
            .and_then(|s| s.analysis_runs.iter().flatten().find(|r| r.name == a.name))
            .cloned()
            .unwrap_or_else(|| ExperimentAnalysisRunStatus {
                name: Some(name.clone()),
                ..Default::default()
            });
        let mut next = previous.clone();

        if !available {
            if let Err(message) = verify_template(a, &o.analysis_templates) {
                next.phase = Some(AnalysisPhase::Error);
                next.message = Some(message);
            }
        } else {
            let recorded = previous.analysis_run.as_deref().filter(|n| !n.is_empty());
            let run = recorded
                .and_then(|n| {
                    o.analysis_runs.iter().find(|r| {
                        r.metadata.name.as_deref() == Some(n) && controlled_by(&r.metadata, uid)
                    })
                })
                .or_else(|| {
                    terminating
                        .then(|| unrecorded_run(o, uid, a, &facts))
                        .flatten()
                });
            match run {
                None if terminating => {}
                None => match build_run(e, uid, a, &o.analysis_templates, &facts) {
                    Ok(mut run) => {
                        let run_name = match place_run(&run, &o.analysis_runs, uid) {
                            Placement::Create(n) => {
                                run.metadata.name = Some(n.clone());
                                actions.push(ExperimentAction::CreateAnalysisRun(Box::new(run)));
                                n
                            }
                            Placement::Reuse(n) => n,
                        };
                        next.analysis_run = Some(run_name);
                        next.phase = Some(AnalysisPhase::Pending);
                        next.message = None;
                    }
                    Err(err) => {
                        next.phase = Some(AnalysisPhase::Error);
                        next.message = Some(format!(
                            "Failed to create AnalysisRun for analysis '{name}': {err}"
                        ));
                    }
                },
                Some(run) => {
                    let phase = run_phase(run);
                    let run_name = run.metadata.name.clone().unwrap_or_default();
                    next.analysis_run = Some(run_name.clone());
                    if terminating
                        && phase.is_none_or(|p| !p.is_completed())
                        && run.spec.terminate != Some(true)
                    {
                        actions.push(ExperimentAction::TerminateAnalysisRun {
                            name: run_name.clone(),
                        });
                        events.push(Event::normal(
                            TERMINATING_RUN,
                            format!("Terminating {name} ({run_name})"),
                        ));
                    }
                    // A run the analysis controller has not picked up yet stays Pending.
                    if let Some(p) = phase {
                        next.phase = Some(p.clone());
                    }
                    next.message = run
                        .status
                        .as_ref()
                        .and_then(|s| s.message.clone())
                        .filter(|m| !m.is_empty());
                }
            }
        }

        // The CRD requires both fields: Argo writes them empty until there is a run.
        next.analysis_run.get_or_insert_with(String::new);
        next.phase
            .get_or_insert_with(|| AnalysisPhase::Other(String::new()));
        let old = previous.phase.as_ref().map_or("", |p| p.as_str());
        let new = next.phase.as_ref().map_or("", |p| p.as_str());
        if old != new {
            let mut message = format!("AnalysisRun '{name}' transitioned from {old} -> {new}");
            if let Some(m) = next.message.as_deref().filter(|m| !m.is_empty()) {
                message.push_str(": ");
                message.push_str(m);
            }
            events.push(transition_event("AnalysisRun", new, message));
        }
        let runs = status.analysis_runs.get_or_insert_with(Vec::new);
        match runs.iter_mut().find(|r| r.name == next.name) {
            Some(slot) => *slot = next,
            None => runs.push(next),
        }
    }
}

#[cfg(test)]
mod tests;
