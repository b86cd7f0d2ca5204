//! Two controller replicas campaigning for one Lease: only the leader writes; when the leader's
//! lease traffic is black-holed it stops writing within the renew deadline and stays up as a
//! follower while the other takes over; a graceful shutdown hands over at once. With instance
//! ids: the Leases of both Argo lines are respected, and two instances lead side by side.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use k8s_openapi::api::coordination::v1::Lease;
use serde_json::json;
use sluice_api::rollout::RolloutPhase;
use sluice_controller::leader::election::{KubeLeases, LeaseClient};
use sluice_controller::{ControllerHandle, Options};
use sluice_e2e::harness::{TestEnv, TestNamespace};
use sluice_e2e::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const LEASE: &str = "sluice-e2e-lock";
const LEASE_DURATION: Duration = Duration::from_secs(3);
const RENEW_DEADLINE: Duration = Duration::from_secs(2);
const RETRY_PERIOD: Duration = Duration::from_millis(500);
/// Scheduling and request latency allowed on top of the election's own bounds.
const SLACK: Duration = Duration::from_millis(500);

/// Lease traffic that can be black-holed: while cut, requests never answer.
struct Cuttable {
    inner: KubeLeases,
    cut: AtomicBool,
}

impl Cuttable {
    async fn pass(&self) {
        if self.cut.load(Ordering::SeqCst) {
            futures::future::pending::<()>().await;
        }
    }
}

impl LeaseClient for Cuttable {
    fn get(&self) -> BoxFuture<'_, Result<Option<Lease>, kube::Error>> {
        Box::pin(async move {
            self.pass().await;
            self.inner.get().await
        })
    }
    fn create<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<Lease, kube::Error>> {
        Box::pin(async move {
            self.pass().await;
            self.inner.create(lease).await
        })
    }
    fn replace<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<Lease, kube::Error>> {
        Box::pin(async move {
            self.pass().await;
            self.inner.replace(lease).await
        })
    }
}

async fn start_replica(
    env: &TestEnv,
    ns: &TestNamespace,
    identity: &str,
    leases: Option<Arc<dyn LeaseClient>>,
) -> ControllerHandle {
    let mut args = controller_args(ns.name());
    args.leader_election_lease_name = Some(LEASE.into());
    start_with(env, ns, identity, leases, args).await
}

/// Starts a campaigning replica from `args` (the lease name and instance id as they say).
async fn start_with(
    env: &TestEnv,
    ns: &TestNamespace,
    identity: &str,
    leases: Option<Arc<dyn LeaseClient>>,
    mut args: sluice_controller::Args,
) -> ControllerHandle {
    sluice_controller::install_crypto_provider();
    args.leader_elect = true;
    args.leader_election_namespace = Some(ns.name().to_string());
    args.leader_election_identity = Some(identity.into());
    args.leader_election_lease_duration = LEASE_DURATION;
    args.leader_election_renew_deadline = RENEW_DEADLINE;
    args.leader_election_retry_period = RETRY_PERIOD;
    args.healthz_port = 0;
    args.metrics_port = 0;
    sluice_controller::init_logging(&args);
    let options = Options {
        lease_client: leases,
        ..Options::default()
    };
    sluice_controller::start(env.config().clone(), &args, options)
        .await
        .unwrap()
}

/// Requests that change something, other than the controller's own lease traffic.
fn writes(replica: &ControllerHandle) -> u64 {
    replica.metrics().requests_matching(|request, _| {
        !matches!(request.verb.as_str(), "Get" | "List" | "Watch") && request.kind != "leases"
    })
}

async fn wait_leading(replica: &ControllerHandle, leading: bool, limit: Duration) -> Duration {
    let start = Instant::now();
    tokio::time::timeout(limit, replica.gate().wait_for(leading))
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{} still {} after {limit:?}",
                replica.identity(),
                if leading { "following" } else { "leading" }
            )
        });
    start.elapsed()
}

