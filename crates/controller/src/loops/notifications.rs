//! Notifications, as Argo Rollouts sends them: the events a Rollout reconcile publishes fire
//! the triggers named after their reasons, and the notifications they make due
//! ([`sluice_notifications::due`]) go out through the configured services.
//!
//! - The configuration is the ConfigMap `argo-rollouts-notification-configmap` and the Secret
//!   `argo-rollouts-notification-secret` of the controller's namespace (the watched namespace
//!   with `--namespaced`), both watched: a change applies to the next event without a restart.
//!   What cannot be used in it is logged and published as a Warning event on the ConfigMap,
//!   once per change; everything else keeps working.
//! - Only the leader sends (events only come from its reconciles, and the queue is dropped
//!   when leadership is lost).
//! - Each notification is sent, then recorded in the Rollout's
//!   `notified.notifications.argoproj.io` annotation with a patch conditional on the Rollout's
//!   resourceVersion (a conflict reads the Rollout again and merges), before the next
//!   notification of the same Rollout and trigger goes out. Before sending, the Rollout is
//!   read afresh: a notification already recorded (by this process before a restart, or by
//!   another leader) is not sent again.
//! - A send that fails is retried with back-off (1 s doubling to 5 min, ten attempts), and
//!   counted in `notification_send_error`; a success in `notification_send_success`. A
//!   recording that fails is retried without sending again.
//! - Slack threads (`groupingKey`) are recorded on the Rollout with the `notified` record.
//! - What is due is first written to the Rollout (`rollouts.sluice.dev/notifications-pending`:
//!   key, event reason and occurrence, never content), and taken off with the `notified`
//!   record. A leader that finds pending entries it has not queued (the previous leader died or
//!   stepped down before sending) decides them again from the Rollout as it is now and sends
//!   what is still due: a notification queued at a change of leader or a crash goes out after
//!   it, rendered from the Rollout of that moment.

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use jiff::Timestamp;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference, Secret};
use kube::api::{Patch, PatchParams};
use kube::runtime::watcher;
use kube::runtime::{WatchStreamExt as _, reflector::Store};
use kube::{Api, Client, Resource as _, ResourceExt as _};
use serde_json::{Value as Json, json};
use sluice_api::Rollout;
use sluice_engine::EventType;
use sluice_notifications::due::{Subject, occurrence};
use sluice_notifications::services::{SLACK_THREADS, Sender, slack_threads};
use sluice_notifications::state::NOTIFIED;
use sluice_notifications::{CONFIG_MAP, Config, Notification, NotifiedState, SECRET};
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use crate::leader::fence::WriteGate;
use crate::loops::events::EventPublisher;
use crate::serve::metrics::Metrics;

/// The reason of the Warning events about an unusable notifications configuration.
pub const CONFIG_INVALID: &str = "NotificationConfigInvalid";
/// Notifications due and not yet recorded as sent, on the Rollout: a JSON object from key to
/// `{"reason", "type", "occurrence"}`.
pub const PENDING: &str = "rollouts.sluice.dev/notifications-pending";
/// How often a leader looks for pending notifications it has not queued.
const RECOVER_EVERY: Duration = Duration::from_secs(15);
/// Most attempts at one send.
const MAX_ATTEMPTS: u32 = 10;
const FIRST_RETRY: Duration = Duration::from_secs(1);
const MAX_RETRY: Duration = Duration::from_secs(300);

/// One event a reconcile published about a Rollout.
#[derive(Debug, Clone)]
struct Fired {
    rollout: Arc<Rollout>,
    type_: EventType,
    reason: String,
    message: String,
}

/// Hands the events of reconciles to the notifications loop; cheap to clone.
#[derive(Clone)]
pub struct Notifier {
    tx: Option<mpsc::UnboundedSender<Fired>>,
    /// Whether the configuration has global subscriptions (then every Rollout's events
    /// matter, not only those of Rollouts with subscription annotations).
    global: Arc<AtomicBool>,
}

impl Notifier {
    /// A notifier that sends nothing.
    pub fn disabled() -> Notifier {
        Notifier {
            tx: None,
            global: Arc::default(),
        }
    }

