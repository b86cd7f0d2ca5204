//! A fixed dozen of generated live scenarios (`sluice_e2e::live`), each played at once under
//! Argo Rollouts 1.9.1's own controller and under Sluice on the local control plane, compared
//! at every settle point and by their events. `make conformance` plays 200 more
//! (`sluice-live-conformance`).

use sluice_e2e::harness::{ArgoController, TestEnv, TestNamespace};
use sluice_e2e::live::{Scenario, play};

async fn side_by_side(seed: u64) {
    let scenario = Scenario::generate(seed);
    let env = TestEnv::with_crds().await.expect("local control plane");
    let sluice = TestNamespace::create(&env, &format!("live-{seed}-sluice"))
        .await
        .expect("namespace");
    let argo = TestNamespace::create(&env, &format!("live-{seed}-argo"))
        .await
        .expect("namespace");
    let _controller = sluice_e2e::start_controller(&env, &sluice);
    let _argo = ArgoController::start(&env, argo.name(), &[])
        .await
        .expect("Argo Rollouts' controller");
    let outcome = play(&scenario, &sluice, &argo).await;
    // What differs by design is on the differences page, by its key.
    let page = std::fs::read_to_string(env.repo_root().join("docs/differences-from-argo.md"))
        .expect("docs/differences-from-argo.md");
    for key in &outcome.documented {
        assert!(
            page.contains(&format!("`{key}`")),
            "{key:?} is not on docs/differences-from-argo.md"
        );
    }
    assert!(
        outcome.differences.is_empty(),
        "{scenario:#?}\n{} of {} settle points differ:\n{}",
        outcome.differences.len(),
        outcome.settle_points,
        outcome.differences.join("\n")
    );
}

macro_rules! scenarios {
    ($($name:ident: $seed:expr,)*) => {
        $(
            #[tokio::test]
            async fn $name() {
                side_by_side($seed).await;
            }
        )*
    };
}

scenarios! {
    scenario_1: 1,
    scenario_2: 2,
    scenario_3: 3,
    scenario_4: 4,
    scenario_5: 5,
    scenario_6: 6,
    scenario_7: 7,
    scenario_8: 8,
    scenario_9: 9,
    scenario_10: 10,
    scenario_11: 11,
    scenario_12: 12,
}
