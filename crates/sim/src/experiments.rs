//! The Experiment controller as the simulation runs it: the real engine
//! (`sluice_engine::experiment::reconcile_experiment`, with `record_write_failure` for a write
//! that fails) driven as the controller's Experiment loop (`sluice_controller::loops::
//! experiments`) drives it. A reconcile observes the Experiment's ReplicaSets, Services and
//! AnalysisRuns and its analyses' templates from the API server, decides, makes every write of
//! the plan in order (a failed one is reported back to the engine and the others still go),
//! then writes the status as a merge patch carrying the resourceVersion it was decided on.
//! That loop's writes go through kube's client directly, so [`apply`] makes each one here
//! through the simulated client, with the patches the loop sends.
//!
//! Its ReplicaSets are brought up by the ReplicaSet controller and kubelet stand-ins, its
//! AnalysisRuns measured by the simulated AnalysisRun controller. Like that one it stands apart
//! from the Rollout controller replicas (no crashes, no leader election) and runs one
//! reconcile per Experiment at a time, a change noticed meanwhile running it again afterwards.
//! Its requests travel with the network's latency, so a Rollout terminating the Experiment
//! meanwhile makes its status write a 409, and a ReplicaSet written by a third party refuses
//! its scale with one. Its replies are never lost: by Argo's rules a create that timed out
//! errs the Experiment, which would make the end state depend on the schedule rather than
//! on the scenario's inputs.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};
use sluice_api::common::AnalysisPhase;
use sluice_api::experiment::Experiment;
use sluice_controller::cluster::{ClusterAccess, WriteError};
use sluice_controller::loops::apply::{annotations_patch, merge_diff};
use sluice_controller::loops::observe::fetch_templates;
use sluice_engine::experiment::{
    ExperimentAction, ExperimentObserved, ExperimentPlan, WriteFailure, analysis_template_refs,
    reconcile_experiment, record_write_failure,
};

use crate::api_model::{ApiServer, Kind, WatchEvent, name_of};
use crate::net::{NAMESPACE, Request, Response, SimWriter};
use crate::side_loop::{Reconcile, SideLoop};

/// The loop's resync period (`--rollout-resync` default): the latest it looks again.
const RESYNC: Duration = Duration::from_secs(900);
/// The loop's error policy: a reconcile that failed is retried after this long.
const ERROR_RETRY: Duration = Duration::from_secs(5);

pub fn phase_of(e: &Value) -> Option<AnalysisPhase> {
    e.pointer("/status/phase")
        .and_then(Value::as_str)
        .map(AnalysisPhase::from)
}

/// Successful, Failed or Error (Inconclusive too): the Experiment runs nothing any more.
pub fn is_finished(e: &Value) -> bool {
    phase_of(e).is_some_and(|p| p.is_completed())
}

/// The controller owner of `obj` when it is of `kind`.
pub fn controller_owner<'v>(obj: &'v Value, kind: &str) -> Option<&'v Value> {
    obj.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|o| o["controller"] == Value::Bool(true) && o["kind"] == kind)
}

/// Which Experiment a committed change makes the controller look at: the Experiment itself,
/// or the one controlling a ReplicaSet or AnalysisRun that changed, as the loop's watches map
/// them.
pub fn interested_in(kind: Kind, event: &WatchEvent) -> Option<String> {
    let obj = event.object();
    match kind {
        Kind::Experiment => Some(name_of(obj).to_string()),
        Kind::ReplicaSet | Kind::AnalysisRun => controller_owner(obj, "Experiment")?
            .get("name")?
            .as_str()
            .map(str::to_string),
        _ => None,
    }
}

/// What one reconcile came to.
#[derive(Debug)]
pub struct Reconciled {
    pub plan: ExperimentPlan,
    /// The writes that failed, as the engine was told.
    pub failed_writes: Vec<String>,
}