    /// Tells the loop that `reason` was published about `rollout`.
    pub fn fired(&self, rollout: &Rollout, type_: EventType, reason: &str, message: &str) {
        let subscribed = || {
            rollout
                .annotations()
                .keys()
                .any(|k| k.starts_with("notifications.argoproj.io/subscri"))
        };
        if let Some(tx) = &self.tx
            && (self.global.load(Ordering::Relaxed) || subscribed())
        {
            let _ = tx.send(Fired {
                rollout: Arc::new(rollout.clone()),
                type_,
                reason: reason.to_owned(),
                message: message.to_owned(),
            });
        }
    }
}

/// A notification waiting to be sent or recorded.
#[derive(Debug)]
struct Job {
    namespace: String,
    name: String,
    type_: &'static str,
    reason: String,
    notification: Notification,
    attempts: u32,
    not_before: Instant,
    /// Sent; only the record is left to write (with the Slack thread it started).
    sent: Option<Option<(String, String, String)>>,
}

impl Job {
    fn lane(&self) -> (&str, &str, &str) {
        (&self.namespace, &self.name, &self.notification.trigger)
    }
}

/// The notifications loop's state.
struct Loop {
    client: Client,
    namespace: String,
    gate: WriteGate,
    metrics: Option<Arc<Metrics>>,
    events: EventPublisher,
    rollouts: Store<Rollout>,
    config: Arc<Config>,
    /// Both the ConfigMap and the Secret have been listed once: events before that wait.
    synced: (bool, bool),
    waiting: Vec<Fired>,
    global: Arc<AtomicBool>,
    sender: Option<Sender>,
    queue: VecDeque<Job>,
    queued: HashSet<String>,
    /// Problems already reported for a Rollout (uid, text), so that each is told once.
    reported: Mutex<BTreeSet<(String, String)>>,
}

/// The notifier handed to reconciles, and the loop to run beside them (it never ends; drop it
/// to stop).
pub fn start(
    client: Client,
    namespace: String,
    gate: WriteGate,
    metrics: Option<Arc<Metrics>>,
    rollouts: Store<Rollout>,
) -> (Notifier, impl std::future::Future<Output = ()> + Send) {
    let (tx, rx) = mpsc::unbounded_channel();
    let global = Arc::new(AtomicBool::new(false));
    let state = Loop {
        synced: (false, false),
        waiting: Vec::new(),
        global: global.clone(),
        events: EventPublisher::new(client.clone(), std::env::var("POD_NAME").ok()),
        client,
        namespace,
        gate,
        metrics,
        rollouts,
        config: Arc::new(Config::default()),
        sender: None,
        queue: VecDeque::new(),
        queued: HashSet::new(),
        reported: Mutex::default(),
    };
    (
        Notifier {
            tx: Some(tx),
            global,
        },
        state.run(rx),
    )
}

/// The configuration sources as last seen.
#[derive(Default)]
struct Sources {
    config_map: Option<ConfigMap>,
    secret: BTreeMap<String, String>,
    /// What the last parse reported, so that a change is reported once.
    reported: Option<Vec<String>>,
}

