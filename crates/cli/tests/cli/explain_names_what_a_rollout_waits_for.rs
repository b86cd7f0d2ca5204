//! `kubectl sluice explain` on the real control plane, with a Sluice controller running
//! in-process: each waiting state is made for real (pods that never become ready, pause steps,
//! a user's pause, analyses that keep measuring, end Inconclusive or fail, an invalid spec, a
//! blue-green preview awaiting promotion, an experiment step running, the progress deadline, a
//! traffic weight the router object does not carry yet) and explain must give the engine's reason for it and the command that moves it on. Each
//! test takes a few seconds; they run in parallel.

use serde_json::json;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::*;
use sluice_testenv::harness::{TestEnv, TestNamespace, wait_for};
use sluice_testenv::http_stub::HttpStub;

/// Runs `explain NAME` until its text holds every one of `expected`; returns the text.
async fn explain_until(env: &TestEnv, ns: &TestNamespace, name: &str, expected: &[&str]) -> String {
    let kubeconfig = env.kubeconfig_path().to_owned();
    let (namespace, name) = (ns.name().to_owned(), name.to_owned());
    let expected: Vec<String> = expected.iter().map(|e| (*e).to_owned()).collect();
    wait_for("explain to give the reason", TIMEOUT, || {
        let (kubeconfig, namespace, name, expected) = (
            kubeconfig.clone(),
            namespace.clone(),
            name.clone(),
            expected.clone(),
        );
        async move {
            let out = tokio::task::spawn_blocking(move || {
                std::process::Command::new(env!("CARGO_BIN_EXE_kubectl-sluice"))
                    .arg("--kubeconfig")
                    .arg(&kubeconfig)
                    .args(["-n", &namespace, "explain", &name])
                    .output()
            })
            .await??;
            anyhow::ensure!(out.status.success(), "{out:?}");
            let text = String::from_utf8(out.stdout)?;
            for e in &expected {
                anyhow::ensure!(text.contains(e.as_str()), "missing {e:?} in:\n{text}");
            }
            Ok(text)
        }
    })
    .await
    .unwrap()
}