/// Samples both replicas until `done` holds, failing if they ever lead together.
async fn never_both_lead_until(
    a: &ControllerHandle,
    b: &ControllerHandle,
    limit: Duration,
    done: impl Fn() -> bool,
) {
    let start = Instant::now();
    while !done() {
        assert!(
            !(a.is_leader() && b.is_leader()),
            "both replicas lead at once"
        );
        assert!(start.elapsed() < limit, "not done after {limit:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn http_status(port: u16, path: &str) -> u16 {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

async fn update_to_healthy(ns: &TestNamespace, image: &str) {
    let api = rollouts(ns);
    set_image(&api, "web", image).await;
    wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;
    wait_replicas(ns, "web", &[(image, 2)], TIMEOUT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_writes_and_leadership_moves_on_loss_and_on_shutdown() {
    let env = TestEnv::with_crds().await.expect("control plane");
    let ns = TestNamespace::create(&env, "leader-election")
        .await
        .unwrap();

    let a_leases = Arc::new(Cuttable {
        inner: KubeLeases::new(env.client(), ns.name(), LEASE),
        cut: AtomicBool::new(false),
    });
    let a = start_replica(&env, &ns, "replica-a", Some(a_leases.clone())).await;
    wait_leading(&a, true, Duration::from_secs(10)).await;
    let b = start_replica(&env, &ns, "replica-b", None).await;

    // A leads and does all the work; B only watches.
    let api = rollouts(&ns);
    ns.apply_yaml(&canary_rollout(
        "web",
        2,
        "nginx:1.0",
        json!([{"setWeight": 50}, {"pause": {"duration": 1}}]),
        json!({}),
    ))
    .await
    .unwrap();
    wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;
    update_to_healthy(&ns, "nginx:2.0").await;
    assert!(a.is_leader() && !b.is_leader());
    assert!(writes(&a) > 0, "the leader wrote");
    assert_eq!(writes(&b), 0, "the follower never wrote");

    // Black-hole A's lease traffic: it stops writing within the renew deadline, and B takes
    // over only after that, within the lease duration and a retry or two.
    a_leases.cut.store(true, Ordering::SeqCst);
    let cut = Instant::now();
    let fenced_after = wait_leading(&a, false, RENEW_DEADLINE + SLACK).await;
    assert!(!b.is_leader(), "B must not lead while A may still write");
    never_both_lead_until(&a, &b, LEASE_DURATION + 4 * RETRY_PERIOD + SLACK, || {
        b.is_leader()
    })
    .await;
    let takeover_after = cut.elapsed();
    eprintln!(
        "black-holed leader stopped writing after {fenced_after:?}; the standby took over {takeover_after:?} after the cut"
    );
    assert!(takeover_after > fenced_after);

    // A stays up and healthy as a follower, and writes nothing while B works.
    assert!(a.is_running());
    assert_eq!(http_status(a.ports().healthz, "/healthz").await, 200);
    assert_eq!(http_status(a.ports().healthz, "/readyz").await, 200);
    let a_writes = writes(&a);
    update_to_healthy(&ns, "nginx:3.0").await;
    assert_eq!(writes(&a), a_writes, "the fenced replica wrote");
    assert!(writes(&b) > 0, "the new leader did the update");

    // A's lease traffic flows again: it follows, B keeps the lease.
    a_leases.cut.store(false, Ordering::SeqCst);
    let settle = Instant::now();
    never_both_lead_until(&a, &b, Duration::from_secs(10), || {
        settle.elapsed() > LEASE_DURATION + RETRY_PERIOD
    })
    .await;
    assert!(b.is_leader() && !a.is_leader());

    // B shuts down cleanly: it releases the lease and A leads in well under 2 seconds.
    let shutdown = Instant::now();
    b.shutdown().await.unwrap();
    wait_leading(&a, true, Duration::from_secs(2)).await;
    let handover = shutdown.elapsed();
    eprintln!("graceful handover took {handover:?}");
    assert!(handover < Duration::from_secs(2), "{handover:?}");

    // And A does the work again.
    let a_writes = writes(&a);
    update_to_healthy(&ns, "nginx:4.0").await;
    assert!(writes(&a) > a_writes);
    a.shutdown().await.unwrap();
}

const ARGO_19_LEASE: &str = "argo-rollouts-controller-lock";

/// Creates `name` as Argo's client-go leader election holds it, renewed just now.
async fn argo_holds(leases: &kube::Api<Lease>, name: &str, held_for: Duration) {
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(jiff::Timestamp::now());
    let held: Lease = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "holderIdentity": "argo-rollouts-7d9f8c6b5-x2x4q_3b1c2d4e-0000-4000-8000-000000000000",
            "leaseDurationSeconds": held_for.as_secs(),
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": 0
        }
    }))
    .unwrap();
    leases.create(&Default::default(), &held).await.unwrap();
}

async fn holder(leases: &kube::Api<Lease>, name: &str) -> Option<String> {
    leases.get(name).await.ok()?.spec?.holder_identity
}

async fn start_instance(
    env: &TestEnv,
    ns: &TestNamespace,
    identity: &str,
    instance: &str,
) -> ControllerHandle {
    let mut args = controller_args(ns.name());
    args.instance_id = instance.into();
    start_with(env, ns, identity, None, args).await
}

/// With `--instance-id`, Argo 1.9 campaigns for `argo-rollouts-controller-lock` and Argo 1.10
/// for `argo-rollouts-controller-lock-<id>`. A Sluice instance must stay out while either is
/// held by Argo, whichever line a team runs; here each is held as Argo holds it, the instance
/// does not lead while it is valid, then leads holding both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_id_waits_for_argo_of_either_line() {
    let env = TestEnv::with_crds().await.expect("control plane");
    const HELD_FOR: Duration = Duration::from_secs(4);
    for (line, held) in [
        ("1.9", ARGO_19_LEASE),
        ("1.10", "argo-rollouts-controller-lock-team-a"),
    ] {
        let ns = TestNamespace::create(&env, &format!("lease-argo-{}", line.replace('.', "")))
            .await
            .unwrap();
        let leases: kube::Api<Lease> = kube::Api::namespaced(env.client(), ns.name());
        argo_holds(&leases, held, HELD_FOR).await;
        let replica = start_instance(&env, &ns, "sluice-a", "team-a").await;
        // The Lease was renewed just now: not before it expires on the replica's own clock.
        tokio::time::sleep(HELD_FOR - Duration::from_secs(1)).await;
        assert!(
            !replica.is_leader(),
            "led while Argo {line}'s controller held {held}"
        );
        wait_leading(&replica, true, HELD_FOR + 4 * RETRY_PERIOD + SLACK).await;
        for name in [ARGO_19_LEASE, "argo-rollouts-controller-lock-team-a"] {
            assert_eq!(
                holder(&leases, name).await.as_deref(),
                Some("sluice-a"),
                "{name}"
            );
        }
        replica.shutdown().await.unwrap();
    }
}

