//! CustomResourceDefinitions on the current Kubernetes the local control plane runs:
//! Argo's CEL rule on a Rollout's `.spec.selector` is enforced by the API server, and the
//! Gateway API v1.6.1 CRDs (which traffic routing edits) install, with an HTTPRoute's weighted
//! backendRefs stored and read back as written.

use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::json;
use sluice_api::Rollout;
use sluice_e2e::canary_rollout;
use sluice_e2e::harness::{TestEnv, TestNamespace, gateway_api_crds_dir};

#[tokio::test]
async fn the_api_server_refuses_a_changed_rollout_selector() {
    let env = TestEnv::with_crds().await.unwrap();
    let ns = TestNamespace::create(&env, "crd-cel").await.unwrap();
    ns.apply_yaml(&canary_rollout(
        "web",
        0,
        "example.invalid/web:1",
        json!([]),
        json!({}),
    ))
    .await
    .unwrap();
    let rollouts = ns.api::<Rollout>();

    let change = json!({"spec": {"selector": {"matchLabels": {"app": "other"}}}});
    let err = rollouts
        .patch("web", &PatchParams::default(), &Patch::Merge(&change))
        .await
        .expect_err("a changed selector must be refused");
    let kube::Error::Api(status) = err else {
        panic!("expected an API error, got {err:?}");
    };
    assert_eq!(status.code, 422, "{status:?}");
    assert!(
        status.message.contains(".spec.selector is immutable"),
        "{}",
        status.message
    );

    // The same selector written again, and other fields, are accepted.
    let same = json!({"spec": {"selector": {"matchLabels": {"app": "web"}}, "replicas": 1}});
    let ro = rollouts
        .patch("web", &PatchParams::default(), &Patch::Merge(&same))
        .await
        .unwrap();
    assert_eq!(ro.spec.replicas, Some(1));
}

fn http_route_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "HTTPRoute"),
        "httproutes",
    )
}

fn backend_weights(route: &DynamicObject) -> Vec<(String, i64)> {
    route.data["spec"]["rules"][0]["backendRefs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|b| {
            (
                b["name"].as_str().unwrap_or_default().to_owned(),
                b["weight"].as_i64().unwrap_or(-1),
            )
        })
        .collect()
}

#[tokio::test]
async fn gateway_api_crds_install_and_an_http_route_round_trips_its_weights() {
    let env = TestEnv::shared().await.unwrap();
    env.install_crds(&gateway_api_crds_dir().unwrap())
        .await
        .unwrap();
    let ns = TestNamespace::create(&env, "gateway-api").await.unwrap();
    let routes: kube::Api<DynamicObject> =
        kube::Api::namespaced_with(env.client(), ns.name(), &http_route_resource());

    let route = json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "web"},
        "spec": {
            "parentRefs": [{"name": "gateway"}],
            "rules": [{
                "backendRefs": [
                    {"name": "web-stable", "port": 80, "weight": 90},
                    {"name": "web-canary", "port": 80, "weight": 10}
                ]
            }]
        }
    });
    let params = PatchParams::apply("sluice-e2e").force();
    let stored = routes
        .patch("web", &params, &Patch::Apply(&route))
        .await
        .unwrap();
    assert_eq!(
        backend_weights(&stored),
        [("web-stable".into(), 90), ("web-canary".into(), 10)]
    );
    // The server's defaults are applied (the schema is live), the weights are untouched.
    assert_eq!(
        stored.data["spec"]["rules"][0]["matches"][0]["path"],
        json!({"type": "PathPrefix", "value": "/"})
    );

    // A weight change, as a router would write it, reads back as written.
    let shift = json!({"spec": {"rules": [{"backendRefs": [
        {"name": "web-stable", "port": 80, "weight": 40},
        {"name": "web-canary", "port": 80, "weight": 60}
    ]}]}});
    routes
        .patch("web", &PatchParams::default(), &Patch::Merge(&shift))
        .await
        .unwrap();
    let read = routes.get("web").await.unwrap();
    assert_eq!(
        backend_weights(&read),
        [("web-stable".into(), 40), ("web-canary".into(), 60)]
    );

    // The schema's validation is enforced: a negative weight is refused.
    let bad = json!({"spec": {"rules": [{"backendRefs": [
        {"name": "web-stable", "port": 80, "weight": -1}
    ]}]}});
    let err = routes
        .patch("web", &PatchParams::default(), &Patch::Merge(&bad))
        .await
        .expect_err("a negative weight must be refused");
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 422),
        "{err:?}"
    );
}