fn never_ready(name: &str, extra: serde_json::Value) -> String {
    let mut manifest: serde_json::Value =
        serde_json::from_str(&canary_rollout(name, 1, "app:v1", json!([]), extra)).unwrap();
    manifest["spec"]["template"]["metadata"]["annotations"] =
        json!({"sluice.dev/never-ready": "true"});
    manifest.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_pods_not_ready_and_the_progress_deadline() {
    let (env, ns, _controller) = setup("explain-pods").await;
    ns.apply_yaml(&never_ready(
        "stuck",
        json!({"progressDeadlineSeconds": 600}),
    ))
    .await
    .unwrap();
    ns.apply_yaml(&never_ready("late", json!({"progressDeadlineSeconds": 1})))
        .await
        .unwrap();
    let text = explain_until(
        &env,
        &ns,
        "stuck",
        &[
            "to be available: 0 of 1",
            "is not ready (Running) since",
            "the progress deadline fires at",
        ],
    )
    .await;
    assert!(
        text.starts_with("Rollout \"stuck\" is Progressing"),
        "{text}"
    );
    assert!(text.contains("kubectl describe pods -n"), "{text}");
    let text = explain_until(
        &env,
        &ns,
        "late",
        &["progress, past its deadline: ReplicaSet \"late-"],
    )
    .await;
    assert!(text.contains("has timed out progressing."), "{text}");
    assert!(text.contains("kubectl sluice abort late"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_pause_steps_and_a_users_pause() {
    let (env, ns, _controller) = setup("explain-pause").await;
    let api = rollouts(&ns);
    ns.apply_yaml(&canary_rollout(
        "web",
        1,
        "app:v1",
        json!([{"pause": {"duration": "1h"}}, {"pause": {}}]),
        json!({}),
    ))
    .await
    .unwrap();
    wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;
    set_image(&api, "web", "app:v2").await;
    let text = explain_until(&env, &ns, "web", &["the pause of step 1/2 to end at"]).await;
    assert!(
        text.contains("(in 59m") || text.contains("(in 60m"),
        "{text}"
    );
    assert!(
        text.contains("To go on now: kubectl sluice promote web -n"),
        "{text}"
    );

    promote(&api, "web").await;
    explain_until(
        &env,
        &ns,
        "web",
        &[
            "a promotion: step 2/2 is a pause without a duration",
            "kubectl sluice promote web",
        ],
    )
    .await;

    pause(&api, "web").await;
    let text = explain_until(
        &env,
        &ns,
        "web",
        &["a resume: spec.paused is true (set by "],
    )
    .await;
    assert!(text.contains("kubectl sluice resume web -n"), "{text}");
}

fn web_template(url: &str, count: i32, interval: &str) -> String {
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AnalysisTemplate",
        "metadata": {"name": "health"},
        "spec": {"metrics": [{
            "name": "web",
            "interval": interval,
            "count": count,
            "successCondition": "result.status == 'ok'",
            "failureCondition": "result.status == 'bad'",
            "provider": {"web": {"url": url, "jsonPath": "{$}"}}
        }]}
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_analysis_inconclusive_then_failed() {
    let (env, ns, _controller) = setup("explain-analysis").await;
    let api = rollouts(&ns);
    let metric = HttpStub::start().await.unwrap();
    metric.respond_json(200, &json!({"status": "unsure"}));
    ns.apply_yaml(&web_template(&metric.url("/health"), 1, "1s"))
        .await
        .unwrap();
    ns.apply_yaml(&canary_rollout(
        "web",
        1,
        "app:v1",
        json!([{"analysis": {"templates": [{"templateName": "health"}]}}]),
        json!({}),
    ))
    .await
    .unwrap();
    wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;
    set_image(&api, "web", "app:v2").await;
    let text = explain_until(&env, &ns, "web", &["was Inconclusive (web: Inconclusive"]).await;
    assert!(
        text.starts_with("Rollout \"web\" is Paused: InconclusiveAnalysisRun"),
        "{text}"
    );
    assert!(
        text.contains("To go on: kubectl sluice promote web -n"),
        "{text}"
    );

    // Measured again, now failing: the update is aborted.
    metric.respond_json(200, &json!({"status": "bad"}));
    promote(&api, "web").await;
    let text = explain_until(
        &env,
        &ns,
        "web",
        &["the update was aborted (RolloutAborted: "],
    )
    .await;
    assert!(text.contains("assessed Failed"), "{text}");
    assert!(
        text.contains("kubectl sluice retry rollout web -n"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_analysis_still_measuring() {
    let (env, ns, _controller) = setup("explain-measuring").await;
    let api = rollouts(&ns);
    let metric = HttpStub::start().await.unwrap();
    metric.respond_json(200, &json!({"status": "ok"}));
    // Two measurements an hour apart: the run measures once, then keeps running.
    ns.apply_yaml(&web_template(&metric.url("/health"), 2, "1h"))
        .await
        .unwrap();
    ns.apply_yaml(&canary_rollout(
        "web",
        1,
        "app:v1",
        json!([{"analysis": {"templates": [{"templateName": "health"}]}}]),
        json!({}),
    ))
    .await
    .unwrap();
    wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;
    set_image(&api, "web", "app:v2").await;
    let text = explain_until(
        &env,
        &ns,
        "web",
        &["to finish measuring (web: Running, last value"],
    )
    .await;
    assert!(
        text.contains("To skip it: kubectl sluice promote web"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_invalid_spec_names_the_field() {
    let (env, ns, _controller) = setup("explain-invalid").await;
    ns.apply_yaml(&canary_rollout(
        "bad",
        1,
        "app:v1",
        json!([]),
        json!({}),
    ).replace("\"canary\":{\"steps\":[]}", "\"canary\":{\"steps\":[],\"canaryService\":\"no-canary\",\"stableService\":\"no-stable\"}"))
    .await
    .unwrap();
    let text = explain_until(
        &env,
        &ns,
        "bad",
        &["a valid spec: The Rollout \"bad\" is invalid: spec.strategy.canary.canaryService: Invalid value: \"no-canary\""],
    )
    .await;
    assert!(text.contains("not found"), "{text}");
    assert!(text.contains("lint -f FILE"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_blue_green_awaiting_promotion() {
    let (env, ns, _controller) = setup("explain-bluegreen").await;
    let api = rollouts(&ns);
    apply_blue_green(
        &ns,
        "manual",
        1,
        "app:v1",
        json!({"autoPromotionEnabled": false}),
    )
    .await;
    apply_blue_green(
        &ns,
        "auto",
        1,
        "app:v1",
        json!({"autoPromotionSeconds": 3600}),
    )
    .await;
    wait_phase(&api, "manual", RolloutPhase::Healthy, TIMEOUT).await;
    wait_phase(&api, "auto", RolloutPhase::Healthy, TIMEOUT).await;
    set_image(&api, "manual", "app:v2").await;
    set_image(&api, "auto", "app:v2").await;
    let text = explain_until(
        &env,
        &ns,
        "manual",
        &["a promotion: the preview is up and autoPromotionEnabled is false"],
    )
    .await;
    assert!(
        text.contains("To switch traffic to it: kubectl sluice promote manual"),
        "{text}"
    );
    let text = explain_until(&env, &ns, "auto", &["the automatic promotion at "]).await;
    assert!(text.contains("autoPromotionSeconds)"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_experiment_step_running() {
    let (env, ns, _controller) = setup("explain-experiment").await;
    let api = rollouts(&ns);
    ns.apply_yaml(&canary_rollout(
        "web",
        1,
        "app:v1",
        json!([{"experiment": {"duration": "1h", "templates": [
            {"name": "canary", "specRef": "canary", "replicas": 1}
        ]}}]),
        json!({}),
    ))
    .await
    .unwrap();
    wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;
    set_image(&api, "web", "app:v2").await;
    let text = explain_until(&env, &ns, "web", &["Experiment \"web-"]).await;
    assert!(text.contains("to finish"), "{text}");
    assert!(
        text.contains("kubectl sluice get experiment web-"),
        "{text}"
    );
}

/// Istio host split from Argo's corpus, paused at its 10% step; then, with the controller
/// stopped, the VirtualService is put back to 0% by hand: the weight the engine decides is not
/// what the router object carries, so explain reports it pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_router_weight_not_yet_routed() {
    use kube::api::PostParams;
    use sluice_e2e::routing::{install_router_crds, json_of, virtual_services, vs_weights};

    let (env, ns, controller) = setup("explain-router").await;
    install_router_crds(&env).await;
    ns.apply_yaml(&corpus_file("test/e2e/istio/istio-host-split.yaml"))
        .await
        .unwrap();
    let api = rollouts(&ns);
    let name = "istio-host-split";
    let (canary, stable) = ("istio-host-split-canary", "istio-host-split-stable");
    wait_phase(&api, name, RolloutPhase::Healthy, TIMEOUT).await;
    set_image(&api, name, "nginx:1.20-alpine").await;
    wait_phase(&api, name, RolloutPhase::Paused, TIMEOUT).await;
    controller.stop().await;

    let vss = virtual_services(&ns);
    let mut vs = json_of(&vss.get("istio-host-split-vsvc").await.unwrap());
    assert_eq!(vs_weights(&vs, canary, stable), Some((10, 90)));
    for route in vs["spec"]["http"][0]["route"].as_array_mut().unwrap() {
        let to_canary = route["destination"]["host"] == canary;
        route["weight"] = json!(if to_canary { 0 } else { 100 });
    }
    let object = serde_json::from_value(vs).unwrap();
    vss.replace("istio-host-split-vsvc", &PostParams::default(), &object)
        .await
        .unwrap();

    let text = explain_until(
        &env,
        &ns,
        name,
        &["the traffic router to carry 10% to the canary: the weight is written but not yet read back"],
    )
    .await;
    assert!(text.contains("a promotion: step 2/"), "{text}");
}
