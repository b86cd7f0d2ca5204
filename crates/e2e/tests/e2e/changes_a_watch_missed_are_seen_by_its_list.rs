//! Changes a watch never delivered are acted on once it lists again.
//!
//! The soak under control-plane faults found this: with kube-apiserver SIGKILLed right after a
//! thousand image changes, four Rollouts kept `observedGeneration` 1 under generation 2 for five
//! minutes (docs/benchmarks.md). The watch, lagging by seconds, lost the last changes with its
//! connection, and the list it made once the API server was back held them; but kube-runtime's
//! `Controller` reads the object it reconciles from the cache, which takes a list whole at its
//! end, while the list's objects triggered their reconciles as they arrived. Those that ran
//! before the list ended decided on the version from before it, found nothing to do, and
//! nothing triggered them again (`crates/watch/src/lib.rs`).
//!
//! Here the `sluice-controller` process talks to the API server through a [`FaultProxy`],
//! which answers lists in pages of [`PAGE`] objects (the client asks for 500), so that
//! [`ROLLOUTS`] Rollouts without pods take several pages, as 1,000 do. They are Healthy. The
//! proxy holds back everything the controller's watches receive while every image
//! changes, the last ones first in name order (so that the list's first page holds them);
//! then it cuts every watch (what was held back is lost with the connections) and answers the
//! Rollout watch's next start with a 410, so that it lists again, as after the API server's
//! restart. Every Rollout must have observed its new generation within [`BOUND`] of the cut:
//! less than the resync (the default, 15 minutes) and the Rollout watch's five-minute list.
//!
//! The check is shown to fail: the same run with the bug planted
//! (`SLUICE_TEST_PLANT=early-list-objects`: a list's objects reconciled as they arrive) leaves
//! Rollouts behind at the bound.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use futures::{StreamExt as _, TryStreamExt as _};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use sluice_api::Rollout;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::harness::{TestEnv, TestNamespace, wait_for};
use sluice_e2e::process::ControllerProcess;
use sluice_e2e::*;
use sluice_testenv::fault_proxy::{Action, FaultProxy, Faults, Requests, Rule};

/// The most objects a page of a list holds, through the proxy.
const PAGE: u32 = 50;
/// Three pages of a list.
const ROLLOUTS: usize = 150;
/// From the cut to every change observed.
const BOUND: Duration = Duration::from_secs(30);
/// Image changes in flight at once.
const CONCURRENCY: usize = 32;

fn name(i: usize) -> String {
    format!("r{i:03}")
}

/// The image of `name` changed to `app:v2`, sent again if the connection failed (the patch
/// sets a value, so a second one that lands changes nothing; the container list it replaces
/// is that one container).
async fn change_image(api: &Api<Rollout>, name: &str) {
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "app:v2"}]}}}});
    for attempt in 1.. {
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return,
            Err(e) if attempt < 5 => eprintln!("changing {name}'s image, again: {e}"),
            Err(e) => panic!("changing {name}'s image: {e}"),
        }
    }
}

/// Whether the controller has seen the Rollout's current generation.
fn observed(ro: &Rollout) -> bool {
    let generation = ro.metadata.generation.map(|g| g.to_string());
    ro.status
        .as_ref()
        .is_some_and(|s| s.observed_generation.is_some() && s.observed_generation == generation)
}

/// The Rollouts whose current generation the controller has not observed yet.
async fn unobserved(ns: &TestNamespace) -> anyhow::Result<BTreeSet<String>> {
    let list = rollouts(ns).list(&ListParams::default()).await?;
    Ok(list
        .items
        .iter()
        .filter(|ro| !observed(ro))
        .filter_map(|ro| ro.metadata.name.clone())
        .collect())
}