impl Loop {
    async fn run(mut self, mut fired: mpsc::UnboundedReceiver<Fired>) {
        let by_name =
            |name: &str| watcher::Config::default().fields(&format!("metadata.name={name}"));
        let config_maps = watcher(
            Api::<ConfigMap>::namespaced(self.client.clone(), &self.namespace),
            by_name(CONFIG_MAP),
        )
        .default_backoff()
        .applied_objects_or_deleted();
        let secrets = watcher(
            Api::<Secret>::namespaced(self.client.clone(), &self.namespace),
            by_name(SECRET),
        )
        .default_backoff()
        .applied_objects_or_deleted();
        tokio::pin!(config_maps);
        tokio::pin!(secrets);
        let mut sources = Sources::default();
        let mut leading = self.gate.watch();
        // A gate without leader election never changes (its sender is gone).
        let mut gate_changes = true;
        let mut recovery = tokio::time::interval(RECOVER_EVERY);
        recovery.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let wait = self.next_ready_in();
            tokio::select! {
                Some(cm) = config_maps.next() => {
                    match cm {
                        Ok(Change::Applied(cm)) => sources.config_map = Some(cm),
                        Ok(Change::Deleted) => sources.config_map = None,
                        Ok(Change::Listed) => self.synced.0 = true,
                        Err(e) => { debug!(error = %e, "notification ConfigMap watch"); continue; }
                    }
                    self.reconfigure(&mut sources).await;
                }
                Some(secret) = secrets.next() => {
                    match secret {
                        Ok(Change::Applied(s)) => sources.secret = decode(&s),
                        Ok(Change::Deleted) => sources.secret.clear(),
                        Ok(Change::Listed) => self.synced.1 = true,
                        Err(e) => { debug!(error = %e, "notification Secret watch"); continue; }
                    }
                    self.reconfigure(&mut sources).await;
                }
                Some(event) = fired.recv() => {
                    if self.synced == (true, true) {
                        self.on_event(event).await;
                    } else {
                        self.waiting.push(event);
                    }
                }
                changed = leading.changed(), if gate_changes => {
                    if changed.is_err() {
                        gate_changes = false;
                        continue;
                    }
                    if !self.gate.is_open() && !self.queue.is_empty() {
                        info!(dropped = self.queue.len(), "not leading: pending notifications are left to the leader");
                        self.queue.clear();
                        self.queued.clear();
                    }
                    self.recover().await;
                }
                () = tokio::time::sleep(wait) => {
                    self.work().await;
                }
                _ = recovery.tick() => {
                    self.recover().await;
                }
            }
        }
    }

    /// Parses the configuration again and reports what cannot be used in it.
    async fn reconfigure(&mut self, sources: &mut Sources) {
        let data: BTreeMap<String, String> = sources
            .config_map
            .as_ref()
            .and_then(|cm| cm.data.clone())
            .unwrap_or_default()
            .into_iter()
            .collect();
        let config = Config::parse(&data, &sources.secret);
        let problems: Vec<String> = config.problems.iter().map(ToString::to_string).collect();
        info!(
            triggers = config.triggers.len(),
            templates = config.templates.len(),
            services = config.services.len(),
            problems = problems.len(),
            "notifications configuration loaded"
        );
        if sources.reported.as_ref() != Some(&problems) {
            if let Some(cm) = &sources.config_map {
                for problem in &problems {
                    warn!(configmap = CONFIG_MAP, namespace = %self.namespace, "notifications configuration: {problem}");
                    let reference = ObjectReference {
                        api_version: Some("v1".into()),
                        kind: Some("ConfigMap".into()),
                        name: Some(CONFIG_MAP.into()),
                        namespace: Some(self.namespace.clone()),
                        uid: cm.metadata.uid.clone(),
                        ..ObjectReference::default()
                    };
                    if self.gate.is_open()
                        && let Err(e) = self
                            .events
                            .publish(&reference, EventType::Warning, CONFIG_INVALID, problem)
                            .await
                    {
                        debug!(error = %e, "could not publish event");
                    }
                }
            }
            sources.reported = Some(problems);
        }
        self.global
            .store(!config.subscriptions.is_empty(), Ordering::Relaxed);
        self.config = Arc::new(config);
        if self.synced == (true, true) {
            for event in std::mem::take(&mut self.waiting) {
                self.on_event(event).await;
            }
        }
    }

    /// Decides what an event makes due and queues it.
    async fn on_event(&mut self, fired: Fired) {
        if !self.gate.is_open() || self.config.triggers.is_empty() {
            return;
        }
        let rollout = match serde_json::to_value(&*fired.rollout) {
            Ok(v) => v,
            Err(_) => return,
        };
        // The freshest record the cache has (the reconcile's copy may predate a record).
        let key = kube::runtime::reflector::ObjectRef::from_obj(&*fired.rollout);
        let latest = self
            .rollouts
            .get(&key)
            .unwrap_or_else(|| fired.rollout.clone());
        let notified = NotifiedState::of(latest.annotations());
        let occurrence = occurrence(&rollout, &fired.message);
        let subject = Subject {
            rollout: &rollout,
            analysis_runs: &Json::Null,
        };
        let due =
            sluice_notifications::due(&self.config, subject, &fired.reason, &occurrence, &notified);
        for problem in &due.problems {
            self.report(&fired.rollout, &problem.to_string()).await;
        }
        let type_ = match fired.type_ {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        };
        let fresh: Vec<&Notification> = due
            .notifications
            .iter()
            .filter(|n| !self.queued.contains(&n.key))
            .collect();
        if !fresh.is_empty() {
            let entry = json!({"reason": fired.reason, "type": type_, "occurrence": occurrence});
            let keys: Vec<String> = fresh.iter().map(|n| n.key.clone()).collect();
            let api: Api<Rollout> = Api::namespaced(
                self.client.clone(),
                &fired.rollout.namespace().unwrap_or_default(),
            );
            let written = update_annotations(&api, &fired.rollout.name_any(), |ro| {
                let mut pending = pending_of(ro);
                for k in &keys {
                    pending.insert(k.clone(), entry.clone());
                }
                Some(vec![(PENDING.to_owned(), pending_value(&pending))])
            })
            .await;
            if let Err(e) = written {
                // Sent all the same; only a crash before the send would lose it.
                debug!(error = %e, "recording pending notifications");
            }
        }
        for notification in due.notifications {
            if !self.queued.insert(notification.key.clone()) {
                continue;
            }
            self.queue.push_back(Job {
                namespace: fired.rollout.namespace().unwrap_or_default(),
                name: fired.rollout.name_any(),
                type_,
                reason: fired.reason.clone(),
                notification,
                attempts: 0,
                not_before: Instant::now(),
                sent: None,
            });
        }
    }

    /// Logs a problem of a Rollout's notifications and publishes it as a Warning event on the
    /// Rollout, once.
    async fn report(&self, ro: &Rollout, problem: &str) {
        let uid = ro.metadata.uid.clone().unwrap_or_default();
        let fresh = self
            .reported
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((uid, problem.to_owned()));
        if !fresh {
            return;
        }
        warn!(rollout = %ro.name_any(), namespace = ro.namespace().unwrap_or_default(), "notifications: {problem}");
        if let Err(e) = self
            .events
            .publish(
                &ro.object_ref(&()),
                EventType::Warning,
                CONFIG_INVALID,
                problem,
            )
            .await
        {
            debug!(error = %e, "could not publish event");
        }
    }

    /// How long until a job may be worked on.
    fn next_ready_in(&self) -> Duration {
        let now = Instant::now();
        self.queue
            .iter()
            .map(|j| j.not_before.saturating_duration_since(now))
            .min()
            .unwrap_or(Duration::from_secs(3600))
    }

    /// Works on the first ready job of each Rollout and trigger (a later one waits for the
    /// earlier to be recorded).
    async fn work(&mut self) {
        if !self.gate.is_open() {
            return;
        }
        let now = Instant::now();
        let mut blocked: HashSet<(String, String, String)> = HashSet::new();
        let mut i = 0;
        while i < self.queue.len() {
            let lane = {
                let (a, b, c) = self.queue[i].lane();
                (a.to_owned(), b.to_owned(), c.to_owned())
            };
            if blocked.contains(&lane) || self.queue[i].not_before > now {
                blocked.insert(lane);
                i += 1;
                continue;
            }
            let mut job = self.queue.remove(i).expect("in range");
            let done = self.step(&mut job).await;
            if done {
                self.queued.remove(&job.notification.key);
            } else {
                blocked.insert(lane);
                self.queue.insert(i, job);
                i += 1;
            }
        }
    }

    /// Sends or records one job; true once it is finished with (recorded, already sent, or
    /// given up).
    async fn step(&mut self, job: &mut Job) -> bool {
        let api: Api<Rollout> = Api::namespaced(self.client.clone(), &job.namespace);
        let key = job.notification.key.clone();
        let Some(thread) = job.sent.clone() else {
            // Not sent yet: read the Rollout afresh; a recorded notification is never sent again.
            let ro = match api.get_opt(&job.name).await {
                Ok(Some(ro)) => ro,
                Ok(None) => return true,
                Err(e) => {
                    debug!(error = %e, "reading the Rollout before a notification");
                    self.retry_later(job);
                    return false;
                }
            };
            if NotifiedState::of(ro.annotations()).contains(&key) {
                self.forget_pending(&api, job).await;
                return true;
            }
            let sender = match &self.sender {
                Some(s) => s.clone(),
                None => match Sender::new() {
                    Ok(s) => {
                        self.sender = Some(s.clone());
                        s
                    }
                    Err(e) => {
                        warn!("notifications cannot be sent: {e}");
                        return true;
                    }
                },
            };
            let threads = slack_threads(ro.annotations());
            let started = Instant::now();
            let result = sender.send(&self.config, &job.notification, &threads).await;
            if let Some(m) = &self.metrics {
                m.observe_notification_send(&job.namespace, &job.name, started.elapsed());
            }
            let dest = &job.notification.destination;
            match result {
                Ok(sent) => {
                    self.count(job, true);
                    info!(rollout = %job.name, namespace = %job.namespace, trigger = %job.notification.trigger, service = %dest.service, recipient = %dest.recipient, "notification sent");
                    job.sent = Some(sent.slack_thread);
                    job.attempts = 0;
                }
                Err(e) => {
                    self.count(job, false);
                    job.attempts += 1;
                    if job.attempts >= MAX_ATTEMPTS {
                        warn!(rollout = %job.name, namespace = %job.namespace, trigger = %job.notification.trigger, service = %dest.service, attempts = job.attempts, "notification failed, giving up: {e}");
                        self.forget_pending(&api, job).await;
                        return true;
                    }
                    warn!(rollout = %job.name, namespace = %job.namespace, trigger = %job.notification.trigger, service = %dest.service, attempt = job.attempts, "notification failed, will retry: {e}");
                    self.retry_later(job);
                    return false;
                }
            }
            return self.record(&api, job, job.sent.clone().flatten()).await;
        };
        self.record(&api, job, thread).await
    }

    /// Records a sent notification on its Rollout; false to try again later.
    async fn record(
        &self,
        api: &Api<Rollout>,
        job: &mut Job,
        thread: Option<(String, String, String)>,
    ) -> bool {
        for _ in 0..5 {
            let ro = match api.get_opt(&job.name).await {
                Ok(Some(ro)) => ro,
                Ok(None) => return true,
                Err(e) => {
                    debug!(error = %e, "reading the Rollout to record a notification");
                    break;
                }
            };
            let mut state = NotifiedState::of(ro.annotations());
            state.record(&job.notification.key, Timestamp::now().as_second());
            let mut annotations = serde_json::Map::new();
            annotations.insert(NOTIFIED.into(), json!(state.to_annotation()));
            let mut pending = pending_of(&ro);
            if pending.remove(&job.notification.key).is_some() {
                annotations.insert(PENDING.into(), json!(pending_value(&pending)));
            }
            if let Some((id, group, ts)) = &thread {
                let mut threads = slack_threads(ro.annotations());
                threads
                    .entry(id.clone())
                    .or_default()
                    .insert(group.clone(), ts.clone());
                annotations.insert(
                    SLACK_THREADS.into(),
                    json!(serde_json::to_string(&threads).unwrap_or_default()),
                );
            }
            let patch = json!({"metadata": {
                "resourceVersion": ro.resource_version(),
                "annotations": annotations,
            }});
            match api
                .patch(&job.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return true,
                Err(kube::Error::Api(s)) if s.is_conflict() => continue,
                Err(kube::Error::Api(s)) if s.is_not_found() => return true,
                Err(e) => {
                    debug!(error = %e, "recording a notification");
                    break;
                }
            }
        }
        job.attempts += 1;
        self.retry_later(job);
        false
    }

    /// Takes a notification off the Rollout's pending record (best effort).
    async fn forget_pending(&self, api: &Api<Rollout>, job: &Job) {
        let key = job.notification.key.clone();
        let result = update_annotations(api, &job.name, |ro| {
            let mut pending = pending_of(ro);
            pending.remove(&key)?;
            Some(vec![(PENDING.to_owned(), pending_value(&pending))])
        })
        .await;
        if let Err(e) = result {
            debug!(error = %e, "updating pending notifications");
        }
    }

    /// Queues the pending notifications of every cached Rollout that this process has not
    /// queued (left by a leader before it, or by this process before a restart), decided again
    /// from the Rollout as it is now; entries no longer due are taken off.
    async fn recover(&mut self) {
        if !self.gate.is_open() || self.synced != (true, true) {
            return;
        }
        for ro in self.rollouts.state() {
            let pending = pending_of(&ro);
            let stale: Vec<&String> = pending
                .keys()
                .filter(|k| !self.queued.contains(*k))
                .collect();
            if stale.is_empty() {
                continue;
            }
            let Ok(rollout) = serde_json::to_value(&*ro) else {
                continue;
            };
            let notified = NotifiedState::of(ro.annotations());
            let mut found = BTreeSet::new();
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
                let subject = Subject {
                    rollout: &rollout,
                    analysis_runs: &Json::Null,
                };
                let due = sluice_notifications::due(
                    &self.config,
                    subject,
                    &reason,
                    &occurrence,
                    &notified,
                );
                for notification in due.notifications {
                    if notification.key != **key || !self.queued.insert(notification.key.clone()) {
                        continue;
                    }
                    found.insert(notification.key.clone());
                    info!(rollout = %ro.name_any(), namespace = ro.namespace().unwrap_or_default(), trigger = %notification.trigger, "pending notification taken over");
                    self.queue.push_back(Job {
                        namespace: ro.namespace().unwrap_or_default(),
                        name: ro.name_any(),
                        type_,
                        reason: reason.clone(),
                        notification,
                        attempts: 0,
                        not_before: Instant::now(),
                        sent: None,
                    });
                }
            }
            let gone: Vec<String> = stale
                .into_iter()
                .filter(|k| !found.contains(*k))
                .cloned()
                .collect();
            if !gone.is_empty() {
                let api: Api<Rollout> =
                    Api::namespaced(self.client.clone(), &ro.namespace().unwrap_or_default());
                let result = update_annotations(&api, &ro.name_any(), |ro| {
                    let mut pending = pending_of(ro);
                    let before = pending.len();
                    pending.retain(|k, _| !gone.contains(k));
                    (pending.len() != before)
                        .then(|| vec![(PENDING.to_owned(), pending_value(&pending))])
                })
                .await;
                if let Err(e) = result {
                    debug!(error = %e, "updating pending notifications");
                }
            }
        }
    }

    fn retry_later(&self, job: &mut Job) {
        let exp = job.attempts.saturating_sub(1).min(16);
        let delay = FIRST_RETRY.saturating_mul(1 << exp).min(MAX_RETRY);
        job.not_before = Instant::now() + delay;
    }

    fn count(&self, job: &Job, ok: bool) {
        if let Some(m) = &self.metrics {
            m.count_notification(&job.namespace, &job.name, job.type_, &job.reason, ok);
        }
    }
}

