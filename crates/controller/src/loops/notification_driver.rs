//! The notifications loop's work, free of kube's runtime types: what an event of a Rollout
//! makes due ([`take_event`]), what a leader takes over from the pending record another left
//! ([`take_over`]), and one notification sent and recorded ([`step`]). The controller's
//! notifications loop and the simulator both run exactly this, through [`ClusterAccess`] and
//! a [`Deliver`]; the queue's timing, events and metrics are theirs.
//!
//! The bookkeeping on the Rollout:
//! - what is due is first written to `rollouts.sluice.dev/notifications-pending` (key, event
//!   reason and occurrence, and the Rollout's status at the event; never content), so that a
//!   leader after a crash or a change of leader can decide it again and send it;
//! - before a send the Rollout is read afresh from the API server: a notification in its
//!   `notified.notifications.argoproj.io` record is never sent again;
//! - after a send, the record is written with a merge patch conditional on the Rollout's
//!   resourceVersion; a conflict reads the Rollout again and merges (the send is not made
//!   again), and the pending entry goes with it.
//!
//! A process that stops between a successful send and its record (a crash, or leadership lost
//! in between: the record is a write, and only the leader writes) leaves the notification
//! pending and unrecorded, and the next leader sends it again. No order of send and record
//! closes that window without a receiver that drops repeats; docs/notifications.md says so.

use std::collections::{BTreeSet, HashSet};
use std::future::Future;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value as Json, json};
use sluice_api::Rollout;
use sluice_notifications::due::{Subject, due_in_all, occurrence};
use sluice_notifications::services::{
    SLACK_THREADS, SendError, Sender, Sent, SlackThreads, slack_threads,
};
use sluice_notifications::state::NOTIFIED;
use sluice_notifications::{Config, Notification, NotifiedState, Problem};
use tracing::{Instrument, debug};

use crate::cluster::{ClusterAccess, WriteError};

/// Notifications due and not yet recorded as sent, on the Rollout: a JSON object from key to
/// `{"reason", "type", "occurrence", "status", "at"}`.
pub const PENDING: &str = "rollouts.sluice.dev/notifications-pending";
/// The name of the span every call of the driver runs in (its requests can be told apart by it).
pub const SPAN: &str = "notification_driver";
/// Most attempts at one send.
pub const MAX_ATTEMPTS: u32 = 10;
const FIRST_RETRY: Duration = Duration::from_secs(1);
const MAX_RETRY: Duration = Duration::from_secs(300);
/// Conflicts met in a row before an annotation write is left for later.
const CONFLICT_RETRIES: usize = 5;

/// A Slack thread a send started: (`<service>:<channel>`, grouping key, ts).
pub type Thread = (String, String, String);

/// What sends a notification: the services over HTTP in the controller, a recording service
/// in the simulator.
pub trait Deliver: Send + Sync {
    /// Sends `n` (about Rollout `name` of `namespace`) with `cfg`'s services, with the Slack
    /// threads recorded on the Rollout.
    fn deliver(
        &self,
        namespace: &str,
        name: &str,
        cfg: &Config,
        n: &Notification,
        threads: &SlackThreads,
    ) -> impl Future<Output = Result<Sent, SendError>> + Send;
}

impl Deliver for Sender {
    async fn deliver(
        &self,
        _namespace: &str,
        _name: &str,
        cfg: &Config,
        n: &Notification,
        threads: &SlackThreads,
    ) -> Result<Sent, SendError> {
        self.send(cfg, n, threads).await
    }
}

/// One event a reconcile published about a Rollout: the Rollout as the reconcile saw it.
#[derive(Debug, Clone)]
pub struct Fired {
    pub rollout: Rollout,
    /// When it was published (`time.Now()` for its conditions and templates).
    pub at: Timestamp,
    /// `Normal` or `Warning`.
    pub type_: &'static str,
    pub reason: String,
    pub message: String,
}

/// A notification waiting to be sent or recorded.
#[derive(Debug, Clone)]
pub struct Job {
    pub namespace: String,
    pub name: String,
    pub type_: &'static str,
    pub reason: String,
    pub notification: Notification,
    pub attempts: u32,
    /// Sent; only the record is left to write (with the Slack thread it started).
    pub sent: Option<Option<Thread>>,
    /// The namespace of the self-service configuration it is sent with (none: the
    /// controller's).
    pub config_namespace: Option<String>,
}

