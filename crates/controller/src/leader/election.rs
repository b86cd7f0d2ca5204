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
use crate::leader::lease::{ElectionConfig, JITTER_FACTOR, LeaderElector, Step};
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
    /// Somebody else holds an unexpired lease.
    Held,
    /// The Lease changed between read and write: read again at once.
    Conflict,
    Failed(String),
}

/// One candidate's campaign.
pub struct Election {
    elector: LeaderElector,
    leases: Arc<dyn LeaseClient>,
    leadership: Leadership,
    in_flight: InFlight,
    metrics: Arc<Metrics>,
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
            leadership,
            in_flight,
            metrics,
        }
    }

    /// Campaigns until `stop` fires, then releases the lease if held.
    pub async fn run(mut self, stop: CancellationToken) {
        let config = self.elector.config().clone();
        info!(
            identity = %config.identity,
            lease = %format!("{}/{}", config.lease_namespace, config.lease_name),
            "campaigning for the leader lease"
        );
        let mut next_attempt = Instant::now();
        loop {
            // Wait for the next attempt; close the gate if the renew deadline comes first.
            let deadline = self.elector.deadline();
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
                let attempt = attempt(&mut self.elector, self.leases.as_ref(), at);
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
                Outcome::Leading | Outcome::Held => {}
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
                Outcome::Conflict => now,
                _ if leading => at + config.retry_period,
                _ => now + jittered(config.retry_period),
            };
        }
        self.step_down().await;
    }

    /// Publishes the elector's leadership now.
    fn publish(&self) {
        let term = self.elector.term(Instant::now());
        self.leadership.set(term);
        self.metrics.set_leader(term.is_some());
    }

    /// Closes the gate, lets in-flight writes finish (briefly) and releases the lease.
    ///
    /// At most 1 s of waiting for writes plus [`RELEASE_TIMEOUT`] for the release.
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
        let Some(release) = self.elector.release(Timestamp::now()) else {
            return;
        };
        let leases = self.leases.clone();
        let elector = &mut self.elector;
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
                info!(identity = %config.identity, was_leading, "released the leader lease");
            }
            Ok(Ok(None)) => debug!("the lease was no longer ours to release"),
            Ok(Err(e)) => {
                warn!(error = %e, "could not release the leader lease; it expires on its own");
            }
            Err(_) => warn!("releasing the leader lease timed out; it expires on its own"),
        }
    }
}

