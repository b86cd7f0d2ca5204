//! The notifications loop of a Rollout controller replica as the simulation runs it: the
//! controller's own driver (`sluice_controller::loops::notification_driver`, which its
//! notifications loop runs too) on the simulated client, sending through a recording service.
//! Only the queue's timing and the service are the simulation's.
//!
//! Like the controller's loop, a replica's notifier works while the replica leads: events of
//! its reconciles are decided and written to the Rollout's pending record, each notification
//! is sent and then recorded, a leader takes over what another left pending (every
//! [`RECOVER_EVERY_MS`]), and everything in memory is dropped when the process dies or its
//! term ends (a new term is a new [`Life`]). One call of the driver is in flight at a time.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

use sluice_api::Rollout;
use sluice_controller::loops::notification_driver::{self as driver, Deliver, Fired, Job, Stepped};
use sluice_notifications::services::{SendError, Sent, SlackThreads};
use sluice_notifications::{Config, Notification, NotifiedState};
use tracing::Instrument;

use crate::controller::BoxFuture;
use crate::net::{Gate, Request, Response, SimWriter};
use crate::watch::Cache;

/// The span every call of the driver by this loop runs in.
pub const LOOP_SPAN: &str = "sim_notification_loop";
/// How often a leader looks for pending notifications it has not queued (the controller's
/// `RECOVER_EVERY`).
pub const RECOVER_EVERY_MS: u64 = 5_000;

/// A scenario's notifications: the ConfigMap's data, and how often a send fails while the
/// faults last.
#[derive(Debug, Clone)]
pub struct Notify {
    pub data: BTreeMap<String, String>,
    pub send_failure: f64,
}

impl Notify {
    pub fn config(&self) -> Config {
        Config::parse(&self.data, &BTreeMap::new())
    }
}

/// One term of one process of a replica: what a notifier holds in memory lives as long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Life {
    pub replica: usize,
    pub incarnation: u32,
    pub term: u64,
}

impl std::fmt::Display for Life {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "sluice-{}-{} term {}",
            self.replica, self.incarnation, self.term
        )
    }
}

/// One notification the recording service delivered.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub at_ms: u64,
    pub life: Life,
    pub rollout: String,
    /// The engine's key: occurrence (or `oncePer` value), trigger, condition, destination.
    pub key: String,
    pub trigger: String,
    pub recipient: String,
}

#[derive(Debug, Default)]
struct Local {
    now_ms: u64,
    life: Option<Life>,
    fail_next: bool,
}

/// The service a replica's notifier sends through: every delivery is kept (in one list for
/// all replicas); a send fails when the scheduler says so.
#[derive(Debug, Clone, Default)]
pub struct RecordingService {
    delivered: Arc<Mutex<Vec<Delivery>>>,
    local: Arc<Mutex<Local>>,
}

impl RecordingService {
    /// A handle for another replica, delivering to the same list.
    pub fn handle(&self) -> Self {
        Self {
            delivered: self.delivered.clone(),
            local: Arc::default(),
        }
    }

    fn local(&self) -> std::sync::MutexGuard<'_, Local> {
        self.local.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Deliveries from `from` on.
    pub fn since(&self, from: usize) -> Vec<Delivery> {
        let all = self
            .delivered
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        all.get(from..).unwrap_or_default().to_vec()
    }
}

impl Deliver for RecordingService {
    async fn deliver(
        &self,
        _namespace: &str,
        name: &str,
        _cfg: &Config,
        n: &Notification,
        _threads: &SlackThreads,
    ) -> Result<Sent, SendError> {
        let (now_ms, life) = {
            let mut local = self.local();
            if std::mem::take(&mut local.fail_next) {
                return Err(SendError::transient("503 Service Unavailable (injected)"));
            }
            (local.now_ms, local.life)
        };
        let Some(life) = life else {
            return Err(SendError::permanent("no process"));
        };
        // Told in the span of the code that sends: a test checks that it is the driver.
        tracing::trace!(request = %format!("deliver {}", n.key), "delivery");
        self.delivered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Delivery {
                at_ms: now_ms,
                life,
                rollout: name.to_string(),
                key: n.key.clone(),
                trigger: n.trigger.clone(),
                recipient: n.destination.recipient.clone(),
            });
        Ok(Sent::default())
    }
}

/// What a call of the driver came to.
enum Work {
    Taken(driver::Taken),
    TookOver(Vec<Job>),
    Stepped(Box<Job>, Stepped),
}

struct InFlight {
    writer: SimWriter,
    future: BoxFuture<Work>,
}

/// What polling the notifier came to.
pub enum Polled {
    Idle,
    Send(Request),
    /// A step finished: what it came to, for the trace.
    Stepped(String),
}

/// A replica's notifications loop.
#[derive(Default)]
pub struct Notifier {
    pub life: Option<Life>,
    inbox: VecDeque<Fired>,
    queue: Vec<(Job, u64)>,
    queued: HashSet<String>,
    recover_due: bool,
    inflight: Option<InFlight>,
    service: RecordingService,
}

impl Notifier {
    pub fn new(service: RecordingService) -> Self {
        Self {
            service,
            ..Self::default()
        }
    }

