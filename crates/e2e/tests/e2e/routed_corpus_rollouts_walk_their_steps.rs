//! Every Rollout of Argo's corpus that routes traffic through one of Argo's routers (Istio,
//! NGINX, ALB, SMI, Ambassador, APISIX, App Mesh; ping-pong Services included; no experiment
//! step) goes Healthy unchanged, and after an image change walks its steps: at each pause the
//! weight recorded for the router is the step's `setWeight`, and once promoted all traffic is
//! back on the (new) stable pods. The Gateway API plugin's corpus files are walked by
//! `traffic_routing_gateway_api`.
//!
//! One routed corpus file is left out: `functional/alb-canary-multi-ingress-rollout.yaml`
//! names a `rootService` its Ingresses do not route to, which Argo and Sluice both refuse as
//! `InvalidSpec` before deploying anything (`traffic_routing_alb` checks the message).

use std::time::Duration;

use futures::future::join_all;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::routing::install_router_crds;
use sluice_e2e::*;
use sluice_engine::steps;
use sluice_testenv::harness::{TestEnv, TestNamespace, wait_for};

/// Corpus files, each with the files of the same example it needs (its Services, Mappings,
/// routes, mesh objects).
const FILES: &[(&str, &[&str])] = &[
    (
        "examples/ambassador/rollout.yaml",
        &[
            "examples/ambassador/echo-service.yaml",
            "examples/ambassador/echo-mapping.yaml",
        ],
    ),
    (
        "examples/apisix/rollout.yaml",
        &[
            "examples/apisix/services.yaml",
            "examples/apisix/route.yaml",
        ],
    ),
    (
        "examples/appmesh/canary-rollout.yaml",
        &["examples/appmesh/canary-service.yaml"],
    ),
    ("examples/traffic-management/rollout-linkerd.yaml", &[]),
    ("test/e2e/apisix/rollout-apisix-canary.yaml", &[]),
    ("test/e2e/apisix/rollout-apisix-canary-set-header.yaml", &[]),
    ("test/e2e/appmesh/appmesh-canary-rollout.yaml", &[]),
    ("test/e2e/functional/alb-canary-rollout.yaml", &[]),
    ("test/e2e/functional/alb-pingpong-rollout.yaml", &[]),
    (
        "test/e2e/functional/alb-pingpong-multi-ingress-rollout.yaml",
        &[],
    ),
    (
        "test/e2e/functional/albmesh-pingpong-stablecanary-rollout.yaml",
        &[],
    ),
    ("test/e2e/functional/canary-dynamic-stable-scale.yaml", &[]),
    ("test/e2e/functional/canary-scaledowndelay.yaml", &[]),
    ("test/e2e/functional/canary-scaledownonabort.yaml", &[]),
    ("test/e2e/functional/canary-unscaledownonabort.yaml", &[]),
    ("test/e2e/header-routing/alb-header-route.yaml", &[]),
    (
        "test/e2e/header-routing/alb-header-route-multi-ingress.yaml",
        &[],
    ),
    ("test/e2e/istio/istio-host-split-ping-pong.yaml", &[]),
];

const ISTIO_NGINX_SMI: &[&str] = &[
    "examples/istio/istio-mirror.yaml",
    "examples/istio/istio-subset-split.yaml",
    "test/e2e/header-routing/istio-hr-host.yaml",
    "test/e2e/istio/istio-subset-split.yaml",
    "test/e2e/istio/istio-host-split.yaml",
    "test/e2e/istio/istio-host-only-tls-split.yaml",
    "test/e2e/istio/istio-host-http-tls-split.yaml",
    "test/e2e/istio/istio-host-split-update-in-middle.yaml",
    "test/e2e/istio/istio-rollout-abort-delete-all-canary-pods.yaml",
    "test/e2e/istio/istio-subset-split-in-stable-downscale-after-canary-abort.yaml",
    "test/e2e/istio/istio-subset-split-single-route.yaml",
    "test/e2e/mirror-route/istio-mirror-host.yaml",
    "test/e2e/smi_ingress/rollout-smi-ingress-canary.yaml",
];

/// Kinds of mesh infrastructure in the examples that no controller of Rollouts reads (and
/// whose CRDs the tests do not install): left out when applying.
const INFRASTRUCTURE: &[&str] = &[
    "Namespace",
    "Mesh",
    "Deployment",
    "KubernetesEndpointResolver",
];

/// Documents of the corpus that no API client can apply as written: the linkerd example's
/// AnalysisTemplate has an unquoted `{{args.linkerd-enabled}}` (YAML reads a flow mapping;
/// kubectl refuses it too). Its Rollout does not use the template.
const UNAPPLIABLE: &[(&str, &str)] = &[(
    "examples/traffic-management/rollout-linkerd.yaml",
    "AnalysisTemplate",
)];

/// A corpus file without its infrastructure documents.
fn routed_documents(file: &str) -> String {
    let skipped =
        |kind: &str| INFRASTRUCTURE.contains(&kind) || UNAPPLIABLE.contains(&(file, kind));
    corpus_file(file)
        .split("\n---")
        .filter(|doc| {
            !doc.lines()
                .any(|l| l.strip_prefix("kind:").is_some_and(|k| skipped(k.trim())))
        })
        .collect::<Vec<_>>()
        .join("\n---")
}

