//! The leader-election loop: reads and writes the Lease for a [`LeaderElector`] and publishes
//! the resulting leadership to the [`WriteGate`](crate::leader::fence::WriteGate).
//!
//! - While leading it renews every retry period; while not, it retries every retry period with
//!   client-go's jitter (up to 1.2 x more).
//! - Requests are bounded by the renew deadline, and the gate closes at the deadline even when a
//!   renewal hangs (a black-holed API server cannot keep a stale leader writing).
//! - Losing the lease never ends the process: the replica keeps its caches and campaigns again.
//! - On shutdown it closes the gate, waits briefly for in-flight writes, and releases the lease
//!   so a standby takes over at its next attempt.
//! - With a guard (see [`Election::with_guard`]) it leads only while it also holds the guard
//!   Lease or sees another Sluice replica renew it, and releases both on shutdown.

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::time::{Instant, sleep_until, timeout};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::leader::fence::{InFlight, Leadership};
use crate::leader::lease::{ElectionConfig, JITTER_FACTOR, LeaderElector, LeaseRecord, Step};
use crate::serve::metrics::Metrics;

/// The longest a stopping controller waits for the API server to take the lease back.
pub const RELEASE_TIMEOUT: Duration = Duration::from_millis(1500);

/// How the election loop reaches the Lease. [`KubeLeases`] is the real one; tests substitute
/// their own to delay or drop lease traffic.
pub trait LeaseClient: Send + Sync {
    /// The Lease, or `None` if it does not exist.
    fn get(&self) -> BoxFuture<'_, Result<Option<Lease>, kube::Error>>;
    fn create<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<Lease, kube::Error>>;
    /// Replaces the Lease, conditional on the resourceVersion it carries.
    fn replace<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<Lease, kube::Error>>;
}

/// [`LeaseClient`] against the API server.
#[derive(Clone)]
pub struct KubeLeases {
    api: Api<Lease>,
    name: String,
}

impl KubeLeases {
    pub fn new(client: Client, namespace: &str, name: &str) -> KubeLeases {
        KubeLeases {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
        }
    }
}

impl LeaseClient for KubeLeases {
    fn get(&self) -> BoxFuture<'_, Result<Option<Lease>, kube::Error>> {
        Box::pin(self.api.get_opt(&self.name))
    }

    fn create<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<Lease, kube::Error>> {
        Box::pin(async move { self.api.create(&PostParams::default(), lease).await })
    }

    fn replace<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<Lease, kube::Error>> {
        Box::pin(async move {
            self.api
                .replace(&self.name, &PostParams::default(), lease)
                .await
        })
    }
}

/// Why an attempt to acquire or renew did not make us leader.
#[derive(Debug)]
enum Outcome {
    Leading,
    /// Somebody else holds an unexpired lease (its holder).
    Held(String),
    /// A guard another Sluice replica holds, counted as held until then.
    Shared(Instant),
    /// The Lease changed between read and write: read again at once.
    Conflict,
    Failed(String),
}

/// One candidate's campaign.
pub struct Election {
    elector: LeaderElector,
    leases: Arc<dyn LeaseClient>,
    guard: Option<Guard>,
    leadership: Leadership,
    in_flight: InFlight,
    metrics: Arc<Metrics>,
    /// The term published: bumped each time leadership starts again.
    term: u64,
    /// The leader lease's own term when `term` was published.
    lease_term: Option<u64>,
}

/// A second Lease this candidate must hold, or see held by another Sluice replica, to lead.
struct Guard {
    elector: LeaderElector,
    leases: Arc<dyn LeaseClient>,
    /// Until when another Sluice replica's hold counts (see [`Step::Shared`](crate::leader::lease::Step)).
    shared_until: Option<Instant>,
    /// Who holds it, when that is not a Sluice replica (logged once per holder).
    blocked_by: Option<String>,
}

impl Guard {
    /// Until when the guard counts as held: our own renew deadline, or another Sluice
    /// replica's freshness.
    fn held_until(&self) -> Option<Instant> {
        self.elector.deadline().or(self.shared_until)
    }
}

impl Election {
    pub fn new(
        config: ElectionConfig,
        leases: Arc<dyn LeaseClient>,
        leadership: Leadership,
        in_flight: InFlight,
        metrics: Arc<Metrics>,
    ) -> Election {
        Election {
            elector: LeaderElector::new(config),
            leases,
            guard: None,
            leadership,
            in_flight,
            metrics,
            term: 0,
            lease_term: None,
        }
    }

    /// Leads only while the guard Lease in `config` (its role should be
    /// [`LeaseRole::Guard`](crate::leader::lease::LeaseRole)) is held too: by us, or by another
    /// Sluice replica that renews it. The guard is tried after each successful renewal of the
    /// leader lease, within the same renew deadline.
    pub fn with_guard(mut self, config: ElectionConfig, leases: Arc<dyn LeaseClient>) -> Election {
        self.guard = Some(Guard {
            elector: LeaderElector::new(config),
            leases,
            shared_until: None,
            blocked_by: None,
        });
        self
    }

