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
//!   key, event reason and occurrence, and the Rollout's status at the event; never content),
//!   and taken off with the `notified` record. A leader that finds pending entries it has not
//!   queued (the previous leader died or stepped down before sending) decides them again and
//!   sends what is still due: a notification queued at a change of leader or a crash goes out
//!   after it, rendered from the Rollout with the status it had at the event.

mod annotations;
mod jobs;
mod recover;
mod sources;

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::runtime::watcher;
use kube::runtime::{WatchStreamExt as _, reflector::Store};
use kube::{Api, Client, Resource as _, ResourceExt as _};
use serde_json::{Value as Json, json};
use sluice_api::Rollout;
use sluice_engine::EventType;
use sluice_notifications::due::{Subject, due_in_all, occurrence};
use sluice_notifications::services::Sender;
use sluice_notifications::{CONFIG_MAP, Config, Notification, NotifiedState, SECRET};
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use self::annotations::{pending_of, pending_value, update_annotations};
use self::sources::{Change, ChangesExt as _, Sources, decode};
use crate::leader::fence::WriteGate;
use crate::loops::events::EventPublisher;
use crate::serve::metrics::Metrics;

/// The reason of the Warning events about an unusable notifications configuration.
pub const CONFIG_INVALID: &str = "NotificationConfigInvalid";
/// Notifications due and not yet recorded as sent, on the Rollout: a JSON object from key to
/// `{"reason", "type", "occurrence"}`.
pub const PENDING: &str = "rollouts.sluice.dev/notifications-pending";
/// How often a leader looks for pending notifications it has not queued.
const RECOVER_EVERY: Duration = Duration::from_secs(5);
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
    /// The namespace of the self-service configuration it is sent with (none: the
    /// controller's).
    config_namespace: Option<String>,
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
    /// The configuration of the controller's namespace.
    config: Arc<Config>,
    /// With `--self-service-notification-enabled`, the configurations of other namespaces, each
    /// used for the Rollouts of its namespace besides the controller's.
    self_service: Option<BTreeMap<String, Arc<Config>>>,
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
    self_service: bool,
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
        self_service: self_service.then(BTreeMap::new),
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

impl Loop {
    async fn run(mut self, mut fired: mpsc::UnboundedReceiver<Fired>) {
        let by_name =
            |name: &str| watcher::Config::default().fields(&format!("metadata.name={name}"));
        // Self-service reads the ConfigMap and Secret of that name in every namespace, as
        // Argo's informers do.
        let (config_maps, secrets) = if self.self_service.is_some() {
            (Api::all(self.client.clone()), Api::all(self.client.clone()))
        } else {
            (
                Api::namespaced(self.client.clone(), &self.namespace),
                Api::namespaced(self.client.clone(), &self.namespace),
            )
        };
        let config_maps = watcher::<ConfigMap>(config_maps, by_name(CONFIG_MAP))
            .default_backoff()
            .applied_objects_or_deleted();
        let secrets = watcher::<Secret>(secrets, by_name(SECRET))
            .default_backoff()
            .applied_objects_or_deleted();
        tokio::pin!(config_maps);
        tokio::pin!(secrets);
        let mut sources: BTreeMap<String, Sources> = BTreeMap::new();
        let mut leading = self.gate.watch();
        // A gate without leader election never changes (its sender is gone).
        let mut gate_changes = true;
        let mut recovery = tokio::time::interval(RECOVER_EVERY);
        recovery.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let wait = self.next_ready_in();
            tokio::select! {
                Some(cm) = config_maps.next() => {
                    let ns = match cm {
                        Ok(Change::Applied(cm)) => {
                            let ns = cm.namespace().unwrap_or_default();
                            sources.entry(ns.clone()).or_default().config_map = Some(cm);
                            Some(ns)
                        }
                        Ok(Change::Deleted(cm)) => {
                            let ns = cm.namespace().unwrap_or_default();
                            sources.entry(ns.clone()).or_default().config_map = None;
                            Some(ns)
                        }
                        Ok(Change::Listed) => { self.synced.0 = true; None }
                        Err(e) => { debug!(error = %e, "notification ConfigMap watch"); continue; }
                    };
                    self.reconfigure(&mut sources, ns).await;
                }
                Some(secret) = secrets.next() => {
                    let ns = match secret {
                        Ok(Change::Applied(s)) => {
                            let ns = s.namespace().unwrap_or_default();
                            sources.entry(ns.clone()).or_default().secret = decode(&s);
                            Some(ns)
                        }
                        Ok(Change::Deleted(s)) => {
                            let ns = s.namespace().unwrap_or_default();
                            sources.entry(ns.clone()).or_default().secret.clear();
                            Some(ns)
                        }
                        Ok(Change::Listed) => { self.synced.1 = true; None }
                        Err(e) => { debug!(error = %e, "notification Secret watch"); continue; }
                    };
                    self.reconfigure(&mut sources, ns).await;
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

    /// Decides what an event makes due and queues it.
    async fn on_event(&mut self, fired: Fired) {
        let configs = self.configs_for(&fired.rollout.namespace().unwrap_or_default());
        if !self.gate.is_open() || configs.iter().all(|c| c.triggers.is_empty()) {
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
        let configs: Vec<&Config> = configs.iter().map(AsRef::as_ref).collect();
        let (due, problems) = due_in_all(&configs, subject, &fired.reason, &occurrence, &notified);
        for problem in &problems {
            self.report(&fired.rollout, &problem.to_string()).await;
        }
        let type_ = match fired.type_ {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        };
        let fresh: Vec<&Notification> = due
            .iter()
            .map(|(_, n)| n)
            .filter(|n| !self.queued.contains(&n.key))
            .collect();
        if !fresh.is_empty() {
            // The Rollout's status at the event goes with it: a notification taken over after
            // a crash renders as it would have then (its step, weights, phase), not from the
            // status the Rollout has moved on to.
            let status = rollout.get("status").cloned().unwrap_or(Json::Null);
            let entry = json!({"reason": fired.reason, "type": type_, "occurrence": occurrence, "status": status});
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
        for (config_namespace, notification) in due {
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
                config_namespace,
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
}