/// Walks one corpus file; returns the number of pauses checked, or what went wrong.
async fn walk(env: &TestEnv, file: &str, extras: &[&str]) -> Result<usize, String> {
    let prefix = file
        .rsplit('/')
        .next()
        .unwrap_or("f")
        .trim_end_matches(".yaml");
    let prefix: String = prefix.chars().take(20).collect();
    let ns = TestNamespace::create(env, &prefix)
        .await
        .map_err(|e| e.to_string())?;
    let mut args = controller_args(ns.name());
    // The SMI CRD of Argo's suite serves v1alpha4 only.
    args.traffic_split_api_version = "v1alpha4".into();
    let _controller = start_controller_with_args(env.client(), args);
    for f in extras.iter().chain([&file]) {
        ns.apply_yaml(&routed_documents(f))
            .await
            .map_err(|e| format!("{f}: {e:#}"))?;
    }
    let api = rollouts(&ns);
    let name = api
        .list(&Default::default())
        .await
        .map_err(|e| e.to_string())?
        .items
        .first()
        .and_then(|r| r.metadata.name.clone())
        .ok_or("no Rollout")?;
    let healthy = |what: &'static str| {
        let api = api.clone();
        let name = name.clone();
        async move {
            wait_for(what, Duration::from_secs(120), || async {
                let s = api.get(&name).await?.status.unwrap_or_default();
                anyhow::ensure!(
                    s.phase == Some(RolloutPhase::Healthy) && s.stable_rs == s.current_pod_hash,
                    "{:?} {:?}",
                    s.phase,
                    s.message
                );
                Ok(s)
            })
            .await
            .map_err(|e| format!("{e:#}"))
        }
    };
    let first = healthy("first deploy Healthy").await?;
    let image = api
        .get(&name)
        .await
        .map_err(|e| e.to_string())?
        .spec
        .template
        .and_then(|t| t.spec?.containers.first()?.image.clone());
    set_image(&api, &name, &format!("{}-next", image.unwrap_or_default())).await;
    // Each pause: the recorded weight is the step's; then promote.
    let mut pauses = 0;
    loop {
        let s = wait_for("a pause or the end", Duration::from_secs(120), || async {
            let s = api.get(&name).await?.status.unwrap_or_default();
            let moved = s.current_pod_hash != first.current_pod_hash;
            let done = s.phase == Some(RolloutPhase::Healthy) && s.stable_rs == s.current_pod_hash;
            anyhow::ensure!(
                moved && (done || s.phase == Some(RolloutPhase::Paused)),
                "{:?}",
                s.phase
            );
            Ok(s)
        })
        .await
        .map_err(|e| format!("{e:#}"))?;
        let ro = api.get(&name).await.map_err(|e| e.to_string())?;
        let canary = ro
            .spec
            .strategy
            .as_ref()
            .and_then(|st| st.canary.clone())
            .unwrap_or_default();
        let recorded = s
            .canary
            .as_ref()
            .and_then(|c| c.weights.as_ref())
            .and_then(|w| w.canary.as_ref())
            .and_then(|c| c.weight);
        if s.phase == Some(RolloutPhase::Healthy) {
            // Promoted: traffic back on stable (the same pods as the canary Service).
            wait_for(
                "the canary weight back at 0",
                Duration::from_secs(60),
                || async {
                    let s = api.get(&name).await?.status.unwrap_or_default();
                    let w = s
                        .canary
                        .and_then(|c| c.weights)
                        .and_then(|w| w.canary)
                        .and_then(|c| c.weight);
                    anyhow::ensure!(w == Some(0), "{w:?}");
                    Ok(())
                },
            )
            .await
            .map_err(|e| format!("{e:#}"))?;
            let has_pause = steps::steps(&canary).iter().any(|st| st.pause.is_some());
            if pauses == 0 && has_pause {
                return Err("completed without the pause its steps have".into());
            }
            return Ok(pauses);
        }
        let index = s.current_step_index.unwrap_or(0);
        let expected = crate_weight_at(&canary, index);
        if recorded != Some(expected) {
            return Err(format!(
                "paused at step {index}: weight {recorded:?}, Argo's is {expected}"
            ));
        }
        pauses += 1;
        promote(&api, &name).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The last `setWeight` at or before `index` (0 before any).
fn crate_weight_at(canary: &sluice_api::rollout::CanaryStrategy, index: i32) -> i32 {
    let all = steps::steps(canary);
    let end = usize::try_from(index + 1).unwrap_or(0).min(all.len());
    all[..end]
        .iter()
        .rev()
        .find_map(|s| s.set_weight)
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn routed_corpus_rollouts_go_healthy_and_walk_their_steps_with_argos_weights() {
    let env = TestEnv::with_crds().await.expect("local control plane");
    install_router_crds(&env).await;
    let all = ISTIO_NGINX_SMI
        .iter()
        .map(|f| (*f, &[] as &[&str]))
        .chain(FILES.iter().copied());
    let results = join_all(all.map(|(f, extras)| {
        let env = env.clone();
        async move { (f, walk(&env, f, extras).await) }
    }))
    .await;
    let failed: Vec<String> = results
        .into_iter()
        .filter_map(|(f, r)| match r {
            Ok(_) => None,
            Err(e) => Some(format!("{f}: {e}")),
        })
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