    /// The process died or its term ended (`life` is the one now, if any): whatever it held
    /// in memory is gone, as the controller's loop drops its queue.
    pub fn reset(&mut self, life: Option<Life>) {
        let service = self.service.clone();
        *self = Self::new(service);
        self.life = life;
        self.recover_due = life.is_some();
        self.service.local().life = life;
    }

    pub fn fire(&mut self, fired: Fired) {
        self.inbox.push_back(fired);
    }

    pub fn recover_later(&mut self) {
        self.recover_due = true;
    }

    pub fn busy(&self) -> bool {
        self.inflight.is_some()
    }

    /// When the next queued job may be worked on.
    pub fn next_due(&self) -> Option<u64> {
        self.queue.iter().map(|(_, at)| *at).min()
    }

    /// Starts the next call of the driver, if there is work and none in flight: events first,
    /// then taking over, then the next ready job. `fail_send` makes that job's send fail.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        &mut self,
        now_ms: u64,
        now_unix: i64,
        config: &Arc<Config>,
        cache: &Cache<Rollout>,
        gate: &Gate,
        fail_send: &mut dyn FnMut() -> bool,
    ) -> bool {
        let Some(life) = self.life else {
            return false;
        };
        if self.inflight.is_some() {
            return false;
        }
        let writer = SimWriter::new(gate.clone(), Some(life.term));
        let w = writer.clone();
        let cfg = config.clone();
        let queued = self.queued.clone();
        let now = jiff::Timestamp::from_second(now_unix).unwrap_or_default();
        let span = tracing::debug_span!(LOOP_SPAN, replica = life.replica);
        let future: BoxFuture<Work> = if let Some(fired) = self.inbox.pop_front() {
            // The freshest record the cache has (the reconcile's copy may predate a record).
            let name = fired.rollout.metadata.name.clone().unwrap_or_default();
            let latest = cache.objects.get(&name).unwrap_or(&fired.rollout);
            let notified = NotifiedState::of(
                latest
                    .metadata
                    .annotations
                    .as_ref()
                    .unwrap_or(&BTreeMap::new()),
            );
            Box::pin(
                async move {
                    let taken = driver::take_event(&w, &[&cfg], &fired, &notified, &queued).await;
                    Work::Taken(taken)
                }
                .instrument(span),
            )
        } else if std::mem::take(&mut self.recover_due) {
            let rollouts: Vec<Rollout> = cache.objects.values().cloned().collect();
            Box::pin(
                async move {
                    let mut jobs = Vec::new();
                    for ro in &rollouts {
                        jobs.extend(driver::take_over(&w, &[&cfg], ro, &queued, now).await);
                    }
                    Work::TookOver(jobs)
                }
                .instrument(span),
            )
        } else {
            let Some(i) = driver::next_job(&self.queue, &HashSet::new(), |at| *at <= now_ms) else {
                return false;
            };
            let mut job = self.queue[i].0.clone();
            self.service.local().fail_next = fail_send();
            let service = self.service.clone();
            Box::pin(
                async move {
                    let stepped = driver::step(&w, &service, &cfg, &mut job, now_unix).await;
                    Work::Stepped(Box::new(job), stepped)
                }
                .instrument(span),
            )
        };
        self.inflight = Some(InFlight { writer, future });
        true
    }

    /// Hands a reply to the call in flight.
    pub fn deliver(&mut self, response: Response) {
        if let Some(f) = &self.inflight {
            f.writer.deliver(response);
        }
    }

    /// Runs the call in flight until it sends a request or finishes.
    pub fn poll(&mut self, now_ms: u64) -> Polled {
        let Some(inflight) = self.inflight.as_mut() else {
            return Polled::Idle;
        };
        self.service.local().now_ms = now_ms;
        let mut cx = Context::from_waker(Waker::noop());
        let Poll::Ready(work) = inflight.future.as_mut().poll(&mut cx) else {
            return match inflight.writer.take_request() {
                Some(request) => Polled::Send(request),
                None => Polled::Idle,
            };
        };
        self.inflight = None;
        self.service.local().fail_next = false;
        match work {
            Work::Taken(taken) => {
                self.enqueue(taken.jobs, now_ms);
                Polled::Idle
            }
            Work::TookOver(jobs) => {
                self.enqueue(jobs, now_ms);
                Polled::Idle
            }
            Work::Stepped(job, stepped) => {
                let key = job.notification.key.clone();
                let Some(i) = self
                    .queue
                    .iter()
                    .position(|(j, _)| j.notification.key == key)
                else {
                    return Polled::Idle;
                };
                let what = format!("{} {}: {stepped:?}", job.notification.trigger, key);
                if stepped.done() {
                    self.queue.remove(i);
                    self.queued.remove(&key);
                } else {
                    let at = now_ms + driver::retry_delay(job.attempts).as_millis() as u64;
                    self.queue[i] = (*job, at);
                }
                Polled::Stepped(what)
            }
        }
    }

    fn enqueue(&mut self, jobs: Vec<Job>, now_ms: u64) {
        for job in jobs {
            if self.queued.insert(job.notification.key.clone()) {
                self.queue.push((job, now_ms));
            }
        }
    }
}