impl Job {
    /// Jobs of one lane go out in order: each is recorded before the next is sent.
    pub fn lane(&self) -> (&str, &str, &str) {
        (&self.namespace, &self.name, &self.notification.trigger)
    }
}

/// What an event made due.
#[derive(Debug, Default)]
pub struct Taken {
    /// Jobs to queue (none already in `queued`).
    pub jobs: Vec<Job>,
    /// What is wrong in the configuration for this event.
    pub problems: Vec<Problem>,
    /// The pending record could not be written (the jobs go out all the same; only a stop
    /// before they are sent loses them).
    pub pending_error: Option<WriteError>,
}

/// Decides what `fired` makes due under `configs`, leaving out what `notified` (the freshest
/// record at hand) holds and what is `queued` already, and writes it to the Rollout's pending
/// record before it is sent.
pub async fn take_event<C: ClusterAccess>(
    cluster: &C,
    configs: &[&Config],
    fired: &Fired,
    notified: &NotifiedState,
    queued: &HashSet<String>,
) -> Taken {
    let span = tracing::debug_span!(SPAN, rollout = fired.rollout.metadata.name.as_deref());
    take_event_in_span(cluster, configs, fired, notified, queued)
        .instrument(span)
        .await
}

async fn take_event_in_span<C: ClusterAccess>(
    cluster: &C,
    configs: &[&Config],
    fired: &Fired,
    notified: &NotifiedState,
    queued: &HashSet<String>,
) -> Taken {
    let Ok(rollout) = serde_json::to_value(&fired.rollout) else {
        return Taken::default();
    };
    let occurrence = occurrence(&rollout, &fired.message);
    let runs = current_analysis_runs(cluster, &fired.rollout).await;
    let subject = Subject {
        rollout: &rollout,
        analysis_runs: &runs,
        now: fired.at,
    };
    let (due, problems) = due_in_all(configs, subject, &fired.reason, &occurrence, notified);
    let (namespace, name) = names(&fired.rollout.metadata);
    let mut taken = Taken {
        problems,
        ..Taken::default()
    };
    // In order: the pending record is written the same way every time.
    let mut keys = BTreeSet::new();
    for (config_namespace, notification) in due {
        if queued.contains(&notification.key) || !keys.insert(notification.key.clone()) {
            continue;
        }
        taken.jobs.push(Job {
            namespace: namespace.clone(),
            name: name.clone(),
            type_: fired.type_,
            reason: fired.reason.clone(),
            notification,
            attempts: 0,
            sent: None,
            config_namespace,
        });
    }
    if taken.jobs.is_empty() {
        return taken;
    }
    // The Rollout's status at the event goes with it: a notification taken over after a crash
    // renders as it would have then (its step, weights, phase), not from the status the
    // Rollout has moved on to.
    let status = rollout.get("status").cloned().unwrap_or(Json::Null);
    let entry = json!({"reason": fired.reason, "type": fired.type_, "occurrence": occurrence, "status": status, "at": fired.at});
    let written = update_annotations(cluster, &namespace, &name, |ro| {
        let mut pending = pending_of(ro);
        for k in &keys {
            pending.insert(k.clone(), entry.clone());
        }
        Some(vec![(PENDING.to_owned(), pending_value(&pending))])
    })
    .await;
    taken.pending_error = written.err();
    taken
}

/// The pending notifications of `rollout` (as a cache has it) that are not `queued`, decided
/// again from the Rollout with the status it had at their event, at the time of the event
/// (`now` for an entry that does not say); entries no longer due are taken off its pending
/// record.
pub async fn take_over<C: ClusterAccess>(
    cluster: &C,
    configs: &[&Config],
    rollout: &Rollout,
    queued: &HashSet<String>,
    now: Timestamp,
) -> Vec<Job> {
    let span = tracing::debug_span!(SPAN, rollout = rollout.metadata.name.as_deref());
    take_over_in_span(cluster, configs, rollout, queued, now)
        .instrument(span)
        .await
}

