//! `--aws-verify-target-group` after a promotion: the old pods of an ALB canary stay until the
//! AWS target group bound to the stable Service (a TargetGroupBinding of `targetType: ip`)
//! has every new pod registered, against moto's ELBv2 API.
//!
//! Proven: once the update is promoted, `TargetGroupUnverified` (`0/1 endpoints registered`)
//! and the old ReplicaSet keeps its pod, past Argo's 10 s retry; once the test (playing the
//! AWS Load Balancer Controller) registers the new pod's `ip:port`, `TargetGroupVerified`
//! (`1 endpoints registered`) and the old ReplicaSet goes to zero.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Endpoints, Pod};
use kube::api::ListParams;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::aws::Aws;
use sluice_e2e::routing::*;
use sluice_e2e::*;
use sluice_testenv::harness::{TestEnv, TestNamespace, wait_for};
use sluice_testenv::moto::Moto;

const NAME: &str = "alb-canary";
const STABLE: &str = "alb-canary-stable";

async fn wait_event(ns: &TestNamespace, reason: &str, message: &str) {
    wait_for(&format!("event {reason}: {message}"), TIMEOUT, || async {
        let events = rollout_events(ns, NAME).await;
        anyhow::ensure!(
            events.iter().any(|(r, m)| r == reason && m == message),
            "{events:?}"
        );
        Ok(())
    })
    .await
    .unwrap();
}

/// Pods wanted of each image.
async fn by_image(ns: &TestNamespace) -> Vec<(String, i32)> {
    replicas_by_image(ns, NAME)
        .await
        .into_iter()
        .map(|(image, (spec, _))| (image, spec))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_pods_stay_until_the_target_group_has_the_new_ones() {
    let moto = Moto::start().await.expect("moto's server");
    let env = TestEnv::with_crds().await.expect("local control plane");
    install_router_crds(&env).await;
    let ns = TestNamespace::create(&env, "alb-targets").await.unwrap();
    let aws = Aws::create(&moto, ns.name()).await;

    // Argo's ALB canary, one step, the old pods going as soon as they may.
    let manifest = corpus_file("test/e2e/functional/alb-canary-rollout.yaml").replace(
        "      steps:\n      - setWeight: 10\n      - pause: {duration: 5s}\n      - setWeight: 20\n      - pause: {duration: 5s}",
        "      scaleDownDelaySeconds: 0\n      steps:\n      - setWeight: 50",
    );
    assert!(manifest.contains("setWeight: 50"), "{manifest}");
    ns.apply_yaml(&manifest).await.unwrap();
    ns.apply_yaml(&format!(
        r#"
apiVersion: elbv2.k8s.aws/v1beta1
kind: TargetGroupBinding
metadata:
  name: stable
spec:
  targetGroupARN: {}
  targetType: ip
  serviceRef:
    name: {STABLE}
    port: 80
"#,
        aws.stable_group
    ))
    .await
    .unwrap();
    let _controller = aws.verifying_controller(&env, &ns).await;
    let api = rollouts(&ns);
    wait_phase(&api, NAME, RolloutPhase::Healthy, TIMEOUT).await;

    // The update, with the load balancer following the weights at once.
    set_image(&api, NAME, "nginx:1.20-alpine").await;
    aws.route(50).await;
    wait_for("the update's steps done", TIMEOUT, || async {
        let s = api.get(NAME).await?.status.unwrap_or_default();
        anyhow::ensure!(
            s.current_step_index == Some(1) && s.current_pod_hash != s.stable_rs,
            "{:?}",
            s.current_step_index
        );
        Ok(())
    })
    .await
    .unwrap();
    aws.route(100).await;
    wait_for("promoted", TIMEOUT, || async {
        let s = api.get(NAME).await?.status.unwrap_or_default();
        anyhow::ensure!(
            s.stable_rs.is_some() && s.stable_rs == s.current_pod_hash,
            "{:?} {:?}",
            s.stable_rs,
            s.current_pod_hash
        );
        Ok(())
    })
    .await
    .unwrap();
    let endpoints: kube::Api<Endpoints> = ns.api();
    let pods: kube::Api<Pod> = ns.api();
    let ip = wait_for(
        "the stable Service's endpoint on the new pod",
        TIMEOUT,
        || async {
            // The new pod's address: the endpoints controller may still list the old pod
            // for a moment after the Service's selector switched.
            let hash = api
                .get(NAME)
                .await?
                .status
                .and_then(|s| s.current_pod_hash)
                .unwrap_or_default();
            let new_pods = pods
                .list(&ListParams::default().labels(&format!("rollouts-pod-template-hash={hash}")))
                .await?;
            let new_ips: Vec<String> = new_pods
                .items
                .into_iter()
                .filter_map(|p| p.status?.pod_ip)
                .collect();
            let e = endpoints.get(STABLE).await?;
            let ips: Vec<String> = e
                .subsets
                .unwrap_or_default()
                .into_iter()
                .flat_map(|s| s.addresses.unwrap_or_default())
                .map(|a| a.ip)
                .collect();
            anyhow::ensure!(
                ips.len() == 1 && new_ips == ips,
                "{ips:?}, new pods {new_ips:?}"
            );
            Ok(ips[0].clone())
        },
    )
    .await
    .unwrap();

    let group = &aws.stable_group;
    wait_event(
        &ns,
        "TargetGroupUnverified",
        &format!("Service {STABLE} (TargetGroup {group}) not verified: 0/1 endpoints registered"),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert_eq!(
        by_image(&ns).await,
        [
            ("nginx:1.19-alpine".to_string(), 1),
            ("nginx:1.20-alpine".to_string(), 1)
        ],
        "the old pod stays while the new one is not registered"
    );

    aws.register_stable(&ip, 80).await;
    wait_event(
        &ns,
        "TargetGroupVerified",
        &format!("Service {STABLE} (TargetGroup {group}) verified: 1 endpoints registered"),
    )
    .await;
    wait_for("the old pods gone", TIMEOUT, || async {
        let got = by_image(&ns).await;
        anyhow::ensure!(
            got == [
                ("nginx:1.19-alpine".to_string(), 0),
                ("nginx:1.20-alpine".to_string(), 1)
            ],
            "{got:?}"
        );
        Ok(())
    })
    .await
    .unwrap();
}