/// One read-decide-write round.
async fn attempt(elector: &mut LeaderElector, leases: &dyn LeaseClient, at: Instant) -> Outcome {
    let current = match leases.get().await {
        Ok(current) => current,
        Err(e) => return Outcome::Failed(format!("reading the lease: {e}")),
    };
    let written = match elector.observe(at, Timestamp::now(), current.as_ref()) {
        Step::Wait => return Outcome::Held,
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
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};

    use kube::core::Status;

    use crate::leader::fence::WriteGate;

    /// An in-memory API server for one Lease, with resourceVersion checks.
    #[derive(Default)]
    struct Server {
        lease: Mutex<Option<Lease>>,
        version: Mutex<u64>,
    }

    fn conflict() -> kube::Error {
        kube::Error::Api(Box::new(
            Status::failure("conflict", "Conflict").with_code(409),
        ))
    }

    impl Server {
        fn store(&self, lease: &Lease) -> Lease {
            let mut version = self.version.lock().unwrap();
            *version += 1;
            let mut stored = lease.clone();
            stored.metadata.resource_version = Some(version.to_string());
            *self.lease.lock().unwrap() = Some(stored.clone());
            stored
        }
        fn holder(&self) -> String {
            self.lease
                .lock()
                .unwrap()
                .as_ref()
                .map(|l| crate::leader::lease::LeaseRecord::from_lease(l).holder_identity)
                .unwrap_or_default()
        }
    }

    /// One candidate's connection to the shared server; can be cut (requests hang).
    struct Link {
        server: Arc<Server>,
        cut: AtomicBool,
    }

    impl Link {
        async fn hang_if_cut(&self) {
            if self.cut.load(Ordering::SeqCst) {
                futures::future::pending::<()>().await;
            }
        }
    }

    impl LeaseClient for Link {
        fn get(&self) -> BoxFuture<'_, Result<Option<Lease>, kube::Error>> {
            Box::pin(async move {
                self.hang_if_cut().await;
                Ok(self.server.lease.lock().unwrap().clone())
            })
        }
        fn create<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<Lease, kube::Error>> {
            Box::pin(async move {
                self.hang_if_cut().await;
                if self.server.lease.lock().unwrap().is_some() {
                    return Err(conflict());
                }
                Ok(self.server.store(lease))
            })
        }
        fn replace<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<Lease, kube::Error>> {
            Box::pin(async move {
                self.hang_if_cut().await;
                let current = self
                    .server
                    .lease
                    .lock()
                    .unwrap()
                    .as_ref()
                    .and_then(|l| l.metadata.resource_version.clone());
                if current != lease.metadata.resource_version {
                    return Err(conflict());
                }
                Ok(self.server.store(lease))
            })
        }
    }

    struct Candidate {
        link: Arc<Link>,
        gate: WriteGate,
        stop: CancellationToken,
        task: tokio::task::JoinHandle<()>,
    }

    fn candidate(server: &Arc<Server>, identity: &str) -> Candidate {
        let link = Arc::new(Link {
            server: server.clone(),
            cut: AtomicBool::new(false),
        });
        let (leadership, gate) = Leadership::new();
        let config = ElectionConfig {
            identity: identity.into(),
            lease_name: "lock".into(),
            lease_namespace: "ns".into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        };
        let election = Election::new(
            config,
            link.clone(),
            leadership,
            InFlight::default(),
            Metrics::new("test"),
        );
        let stop = CancellationToken::new();
        let task = tokio::spawn(election.run(stop.clone()));
        Candidate {
            link,
            gate,
            stop,
            task,
        }
    }

    async fn leading_within(c: &Candidate, limit: Duration) -> Duration {
        let start = Instant::now();
        timeout(limit, c.gate.wait_for(true))
            .await
            .expect("became leader in time");
        start.elapsed()
    }

    #[tokio::test(start_paused = true)]
    async fn one_leader_then_takeover_after_a_black_hole_then_instant_handover_on_release() {
        let server = Arc::new(Server::default());
        let a = candidate(&server, "a");
        leading_within(&a, Duration::from_secs(1)).await;
        let b = candidate(&server, "b");
        // b never leads while a renews.
        for _ in 0..30 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            assert!(a.gate.is_open() && !b.gate.is_open());
        }
        assert_eq!(server.holder(), "a");

        // Cut a off: it stops writing within the renew deadline, b leads within the lease
        // duration (plus one retry with jitter), and never both at once.
        a.link.cut.store(true, Ordering::SeqCst);
        let cut_at = Instant::now();
        timeout(Duration::from_secs(11), a.gate.wait_for(false))
            .await
            .expect("a stops within the renew deadline");
        let fenced_after = cut_at.elapsed();
        assert!(fenced_after <= Duration::from_secs(10), "{fenced_after:?}");
        assert!(!b.gate.is_open(), "b must not lead while a may still write");
        leading_within(&b, Duration::from_secs(15 + 5)).await;
        let takeover_after = cut_at.elapsed();
        assert!(
            takeover_after >= Duration::from_secs(13),
            "{takeover_after:?}"
        );
        assert!(!a.gate.is_open());
        assert!(!a.task.is_finished(), "a stays up as a follower");

        // a reconnects and follows.
        a.link.cut.store(false, Ordering::SeqCst);
        for _ in 0..20 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            assert!(b.gate.is_open() && !a.gate.is_open());
        }

        // b shuts down: the lease is released and a takes over at its next attempt.
        let released_at = Instant::now();
        b.stop.cancel();
        b.task.await.unwrap();
        assert_eq!(server.holder(), "");
        leading_within(&a, Duration::from_secs(5)).await;
        assert!(
            released_at.elapsed() <= Duration::from_millis(4400 + 100),
            "one jittered retry period at most"
        );
        a.stop.cancel();
        a.task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn racing_candidates_never_lead_together() {
        let server = Arc::new(Server::default());
        let cs: Vec<Candidate> = ["a", "b", "c"]
            .iter()
            .map(|id| candidate(&server, id))
            .collect();
        let mut leaders_seen = std::collections::BTreeSet::new();
        for step in 0..200 {
            tokio::time::sleep(Duration::from_millis(250)).await;
            let leading: Vec<usize> = (0..cs.len()).filter(|i| cs[*i].gate.is_open()).collect();
            assert!(
                leading.len() <= 1,
                "two leaders at step {step}: {leading:?}"
            );
            leaders_seen.extend(leading.iter().copied());
            // Every 10s, cut off whoever leads.
            if step % 40 == 39
                && let Some(&i) = leading.first()
            {
                cs[i].link.cut.store(true, Ordering::SeqCst);
                for (j, c) in cs.iter().enumerate() {
                    if j != i {
                        c.link.cut.store(false, Ordering::SeqCst);
                    }
                }
            }
        }
        assert!(
            leaders_seen.len() >= 2,
            "leadership moved: {leaders_seen:?}"
        );
        for c in cs {
            c.stop.cancel();
            c.task.abort();
        }
    }
}