/// The Experiment's world, as the loop gathers it: what it controls, or would name.
async fn observe(
    w: &SimWriter,
    exp: &Experiment,
    now: Timestamp,
) -> Result<ExperimentObserved, WriteError> {
    let uid = exp.metadata.uid.clone().unwrap_or_default();
    let prefix = format!("{}-", exp.metadata.name.as_deref().unwrap_or_default());
    let ours = |meta: &ObjectMeta| {
        let controlled = meta
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.controller == Some(true) && o.uid == uid);
        controlled || meta.name.as_deref().is_some_and(|n| n.starts_with(&prefix))
    };
    let replica_sets = w
        .list_replica_sets()
        .await?
        .into_iter()
        .filter(|rs| ours(&rs.metadata))
        .collect();
    let service_names: Vec<String> = exp
        .spec
        .templates
        .iter()
        .flatten()
        .filter_map(|t| t.service.as_ref().and_then(|s| s.name.clone()))
        .collect();
    let services = w
        .list_services(NAMESPACE)
        .await?
        .into_iter()
        .filter(|s| {
            ours(&s.metadata)
                || s.metadata
                    .name
                    .as_ref()
                    .is_some_and(|n| service_names.contains(n))
        })
        .collect();
    let analysis_runs = w
        .list_analysis_runs(NAMESPACE)
        .await?
        .into_iter()
        .filter(|r| ours(&r.metadata))
        .collect();
    let analysis_templates = fetch_templates(w, NAMESPACE, analysis_template_refs(exp)).await?;
    Ok(ExperimentObserved {
        experiment: exp.clone(),
        replica_sets,
        services,
        analysis_runs,
        analysis_templates,
        now: sluice_api::time::whole_seconds(now),
    })
}

/// One write of the plan, as the loop makes it.
pub async fn apply(w: &SimWriter, action: &ExperimentAction) -> Result<(), WriteError> {
    w.may_write()?;
    match action {
        ExperimentAction::CreateReplicaSet(rs) => w.create_replica_set(NAMESPACE, rs).await,
        ExperimentAction::ScaleReplicaSet {
            name,
            resource_version,
            to,
            annotations,
            ..
        } => {
            let mut patch = annotations_patch(resource_version.as_deref(), annotations);
            patch["spec"] = json!({ "replicas": to });
            w.patch_replica_set(NAMESPACE, name, &patch).await
        }
        ExperimentAction::AnnotateReplicaSet {
            name,
            resource_version,
            annotations,
        } => {
            let patch = annotations_patch(resource_version.as_deref(), annotations);
            w.patch_replica_set(NAMESPACE, name, &patch).await
        }
        ExperimentAction::CreateService(svc) => w.create_service(svc).await,
        ExperimentAction::DeleteService { name, uid } => {
            w.delete_service(name, uid.as_deref()).await
        }
        ExperimentAction::CreateAnalysisRun(run) => w.create_analysis_run(NAMESPACE, run).await,
        ExperimentAction::TerminateAnalysisRun { name } => {
            let patch = json!({ "spec": { "terminate": true } });
            match w.patch_analysis_run(NAMESPACE, name, &patch).await {
                // Gone meanwhile: nothing left to stop.
                Err(WriteError::NotFound) => Ok(()),
                other => other,
            }
        }
    }
}

/// How the loop reports a failed write to the engine.
fn failure_of(action: &ExperimentAction, e: &WriteError) -> WriteFailure {
    match e {
        WriteError::Conflict => match action {
            ExperimentAction::CreateReplicaSet(_)
            | ExperimentAction::CreateService(_)
            | ExperimentAction::CreateAnalysisRun(_) => WriteFailure::AlreadyExists,
            _ => WriteFailure::Conflict,
        },
        WriteError::NotFound => WriteFailure::Conflict,
        WriteError::NotLeader => WriteFailure::Other(e.to_string()),
        WriteError::Api(message) => WriteFailure::Other(message.clone()),
    }
}