/// A watched object, its deletion, or the end of a (re)list.
enum Change<K> {
    Applied(K),
    Deleted,
    Listed,
}

trait ChangesExt<K>: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Sized {
    fn applied_objects_or_deleted(
        self,
    ) -> impl futures::Stream<Item = Result<Change<K>, watcher::Error>> {
        self.filter_map(|event| async move {
            match event {
                Ok(watcher::Event::Apply(k) | watcher::Event::InitApply(k)) => {
                    Some(Ok(Change::Applied(k)))
                }
                Ok(watcher::Event::Delete(_)) => Some(Ok(Change::Deleted)),
                // A relist applies what it finds (an object deleted while the watch was down
                // stays until the next change).
                Ok(watcher::Event::Init) => None,
                Ok(watcher::Event::InitDone) => Some(Ok(Change::Listed)),
                Err(e) => Some(Err(e)),
            }
        })
    }
}

impl<K, S> ChangesExt<K> for S where
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>>
{
}

/// A Secret's data as strings (`stringData` is folded into `data` by the API server).
fn decode(secret: &Secret) -> BTreeMap<String, String> {
    secret
        .data
        .iter()
        .flatten()
        .map(|(k, ByteString(v))| (k.clone(), String::from_utf8_lossy(v).into_owned()))
        .collect()
}

