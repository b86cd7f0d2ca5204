//! A round trip with Argo Rollouts' own controller (v1.9.1, or `ARGO_VERSION`, and the newest
//! 1.10 release that builds here, built from its Go module by `scripts/build-argo-rollouts.sh`): Argo brings a canary Rollout to a state, Argo stops,
//! Sluice takes over, Sluice stops, Argo takes over again; at neither swap is a ReplicaSet
//! created, deleted or scaled, or a pod replaced, and the Rollout keeps its revision, phase,
//! step and hashes. Then the update is finished under Argo.
//!
//! Two states: a Healthy Rollout, and one paused at its first step (setWeight, then an
//! indefinite pause) after an image change. These swaps run one controller at a time, without
//! leader election; a third test swaps the paused Rollout the way the README's migration does,
//! both controllers campaigning for Argo's Lease.
//!
//! How long each controller is watched: both reconcile every Rollout as soon as their caches
//! have synced, and both are started here with a 5 s resync, so within the 15 s watched each
//! has looked at the Rollout at least three times with the same inputs (for Argo, the test
//! checks its log for it). Nothing in these Rollouts waits on a clock (no timed pause, no
//! scale-down delay, a progress deadline of 10 minutes), so what a controller does not do in
//! those reconciles it would not do later either.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{ListParams, WatchEvent, WatchParams};
use serde_json::json;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::harness::{ARGO_1_10, ArgoController, TestEnv, TestNamespace, wait_for};
use sluice_e2e::*;
use sluice_engine::ReplicaSetExt;
use tokio::task::JoinHandle;

const NAME: &str = "round-trip";
const OLD_IMAGE: &str = "registry.example/app:1";
const NEW_IMAGE: &str = "registry.example/app:2";