/// Two Sluice instances with different instance ids in one namespace lead side by side (Argo
/// 1.10's behaviour), and while they run, an Argo 1.9 controller would find its Lease held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instance_ids_lead_side_by_side() {
    let env = TestEnv::with_crds().await.expect("control plane");
    let ns = TestNamespace::create(&env, "lease-shards").await.unwrap();
    let leases: kube::Api<Lease> = kube::Api::namespaced(env.client(), ns.name());
    let a = start_instance(&env, &ns, "sluice-a", "team-a").await;
    let b = start_instance(&env, &ns, "sluice-b", "team-b").await;
    wait_leading(&a, true, 4 * RETRY_PERIOD + SLACK).await;
    wait_leading(&b, true, 4 * RETRY_PERIOD + SLACK).await;
    let guard = holder(&leases, ARGO_19_LEASE).await.unwrap_or_default();
    assert!(
        ["sluice-a", "sluice-b"].contains(&guard.as_str()),
        "{guard}"
    );
    // Stopping the guard's holder hands the guard to the other, which never stops leading.
    let (first, second) = if guard == "sluice-a" { (a, b) } else { (b, a) };
    first.shutdown().await.unwrap();
    let until = Instant::now() + LEASE_DURATION + 2 * RETRY_PERIOD;
    while Instant::now() < until {
        assert!(second.is_leader(), "the other instance stopped leading");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_ne!(
        holder(&leases, ARGO_19_LEASE).await.as_deref(),
        Some(guard.as_str())
    );
    assert!(
        holder(&leases, ARGO_19_LEASE)
            .await
            .is_some_and(|h| !h.is_empty())
    );
    second.shutdown().await.unwrap();
}
