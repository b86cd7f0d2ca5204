//! Services a Rollout manages, against the real control plane: a canary's canaryService and
//! stableService select the new and stable pods without a traffic router, a missing one is
//! InvalidSpec with Argo's message, and a Service the Rollout stops naming (a strategy switch
//! from blue-green to canary) gets its hash selector and managed-by annotation removed.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Event, Service};
use kube::Api;
use serde_json::json;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::harness::{TestNamespace, wait_for};
use sluice_e2e::*;

const HASH: &str = "rollouts-pod-template-hash";
const MANAGED_BY: &str = "argo-rollouts.argoproj.io/managed-by-rollouts";

async fn create_service(ns: &TestNamespace, name: &str, app: &str) {
    ns.apply_yaml(
        &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                "spec": {"selector": {"app": app}, "ports": [{"port": 80}]}})
        .to_string(),
    )
    .await
    .unwrap();
}

/// The Service's selector and managed-by annotation.
async fn service_state(
    ns: &TestNamespace,
    name: &str,
) -> (BTreeMap<String, String>, Option<String>) {
    let api: Api<Service> = ns.api();
    let svc = api.get(name).await.unwrap();
    let selector = svc.spec.and_then(|s| s.selector).unwrap_or_default();
    let managed = svc
        .metadata
        .annotations
        .and_then(|a| a.get(MANAGED_BY).cloned());
    (selector, managed)
}

async fn wait_selects(ns: &TestNamespace, name: &str, hash: &str, rollout: &str) {
    wait_for(&format!("{name} selects {hash}"), TIMEOUT, || async {
        let (selector, managed) = service_state(ns, name).await;
        if selector.get(HASH).map(String::as_str) == Some(hash)
            && managed.as_deref() == Some(rollout)
        {
            Ok(())
        } else {
            anyhow::bail!("selector {selector:?}, managed-by {managed:?}")
        }
    })
    .await
    .unwrap();
}