/// One reconcile: observe, decide, apply, write the status when it changed.
pub async fn reconcile(
    w: &SimWriter,
    exp: &Experiment,
    now: Timestamp,
) -> Result<Reconciled, String> {
    let observed = observe(w, exp, now).await.map_err(|e| e.to_string())?;
    let mut plan = reconcile_experiment(&observed);
    if let Some(err) = plan.error.take() {
        return Err(err);
    }
    let mut failed_writes = Vec::new();
    for action in std::mem::take(&mut plan.actions) {
        if let Err(e) = apply(w, &action).await {
            failed_writes.push(format!("{action:?}: {e}"));
            record_write_failure(&observed, &mut plan, &action, &failure_of(&action, &e));
        }
    }
    let old = serde_json::to_value(exp.status.clone().unwrap_or_default()).unwrap_or_default();
    let new = serde_json::to_value(&plan.status).unwrap_or_default();
    if let Some(diff) = merge_diff(&old, &new) {
        let patch = json!({
            "metadata": { "resourceVersion": exp.metadata.resource_version },
            "status": diff,
        });
        let name = exp.metadata.name.as_deref().unwrap_or_default();
        w.patch_experiment(NAMESPACE, name, &patch)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(Reconciled {
        plan,
        failed_writes,
    })
}

/// What polling an Experiment's reconcile came to.
pub enum Polled {
    /// Nothing in flight for it, or it waits for a reply.
    Waiting,
    /// It sends this request.
    Send(Request),
    /// It finished; the Experiment is due again at `next_ms`, if ever.
    Done {
        /// The phase the Experiment moved to, when it changed.
        phase_change: Option<String>,
        failed_writes: Vec<String>,
        error: Option<String>,
        next_ms: Option<u64>,
    },
}

/// The controller's work queue and the reconciles in flight, each beside the phase it observed.
#[derive(Default)]
pub struct ExperimentController(SideLoop<Option<AnalysisPhase>, Result<Reconciled, String>>);

impl ExperimentController {
    pub fn new() -> Self {
        Self(SideLoop::new())
    }

    /// Queues `name` for `at_ms`. Returns when to wake the controller for it, if that is sooner
    /// than it was already due.
    pub fn trigger(&mut self, name: &str, at_ms: u64) -> Option<u64> {
        self.0.trigger(name, at_ms)
    }

    /// Starts the reconcile of `name` if it is due at `now_ms`, on the Experiment as the API
    /// server has it now. Returns whether a reconcile started.
    pub fn start(&mut self, api: &ApiServer, name: &str, now_ms: u64, now: Timestamp) -> bool {
        self.0.start(name, now_ms, |w| {
            let observed = api
                .get(Kind::Experiment, name)
                .and_then(|v| serde_json::from_value::<Experiment>(v.clone()).ok())?;
            let phase = observed.status.as_ref().and_then(|s| s.phase.clone());
            let future: Reconcile<_> = Box::pin(async move { reconcile(&w, &observed, now).await });
            Some((phase, future))
        })
    }

    /// Hands the reply to the reconcile of `name`.
    pub fn deliver(&mut self, name: &str, response: Response) {
        self.0.deliver(name, response);
    }

    /// Runs the reconcile of `name` until it sends a request or finishes; a finished one is
    /// queued again as the loop's requeue policy says (or at once if triggered meanwhile).
    pub fn poll(&mut self, name: &str, now_ms: u64) -> Polled {
        let requeue = |result: &Result<Reconciled, String>| {
            Some(match result {
                Ok(r) => r.plan.requeue_after.unwrap_or(RESYNC).min(RESYNC),
                Err(_) => ERROR_RETRY,
            })
        };
        let polled = self.0.poll(name, now_ms, requeue);
        polled.resolve(Polled::Waiting, Polled::Send, |done| match done.output {
            Ok(r) => Polled::Done {
                phase_change: (r.plan.status.phase != done.context)
                    .then(|| r.plan.status.phase.map(|p| p.to_string()))
                    .flatten(),
                failed_writes: r.failed_writes,
                error: None,
                next_ms: done.next_ms,
            },
            Err(e) => Polled::Done {
                phase_change: None,
                failed_writes: Vec::new(),
                error: Some(e),
                next_ms: done.next_ms,
            },
        })
    }
}
