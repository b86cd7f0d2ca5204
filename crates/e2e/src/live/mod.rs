//! Live differential scenarios: one generated Rollout and a script of user actions and pod
//! faults, played at the same time under Argo Rollouts' own controller and under Sluice, each in
//! its own namespace of the same control plane, with the traces compared at every settle point.
//!
//! A scenario comes from a seed alone, so a difference is replayed by its seed
//! (`cargo run -p sluice-e2e --bin sluice-live-conformance -- --start SEED --scenarios 1`).
//! What is compared at a settle point, once both controllers have observed the action and
//! nothing, nor any ReplicaSet's pod counts, has changed for a few seconds ([`Snapshot`]): the phase and message, the step index,
//! the abort and pause state, the conditions (type, status, reason), the replica counts, each
//! ReplicaSet's size by revision, the Service selectors by revision, the canary Ingress's
//! weight, the phases of the AnalysisRuns and Experiments; and at the end, the Rollout's events
//! as (type, reason): all in order but the scalings, and the number of scalings.

pub mod documented;
mod scenario;
mod snapshot;

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt as _;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use sluice_engine::labels::{POD_TEMPLATE_HASH, REVISION};
use sluice_engine::reconcile::SPEC_WARNING;

pub use scenario::{Action, FAILING_TEMPLATE, Fault, PASSING_TEMPLATE, Scenario};
pub use snapshot::{Look, Snapshot};

use crate::harness::TestNamespace;

/// The fake kubelet's annotation that keeps a pod from turning Ready.
const NEVER_READY_ANNOTATION: &str = sluice_testenv::fake_kubelet::rules::NEVER_READY_ANNOTATION;

/// Applies one action to the Rollout `web` of `ns`. A write the API server refuses is an
/// error of the scenario, reported with its seed rather than ending the whole run.
pub async fn apply(ns: &TestNamespace, action: &Action) -> anyhow::Result<()> {
    let api = crate::rollouts(ns);
    let spec = |spec: Value| {
        let api = api.clone();
        async move {
            api.patch(
                "web",
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": spec })),
            )
            .await
            .map(drop)
            .context("spec patch")
        }
    };
    match action {
        Action::SetImage { version, fault } => {
            // A merge patch replaces the container list and removes an annotation set to null.
            let mut template = Scenario::template(*version, *fault);
            if *fault != Fault::NeverReady {
                template["metadata"]["annotations"] = json!({NEVER_READY_ANNOTATION: null});
            }
            spec(json!({ "template": template })).await
        }
        Action::Promote => {
            crate::promote(&api, "web").await;
            Ok(())
        }
        Action::PromoteFull => {
            crate::promote_full(&api, "web").await;
            Ok(())
        }
        Action::Abort => {
            crate::abort(&api, "web").await;
            Ok(())
        }
        Action::Retry => {
            crate::retry(&api, "web").await;
            Ok(())
        }
        Action::Pause => {
            crate::pause(&api, "web").await;
            Ok(())
        }
        Action::Resume => {
            crate::resume(&api, "web").await;
            Ok(())
        }
        Action::Scale(n) => spec(json!({ "replicas": n })).await,
        Action::Undo => undo(ns).await,
        Action::Restart => {
            let now = jiff::Timestamp::now().round(jiff::Unit::Second)?;
            spec(json!({ "restartAt": now.to_string() })).await
        }
    }
}

/// What `kubectl argo rollouts undo` does: the pod template of the ReplicaSet of the revision
/// before the newest, without the controller's hash label, becomes the Rollout's again.
async fn undo(ns: &TestNamespace) -> anyhow::Result<()> {
    let rss: Vec<ReplicaSet> = ns
        .api::<ReplicaSet>()
        .list(&ListParams::default())
        .await
        .context("listing ReplicaSets")?
        .items;
    let mut by_revision: Vec<(i64, &ReplicaSet)> = rss
        .iter()
        .filter_map(|rs| Some((rs.annotations().get(REVISION)?.parse().ok()?, rs)))
        .collect();
    by_revision.sort_by_key(|(revision, _)| std::cmp::Reverse(*revision));
    let Some((_, rs)) = by_revision.get(1) else {
        return Ok(()); // nothing to go back to, as the command says
    };
    let mut template = rs
        .spec
        .as_ref()
        .and_then(|s| s.template.clone())
        .context("a ReplicaSet without a pod template")?;
    if let Some(labels) = template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.remove(POD_TEMPLATE_HASH);
    }
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "replace", "path": "/spec/template", "value": template}
    ]))?;
    crate::rollouts(ns)
        .patch("web", &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .context("undo")?;
    Ok(())
}

