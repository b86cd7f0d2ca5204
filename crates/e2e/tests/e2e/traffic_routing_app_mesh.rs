//! AWS App Mesh traffic routing on the real control plane, with Argo's App Mesh example
//! (`examples/appmesh`): the VirtualRouter's weighted targets carry Argo's weights at every
//! step (0/100, 25, 50, 75, 100 at the end of the steps, back to 0 once promoted, 0 at once on
//! abort), and the VirtualNodes' `rollouts-pod-template-hash` selectors name the stable and
//! canary pods (the canary node `canary-hash` while no update is under way), with the
//! managed-by annotation.

use serde_json::Value;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::routing::*;
use sluice_e2e::*;
use sluice_testenv::harness::{TestNamespace, parse_documents, wait_for};

const ROLLOUT: &str = "my-rollout";
const ROUTER: &str = "my-vrouter";
const CANARY_NODE: &str = "my-vn-canary";
const STABLE_NODE: &str = "my-vn-stable";
const HASH: &str = "rollouts-pod-template-hash";

fn appmesh(ns: &TestNamespace, kind: &str, plural: &str) -> kube::Api<kube::api::DynamicObject> {
    router_api(ns, "appmesh.k8s.aws", "v1beta2", kind, plural)
}

fn virtual_routers(ns: &TestNamespace) -> kube::Api<kube::api::DynamicObject> {
    appmesh(ns, "VirtualRouter", "virtualrouters")
}

fn virtual_nodes(ns: &TestNamespace) -> kube::Api<kube::api::DynamicObject> {
    appmesh(ns, "VirtualNode", "virtualnodes")
}

/// `(canary, stable)` weights of the `primary` route's weighted targets.
fn weights(vr: &Value) -> Option<(i64, i64)> {
    let targets = vr
        .pointer("/spec/routes/0/httpRoute/action/weightedTargets")?
        .as_array()?;
    let weight = |node: &str| {
        targets
            .iter()
            .find(|t| t["virtualNodeRef"]["name"] == node)
            .and_then(|t| t["weight"].as_i64())
    };
    Some((weight(CANARY_NODE)?, weight(STABLE_NODE)?))
}

/// The pod-template hash a VirtualNode selects.
fn node_hash(vn: &Value) -> Option<String> {
    vn.pointer("/spec/podSelector/matchLabels")?
        .get(HASH)?
        .as_str()
        .map(str::to_string)
}

/// The example's Services, App Mesh objects and Rollout in the test namespace. Left out: the
/// Mesh (only the App Mesh controller reads it), the Namespace the example deploys into, the
/// load-testing Deployment and the AnalysisTemplate (its analysis is commented out). The
/// 10-minute pauses wait for a promotion instead.
async fn apply_example(ns: &TestNamespace) {
    let yaml = format!(
        "{}\n---\n{}",
        corpus_file("examples/appmesh/canary-service.yaml"),
        corpus_file("examples/appmesh/canary-rollout.yaml")
            .replace("- pause: {duration: 10m}", "- pause: {}"),
    );
    for doc in parse_documents(&yaml).unwrap() {
        if matches!(
            doc["kind"].as_str(),
            Some("Mesh" | "Namespace" | "Deployment" | "AnalysisTemplate")
        ) {
            continue;
        }
        ns.apply_yaml(&doc.to_string()).await.unwrap();
    }
}

async fn wait_weights(ns: &TestNamespace, expected: (i64, i64)) {
    wait_for(&format!("{ROUTER} at {expected:?}"), TIMEOUT, || async {
        let w = weights(&json_of(&virtual_routers(ns).get(ROUTER).await?));
        anyhow::ensure!(w == Some(expected), "{w:?}");
        Ok(())
    })
    .await
    .unwrap();
}

async fn wait_node_hashes(ns: &TestNamespace, canary: &str, stable: &str) {
    wait_for(
        &format!("VirtualNodes on canary {canary}, stable {stable}"),
        TIMEOUT,
        || async {
            let c = node_hash(&json_of(&virtual_nodes(ns).get(CANARY_NODE).await?));
            let s = node_hash(&json_of(&virtual_nodes(ns).get(STABLE_NODE).await?));
            anyhow::ensure!(
                c.as_deref() == Some(canary) && s.as_deref() == Some(stable),
                "{c:?} {s:?}"
            );
            Ok(())
        },
    )
    .await
    .unwrap();
}

