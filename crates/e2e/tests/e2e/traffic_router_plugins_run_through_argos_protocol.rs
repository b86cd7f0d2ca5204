//! Argo's sample traffic-router plugin (`test/cmd/trafficrouter-plugin-sample` of the
//! argo-rollouts module, `argoproj/sample-nginx`: it keeps an NGINX canary Ingress beside the
//! stable one) routes a canary under Sluice through the plugin bridge: installed from
//! `argo-rollouts-config`, told each step's weight (`SetWeight`), the weight read back as the
//! plugin accepted it, back to 0 once promoted. A Rollout naming a plugin the ConfigMap does not
//! list is InvalidSpec saying so, and the other Rollout is not disturbed.

use k8s_openapi::api::networking::v1::Ingress;
use kube::Api;
use serde_json::json;
use sluice_api::Rollout;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::harness::{TestEnv, TestNamespace, plugin_binaries, wait_for};
use sluice_e2e::plugins::{plugin_args, start_with_plugins};
use sluice_e2e::{TIMEOUT, promote, rollouts, set_image, wait_phase};

const PLUGIN: &str = "argoproj/sample-nginx";

fn rollout(name: &str, plugin: &str) -> String {
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": name},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "app:v1"}]}
            },
            "strategy": {"canary": {
                "canaryService": "web-canary",
                "stableService": "web-stable",
                "trafficRouting": {"plugins": {plugin: {"stableIngress": "web-ingress"}}},
                "steps": [{"setWeight": 30}, {"pause": {}}]
            }}
        }
    })
    .to_string()
}

fn service(name: &str) -> String {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}
    })
    .to_string()
}

/// The canary Ingress's weight annotation, once the plugin made it.
async fn canary_weight(ingresses: &Api<Ingress>) -> Option<String> {
    let canary = ingresses.get_opt("web-web-ingress-canary").await.ok()??;
    canary
        .metadata
        .annotations?
        .get("nginx.ingress.kubernetes.io/canary-weight")
        .cloned()
}

async fn wait_weight(ingresses: &Api<Ingress>, weight: &str) {
    wait_for(&format!("canary weight {weight}"), TIMEOUT, || async {
        let got = canary_weight(ingresses).await;
        anyhow::ensure!(got.as_deref() == Some(weight), "{got:?}");
        Ok(())
    })
    .await
    .unwrap();
}

fn status_weight(ro: &Rollout) -> Option<i32> {
    ro.status
        .as_ref()?
        .canary
        .as_ref()?
        .weights
        .as_ref()?
        .canary
        .as_ref()?
        .weight
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argos_sample_router_plugin_routes_a_canary() {
    let bin = plugin_binaries().await.unwrap();
    let env = TestEnv::with_crds().await.unwrap();
    let ns = TestNamespace::create(&env, "router-plugins").await.unwrap();
    ns.apply_yaml(
        &json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "argo-rollouts-config"},
            "data": {"trafficRouterPlugins": format!(
                "- name: {PLUGIN}\n  location: file://{}\n",
                bin.join("trafficrouter-plugin-sample").display()
            )}
        })
        .to_string(),
    )
    .await
    .unwrap();
    for name in ["web-stable", "web-canary"] {
        ns.apply_yaml(&service(name)).await.unwrap();
    }
    ns.apply_yaml(
        &json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "web-ingress",
                         "annotations": {"kubernetes.io/ingress.class": "nginx"}},
            "spec": {"rules": [{"host": "web.example", "http": {"paths": [{
                "path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": "web-stable", "port": {"number": 80}}}
            }]}}]}
        })
        .to_string(),
    )
    .await
    .unwrap();

    let mut args = plugin_args(&ns, &bin);
    // The plugin reaches the cluster as the controller does (it is given KUBECONFIG).
    args.kubeconfig = Some(env.kubeconfig_path().to_path_buf());
    let _controller = start_with_plugins(&env, &ns, &args).await;

    let api = rollouts(&ns);
    let ingresses: Api<Ingress> = ns.api();
    ns.apply_yaml(&rollout("web", PLUGIN)).await.unwrap();
    ns.apply_yaml(&rollout("lost", "acme/not-listed"))
        .await
        .unwrap();
    wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;

    // The update's step weight goes to the plugin, which writes it on its canary Ingress,
    // owned by the Rollout; the status records the weight the plugin accepted.
    set_image(&api, "web", "app:v2").await;
    wait_phase(&api, "web", RolloutPhase::Paused, TIMEOUT).await;
    wait_weight(&ingresses, "30").await;
    let canary = ingresses.get("web-web-ingress-canary").await.unwrap();
    let owner = &canary.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Rollout", "web")
    );
    assert_eq!(status_weight(&api.get("web").await.unwrap()), Some(30));

    // Promoted: the weight goes back to 0 and the update completes.
    promote(&api, "web").await;
    wait_weight(&ingresses, "0").await;
    wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;

    // A plugin the ConfigMap does not list: InvalidSpec, naming it.
    let lost = wait_for("the unlisted plugin reported", TIMEOUT, || async {
        let ro = api.get("lost").await?;
        let message = ro.status.and_then(|s| s.message).unwrap_or_default();
        anyhow::ensure!(
            message.contains("plugin acme/not-listed not configured in configmap"),
            "{message}"
        );
        Ok(message)
    })
    .await
    .unwrap();
    assert!(lost.contains("InvalidSpec"), "{lost}");
}