/// How long each controller is watched after it takes over (see the module's comment).
const QUIET: Duration = Duration::from_secs(15);
/// Both controllers reconcile every Rollout at least this often.
const RESYNC_SECONDS: u64 = 5;
const ARGO_FLAGS: &[&str] = &["--rollout-resync", "5"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthy_canary_goes_argo_sluice_argo_without_a_pod_replaced() {
    round_trip(State::Healthy, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn canary_paused_at_its_first_step_goes_argo_sluice_argo_without_a_pod_replaced() {
    round_trip(State::PausedAtFirstStep, None).await;
}

/// The same with the newest Argo 1.10 release that builds here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn canary_paused_at_its_first_step_goes_argo_1_10_sluice_argo_1_10_without_a_pod_replaced() {
    round_trip(State::PausedAtFirstStep, Some(ARGO_1_10)).await;
}

/// Argo's controller of `version`, or of `ARGO_VERSION` (1.9.1 by default).
async fn start_argo(env: &TestEnv, ns: &TestNamespace, version: Option<&str>) -> ArgoController {
    let started = match version {
        Some(v) => ArgoController::start_version(env, ns.name(), ARGO_FLAGS, v).await,
        None => ArgoController::start(env, ns.name(), ARGO_FLAGS).await,
    };
    started.unwrap_or_else(|e| panic!("starting Argo Rollouts: {e:#}"))
}

/// Argo's Lease, as Argo writes it (`--leader-election-lease-duration 4s`): short, so that
/// Sluice takes it over soon after Argo stops without releasing it, as Argo stops.
const ARGO_LEASE_FLAGS: &[&str] = &[
    "--rollout-resync",
    "5",
    "--leader-elect=true",
    "--leader-election-lease-duration",
    "4s",
    "--leader-election-renew-deadline",
    "3s",
    "--leader-election-retry-period",
    "500ms",
];
/// Sluice's lease duration: long, so that Argo taking the Lease within `HANDOVER` of Sluice's
/// shutdown shows that Sluice released it.
const SLUICE_LEASE_DURATION: Duration = Duration::from_secs(15);
const HANDOVER: Duration = Duration::from_secs(5);
/// How long the second controller is watched following while the first holds the Lease.
const FOLLOW: Duration = Duration::from_secs(5);
const SLUICE_IDENTITY: &str = "sluice-e2e";

/// The migration the README describes, with Argo's own controller: Sluice started beside a
/// leading Argo on Argo's Lease (`argo-rollouts-controller-lock`, same namespace) only follows;
/// Argo stopped, Sluice takes the Lease once it expires and carries on with a Rollout Argo left
/// paused at a step, with no pod replaced, and finishes the update. Then back: Argo started beside
/// the leading Sluice follows; Sluice shut down releases the Lease, Argo leads at once and
/// nothing moves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_canary_changes_hands_on_argos_lease_without_a_pod_replaced() {
    let env = TestEnv::with_crds().await.expect("local control plane");
    let ns = TestNamespace::create(&env, "argo-lease-handover")
        .await
        .expect("namespace");
    let api = rollouts(&ns);

    // Argo leads and brings the Rollout to its first step's pause.
    let argo = ArgoController::start(&env, ns.name(), ARGO_LEASE_FLAGS)
        .await
        .unwrap_or_else(|e| panic!("starting Argo Rollouts: {e:#}"));
    ns.apply_yaml(&canary_rollout(
        NAME,
        4,
        OLD_IMAGE,
        json!([{"setWeight": 25}, {"pause": {}}]),
        json!({}),
    ))
    .await
    .expect("rollout");
    wait_phase(&api, NAME, RolloutPhase::Healthy, TIMEOUT).await;
    wait_replicas(&ns, NAME, &[(OLD_IMAGE, 4)], TIMEOUT).await;
    wait_argo_idle(&argo, &ns).await;
    set_image(&api, NAME, NEW_IMAGE).await;
    wait_phase(&api, NAME, RolloutPhase::Paused, TIMEOUT).await;
    wait_replicas(&ns, NAME, &[(OLD_IMAGE, 3), (NEW_IMAGE, 1)], TIMEOUT).await;
    let argos_stable = api
        .get(NAME)
        .await
        .expect("rollout")
        .status
        .and_then(|s| s.stable_rs)
        .expect("Argo recorded a stable ReplicaSet");
    let argo_version = argo.version().unwrap_or_else(|| "(unknown version)".into());

    // Sluice campaigns beside it and only follows.
    let watch = Watch::begin(&ns).await;
    let sluice = start_sluice_on_argos_lease(&env, &ns).await;
    tokio::time::sleep(FOLLOW).await;
    assert!(
        !sluice.is_leader(),
        "Sluice leads while Argo holds the Lease"
    );
    assert!(
        !sluice_announced(&ns).await,
        "Sluice reconciled {NAME} while following"
    );

    // Argo stops without releasing the Lease; Sluice takes it when it expires.
    argo.stop().await.expect("stopping Argo Rollouts");
    tokio::time::timeout(Duration::from_secs(15), sluice.gate().wait_for(true))
        .await
        .expect("Sluice leads within 15 s of Argo's stop (a 4 s Lease)");
    let who = format!("Sluice, taking the Lease over from Argo Rollouts {argo_version}");
    watch.hold(&ns, QUIET - FOLLOW, &who).await;
    assert!(
        sluice_announced(&ns).await,
        "Sluice did not reconcile {NAME} once leading"
    );

    // The update finishes under Sluice.
    promote(&api, NAME).await;
    let stable = wait_promoted(&api, NAME, &argos_stable).await;
    wait_replicas(&ns, NAME, &[(OLD_IMAGE, 0), (NEW_IMAGE, 4)], TIMEOUT).await;

    // Argo campaigns beside the leading Sluice and only follows; Sluice shut down releases the
    // Lease and Argo leads at once.
    let watch = Watch::begin(&ns).await;
    let mut argo = ArgoController::spawn(&env, ns.name(), ARGO_LEASE_FLAGS)
        .await
        .unwrap_or_else(|e| panic!("starting Argo Rollouts again: {e:#}"));
    tokio::time::sleep(FOLLOW).await;
    assert!(
        !argo.workers_running(),
        "Argo runs its workers while Sluice holds the Lease; log {}",
        argo.log_path().display()
    );
    sluice.shutdown().await.expect("Sluice shuts down");
    argo.wait_started(HANDOVER).await.unwrap_or_else(|e| {
        panic!("Argo did not lead within {HANDOVER:?} of Sluice's shutdown (a 15 s Lease): {e:#}")
    });
    let who = format!("Argo Rollouts {argo_version}, taking the Lease back from Sluice");
    watch.hold(&ns, QUIET - FOLLOW, &who).await;
    let reconciles = argo_reconciles(&argo);
    assert!(
        reconciles >= 2,
        "Argo Rollouts reconciled {NAME} {reconciles} times once leading; log {}",
        argo.log_path().display()
    );
    let names = replica_set_names(&ns).await;
    assert_eq!(
        names.len(),
        2,
        "one ReplicaSet per revision, the stable one {NAME}-{stable}: {names:?}"
    );
    argo.stop().await.expect("stopping Argo Rollouts");
}

/// A Sluice controller for `ns` campaigning for Argo's Lease (`argo-rollouts-controller-lock`,
/// the default name) in `ns`, as the README's migration runs it beside Argo.
async fn start_sluice_on_argos_lease(
    env: &TestEnv,
    ns: &TestNamespace,
) -> sluice_controller::ControllerHandle {
    let mut args = controller_args(ns.name());
    args.rollout_resync = RESYNC_SECONDS;
    args.leader_elect = true;
    args.leader_election_namespace = Some(ns.name().to_string());
    args.leader_election_identity = Some(SLUICE_IDENTITY.into());
    args.leader_election_lease_duration = SLUICE_LEASE_DURATION;
    args.leader_election_renew_deadline = Duration::from_secs(10);
    args.leader_election_retry_period = Duration::from_millis(500);
    assert_eq!(args.lease_name(), "argo-rollouts-controller-lock");
    sluice_controller::install_crypto_provider();
    sluice_controller::init_logging(&args);
    sluice_controller::start(env.config().clone(), &args, Default::default())
        .await
        .expect("starting Sluice")
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    Healthy,
    PausedAtFirstStep,
}

async fn round_trip(state: State, version: Option<&str>) {
    let env = TestEnv::with_crds().await.expect("local control plane");
    let prefix = match (state, version) {
        (State::Healthy, _) => "argo-round-trip-healthy",
        (State::PausedAtFirstStep, None) => "argo-round-trip-paused",
        (State::PausedAtFirstStep, Some(_)) => "argo-round-trip-paused-version",
    };
    let ns = TestNamespace::create(&env, prefix)
        .await
        .expect("namespace");
    let api = rollouts(&ns);

    // Argo brings the Rollout to the state.
    let argo = start_argo(&env, &ns, version).await;
    ns.apply_yaml(&canary_rollout(
        NAME,
        4,
        OLD_IMAGE,
        json!([{"setWeight": 25}, {"pause": {}}]),
        json!({}),
    ))
    .await
    .expect("rollout");
    wait_phase(&api, NAME, RolloutPhase::Healthy, TIMEOUT).await;
    wait_replicas(&ns, NAME, &[(OLD_IMAGE, 4)], TIMEOUT).await;
    if state == State::PausedAtFirstStep {
        wait_argo_idle(&argo, &ns).await;
        set_image(&api, NAME, NEW_IMAGE).await;
        wait_phase(&api, NAME, RolloutPhase::Paused, TIMEOUT).await;
        wait_replicas(&ns, NAME, &[(OLD_IMAGE, 3), (NEW_IMAGE, 1)], TIMEOUT).await;
    }
    let argos_stable = api
        .get(NAME)
        .await
        .expect("rollout")
        .status
        .and_then(|s| s.stable_rs)
        .expect("Argo recorded a stable ReplicaSet");
    let argo_version = argo.version().unwrap_or_else(|| "(unknown version)".into());
    argo.stop().await.expect("stopping Argo Rollouts");

    // Sluice takes over.
    assert!(
        !sluice_announced(&ns).await,
        "an event looks like Sluice's before Sluice ran"
    );
    let watch = Watch::begin(&ns).await;
    let mut args = controller_args(ns.name());
    args.rollout_resync = RESYNC_SECONDS;
    let sluice = start_controller_with_args(env.client(), args);
    let who = format!("Sluice, taking over from Argo Rollouts {argo_version}");
    watch.hold(&ns, QUIET, &who).await;
    assert!(
        sluice_announced(&ns).await,
        "Sluice did not reconcile {NAME} within {QUIET:?} (no RolloutAddedToInformer of its own)"
    );
    sluice.stop().await;

    // Argo takes over again.
    let watch = Watch::begin(&ns).await;
    let argo = start_argo(&env, &ns, version).await;
    let who = format!("Argo Rollouts {argo_version}, taking over from Sluice");
    watch.hold(&ns, QUIET, &who).await;
    let reconciles = argo_reconciles(&argo);
    assert!(
        reconciles >= 2,
        "Argo Rollouts reconciled {NAME} {reconciles} times in {QUIET:?} (a {RESYNC_SECONDS} s \
         resync); log {}",
        argo.log_path().display()
    );

    // The update finishes under Argo.
    if state == State::Healthy {
        wait_argo_idle(&argo, &ns).await;
        set_image(&api, NAME, NEW_IMAGE).await;
        wait_phase(&api, NAME, RolloutPhase::Paused, TIMEOUT).await;
        wait_replicas(&ns, NAME, &[(OLD_IMAGE, 3), (NEW_IMAGE, 1)], TIMEOUT).await;
    }
    wait_argo_idle(&argo, &ns).await;
    promote(&api, NAME).await;
    let stable = wait_promoted(&api, NAME, &argos_stable).await;
    wait_replicas(&ns, NAME, &[(OLD_IMAGE, 0), (NEW_IMAGE, 4)], TIMEOUT).await;
    let names = replica_set_names(&ns).await;
    assert_eq!(
        names.len(),
        2,
        "one ReplicaSet per revision, the stable one {NAME}-{stable}: {names:?}"
    );
    argo.stop().await.expect("stopping Argo Rollouts");
}

/// Waits until Argo has reconciled the Rollout as it is now and is not reconciling it: a user's
/// change made while Argo ends a reconcile that wrote the Rollout can be lost to Argo (see
/// [`ArgoController::idle_at`]), a race of Argo's, not of the takeover.
async fn wait_argo_idle(argo: &ArgoController, ns: &TestNamespace) {
    let api = rollouts(ns);
    wait_for(
        "Argo Rollouts to be idle on the Rollout",
        TIMEOUT,
        || async {
            let version = api.get(NAME).await?.resource_version().unwrap_or_default();
            anyhow::ensure!(
                argo.idle_at(ns.name(), NAME, &version),
                "not idle at resourceVersion {version}"
            );
            // Still idle a moment later, at the same version: no reconcile was about to start.
            tokio::time::sleep(Duration::from_millis(500)).await;
            let again = api.get(NAME).await?.resource_version().unwrap_or_default();
            anyhow::ensure!(
                again == version && argo.idle_at(ns.name(), NAME, &version),
                "busy again after resourceVersion {version}"
            );
            Ok(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}"));
}

/// How many reconciles of the Rollout Argo has logged.
fn argo_reconciles(argo: &ArgoController) -> usize {
    let field = format!("rollout={NAME}");
    argo.log()
        .lines()
        .filter(|l| l.contains(r#"msg="Reconciliation completed""#))
        .filter(|l| l.split_whitespace().any(|f| f == field))
        .count()
}

/// Whether Sluice has reconciled the Rollout: its first reconcile in a process announces the
/// Rollout with `RolloutAddedToInformer`, an events.k8s.io Event with an `eventTime` (Argo's
/// recorder writes core Events, which have none).
async fn sluice_announced(ns: &TestNamespace) -> bool {
    ns.api::<k8s_openapi::api::events::v1::Event>()
        .list(&ListParams::default())
        .await
        .expect("list events")
        .items
        .iter()
        .any(|e| {
            e.reason.as_deref() == Some("RolloutAddedToInformer")
                && e.event_time.is_some()
                && e.regarding
                    .as_ref()
                    .is_some_and(|r| r.name.as_deref() == Some(NAME))
        })
}

async fn replica_set_names(ns: &TestNamespace) -> Vec<String> {
    ns.api::<ReplicaSet>()
        .list(&ListParams::default())
        .await
        .expect("list ReplicaSets")
        .items
        .iter()
        .map(|rs| rs.name_any())
        .collect()
}

/// What a takeover must leave as it is.
#[derive(Debug, PartialEq)]
struct Snapshot {
    /// Name -> spec.replicas.
    replica_sets: BTreeMap<String, i32>,
    /// UID -> name of each pod, and whether it is being deleted.
    pods: BTreeMap<String, (String, bool)>,
    rollout: RolloutMarks,
}

/// The Rollout's record of where it is.
#[derive(Debug, PartialEq)]
struct RolloutMarks {
    revision: Option<String>,
    phase: Option<RolloutPhase>,
    current_step_index: Option<i32>,
    stable_rs: Option<String>,
    current_pod_hash: Option<String>,
    paused: bool,
}

impl Snapshot {
    /// The snapshot, and the resourceVersions of the ReplicaSet and pod lists it was made from.
    async fn take(ns: &TestNamespace) -> (Snapshot, String, String) {
        let sets = ns
            .api::<ReplicaSet>()
            .list(&ListParams::default())
            .await
            .expect("list ReplicaSets");
        let pods = ns
            .api::<Pod>()
            .list(&ListParams::default())
            .await
            .expect("list pods");
        let ro = rollouts(ns).get(NAME).await.expect("rollout");
        let status = ro.status.clone().unwrap_or_default();
        let snapshot = Snapshot {
            replica_sets: sets
                .items
                .iter()
                .map(|rs| (rs.name_any(), rs.spec_replicas()))
                .collect(),
            pods: pods
                .items
                .iter()
                .map(|p| {
                    (
                        p.uid().unwrap_or_default(),
                        (p.name_any(), p.metadata.deletion_timestamp.is_some()),
                    )
                })
                .collect(),
            rollout: RolloutMarks {
                revision: ro
                    .annotations()
                    .get("rollout.argoproj.io/revision")
                    .cloned(),
                phase: observed_phase(&ro),
                current_step_index: status.current_step_index,
                stable_rs: status.stable_rs,
                current_pod_hash: status.current_pod_hash,
                paused: status.pause_conditions.is_some_and(|c| !c.is_empty()),
            },
        };
        (
            snapshot,
            sets.metadata.resource_version.unwrap_or_default(),
            pods.metadata.resource_version.unwrap_or_default(),
        )
    }
}

/// Records every ReplicaSet created, deleted or scaled and every pod created or deleted in the
/// namespace from the moment it begins.
struct Watch {
    before: Snapshot,
    moves: Arc<Mutex<Vec<String>>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Watch {
    async fn begin(ns: &TestNamespace) -> Watch {
        let (before, sets_version, pods_version) = Snapshot::take(ns).await;
        let moves = Arc::new(Mutex::new(Vec::new()));
        let params = WatchParams::default().timeout(290);
        let sets = ns
            .api::<ReplicaSet>()
            .watch(&params, &sets_version)
            .await
            .expect("watch ReplicaSets");
        let pods = ns
            .api::<Pod>()
            .watch(&params, &pods_version)
            .await
            .expect("watch pods");
        let tasks = vec![
            tokio::spawn(record_replica_sets(
                sets.boxed(),
                before.replica_sets.clone(),
                moves.clone(),
            )),
            tokio::spawn(record_pods(pods.boxed(), moves.clone())),
        ];
        Watch {
            before,
            moves,
            tasks,
        }
    }

    /// Waits `during`, then fails naming `who` if anything moved or the Rollout's record of
    /// where it is changed.
    async fn hold(self, ns: &TestNamespace, during: Duration, who: &str) {
        tokio::time::sleep(during).await;
        let (after, _, _) = Snapshot::take(ns).await;
        for task in &self.tasks {
            task.abort();
        }
        let moves = self.moves.lock().expect("moves").clone();
        assert!(
            moves.is_empty() && after == self.before,
            "{who}: within {during:?} of taking over, something moved.\n\
             what happened:\n  {}\nbefore: {:#?}\nafter: {:#?}",
            if moves.is_empty() {
                "(no ReplicaSet or pod event)".to_string()
            } else {
                moves.join("\n  ")
            },
            self.before,
            after
        );
    }
}

async fn record_replica_sets(
    mut events: impl Stream<Item = kube::Result<WatchEvent<ReplicaSet>>> + Unpin,
    mut replicas: BTreeMap<String, i32>,
    moves: Arc<Mutex<Vec<String>>>,
) {
    while let Some(event) = events.next().await {
        let seen = match event {
            Ok(WatchEvent::Added(rs)) => {
                replicas.insert(rs.name_any(), rs.spec_replicas());
                Some(format!(
                    "ReplicaSet {} created with {} replicas",
                    rs.name_any(),
                    rs.spec_replicas()
                ))
            }
            Ok(WatchEvent::Modified(rs)) => {
                let now = rs.spec_replicas();
                match replicas.insert(rs.name_any(), now) {
                    Some(was) if was == now => None,
                    was => Some(format!(
                        "ReplicaSet {} scaled from {was:?} to {now}",
                        rs.name_any()
                    )),
                }
            }
            Ok(WatchEvent::Deleted(rs)) => Some(format!("ReplicaSet {} deleted", rs.name_any())),
            Ok(WatchEvent::Bookmark(_)) => None,
            Ok(WatchEvent::Error(e)) => Some(format!("ReplicaSet watch error: {e}")),
            Err(e) => Some(format!("ReplicaSet watch error: {e}")),
        };
        if let Some(seen) = seen {
            moves.lock().expect("moves").push(seen);
        }
    }
}

async fn record_pods(
    mut events: impl Stream<Item = kube::Result<WatchEvent<Pod>>> + Unpin,
    moves: Arc<Mutex<Vec<String>>>,
) {
    let mut deleting = std::collections::BTreeSet::new();
    while let Some(event) = events.next().await {
        let seen = match event {
            Ok(WatchEvent::Added(pod)) => Some(format!("pod {} created", pod.name_any())),
            Ok(WatchEvent::Modified(pod))
                if pod.metadata.deletion_timestamp.is_some() && deleting.insert(pod.name_any()) =>
            {
                Some(format!("pod {} being deleted", pod.name_any()))
            }
            Ok(WatchEvent::Modified(_) | WatchEvent::Bookmark(_)) => None,
            Ok(WatchEvent::Deleted(pod)) => Some(format!("pod {} deleted", pod.name_any())),
            Ok(WatchEvent::Error(e)) => Some(format!("pod watch error: {e}")),
            Err(e) => Some(format!("pod watch error: {e}")),
        };
        if let Some(seen) = seen {
            moves.lock().expect("moves").push(seen);
        }
    }
}
