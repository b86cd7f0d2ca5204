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
//! - The work itself (what is due, the pending record, each send and its record) is
//!   [`crate::loops::notification_driver`], which the simulator runs too.
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

mod jobs;
mod recover;
mod sources;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::runtime::watcher;
use kube::runtime::{WatchStreamExt as _, reflector::Store};
use kube::{Api, Client, Resource as _, ResourceExt as _};
use sluice_api::Rollout;
use sluice_engine::EventType;
use sluice_notifications::services::Sender;
use sluice_notifications::{CONFIG_MAP, Config, NotifiedState, SECRET};
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use self::sources::{Change, ChangesExt as _, Sources, decode};
use crate::cache::{CachedRollout, Caches};
use crate::cluster::KubeCluster;
use crate::leader::fence::WriteGate;
use crate::loops::events::EventPublisher;
use crate::loops::notification_driver::{self as driver, Job, take_event};
use crate::serve::metrics::Metrics;

/// The reason of the Warning events about an unusable notifications configuration.
pub const CONFIG_INVALID: &str = "NotificationConfigInvalid";
pub use crate::loops::notification_driver::PENDING;
/// How often a leader looks for pending notifications it has not queued.
pub const RECOVER_EVERY: Duration = Duration::from_secs(5);

/// One event a reconcile published about a Rollout.
#[derive(Debug, Clone)]
struct Fired {
    rollout: Arc<Rollout>,
    at: jiff::Timestamp,
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
                at: jiff::Timestamp::now(),
                type_,
                reason: reason.to_owned(),
                message: message.to_owned(),
            });
        }
    }
}

/// The notifications loop's state.
struct Loop {
    client: Client,
    /// The API server, written to only while the gate is open.
    cluster: KubeCluster,
    namespace: String,
    gate: WriteGate,
    metrics: Option<Arc<Metrics>>,
    events: EventPublisher,
    rollouts: Store<CachedRollout>,
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
    /// Jobs in order, each with the time it may be worked on.
    queue: Vec<(Job, Instant)>,
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
    rollouts: Store<CachedRollout>,
    caches: Caches,
    self_service: bool,
) -> (Notifier, impl std::future::Future<Output = ()> + Send) {
    let (tx, rx) = mpsc::unbounded_channel();
    let global = Arc::new(AtomicBool::new(false));
    let state = Loop {
        synced: (false, false),
        waiting: Vec::new(),
        global: global.clone(),
        events: EventPublisher::new(client.clone(), std::env::var("POD_NAME").ok()),
        // AnalysisRuns (`analysisRuns` in conditions and templates) are read from the caches.
        cluster: KubeCluster::with_gate(client.clone(), gate.clone()).with_caches(caches),
        client,
        namespace,
        gate,
        metrics,
        rollouts,
        config: Arc::new(Config::default()),
        self_service: self_service.then(BTreeMap::new),
        sender: None,
        queue: Vec::new(),
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

    /// Decides what an event makes due, records it as pending on the Rollout and queues it.
    async fn on_event(&mut self, fired: Fired) {
        let configs = self.configs_for(&fired.rollout.namespace().unwrap_or_default());
        if !self.gate.is_open() || configs.iter().all(|c| c.triggers.is_empty()) {
            return;
        }
        // The freshest record the cache has (the reconcile's copy may predate a record).
        let key =
            kube::runtime::reflector::ObjectRef::<CachedRollout>::new(&fired.rollout.name_any())
                .within(&fired.rollout.namespace().unwrap_or_default());
        let notified = match self.rollouts.get(&key) {
            Some(latest) => NotifiedState::of(latest.annotations()),
            None => NotifiedState::of(fired.rollout.annotations()),
        };
        let type_ = match fired.type_ {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        };
        let event = driver::Fired {
            rollout: (*fired.rollout).clone(),
            at: fired.at,
            type_,
            reason: fired.reason.clone(),
            message: fired.message.clone(),
        };
        let configs: Vec<&Config> = configs.iter().map(AsRef::as_ref).collect();
        let taken = take_event(&self.cluster, &configs, &event, &notified, &self.queued).await;
        for problem in &taken.problems {
            self.report(&fired.rollout, &problem.to_string()).await;
        }
        if let Some(e) = taken.pending_error {
            // Sent all the same; only a stop before the send would lose it.
            debug!(error = %e, "recording pending notifications");
        }
        let now = Instant::now();
        for job in taken.jobs {
            self.queued.insert(job.notification.key.clone());
            self.queue.push((job, now));
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