async fn take_over_in_span<C: ClusterAccess>(
    cluster: &C,
    configs: &[&Config],
    ro: &Rollout,
    queued: &HashSet<String>,
    now: Timestamp,
) -> Vec<Job> {
    let pending = pending_of(ro);
    let stale: Vec<&String> = pending.keys().filter(|k| !queued.contains(*k)).collect();
    if stale.is_empty() {
        return Vec::new();
    }
    let Ok(rollout) = serde_json::to_value(ro) else {
        return Vec::new();
    };
    let (namespace, name) = names(&ro.metadata);
    let runs = current_analysis_runs(cluster, ro).await;
    let notified = NotifiedState::of(
        ro.metadata
            .annotations
            .as_ref()
            .unwrap_or(&Default::default()),
    );
    let mut jobs: Vec<Job> = Vec::new();
    for key in &stale {
        let entry = &pending[*key];
        let text = |k: &str| {
            entry
                .get(k)
                .and_then(Json::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let (reason, occurrence) = (text("reason"), text("occurrence"));
        let type_ = if text("type") == "Warning" {
            "Warning"
        } else {
            "Normal"
        };
        let at_event = as_at_event(&rollout, entry);
        let at = entry
            .get("at")
            .and_then(Json::as_str)
            .and_then(|t| t.parse().ok())
            .unwrap_or(now);
        let subject = Subject {
            rollout: &at_event,
            analysis_runs: &runs,
            now: at,
        };
        let (due, _) = due_in_all(configs, subject, &reason, &occurrence, &notified);
        for (config_namespace, notification) in due {
            if notification.key != **key || jobs.iter().any(|j| j.notification.key == **key) {
                continue;
            }
            jobs.push(Job {
                namespace: namespace.clone(),
                name: name.clone(),
                type_,
                reason: reason.clone(),
                notification,
                attempts: 0,
                sent: None,
                config_namespace,
            });
        }
    }
    let gone: Vec<String> = stale
        .into_iter()
        .filter(|k| !jobs.iter().any(|j| &j.notification.key == *k))
        .cloned()
        .collect();
    if !gone.is_empty() {
        let result = update_annotations(cluster, &namespace, &name, |ro| {
            let mut pending = pending_of(ro);
            let before = pending.len();
            pending.retain(|k, _| !gone.contains(k));
            (pending.len() != before).then(|| vec![(PENDING.to_owned(), pending_value(&pending))])
        })
        .await;
        if let Err(e) = result {
            debug!(error = %e, "updating pending notifications");
        }
    }
    jobs
}

/// What one step of a job came to.
#[derive(Debug)]
pub enum Stepped {
    /// Sent (now or earlier) and recorded on the Rollout: done.
    Recorded { sent_now: bool },
    /// Already in the Rollout's record (sent by this process before a restart, or by
    /// another leader): not sent again, done.
    AlreadyRecorded,
    /// The Rollout is gone: done.
    Gone,
    /// Not leading: nothing was sent; the job is left to the leader.
    NotLeading,
    /// The send failed; tried again after [`retry_delay`], unless given up (then done).
    SendFailed { error: SendError, given_up: bool },
    /// Sent (now or earlier), the record not written yet: tried again after [`retry_delay`]
    /// without sending again.
    RecordFailed { sent_now: bool, error: WriteError },
    /// The Rollout could not be read: tried again after [`retry_delay`].
    ReadFailed(WriteError),
}

impl Stepped {
    /// Whether the job is finished with.
    pub fn done(&self) -> bool {
        match self {
            Stepped::Recorded { .. } | Stepped::AlreadyRecorded | Stepped::Gone => true,
            Stepped::SendFailed { given_up, .. } => *given_up,
            Stepped::NotLeading | Stepped::RecordFailed { .. } | Stepped::ReadFailed(_) => false,
        }
    }

    /// Whether a send was made and succeeded in this step.
    pub fn sent_now(&self) -> bool {
        matches!(
            self,
            Stepped::Recorded { sent_now: true } | Stepped::RecordFailed { sent_now: true, .. }
        )
    }
}

/// Sends `job` (unless its Rollout records it already) and records it on the Rollout; a job
/// sent before only has its record written. `cfg` is the configuration it is sent with,
/// `now_unix` the time the record says.
pub async fn step<C: ClusterAccess, D: Deliver>(
    cluster: &C,
    deliver: &D,
    cfg: &Config,
    job: &mut Job,
    now_unix: i64,
) -> Stepped {
    let span = tracing::debug_span!(SPAN, rollout = %job.name, trigger = %job.notification.trigger);
    step_in_span(cluster, deliver, cfg, job, now_unix)
        .instrument(span)
        .await
}

async fn step_in_span<C: ClusterAccess, D: Deliver>(
    cluster: &C,
    deliver: &D,
    cfg: &Config,
    job: &mut Job,
    now_unix: i64,
) -> Stepped {
    let mut sent_now = false;
    if job.sent.is_none() {
        let ro = match cluster.get_rollout(&job.namespace, &job.name).await {
            Ok(Some(ro)) => ro,
            Ok(None) => return Stepped::Gone,
            Err(e) => {
                job.attempts += 1;
                return Stepped::ReadFailed(e);
            }
        };
        let annotations = ro.metadata.annotations.clone().unwrap_or_default();
        if NotifiedState::of(&annotations).contains(&job.notification.key) {
            forget_pending(cluster, job).await;
            return Stepped::AlreadyRecorded;
        }
        // Only the leader sends: a process that lost its lease leaves the job to the next.
        if cluster.may_write().is_err() {
            return Stepped::NotLeading;
        }
        let threads = slack_threads(&annotations);
        match deliver
            .deliver(&job.namespace, &job.name, cfg, &job.notification, &threads)
            .await
        {
            Ok(sent) => {
                job.sent = Some(sent.slack_thread);
                job.attempts = 0;
                sent_now = true;
            }
            Err(error) => {
                job.attempts += 1;
                let given_up = job.attempts >= MAX_ATTEMPTS;
                if given_up {
                    forget_pending(cluster, job).await;
                }
                return Stepped::SendFailed { error, given_up };
            }
        }
    }
    let thread = job.sent.clone().flatten();
    match record(cluster, job, thread, now_unix).await {
        Ok(()) => Stepped::Recorded { sent_now },
        Err(error) => {
            job.attempts += 1;
            Stepped::RecordFailed { sent_now, error }
        }
    }
}

/// How long a job waits after its `attempts`-th failure: 1 s doubling, at most 5 minutes.
pub fn retry_delay(attempts: u32) -> Duration {
    let exp = attempts.saturating_sub(1).min(16);
    FIRST_RETRY.saturating_mul(1 << exp).min(MAX_RETRY)
}

/// The index of the next job to work on in `queue`: the first that is `ready`, whose lane is
/// not `blocked` and has no job before it (a later job of a lane waits for the earlier to be
/// recorded).
pub fn next_job<T>(
    queue: &[(Job, T)],
    blocked: &HashSet<(String, String, String)>,
    ready: impl Fn(&T) -> bool,
) -> Option<usize> {
    let mut seen: HashSet<(&str, &str, &str)> = HashSet::new();
    for (i, (job, at)) in queue.iter().enumerate() {
        let lane = job.lane();
        if !seen.insert(lane) {
            continue;
        }
        let owned = (lane.0.to_owned(), lane.1.to_owned(), lane.2.to_owned());
        if ready(at) && !blocked.contains(&owned) {
            return Some(i);
        }
    }
    None
}

/// Records a sent notification (and the Slack thread it started) on its Rollout, taking it
/// off the pending record; a conflict reads the Rollout again.
async fn record<C: ClusterAccess>(
    cluster: &C,
    job: &Job,
    thread: Option<Thread>,
    now_unix: i64,
) -> Result<(), WriteError> {
    let key = &job.notification.key;
    update_annotations(cluster, &job.namespace, &job.name, |ro| {
        let annotations = ro.metadata.annotations.clone().unwrap_or_default();
        let mut state = NotifiedState::of(&annotations);
        state.record(key, now_unix);
        let mut values = vec![(NOTIFIED.to_owned(), state.to_annotation())];
        let mut pending = pending_of(ro);
        if pending.remove(key).is_some() {
            values.push((PENDING.to_owned(), pending_value(&pending)));
        }
        if let Some((id, group, ts)) = &thread {
            let mut threads = slack_threads(&annotations);
            threads
                .entry(id.clone())
                .or_default()
                .insert(group.clone(), ts.clone());
            values.push((
                SLACK_THREADS.to_owned(),
                Some(serde_json::to_string(&threads).unwrap_or_default()),
            ));
        }
        Some(values)
    })
    .await
}

/// Takes a notification off the Rollout's pending record (best effort).
async fn forget_pending<C: ClusterAccess>(cluster: &C, job: &Job) {
    let key = &job.notification.key;
    let result = update_annotations(cluster, &job.namespace, &job.name, |ro| {
        let mut pending = pending_of(ro);
        pending.remove(key)?;
        Some(vec![(PENDING.to_owned(), pending_value(&pending))])
    })
    .await;
    if let Err(e) = result {
        debug!(error = %e, "updating pending notifications");
    }
}

/// The Rollout's pending notifications.
pub fn pending_of(ro: &Rollout) -> serde_json::Map<String, Json> {
    ro.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(PENDING))
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default()
}

/// The pending annotation's value (`None` removes it).
fn pending_value(pending: &serde_json::Map<String, Json>) -> Option<String> {
    (!pending.is_empty()).then(|| Json::Object(pending.clone()).to_string())
}

/// Sets annotations of a Rollout (a `None` value removes one) from its state on the API
/// server, with a merge patch conditional on its resourceVersion, read again on a conflict.
/// `change` returning `None` writes nothing; a Rollout gone is nothing to write.
async fn update_annotations<C: ClusterAccess>(
    cluster: &C,
    namespace: &str,
    name: &str,
    mut change: impl FnMut(&Rollout) -> Option<Vec<(String, Option<String>)>>,
) -> Result<(), WriteError> {
    for _ in 0..CONFLICT_RETRIES {
        let Some(ro) = cluster.get_rollout(namespace, name).await? else {
            return Ok(());
        };
        let Some(values) = change(&ro) else {
            return Ok(());
        };
        let annotations: serde_json::Map<String, Json> =
            values.into_iter().map(|(k, v)| (k, json!(v))).collect();
        let patch = json!({"metadata": {
            "resourceVersion": ro.metadata.resource_version,
            "annotations": annotations,
        }});
        cluster.may_write()?;
        match cluster.patch_rollout(namespace, name, &patch).await {
            Ok(_) | Err(WriteError::NotFound) => return Ok(()),
            Err(WriteError::Conflict) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(WriteError::Conflict)
}

/// The Rollout as it was at a pending entry's event: its status then (recorded with the
/// entry), so that a notification taken over later renders its step, weights and phase as
/// they were; an entry without one leaves the Rollout as it is.
pub fn as_at_event(rollout: &Json, entry: &Json) -> Json {
    let mut at_event = rollout.clone();
    if let Some(status) = entry.get("status").filter(|s| s.is_object()) {
        at_event["status"] = status.clone();
    }
    at_event
}

/// The Rollout's AnalysisRuns of its current revision (labelled with its current pod hash),
/// as conditions and templates see them in `analysisRuns`. Unreadable runs are none.
pub async fn current_analysis_runs<C: ClusterAccess>(cluster: &C, ro: &Rollout) -> Json {
    let hash = ro
        .status
        .as_ref()
        .and_then(|s| s.current_pod_hash.as_deref());
    let runs = match (hash, cluster.rollout_analysis_runs(ro).await) {
        (Some(hash), Ok(runs)) => runs
            .into_iter()
            .filter(|run| {
                run.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(sluice_engine::labels::POD_TEMPLATE_HASH))
                    .is_some_and(|h| h == hash)
            })
            .filter_map(|run| serde_json::to_value(run).ok())
            .collect(),
        (_, Err(e)) => {
            debug!(error = %e, "reading the Rollout's AnalysisRuns for its notifications");
            Vec::new()
        }
        (None, _) => Vec::new(),
    };
    Json::Array(runs)
}

fn names(meta: &ObjectMeta) -> (String, String) {
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests;