    /// When leadership ends unless renewed before: the earlier of the leader lease's deadline
    /// and the guard's.
    fn deadline(&self) -> Option<Instant> {
        let lease = self.elector.deadline()?;
        match &self.guard {
            None => Some(lease),
            Some(guard) => guard.held_until().map(|g| g.min(lease)),
        }
    }

    /// Campaigns until `stop` fires, then releases the lease if held.
    pub async fn run(mut self, stop: CancellationToken) {
        let config = self.elector.config().clone();
        let guard = self.guard.as_ref().map(|g| {
            let c = g.elector.config();
            format!("{}/{}", c.lease_namespace, c.lease_name)
        });
        info!(
            identity = %config.identity,
            lease = %format!("{}/{}", config.lease_namespace, config.lease_name),
            guard = guard.as_deref().unwrap_or("none"),
            "campaigning for the leader lease"
        );
        let mut next_attempt = Instant::now();
        loop {
            // Wait for the next attempt; close the gate if the renew deadline comes first.
            let deadline = self.deadline();
            tokio::select! {
                () = stop.cancelled() => break,
                () = sleep_until(next_attempt) => {}
                () = sleep_until(deadline.unwrap_or(next_attempt)),
                    if self.leadership.term().is_some() && deadline.is_some_and(|d| d < next_attempt) => {
                    self.publish();
                    continue;
                }
            }

            let at = Instant::now();
            let was_leading = self.leadership.term().is_some();
            // Only a gate that is still open needs closing at the deadline.
            let mut deadline = deadline.filter(|_| self.leadership.term().is_some());
            let outcome = {
                let attempt = attempt_guarded(
                    &mut self.elector,
                    self.leases.as_ref(),
                    self.guard.as_mut(),
                    at,
                );
                tokio::pin!(attempt);
                let attempt_timeout = sleep_until(at + config.renew_deadline);
                tokio::pin!(attempt_timeout);
                loop {
                    tokio::select! {
                        outcome = &mut attempt => break outcome,
                        () = &mut attempt_timeout => break Outcome::Failed("lease request timed out".into()),
                        () = sleep_until(deadline.unwrap_or(at)), if deadline.is_some() => {
                            // A renewal is still hanging at the deadline: stop writing now.
                            deadline = None;
                            self.leadership.set(None);
                            self.metrics.set_leader(false);
                            warn!("renew deadline passed while renewing the lease; writes stopped");
                        }
                        () = stop.cancelled() => break Outcome::Failed("stopping".into()),
                    }
                }
            };
            if stop.is_cancelled() {
                break;
            }
            self.publish();
            let leading = self.leadership.term().is_some();
            match &outcome {
                Outcome::Leading if !was_leading => {
                    info!(identity = %config.identity, "became leader");
                }
                Outcome::Leading | Outcome::Shared(_) | Outcome::Held(_) => {}
                Outcome::Conflict => debug!("lease changed while writing it; reading again"),
                Outcome::Failed(why) => {
                    if was_leading {
                        warn!(error = %why, "could not renew the leader lease");
                    } else {
                        debug!(error = %why, "could not acquire the leader lease");
                    }
                }
            }
            if was_leading && !leading {
                warn!(identity = %config.identity, "lost the leader lease: writes stopped, caches kept, campaigning again");
            }
            let now = Instant::now();
            next_attempt = match outcome {
                _ if leading
                    && self
                        .deadline()
                        .is_some_and(|d| d < at + config.retry_period) =>
                {
                    // A shared guard going stale: look again before leadership would lapse.
                    now.max(self.deadline().unwrap_or(now))
                }
                Outcome::Conflict => now,
                _ if leading => at + config.retry_period,
                _ => now + jittered(config.retry_period),
            };
        }
        self.step_down().await;
    }

    /// Publishes the leadership now: the leader lease held, and the guard if there is one.
    /// A new term starts whenever leadership starts again, or the leader lease's term changed.
    fn publish(&mut self) {
        let now = Instant::now();
        let lease_term = self.elector.term(now);
        let leading = lease_term.is_some() && self.deadline().is_some_and(|d| now < d);
        let term = if leading {
            if self.leadership.term().is_none() || self.lease_term != lease_term {
                self.term += 1;
                self.lease_term = lease_term;
            }
            Some(self.term)
        } else {
            None
        };
        self.leadership.set(term);
        self.metrics.set_leader(term.is_some());
    }

