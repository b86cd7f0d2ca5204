//! A Rollout written for the Gateway API traffic-router plugin (`argoproj-labs/gatewayAPI`)
//! runs unchanged, with no plugin binary and no plugin ConfigMap: the HTTPRoute's backendRefs
//! carry the step weights (also on a route found by the configuration's selector), the route
//! is labelled in progress while the canary has traffic, a
//! header step adds a rule sending matching requests to the canary, and promotion leaves all
//! traffic on stable with the managed rule gone.

use serde_json::{Value, json};
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::routing::*;
use sluice_e2e::*;
use sluice_testenv::harness::{TestNamespace, wait_for};

const IN_PROGRESS: &str = "rollouts.argoproj.io/gatewayapi-canary";

fn manifests() -> String {
    let services = ["web-stable", "web-canary"].map(|name| {
        json!({
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80}]}
        })
        .to_string()
    });
    let route = json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "web-route"},
        "spec": {
            "parentRefs": [{"name": "gateway"}],
            "rules": [{
                "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                "backendRefs": [
                    {"name": "web-stable", "port": 80, "weight": 100},
                    {"name": "web-canary", "port": 80, "weight": 0}
                ]
            }]
        }
    });
    let rollout = json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 4,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "web:v1"}]}
            },
            "strategy": {"canary": {
                "canaryService": "web-canary",
                "stableService": "web-stable",
                "trafficRouting": {
                    "managedRoutes": [{"name": "beta-users"}],
                    "plugins": {"argoproj-labs/gatewayAPI": {
                        "httpRoute": "web-route",
                        "httpRouteSelector": {"matchLabels": {"shifted-by": "web"}}
                    }}
                },
                "steps": [
                    {"setWeight": 30},
                    {"setHeaderRoute": {"name": "beta-users", "match": [
                        {"headerName": "x-beta", "headerValue": {"exact": "yes"}}
                    ]}},
                    {"pause": {}},
                    {"setWeight": 60},
                    {"pause": {}}
                ]
            }}
        }
    });
    // A second route, found by the configuration's selector.
    let mut internal = route.clone();
    internal["metadata"] = json!({"name": "web-internal", "labels": {"shifted-by": "web"}});
    [
        services[0].clone(),
        services[1].clone(),
        route.to_string(),
        internal.to_string(),
        rollout.to_string(),
    ]
    .join("\n---\n")
}

/// (canary, stable) weights of the route's first rule.
fn weights(route: &Value) -> Option<(i64, i64)> {
    let refs = route["spec"]["rules"][0]["backendRefs"].as_array()?;
    let weight = |name: &str| {
        refs.iter()
            .find(|r| r["name"] == name)
            .and_then(|r| r["weight"].as_i64())
    };
    Some((weight("web-canary")?, weight("web-stable")?))
}

async fn route(ns: &TestNamespace) -> Value {
    json_of(&http_routes(ns).get("web-route").await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_api_plugin_rollout_runs_built_in_with_weights_labels_and_header_rules() {
    let (env, ns, _controller) = setup("gateway").await;
    install_router_crds(&env).await;
    ns.apply_yaml(&manifests()).await.unwrap();
    let api = rollouts(&ns);
    wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;
    let recorder = Recorder::start(http_routes(&ns), "web-route", weights);

    set_image(&api, "web", "web:v2").await;
    wait_phase(&api, "web", RolloutPhase::Paused, TIMEOUT).await;
    let r = route(&ns).await;
    assert_eq!(weights(&r), Some((30, 70)));
    assert_eq!(r["metadata"]["labels"][IN_PROGRESS], "in-progress");
    let rules = r["spec"]["rules"].as_array().unwrap();
    assert_eq!(rules.len(), 2, "{rules:#?}");
    assert_eq!(rules[1]["name"], "beta-users");
    assert_eq!(
        rules[1]["matches"][0]["headers"],
        json!([{"name": "x-beta", "type": "Exact", "value": "yes"}])
    );
    assert_eq!(rules[1]["backendRefs"][0]["name"], "web-canary");
    // The selected route gets the weights, not the header rule (as the plugin does it).
    let internal = json_of(&http_routes(&ns).get("web-internal").await.unwrap());
    assert_eq!(weights(&internal), Some((30, 70)));
    assert_eq!(internal["spec"]["rules"].as_array().map(Vec::len), Some(1));
    // The plugin reports weights as verified.
    let status = api.get("web").await.unwrap().status.unwrap();
    assert_eq!(status.canary.unwrap().weights.unwrap().verified, Some(true));

    promote(&api, "web").await;
    wait_for("the pause after the 60% step", TIMEOUT, || async {
        let s = api.get("web").await?.status.unwrap_or_default();
        anyhow::ensure!(s.current_step_index == Some(4) && s.phase == Some(RolloutPhase::Paused));
        Ok(())
    })
    .await
    .unwrap();
    assert_eq!(weights(&route(&ns).await), Some((60, 40)));
    promote(&api, "web").await;
    wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;
    wait_for(
        "all traffic on stable, managed rule gone, label removed",
        TIMEOUT,
        || async {
            let r = route(&ns).await;
            anyhow::ensure!(weights(&r) == Some((0, 100)), "{:?}", weights(&r));
            anyhow::ensure!(r["spec"]["rules"].as_array().map(Vec::len) == Some(1));
            anyhow::ensure!(r["metadata"]["labels"][IN_PROGRESS].is_null());
            Ok(())
        },
    )
    .await
    .unwrap();
    assert_eq!(
        recorder.values().await,
        vec![(0, 100), (30, 70), (60, 40), (100, 0), (0, 100)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_plugin_the_config_map_does_not_list_is_invalid_naming_it() {
    let (env, ns, _controller) = setup("plugin").await;
    install_router_crds(&env).await;
    let manifest = manifests().replace("argoproj-labs/gatewayAPI", "acme/router");
    ns.apply_yaml(&manifest).await.unwrap();
    let api = rollouts(&ns);
    let ro = wait_phase(&api, "web", RolloutPhase::Degraded, TIMEOUT).await;
    let message = ro.status.unwrap().message.unwrap_or_default();
    assert!(
        message.starts_with("InvalidSpec: The Rollout \"web\" is invalid: "),
        "{message}"
    );
    // Any other plugin name is a plugin router; without an `argo-rollouts-config` listing it
    // there is no binary to run.
    assert!(
        message.contains("plugin acme/router not configured in configmap"),
        "{message}"
    );
}