/// Waits until the controller of `ns` has observed the Rollout's generation and nothing it
/// shows, nor the ReplicaSets' pod counts, has changed for `quiet`, and at least `at_least`
/// has passed; gives up after `limit` with the last snapshot. Quiet is counted from the pods'
/// last change too: a status reports it up to one status-write interval later, so a
/// snapshot unchanged for `quiet` since an earlier change may still be about to change.
pub async fn settle(
    ns: &TestNamespace,
    quiet: Duration,
    at_least: Duration,
    limit: Duration,
) -> Snapshot {
    let start = Instant::now();
    let mut last: Option<(Look, Instant)> = None;
    loop {
        if let Ok(look) = Snapshot::take(ns).await {
            match &last {
                Some((before, since))
                    if before.snapshot == look.snapshot
                        && before.pods == look.pods
                        && look.observed =>
                {
                    if since.elapsed() >= quiet && start.elapsed() >= at_least {
                        return look.snapshot;
                    }
                }
                _ => last = Some((look, Instant::now())),
            }
        }
        if start.elapsed() >= limit {
            return last.map(|(l, _)| l.snapshot).unwrap_or_default();
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The Rollout's events, oldest first, as (type, reason), and how many were recorded in all
/// (a repeat folded into an event counts again).
pub async fn events(ns: &TestNamespace) -> (Vec<(String, String)>, i32) {
    let api: Api<Event> = ns.api();
    let items: Vec<Event> = api
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| {
            e.regarding
                .as_ref()
                .is_some_and(|r| r.kind.as_deref() == Some("Rollout"))
        })
        .collect();
    let recorded = items
        .iter()
        .map(|e| {
            e.series
                .as_ref()
                .map(|s| s.count)
                .or(e.deprecated_count)
                .unwrap_or(1)
                .max(1)
        })
        .sum();
    let mut all: Vec<(i128, (String, String))> = items
        .into_iter()
        .map(|e| {
            let name = e.metadata.name.clone().unwrap_or_default();
            let at = name
                .rsplit_once('.')
                .and_then(|(_, h)| i128::from_str_radix(h, 16).ok())
                .unwrap_or(0);
            (
                at,
                (
                    e.type_.clone().unwrap_or_default(),
                    e.reason.clone().unwrap_or_default(),
                ),
            )
        })
        .collect();
    all.sort_by_key(|(at, _)| *at);
    (all.into_iter().map(|(_, e)| e).collect(), recorded)
}

/// client-go's event recorder, which Argo's controller uses, drops an object's events past a
/// burst of 25 (then lets one through every five minutes); Sluice posts every event. Argo's
/// list then stops short of Sluice's, which goes on the same (in the order compared).
const ARGO_EVENT_BURST: i32 = 25;

/// The key of the differences page's row for events Argo's recorder dropped.
pub const EVENTS_PAST_ARGOS_BURST: &str = "events past Argo's event burst";
/// A run whose Job measurement was terminated (its update completed) is Inconclusive, as in
/// Argo 1.10; Argo 1.9.1 calls it Successful (docs/differences-from-argo.md).
pub const JOB_CUT_SHORT: &str = "a Job cut short is Inconclusive (Argo 1.10)";

/// Counts Sluice's Inconclusive runs that Argo 1.9.1 calls Successful as Argo's, when nothing
/// waits on them (the Rollout is not paused on an Inconclusive run): the 1.10 verdict of a Job
/// terminated because its update completed. Says whether it changed anything.
fn job_cut_short_as_argo_1_10(sluice: &mut Snapshot, argo: &Snapshot) -> bool {
    if sluice
        .paused
        .iter()
        .any(|p| p.contains("InconclusiveAnalysisRun"))
    {
        return false;
    }
    let mut changed = false;
    for (name, phase) in sluice.analysis_runs.iter_mut() {
        let argos = argo.analysis_runs.get(name).map(String::as_str);
        if phase == "Some(Inconclusive)" && argos == Some("Some(Successful)") {
            *phase = "Some(Successful)".to_string();
            changed = true;
        }
    }
    changed
}

/// The events but `ScalingReplicaSet` in order, and how many `ScalingReplicaSet` there are.
/// A scaling is reported by the pass that writes it, and which pass that is depends on when
/// each controller saw the ReplicaSet controller's status: the scalings of two passes may
/// interleave differently with the events of the steps around them. Their number, and the order
/// of everything else, do not depend on timing.
fn order_and_scalings(events: &[(String, String)]) -> (Vec<&(String, String)>, usize) {
    let scaling = |e: &&(String, String)| e.1 == "ScalingReplicaSet";
    (
        events.iter().filter(|e| !scaling(e)).collect(),
        events.iter().filter(scaling).count(),
    )
}

/// The outcome of one scenario.
#[derive(Debug, Default)]
pub struct Outcome {
    pub settle_points: usize,
    /// Settle points (and the event lists) that differ, described.
    pub differences: Vec<String>,
    /// Differences the differences page explains, by the page's key.
    pub documented: Vec<&'static str>,
}

impl Outcome {
    /// Counts the scenario under the documented difference `key`, once.
    fn document(&mut self, key: &'static str) {
        if !self.documented.contains(&key) {
            self.documented.push(key);
        }
    }
}

/// Plays `scenario` in `sluice` and `argo` (namespaces each watched by its controller) at the
/// same time and compares them at every settle point.
pub async fn play(scenario: &Scenario, sluice: &TestNamespace, argo: &TestNamespace) -> Outcome {
    // Longer than Sluice's status-write interval (5 s by default), which may hold back a write
    // of counts in the middle of an update.
    let quiet = Duration::from_secs(7);
    let limit = Duration::from_secs(90);
    // A progress deadline ends a wait that looks settled: each side is looked at once both
    // deadlines have surely passed, so that the two are compared on the same side of theirs.
    let at_least = scenario
        .progress_deadline
        .map_or(Duration::ZERO, |(seconds, _)| {
            Duration::from_secs(seconds.unsigned_abs() + 5)
        });
    let manifests = scenario.manifests();
    let mut outcome = Outcome::default();
    let (a, b) = tokio::join!(sluice.apply_yaml(&manifests), argo.apply_yaml(&manifests));
    if let Err(e) = a.and(b) {
        outcome.differences.push(format!(
            "seed {}: could not create the scenario: {e:#}",
            scenario.seed
        ));
        return outcome;
    }
    let mut history = documented::History::default();
    // The documented differences met at settle points: they change the events too.
    let mut diverged: Vec<&'static str> = Vec::new();
    let mut compare =
        |action: Option<&Action>, mut s: Snapshot, a: Snapshot, outcome: &mut Outcome| {
            outcome.settle_points += 1;
            if s != a && job_cut_short_as_argo_1_10(&mut s, &a) {
                outcome.document(JOB_CUT_SHORT);
            }
            history.saw(action, &a);
            let explained = if s == a {
                Vec::new()
            } else {
                documented::explain(action, &mut history, &s, &a)
            };
            for &key in &explained {
                outcome.document(key);
                if documented::CHANGES_EVENTS.contains(&key) && !diverged.contains(&key) {
                    diverged.push(key);
                }
            }
            if s != a && explained.is_empty() {
                let label =
                    action.map_or_else(|| "the first deploy".to_string(), |a| format!("{a:?}"));
                let mut why = String::new();
                let _ = write!(
                    why,
                    "seed {}, after {label}:\n  Sluice: {s:?}\n  Argo:   {a:?}",
                    scenario.seed
                );
                outcome.differences.push(why);
            }
        };
    let (s, a) = tokio::join!(
        settle(sluice, quiet, at_least, limit),
        settle(argo, quiet, at_least, limit)
    );
    compare(None, s, a, &mut outcome);
    for action in &scenario.actions {
        let (a, b) = tokio::join!(apply(sluice, action), apply(argo, action));
        if let Err(e) = a.and(b) {
            outcome.differences.push(format!(
                "seed {}: could not apply {action:?}: {e:#}",
                scenario.seed
            ));
            return outcome;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (s, a) = tokio::join!(
            settle(sluice, quiet, at_least, limit),
            settle(argo, quiet, at_least, limit)
        );
        compare(Some(action), s, a, &mut outcome);
    }
    let ((mut s, _), (mut a, argo_recorded)) = tokio::join!(events(sluice), events(argo));
    // A run Argo 1.9.1 saw succeed where Sluice's was cut short (Inconclusive, as in 1.10) has
    // an `AnalysisRunSuccessful` only in Argo's list.
    let cut_short = outcome.documented.contains(&JOB_CUT_SHORT);
    let successful = |e: &(String, String)| e.1 == "AnalysisRunSuccessful";
    if cut_short
        && a.iter().filter(|e| successful(e)).count() > s.iter().filter(|e| successful(e)).count()
    {
        let sluice_successes = s.iter().filter(|e| successful(e)).count();
        let mut seen = 0;
        a.retain(|e| {
            if !successful(e) {
                return true;
            }
            seen += 1;
            seen <= sluice_successes
        });
    }
    // Sluice's own warning about a spec Argo runs as it is (docs/differences-from-argo.md).
    let warning = ("Warning".to_string(), SPEC_WARNING.to_string());
    if s.contains(&warning) {
        s.retain(|e| *e != warning);
        outcome.document(SPEC_WARNING);
    }
    let (s_order, s_scalings) = order_and_scalings(&s);
    let (a_order, a_scalings) = order_and_scalings(&a);
    let same = s_order == a_order && s_scalings == a_scalings;
    let past_burst = argo_recorded >= ARGO_EVENT_BURST
        && s_order.starts_with(&a_order)
        && s_scalings >= a_scalings;
    if !same && past_burst {
        outcome.document(EVENTS_PAST_ARGOS_BURST);
    } else if let Some(key) = documented::explain_extra_scalings(&history)
        .filter(|_| !same && s_order == a_order && a_scalings > s_scalings)
    {
        outcome.document(key);
    } else if let Some(key) = diverged.first().filter(|_| !same) {
        // The documented difference met at a settle point made the events differ too.
        outcome.document(key);
    } else if !same {
        outcome.differences.push(format!(
            "seed {}, events:\n  Sluice: {s:?}\n  Argo:   {a:?}",
            scenario.seed
        ));
    }
    outcome
}