async fn hashes(ns: &TestNamespace) -> (String, String) {
    let s = rollouts(ns)
        .get(ROLLOUT)
        .await
        .unwrap()
        .status
        .unwrap_or_default();
    (
        s.stable_rs.unwrap_or_default(),
        s.current_pod_hash.unwrap_or_default(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_mesh_weighted_targets_and_virtual_node_hashes_follow_the_update() {
    let (_env, ns, _controller) = setup_routed("appmesh").await;
    // Recording from before the objects exist: everything they are ever given.
    let router = Recorder::start(virtual_routers(&ns), ROUTER, weights);
    let canary_node = Recorder::start(virtual_nodes(&ns), CANARY_NODE, node_hash);
    let stable_node = Recorder::start(virtual_nodes(&ns), STABLE_NODE, node_hash);
    apply_example(&ns).await;
    let api = rollouts(&ns);
    wait_phase(&api, ROLLOUT, RolloutPhase::Healthy, TIMEOUT).await;
    let (first, _) = hashes(&ns).await;
    // Deployed: the stable node on the pods, the canary node on none.
    wait_node_hashes(&ns, "canary-hash", &first).await;
    wait_weights(&ns, (0, 100)).await;
    for node in [CANARY_NODE, STABLE_NODE] {
        let vn = json_of(&virtual_nodes(&ns).get(node).await.unwrap());
        assert_eq!(
            vn["metadata"]["annotations"]["argo-rollouts.argoproj.io/managed-by-rollouts"], ROLLOUT,
            "{node}"
        );
        assert_eq!(vn["spec"]["podSelector"]["matchLabels"]["app"], "my-app");
    }

    // setWeight 25 and a pause: one canary pod of four.
    set_image(&api, ROLLOUT, "argoproj/rollouts-demo:yellow").await;
    wait_phase(&api, ROLLOUT, RolloutPhase::Paused, TIMEOUT).await;
    let (stable, second) = hashes(&ns).await;
    assert_eq!(stable, first);
    wait_weights(&ns, (25, 75)).await;
    wait_node_hashes(&ns, &second, &first).await;
    wait_replicas(
        &ns,
        ROLLOUT,
        &[
            ("argoproj/rollouts-demo:blue", 4),
            ("argoproj/rollouts-demo:yellow", 1),
        ],
        TIMEOUT,
    )
    .await;
    // 50, then 75.
    promote(&api, ROLLOUT).await;
    wait_weights(&ns, (50, 50)).await;
    wait_phase(&api, ROLLOUT, RolloutPhase::Paused, TIMEOUT).await;
    promote(&api, ROLLOUT).await;
    wait_weights(&ns, (75, 25)).await;
    wait_phase(&api, ROLLOUT, RolloutPhase::Paused, TIMEOUT).await;
    wait_node_hashes(&ns, &second, &first).await;
    // The end of the steps, then promotion: the stable node on the new pods.
    promote(&api, ROLLOUT).await;
    wait_for("the update to complete", TIMEOUT, || async {
        let s = api.get(ROLLOUT).await?.status.unwrap_or_default();
        anyhow::ensure!(
            s.phase == Some(RolloutPhase::Healthy) && s.stable_rs == s.current_pod_hash,
            "{:?}",
            s.phase
        );
        Ok(())
    })
    .await
    .unwrap();
    wait_weights(&ns, (0, 100)).await;
    wait_node_hashes(&ns, "canary-hash", &second).await;
    assert_eq!(
        router.values().await,
        vec![(0, 100), (25, 75), (50, 50), (75, 25), (100, 0), (0, 100)],
        "VirtualRouter weights over the update"
    );

    // An update aborted at 25%: the weight back to 0, the canary node left on the aborted
    // pods, the stable node on the stable ones.
    set_image(&api, ROLLOUT, "argoproj/rollouts-demo:green").await;
    wait_phase(&api, ROLLOUT, RolloutPhase::Paused, TIMEOUT).await;
    wait_weights(&ns, (25, 75)).await;
    let (_, third) = hashes(&ns).await;
    wait_node_hashes(&ns, &third, &second).await;
    abort(&api, ROLLOUT).await;
    wait_weights(&ns, (0, 100)).await;
    wait_phase(&api, ROLLOUT, RolloutPhase::Degraded, TIMEOUT).await;
    wait_node_hashes(&ns, &third, &second).await;
    assert_eq!(
        router.values().await,
        vec![
            (0, 100),
            (25, 75),
            (50, 50),
            (75, 25),
            (100, 0),
            (0, 100),
            (25, 75),
            (0, 100)
        ],
        "VirtualRouter weights over the update and the aborted one"
    );
    assert_eq!(
        stable_node.values().await,
        vec!["stable-tbd".to_string(), first.clone(), second.clone()],
        "stable VirtualNode selector over both updates"
    );
    assert_eq!(
        canary_node.values().await,
        vec![
            "canary-tbd".to_string(),
            "canary-hash".to_string(),
            second.clone(),
            "canary-hash".to_string(),
            third.clone()
        ],
        "canary VirtualNode selector over both updates"
    );
}