/// The Rollout's pending notifications.
fn pending_of(ro: &Rollout) -> serde_json::Map<String, Json> {
    ro.annotations()
        .get(PENDING)
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default()
}

/// The pending annotation's value (`null` removes it).
fn pending_value(pending: &serde_json::Map<String, Json>) -> Option<String> {
    (!pending.is_empty()).then(|| Json::Object(pending.clone()).to_string())
}

/// Sets annotations of a Rollout (a `None` value removes one) from its current state, with a
/// patch conditional on its resourceVersion, read again on a conflict. `change` returning
/// `None` writes nothing.
async fn update_annotations(
    api: &Api<Rollout>,
    name: &str,
    mut change: impl FnMut(&Rollout) -> Option<Vec<(String, Option<String>)>>,
) -> Result<(), kube::Error> {
    let mut last = None;
    for _ in 0..5 {
        let Some(ro) = api.get_opt(name).await? else {
            return Ok(());
        };
        let Some(values) = change(&ro) else {
            return Ok(());
        };
        let annotations: serde_json::Map<String, Json> =
            values.into_iter().map(|(k, v)| (k, json!(v))).collect();
        let patch = json!({"metadata": {
            "resourceVersion": ro.resource_version(),
            "annotations": annotations,
        }});
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.is_conflict() => last = Some(kube::Error::Api(s)),
            Err(e) => return Err(e),
        }
    }
    Err(last.expect("a conflict"))
}
