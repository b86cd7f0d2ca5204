//! Header and mirror routes through Istio, with the Rollouts of Argo's own header-routing and
//! mirror-route suites: each `setHeaderRoute` / `setMirrorRoute` step puts its managed route
//! in the VirtualService ahead of the weighted one (in `managedRoutes` order), a later step of
//! the same name replaces or (without `match`) removes it, and promotion leaves only the
//! weighted route, all traffic on stable.

use serde_json::{Value, json};
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::routing::*;
use sluice_e2e::*;
use sluice_testenv::harness::{TestNamespace, wait_for};

async fn vs(ns: &TestNamespace) -> Value {
    json_of(
        &virtual_services(ns)
            .get("rollouts-demo-vsvc")
            .await
            .unwrap(),
    )
}

fn route_names(vs: &Value) -> Vec<String> {
    vs["spec"]["http"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| r["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// (canary, stable) weights of the route named `primary`.
fn primary_weights(vs: &Value) -> Option<(i64, i64)> {
    let primary = vs["spec"]["http"]
        .as_array()?
        .iter()
        .find(|r| r["name"] == "primary")?;
    let only = json!({"spec": {"http": [primary]}});
    vs_weights(&only, "canary-service", "stable-service")
}

/// Promotes from the pause at `index` and waits for the pause at `next`.
async fn promote_to(ns: &TestNamespace, next: i32) {
    let api = rollouts(ns);
    promote(&api, "rollouts-demo").await;
    wait_for(&format!("the pause at step {next}"), TIMEOUT, || async {
        let ro = api.get("rollouts-demo").await?;
        let s = ro.status.unwrap_or_default();
        anyhow::ensure!(
            s.current_step_index == Some(next) && s.phase == Some(RolloutPhase::Paused),
            "at {:?} {:?}",
            s.current_step_index,
            s.phase
        );
        Ok(())
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_route_steps_add_replace_and_remove_the_managed_route() {
    let (env, ns, _controller) = setup("istio-header").await;
    install_router_crds(&env).await;
    ns.apply_yaml(&corpus_file("test/e2e/header-routing/istio-hr-host.yaml"))
        .await
        .unwrap();
    let api = rollouts(&ns);
    wait_phase(&api, "rollouts-demo", RolloutPhase::Healthy, TIMEOUT).await;
    wait_for("all traffic on stable", TIMEOUT, || async {
        anyhow::ensure!(primary_weights(&vs(&ns).await) == Some((0, 100)));
        Ok(())
    })
    .await
    .unwrap();

    set_image(&api, "rollouts-demo", "nginx:1.20-alpine").await;
    wait_phase(&api, "rollouts-demo", RolloutPhase::Paused, TIMEOUT).await;
    let v = vs(&ns).await;
    assert_eq!(route_names(&v), ["set-header-1", "primary"]);
    let header = &v["spec"]["http"][0];
    assert_eq!(
        header["match"],
        json!([{"headers": {"agent": {"regex": "firefox(.*)"}}}])
    );
    assert_eq!(
        header["route"],
        json!([{"destination": {"host": "canary-service"}, "weight": 100}])
    );
    assert_eq!(primary_weights(&v), Some((20, 80)));

    promote_to(&ns, 4).await;
    let v = vs(&ns).await;
    assert_eq!(route_names(&v), ["set-header-1", "primary"]);
    assert_eq!(
        v["spec"]["http"][0]["match"],
        json!([{"headers": {"agent": {"regex": "chrome(.*)"}}}])
    );

    // setWeight 40, then the step without `match` removes the route.
    promote_to(&ns, 7).await;
    let v = vs(&ns).await;
    assert_eq!(route_names(&v), ["primary"]);
    assert_eq!(primary_weights(&v), Some((40, 60)));

    promote(&api, "rollouts-demo").await;
    wait_phase(&api, "rollouts-demo", RolloutPhase::Healthy, TIMEOUT).await;
    wait_for("all traffic on the promoted stable", TIMEOUT, || async {
        let v = vs(&ns).await;
        anyhow::ensure!(route_names(&v) == ["primary"] && primary_weights(&v) == Some((0, 100)));
        Ok(())
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirror_route_steps_mirror_in_managed_route_order_and_go_at_promotion() {
    let (env, ns, _controller) = setup("istio-mirror").await;
    install_router_crds(&env).await;
    ns.apply_yaml(&corpus_file("test/e2e/mirror-route/istio-mirror-host.yaml"))
        .await
        .unwrap();
    let api = rollouts(&ns);
    wait_phase(&api, "rollouts-demo", RolloutPhase::Healthy, TIMEOUT).await;

    set_image(&api, "rollouts-demo", "nginx:1.20-alpine").await;
    wait_phase(&api, "rollouts-demo", RolloutPhase::Paused, TIMEOUT).await;
    let v = vs(&ns).await;
    assert_eq!(
        route_names(&v),
        ["mirror-route-1", "mirror-route-2", "primary"]
    );
    let second = &v["spec"]["http"][1];
    assert_eq!(second["mirror"], json!({"host": "canary-service"}));
    assert_eq!(second["mirrorPercentage"], json!({"value": 80}));
    assert_eq!(
        second["match"],
        json!([{"method": {"exact": "GET"}, "uri": {"prefix": "/"}}])
    );
    // A mirror route carries the weights of the weighted route it copies.
    let first = &v["spec"]["http"][0];
    assert_eq!(
        vs_weights(
            &json!({"spec": {"http": [first]}}),
            "canary-service",
            "stable-service"
        ),
        Some((20, 80))
    );

    promote_to(&ns, 5).await;
    let v = vs(&ns).await;
    assert_eq!(
        v["spec"]["http"][0]["match"],
        json!([{"uri": {"prefix": "/rewrite"}}])
    );

    promote_to(&ns, 8).await;
    assert_eq!(route_names(&vs(&ns).await), ["mirror-route-2", "primary"]);

    promote(&api, "rollouts-demo").await;
    wait_phase(&api, "rollouts-demo", RolloutPhase::Healthy, TIMEOUT).await;
    wait_for("only the weighted route left", TIMEOUT, || async {
        let v = vs(&ns).await;
        anyhow::ensure!(
            route_names(&v) == ["primary"] && primary_weights(&v) == Some((0, 100)),
            "{:?}",
            route_names(&v)
        );
        Ok(())
    })
    .await
    .unwrap();
}