/// The Rollouts, Healthy on `app:v1` under a controller started with `planted` in its
/// environment; every image changed while the watches are held back, then the watches cut and
/// the Rollout watch made to list again. Returns the Rollouts whose change was still
/// unobserved at [`BOUND`] after the cut, and how long the last one took.
async fn run(env: &TestEnv, label: &str, planted: &[(&str, &str)]) -> (BTreeSet<String>, Duration) {
    let ns = TestNamespace::create(env, label).await.unwrap();
    let api = rollouts(&ns);
    futures::stream::iter(0..ROLLOUTS)
        .map(|i| {
            let api = &api;
            async move {
                let rollout: Rollout = serde_json::from_str(&canary_rollout(
                    &name(i),
                    0,
                    "app:v1",
                    json!([]),
                    json!({}),
                ))?;
                api.create(&PostParams::default(), &rollout).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<()>()
        .await
        .unwrap();
    let proxy = FaultProxy::start(env.config().clone(), Faults::none())
        .await
        .unwrap();
    proxy.limit_pages(PAGE);
    let proxied = std::env::temp_dir().join(format!("kubeconfig-{}", ns.name()));
    std::fs::write(&proxied, proxy.kubeconfig()).unwrap();
    let mut controller = ControllerProcess::start_with(
        env,
        &proxied,
        label,
        // The default resync, as the soak's: a resync every 30 s (the tests' default) would
        // also find what the lists miss, only later.
        &[
            "--namespaced",
            "--namespace",
            ns.name(),
            "--rollout-resync",
            "900",
        ],
        planted,
    )
    .await
    .unwrap();
    let started = Instant::now();
    wait_for(
        "every Rollout Healthy",
        Duration::from_secs(300),
        || async {
            let list = rollouts(&ns).list(&ListParams::default()).await?;
            let healthy = list
                .items
                .iter()
                .filter(|ro| observed_phase(ro) == Some(RolloutPhase::Healthy))
                .count();
            anyhow::ensure!(healthy == ROLLOUTS, "{healthy} of {ROLLOUTS} Healthy");
            Ok(())
        },
    )
    .await
    .unwrap();
    eprintln!("{label}: {ROLLOUTS} Healthy in {:.0?}", started.elapsed());

    // Last the first in name order: a list's first page holds them, and the reconciles the
    // list triggers start while the rest of it is on its way.
    proxy.hold_watches(true);
    futures::stream::iter((0..ROLLOUTS).rev())
        .map(|i| {
            let api = &api;
            async move { change_image(api, &name(i)).await }
        })
        .buffer_unordered(CONCURRENCY)
        .collect::<()>()
        .await;
    // The Rollout watch's next start is refused as a watch from a revision the API server no
    // longer serves: it lists again. Only for a moment, so that it lists once.
    proxy.set_rules(vec![Rule {
        path_prefix: format!(
            "/apis/argoproj.io/v1alpha1/namespaces/{}/rollouts",
            ns.name()
        ),
        requests: Requests::Watches,
        action: Action::Status(410),
    }]);
    let cut = proxy.cut_watches();
    let back = Instant::now();
    proxy.hold_watches(false);
    let refused = || {
        proxy
            .injected()
            .get("rule-status-410")
            .copied()
            .unwrap_or(0)
    };
    while refused() == 0 {
        assert!(
            back.elapsed() < Duration::from_secs(10),
            "{label}: the Rollout watch did not start again ({cut} watches cut)"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    proxy.set_rules(Vec::new());

    let mut left = BTreeSet::new();
    while back.elapsed() < BOUND {
        match unobserved(&ns).await {
            Ok(now) if now.is_empty() => {
                left.clear();
                break;
            }
            Ok(now) => left = now,
            Err(e) => eprintln!("{label}: listing: {e:#}"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let took = back.elapsed();
    assert!(
        controller.ended_by_signal().is_none(),
        "{label}: the controller ended:\n{}",
        controller.log()
    );
    eprintln!(
        "{label}: {} of {ROLLOUTS} changes unobserved {:.0?} after the cut{}",
        left.len(),
        took,
        if left.is_empty() {
            String::new()
        } else {
            format!(": {:?}", left.iter().take(10).collect::<Vec<_>>())
        }
    );
    controller.kill();
    std::fs::remove_file(&proxied).ok();
    (left, took)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_a_watch_missed_are_seen_by_its_list() {
    let started = Instant::now();
    sluice_controller::install_crypto_provider();
    let env = TestEnv::with_crds().await.expect("the local control plane");

    let planted = [("SLUICE_TEST_PLANT", "early-list-objects")];
    let (missed, _) = run(&env, "planted", &planted).await;
    assert!(
        !missed.is_empty(),
        "with a list's objects reconciled as they arrive, every change was still seen within \
         {BOUND:?}: the test does not reach the fault it is for"
    );

    let (missed, took) = run(&env, "sluice", &[]).await;
    assert!(
        missed.is_empty(),
        "{} Rollouts never observed their change within {BOUND:?} of the cut: {missed:?}",
        missed.len()
    );
    eprintln!(
        "every change observed {took:.0?} after the cut; done in {:.0?}",
        started.elapsed()
    );
}