    /// Closes the gate, lets in-flight writes finish (briefly) and releases the lease (and the
    /// guard).
    ///
    /// At most 1 s of waiting for writes plus [`RELEASE_TIMEOUT`] for each release.
    async fn step_down(mut self) {
        let was_leading = self.leadership.term().is_some();
        self.leadership.set(None);
        self.metrics.set_leader(false);
        let config = self.elector.config().clone();
        let bound = config.renew_deadline.min(Duration::from_secs(1));
        if !self.in_flight.drained(bound).await {
            warn!(
                in_flight = self.in_flight.count(),
                "releasing the lease with writes still in flight"
            );
        }
        release(&mut self.elector, self.leases.clone(), was_leading).await;
        if let Some(guard) = &mut self.guard {
            release(&mut guard.elector, guard.leases.clone(), was_leading).await;
        }
    }
}

/// Frees the Lease `elector` campaigns for, if it holds it, within [`RELEASE_TIMEOUT`].
async fn release(elector: &mut LeaderElector, leases: Arc<dyn LeaseClient>, was_leading: bool) {
    let config = elector.config().clone();
    let lease = format!("{}/{}", config.lease_namespace, config.lease_name);
    let Some(release) = elector.release(Timestamp::now()) else {
        return;
    };
    // Bounded well inside the 5 s a stopping controller is given, whatever the renew deadline.
    let released = timeout(config.renew_deadline.min(RELEASE_TIMEOUT), async move {
        match leases.replace(&release).await {
            // A renewal cut short by the shutdown may have landed after all: release the
            // Lease as it is now, if it still names us.
            Err(kube::Error::Api(s)) if s.code == 409 => {
                let current = leases.get().await?;
                match current.and_then(|c| elector.release_of(&c, Timestamp::now())) {
                    Some(release) => leases.replace(&release).await.map(Some),
                    None => Ok(None),
                }
            }
            other => other.map(Some),
        }
    })
    .await;
    match released {
        Ok(Ok(Some(_))) => {
            info!(identity = %config.identity, %lease, was_leading, "released the leader lease");
        }
        Ok(Ok(None)) => debug!(%lease, "the lease was no longer ours to release"),
        Ok(Err(e)) => {
            warn!(error = %e, %lease, "could not release the leader lease; it expires on its own");
        }
        Err(_) => warn!(%lease, "releasing the leader lease timed out; it expires on its own"),
    }
}

/// One round on the leader lease and, once that is held, one on the guard.
async fn attempt_guarded(
    elector: &mut LeaderElector,
    leases: &dyn LeaseClient,
    guard: Option<&mut Guard>,
    at: Instant,
) -> Outcome {
    let outcome = attempt(elector, leases, at).await;
    let Some(guard) = guard else {
        return outcome;
    };
    if !matches!(outcome, Outcome::Leading) {
        return outcome;
    }
    let outcome = attempt(&mut guard.elector, guard.leases.as_ref(), at).await;
    guard.shared_until = match outcome {
        Outcome::Shared(until) => Some(until),
        _ => None,
    };
    match &outcome {
        Outcome::Held(holder) if guard.blocked_by.as_ref() != Some(holder) => {
            let c = guard.elector.config();
            info!(
                guard = %format!("{}/{}", c.lease_namespace, c.lease_name),
                holder = %holder,
                "not leading: the guard lease is held by a controller that is not Sluice (Argo \
                 Rollouts 1.9 takes this lease whatever its instance id); waiting for it to expire"
            );
            guard.blocked_by = Some(holder.clone());
        }
        Outcome::Held(_) => {}
        _ => guard.blocked_by = None,
    }
    outcome
}

/// One read-decide-write round.
async fn attempt(elector: &mut LeaderElector, leases: &dyn LeaseClient, at: Instant) -> Outcome {
    let current = match leases.get().await {
        Ok(current) => current,
        Err(e) => return Outcome::Failed(format!("reading the lease: {e}")),
    };
    let written = match elector.observe(at, Timestamp::now(), current.as_ref()) {
        Step::Wait => {
            let holder = current.as_ref().map(LeaseRecord::from_lease);
            return Outcome::Held(holder.map(|r| r.holder_identity).unwrap_or_default());
        }
        Step::Shared(until) => return Outcome::Shared(until),
        Step::Create(lease) => leases.create(&lease).await,
        Step::Update(lease) => leases.replace(&lease).await,
    };
    match written {
        Ok(stored) => {
            elector.written(at, &stored);
            if elector.term(Instant::now()).is_some() {
                Outcome::Leading
            } else {
                Outcome::Failed("the lease write completed after the renew deadline".into())
            }
        }
        Err(kube::Error::Api(s)) if s.code == 409 => Outcome::Conflict,
        Err(e) => Outcome::Failed(format!("writing the lease: {e}")),
    }
}

/// `period` stretched by up to [`JITTER_FACTOR`], so standbys do not retry in lockstep.
fn jittered(period: Duration) -> Duration {
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let fraction = (random % 10_000) as f64 / 10_000.0;
    period.mul_f64(1.0 + JITTER_FACTOR * fraction)
}

#[cfg(test)]
mod tests;
