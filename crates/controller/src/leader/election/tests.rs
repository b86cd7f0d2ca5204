//! The election loop on paused time, against an in-memory API server per Lease.

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
    /// The link to the guard's server, for a candidate with a guard.
    guard_link: Option<Arc<Link>>,
    gate: WriteGate,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

fn link(server: &Arc<Server>) -> Arc<Link> {
    Arc::new(Link {
        server: server.clone(),
        cut: AtomicBool::new(false),
    })
}

fn candidate(server: &Arc<Server>, identity: &str) -> Candidate {
    candidate_with(server, identity, None)
}

/// A candidate for the Lease on `server`, and for the guard on `guard` if given.
fn candidate_with(server: &Arc<Server>, identity: &str, guard: Option<&Arc<Server>>) -> Candidate {
    let primary = link(server);
    let (leadership, gate) = Leadership::new();
    let config = ElectionConfig {
        role: crate::leader::lease::LeaseRole::Leader,
        identity: identity.into(),
        lease_name: "lock".into(),
        lease_namespace: "ns".into(),
        lease_duration: Duration::from_secs(15),
        renew_deadline: Duration::from_secs(10),
        retry_period: Duration::from_secs(2),
    };
    let guard_link = guard.map(link);
    let mut election = Election::new(
        config.clone(),
        primary.clone(),
        leadership,
        InFlight::default(),
        Metrics::new("test"),
    );
    if let Some(guard_link) = &guard_link {
        let guard = ElectionConfig {
            role: crate::leader::lease::LeaseRole::Guard,
            lease_name: "guard".into(),
            ..config
        };
        election = election.with_guard(guard, guard_link.clone());
    }
    let stop = CancellationToken::new();
    let task = tokio::spawn(election.run(stop.clone()));
    Candidate {
        link: primary,
        guard_link,
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

mod guard;
