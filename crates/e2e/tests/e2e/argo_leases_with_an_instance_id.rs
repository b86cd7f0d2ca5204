//! With `--instance-id`, Argo Rollouts 1.9 elects on `argo-rollouts-controller-lock` and 1.10
//! on `argo-rollouts-controller-lock-<id>`. Here each of Argo's own controllers (1.9.1 and the
//! newest 1.10 that builds here) leads with an instance id, and a Sluice controller of the same
//! instance beside it only follows; once Argo stops, Sluice leads and carries an update through;
//! an Argo controller started beside the leading Sluice only follows, and leads once Sluice
//! shuts down.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use serde_json::json;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::harness::{ARGO_1_10, ArgoController, TestEnv, TestNamespace};
use sluice_e2e::*;

const NAME: &str = "sharded";
const INSTANCE: &str = "team-a";
const OLD_IMAGE: &str = "registry.example/app:1";
const NEW_IMAGE: &str = "registry.example/app:2";
/// Argo's Lease is short, so that Sluice takes it over soon after Argo stops without releasing
/// it (as Argo stops).
const ARGO_FLAGS: &[&str] = &[
    "--instance-id",
    INSTANCE,
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
/// How long the second controller is watched following while the first leads.
const FOLLOW: Duration = Duration::from_secs(6);
/// Sluice's Lease is long: Argo leading within `HANDOVER` of Sluice's shutdown shows that Sluice
/// released what Argo waits for.
const HANDOVER: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argo_1_9_with_an_instance_id_and_sluice_exclude_each_other() {
    exclusion("1.9.1", "argo-rollouts-controller-lock").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argo_1_10_with_an_instance_id_and_sluice_exclude_each_other() {
    exclusion(ARGO_1_10, "argo-rollouts-controller-lock-team-a").await;
}

async fn holder(ns: &TestNamespace, lease: &str) -> Option<String> {
    let leases: kube::Api<Lease> = ns.api();
    leases.get(lease).await.ok()?.spec?.holder_identity
}

async fn start_sluice(env: &TestEnv, ns: &TestNamespace) -> sluice_controller::ControllerHandle {
    let mut args = controller_args(ns.name());
    args.instance_id = INSTANCE.into();
    args.rollout_resync = 5;
    args.leader_elect = true;
    args.leader_election_namespace = Some(ns.name().to_string());
    args.leader_election_identity = Some("sluice-e2e".into());
    args.leader_election_lease_duration = Duration::from_secs(15);
    args.leader_election_renew_deadline = Duration::from_secs(10);
    args.leader_election_retry_period = Duration::from_millis(500);
    sluice_controller::install_crypto_provider();
    sluice_controller::init_logging(&args);
    sluice_controller::start(env.config().clone(), &args, Default::default())
        .await
        .expect("starting Sluice")
}

async fn exclusion(version: &str, argos_lease: &str) {
    let env = TestEnv::with_crds().await.expect("local control plane");
    let ns = TestNamespace::create(&env, &format!("lease-argo-{}", version.replace('.', "")))
        .await
        .expect("namespace");
    let api = rollouts(&ns);

    // Argo leads and runs the Rollout of its instance.
    let argo = ArgoController::start_version(&env, ns.name(), ARGO_FLAGS, version)
        .await
        .unwrap_or_else(|e| panic!("starting Argo Rollouts {version}: {e:#}"));
    let mut rollout: serde_json::Value =
        serde_json::from_str(&canary_rollout(NAME, 2, OLD_IMAGE, json!([]), json!({}))).unwrap();
    rollout["metadata"]["labels"] =
        json!({"argo-rollouts.argoproj.io/controller-instance-id": INSTANCE});
    ns.apply_yaml(&rollout.to_string()).await.expect("rollout");
    wait_phase(&api, NAME, RolloutPhase::Healthy, TIMEOUT).await;
    let argos = holder(&ns, argos_lease).await.unwrap_or_default();
    assert!(
        !argos.is_empty() && argos != "sluice-e2e",
        "Argo {version} holds {argos_lease}"
    );

    // Sluice of the same instance only follows.
    let sluice = start_sluice(&env, &ns).await;
    tokio::time::sleep(FOLLOW).await;
    assert!(!sluice.is_leader(), "Sluice leads beside Argo {version}");
    assert_eq!(
        holder(&ns, argos_lease).await.as_deref(),
        Some(argos.as_str())
    );

    // Argo stops without releasing its Lease; Sluice leads once it expires, and acts.
    argo.stop().await.expect("stopping Argo Rollouts");
    tokio::time::timeout(Duration::from_secs(20), sluice.gate().wait_for(true))
        .await
        .expect("Sluice leads once Argo's 4 s Lease has expired");
    assert_eq!(
        holder(&ns, argos_lease).await.as_deref(),
        Some("sluice-e2e")
    );
    set_image(&api, NAME, NEW_IMAGE).await;
    wait_replicas(&ns, NAME, &[(NEW_IMAGE, 2)], TIMEOUT).await;
    wait_phase(&api, NAME, RolloutPhase::Healthy, TIMEOUT).await;

    // Argo started beside the leading Sluice only follows, and leads once Sluice shuts down.
    let mut argo = ArgoController::spawn_version(&env, ns.name(), ARGO_FLAGS, version)
        .await
        .unwrap_or_else(|e| panic!("starting Argo Rollouts {version} again: {e:#}"));
    tokio::time::sleep(FOLLOW).await;
    assert!(
        !argo.workers_running(),
        "Argo {version} runs its workers while Sluice leads; log {}",
        argo.log_path().display()
    );
    sluice.shutdown().await.expect("Sluice shuts down");
    argo.wait_started(HANDOVER).await.unwrap_or_else(|e| {
        panic!("Argo {version} did not lead within {HANDOVER:?} of Sluice's shutdown: {e:#}")
    });
    // Only the end of the test: now and then Argo 1.9.1 hangs in its shutdown after "All
    // analysis workers have stopped" and is killed 10 s on, which is not for this test to judge.
    if let Err(e) = argo.stop().await {
        eprintln!("stopping Argo Rollouts {version}: {e:#}");
    }
}