/// Messages of the Rollout's events with this reason, oldest first.
async fn event_messages(ns: &TestNamespace, rollout: &str, reason: &str) -> Vec<String> {
    let api: Api<Event> = ns.api();
    let mut events: Vec<Event> = api
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(rollout))
        .filter(|e| e.reason.as_deref() == Some(reason))
        .collect();
    events.sort_by_key(|e| {
        (
            e.first_timestamp.as_ref().map(|t| t.0),
            e.metadata.creation_timestamp.as_ref().map(|t| t.0),
        )
    });
    events.into_iter().filter_map(|e| e.message).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn canary_and_stable_services_select_new_and_stable_pods_without_a_router() {
    let (_env, ns, _controller) = setup("canary-svcs").await;
    let api = rollouts(&ns);
    create_service(&ns, "svc-canary", "cs").await;
    create_service(&ns, "svc-stable", "cs").await;
    let mut manifest: serde_json::Value = serde_json::from_str(&canary_rollout(
        "cs",
        2,
        "app:v1",
        json!([{"setWeight": 50}, {"pause": {}}]),
        json!({}),
    ))
    .unwrap();
    manifest["spec"]["strategy"]["canary"]["canaryService"] = json!("svc-canary");
    manifest["spec"]["strategy"]["canary"]["stableService"] = json!("svc-stable");
    ns.apply_yaml(&manifest.to_string()).await.unwrap();
    let ro = wait_phase(&api, "cs", RolloutPhase::Healthy, TIMEOUT).await;
    let v1 = ro.status.unwrap().stable_rs.unwrap();
    wait_selects(&ns, "svc-stable", &v1, "cs").await;
    wait_selects(&ns, "svc-canary", &v1, "cs").await;
    // Only the hash key is added: the app selector stays.
    let (selector, _) = service_state(&ns, "svc-stable").await;
    assert_eq!(selector.get("app").map(String::as_str), Some("cs"));

    set_image(&api, "cs", "app:v2").await;
    let ro = wait_phase(&api, "cs", RolloutPhase::Paused, TIMEOUT).await;
    let v2 = ro.status.unwrap().current_pod_hash.unwrap();
    wait_replicas(&ns, "cs", &[("app:v1", 1), ("app:v2", 1)], TIMEOUT).await;
    wait_selects(&ns, "svc-canary", &v2, "cs").await;
    wait_selects(&ns, "svc-stable", &v1, "cs").await;

    promote(&api, "cs").await;
    wait_phase(&api, "cs", RolloutPhase::Healthy, TIMEOUT).await;
    wait_selects(&ns, "svc-stable", &v2, "cs").await;
    wait_selects(&ns, "svc-canary", &v2, "cs").await;
    wait_replicas(&ns, "cs", &[("app:v2", 2)], TIMEOUT).await;

    // Events of one reason are published as one series (kube's recorder), so only the first
    // switch's message is there to read.
    let switches = event_messages(&ns, "cs", "SwitchService").await;
    assert_eq!(
        switches.first(),
        Some(&format!(
            "Switched selector for service 'svc-stable' from '' to '{v1}'"
        )),
        "{switches:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborted_canary_points_the_canary_service_back_at_stable() {
    let (_env, ns, _controller) = setup("canary-svc-abort").await;
    let api = rollouts(&ns);
    create_service(&ns, "ab-canary", "ab").await;
    create_service(&ns, "ab-stable", "ab").await;
    let mut manifest: serde_json::Value = serde_json::from_str(&canary_rollout(
        "ab",
        2,
        "app:v1",
        json!([{"setWeight": 50}, {"pause": {}}]),
        json!({}),
    ))
    .unwrap();
    manifest["spec"]["strategy"]["canary"]["canaryService"] = json!("ab-canary");
    manifest["spec"]["strategy"]["canary"]["stableService"] = json!("ab-stable");
    ns.apply_yaml(&manifest.to_string()).await.unwrap();
    let ro = wait_phase(&api, "ab", RolloutPhase::Healthy, TIMEOUT).await;
    let v1 = ro.status.unwrap().stable_rs.unwrap();
    set_image(&api, "ab", "app:v2").await;
    let ro = wait_phase(&api, "ab", RolloutPhase::Paused, TIMEOUT).await;
    let v2 = ro.status.unwrap().current_pod_hash.unwrap();
    wait_selects(&ns, "ab-canary", &v2, "ab").await;

    abort(&api, "ab").await;
    wait_phase(&api, "ab", RolloutPhase::Degraded, TIMEOUT).await;
    wait_selects(&ns, "ab-canary", &v1, "ab").await;
    wait_selects(&ns, "ab-stable", &v1, "ab").await;
    wait_replicas(&ns, "ab", &[("app:v1", 2)], TIMEOUT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_canary_service_is_invalid_spec_with_argos_message() {
    let (_env, ns, _controller) = setup("canary-svc-missing").await;
    let api = rollouts(&ns);
    let mut manifest: serde_json::Value = serde_json::from_str(&canary_rollout(
        "ms",
        1,
        "app:v1",
        json!([{"setWeight": 50}]),
        json!({}),
    ))
    .unwrap();
    manifest["spec"]["strategy"]["canary"]["canaryService"] = json!("nope");
    ns.apply_yaml(&manifest.to_string()).await.unwrap();
    let ro = wait_phase(&api, "ms", RolloutPhase::Degraded, TIMEOUT).await;
    assert_eq!(
        ro.status.unwrap().message.as_deref(),
        Some(
            "InvalidSpec: The Rollout \"ms\" is invalid: spec.strategy.canary.canaryService: Invalid value: \"nope\": services \"nope\" not found"
        )
    );
    assert!(replicas_by_image(&ns, "ms").await.is_empty());

    // Creating the Service fixes the spec.
    create_service(&ns, "nope", "ms").await;
    wait_phase(&api, "ms", RolloutPhase::Healthy, TIMEOUT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_the_rollout_stops_naming_loses_the_hash_selector() {
    let (_env, ns, _controller) = setup("svc-release").await;
    let api = rollouts(&ns);
    create_service(&ns, "rel-active", "rel").await;
    let mut manifest: serde_json::Value =
        serde_json::from_str(&canary_rollout("rel", 2, "app:v1", json!([]), json!({}))).unwrap();
    manifest["spec"]["strategy"] = json!({"blueGreen": {"activeService": "rel-active"}});
    ns.apply_yaml(&manifest.to_string()).await.unwrap();
    let ro = wait_phase(&api, "rel", RolloutPhase::Healthy, TIMEOUT).await;
    let v1 = ro.status.unwrap().stable_rs.unwrap();
    wait_selects(&ns, "rel-active", &v1, "rel").await;

    // Blue-green to canary, with a new pod template: the old active Service is no longer named.
    api.patch(
        "rel",
        &Default::default(),
        &kube::api::Patch::Merge(json!({"spec": {
            "strategy": {"blueGreen": null, "canary": {"steps": [{"setWeight": 50}, {"pause": {"duration": 1}}]}},
        }})),
    )
    .await
    .unwrap();
    set_image(&api, "rel", "app:v2").await;
    wait_for("rel-active released", TIMEOUT, || async {
        let (selector, managed) = service_state(&ns, "rel-active").await;
        if !selector.contains_key(HASH) && managed.is_none() {
            Ok(())
        } else {
            anyhow::bail!("selector {selector:?}, managed-by {managed:?}")
        }
    })
    .await
    .unwrap();
    let (selector, _) = service_state(&ns, "rel-active").await;
    assert_eq!(
        selector,
        BTreeMap::from([("app".to_string(), "rel".to_string())])
    );
    wait_phase(&api, "rel", RolloutPhase::Healthy, TIMEOUT).await;
    wait_replicas(&ns, "rel", &[("app:v2", 2)], TIMEOUT).await;
    // The Service still selects every pod of the app: no outage.
    let (selector, managed) = service_state(&ns, "rel-active").await;
    assert!(!selector.contains_key(HASH));
    assert_eq!(managed, None);
}
