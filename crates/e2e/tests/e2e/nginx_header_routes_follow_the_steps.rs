//! `setHeaderRoute` with NGINX, which Argo refuses (its #2830), on the real control plane: the
//! steps put the header route into the canary Ingress's ingress-nginx annotations next to the
//! weight, take it out again by name, and the end of the update or an abort clears it.

use serde_json::Value;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::routing::*;
use sluice_e2e::*;
use sluice_testenv::harness::{TestNamespace, wait_for};

const PREFIX: &str = "nginx.ingress.kubernetes.io";
const CANARY_INGRESS: &str = "shop-shop-ingress-canary";

const STEPS: &str = "      steps:
      - setWeight: 10
      - setHeaderRoute:
          name: beta
          match:
          - headerName: X-Beta
            headerValue:
              exact: \"yes\"
      - pause: {}
      - setHeaderRoute:
          name: beta
      - pause: {}
      - setHeaderRoute:
          name: beta
          match:
          - headerName: X-Version
            headerValue:
              prefix: v2.
      - pause: {}
";

/// The canary Ingress's header route: (`canary-by-header`, value, pattern, the route's name).
type Route = (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

fn route_of(ingress: &Value) -> Route {
    let a = &ingress["metadata"]["annotations"];
    let get = |key: &str| a[key].as_str().map(str::to_string);
    (
        get(&format!("{PREFIX}/canary-by-header")),
        get(&format!("{PREFIX}/canary-by-header-value")),
        get(&format!("{PREFIX}/canary-by-header-pattern")),
        get("rollouts.sluice.dev/header-route"),
    )
}

fn weight_of(ingress: &Value) -> Option<String> {
    ingress["metadata"]["annotations"][format!("{PREFIX}/canary-weight")]
        .as_str()
        .map(str::to_string)
}

fn route(header: &str, value: Option<&str>, pattern: Option<&str>) -> Route {
    (
        Some(header.into()),
        value.map(Into::into),
        pattern.map(Into::into),
        Some("beta".into()),
    )
}

const NO_ROUTE: Route = (None, None, None, None);

/// Whether the canary Ingress holds `want` at `weight`.
async fn holds(ns: &TestNamespace, want: &Route, weight: &str) -> anyhow::Result<()> {
    let canary = json_of(&ingresses(ns).get(CANARY_INGRESS).await?);
    let got = (route_of(&canary), weight_of(&canary));
    anyhow::ensure!(got == (want.clone(), Some(weight.into())), "{got:?}");
    Ok(())
}

/// Waits until the Rollout is paused at `step` and the canary Ingress holds `want` at `weight`.
async fn wait_at(ns: &TestNamespace, step: i64, want: &Route, weight: &str) {
    let api = rollouts(ns);
    wait_for(&format!("step {step}: {want:?}"), TIMEOUT, || async {
        let ro = serde_json::to_value(api.get("shop").await?)?;
        let at = ro["status"]["currentStepIndex"].as_i64();
        anyhow::ensure!(at == Some(step), "at step {at:?}");
        anyhow::ensure!(ro["status"]["phase"] == "Paused", "{}", ro["status"]);
        holds(ns, want, weight).await
    })
    .await
    .unwrap();
}

async fn wait_route(ns: &TestNamespace, want: &Route, weight: &str) {
    let what = format!("the canary Ingress at {want:?}");
    wait_for(&what, TIMEOUT, || holds(ns, want, weight))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_header_routes_follow_the_steps_and_go_at_the_end() {
    let (env, ns, _controller) = setup("nginx-header").await;
    install_router_crds(&env).await;
    let manifest = corpus_file("test/e2e/functional/nginx-template.yaml")
        .replace("REPLACEME", "shop")
        .replace(
            "          stableIngress: shop-ingress\n",
            "          stableIngress: shop-ingress\n        managedRoutes:\n        - name: beta\n",
        )
        .replace(
            "      stableService: shop-stable\n",
            &format!("      stableService: shop-stable\n{STEPS}"),
        );
    ns.apply_yaml(&manifest).await.unwrap();
    let api = rollouts(&ns);
    wait_phase(&api, "shop", RolloutPhase::Healthy, TIMEOUT).await;
    // A first revision routes nothing by header.
    wait_route(&ns, &NO_ROUTE, "0").await;

    set_image(&api, "shop", "nginx:1.20-alpine").await;
    wait_at(&ns, 2, &route("X-Beta", Some("yes"), None), "10").await;
    // The rest of the canary Ingress is as before: the weight and Argo's annotations beside.
    let canary = json_of(&ingresses(&ns).get(CANARY_INGRESS).await.unwrap());
    assert_eq!(
        canary["metadata"]["annotations"][format!("{PREFIX}/canary")],
        "true"
    );
    assert_eq!(
        canary["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"],
        "shop-canary"
    );

    // A step without match removes the route by its name.
    promote(&api, "shop").await;
    wait_at(&ns, 4, &NO_ROUTE, "10").await;

    // A prefix becomes an anchored, escaped pattern.
    promote(&api, "shop").await;
    wait_at(&ns, 6, &route("X-Version", None, Some(r"^v2\.")), "10").await;

    // The end of the update clears the route with the weight.
    promote(&api, "shop").await;
    wait_phase(&api, "shop", RolloutPhase::Healthy, TIMEOUT).await;
    wait_route(&ns, &NO_ROUTE, "0").await;

    // So does an abort.
    set_image(&api, "shop", "nginx:1.21-alpine").await;
    wait_at(&ns, 2, &route("X-Beta", Some("yes"), None), "10").await;
    abort(&api, "shop").await;
    wait_phase(&api, "shop", RolloutPhase::Degraded, TIMEOUT).await;
    wait_route(&ns, &NO_ROUTE, "0").await;
    let events = rollout_events(&ns, "shop").await;
    assert!(
        events.iter().any(|(_, message)| message
            .contains("Updating Ingress `shop-shop-ingress-canary` to headerRoute 'beta'")),
        "{events:#?}"
    );
}
