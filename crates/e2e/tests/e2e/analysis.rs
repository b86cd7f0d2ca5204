//! Analysis against the real control plane: AnalysisRuns created by Rollouts and measured by
//! Sluice's providers against real servers (a local HTTP endpoint the test controls, Debian's
//! Prometheus scraping a target the test controls, Jobs run by the real Job controller).

use std::time::{Duration, Instant};

use kube::Api;
use kube::api::ListParams;
use serde_json::{Value, json};
use sluice_api::analysis::AnalysisRun;
use sluice_api::common::AnalysisPhase;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::*;
use sluice_testenv::harness::{TestNamespace, wait_for};
use sluice_testenv::http_stub::HttpStub;
use sluice_testenv::prometheus::Prometheus;

/// A canary Rollout with `analysis` merged into `spec.strategy.canary`.
fn rollout_with(name: &str, steps: Value, canary_extra: Value) -> String {
    let mut ro: Value = serde_json::from_str(&canary_rollout(
        name,
        2,
        "app:v1",
        steps,
        json!({"progressDeadlineSeconds": 600}),
    ))
    .unwrap();
    let canary = ro
        .pointer_mut("/spec/strategy/canary")
        .and_then(Value::as_object_mut)
        .unwrap();
    for (k, v) in canary_extra.as_object().unwrap() {
        canary.insert(k.clone(), v.clone());
    }
    ro.to_string()
}

fn web_template(name: &str, url: &str, extra_metric: Value) -> String {
    let mut metric = json!({
        "name": "web",
        "interval": "2s",
        "successCondition": "result.status == 'ok'",
        "failureCondition": "result.status == 'bad'",
        "provider": {"web": {"url": url}}
    });
    for (k, v) in extra_metric.as_object().unwrap() {
        metric[k] = v.clone();
    }
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AnalysisTemplate",
        "metadata": {"name": name},
        "spec": {"metrics": [metric]}
    })
    .to_string()
}

async fn runs_of(ns: &TestNamespace, rollout_type: &str) -> Vec<AnalysisRun> {
    ns.api::<AnalysisRun>()
        .list(&ListParams::default().labels(&format!("rollout-type={rollout_type}")))
        .await
        .unwrap()
        .items
}

fn pause_reasons(ro: &sluice_api::Rollout) -> Vec<String> {
    ro.status
        .as_ref()
        .and_then(|s| s.pause_conditions.clone())
        .unwrap_or_default()
        .iter()
        .filter_map(|p| p.reason.as_ref().map(|r| r.as_str().to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inconclusive_background_analysis_holds_through_a_timed_pause_until_resumed() {
    let (_env, ns, _controller) = setup("inconclusive").await;
    let api = rollouts(&ns);
    let metric = HttpStub::start().await.unwrap();
    // Neither condition holds: every measurement is Inconclusive (inconclusiveLimit 0).
    metric.respond_json(200, &json!({"status": "unsure"}));
    ns.apply_yaml(&web_template("health", &metric.url("/health"), json!({})))
        .await
        .unwrap();
    let pause_secs = 10;
    ns.apply_yaml(&rollout_with(
        "inc",
        json!([{"setWeight": 50}, {"pause": {"duration": format!("{pause_secs}s")}}]),
        // From the timed pause on: the verdict lands while the pause step runs.
        json!({"analysis": {"templates": [{"templateName": "health"}], "startingStep": 1}}),
    ))
    .await
    .unwrap();
    wait_phase(&api, "inc", RolloutPhase::Healthy, TIMEOUT).await;
    assert!(runs_of(&ns, "Background").await.is_empty());

    set_image(&api, "inc", "app:v2").await;
    let started = Instant::now();
    let ro = wait_for(
        "the rollout to pause on the Inconclusive run",
        TIMEOUT,
        || async {
            let ro = api.get("inc").await?;
            if pause_reasons(&ro).contains(&"InconclusiveAnalysisRun".to_string()) {
                Ok(ro)
            } else {
                anyhow::bail!("{:?}", ro.status.as_ref().map(|s| &s.pause_conditions))
            }
        },
    )
    .await
    .unwrap();
    // One measurement interval (2 s) plus the time to create pods and the run.
    eprintln!(
        "paused on InconclusiveAnalysisRun {:?} after the update",
        started.elapsed()
    );
    assert_eq!(
        ro.status.as_ref().unwrap().phase,
        Some(RolloutPhase::Paused)
    );
    let run_name = runs_of(&ns, "Background").await[0].metadata.name.clone();

    // The timed step runs out, as in Argo: the Inconclusive pause alone holds the update and
    // is the phase message; the pods stay as they are and the run is not re-created.
    let ro = wait_for("the timed pause step to run out", TIMEOUT, || async {
        let ro = api.get("inc").await?;
        let s = ro.status.clone().unwrap_or_default();
        anyhow::ensure!(s.current_step_index == Some(2), "{s:?}");
        Ok(ro)
    })
    .await
    .unwrap();
    let s = ro.status.clone().unwrap();
    assert_eq!(
        pause_reasons(&ro),
        vec!["InconclusiveAnalysisRun".to_string()]
    );
    assert_eq!(s.phase, Some(RolloutPhase::Paused));
    assert_eq!(s.message.as_deref(), Some("InconclusiveAnalysisRun"));
    let watch_until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < watch_until {
        let ro = api.get("inc").await.unwrap();
        let s = ro.status.as_ref().unwrap();
        assert_eq!(s.phase, Some(RolloutPhase::Paused), "{s:?}");
        assert_ne!(s.stable_rs, s.current_pod_hash, "not completed");
        let runs = runs_of(&ns, "Background").await;
        assert_eq!(runs.len(), 1, "exactly one background run");
        assert_eq!(runs[0].metadata.name, run_name, "never re-created");
        assert_eq!(
            runs[0].status.as_ref().and_then(|s| s.phase.clone()),
            Some(AnalysisPhase::Inconclusive)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    wait_replicas(&ns, "inc", &[("app:v1", 1), ("app:v2", 1)], TIMEOUT).await;

    // The metric recovers. A resume (Argo CD's Resume: the pause conditions cleared)
    // measures again with a new run; the steps are done, so the update completes.
    metric.respond_json(200, &json!({"status": "ok"}));
    promote(&api, "inc").await;
    let ro = wait_phase(&api, "inc", RolloutPhase::Healthy, TIMEOUT).await;
    let status = ro.status.unwrap();
    assert_eq!(status.stable_rs, status.current_pod_hash);
    let mut names: Vec<String> = runs_of(&ns, "Background")
        .await
        .iter()
        .filter_map(|r| r.metadata.name.clone())
        .collect();
    names.sort();
    let first = run_name.unwrap();
    assert_eq!(
        names,
        vec![first.clone(), format!("{first}.1")],
        "measured again"
    );
    wait_replicas(&ns, "inc", &[("app:v1", 0), ("app:v2", 2)], TIMEOUT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_step_analysis_promotes_when_healthy_and_aborts_when_failed() {
    let (_env, ns, _controller) = setup("web-step").await;
    let api = rollouts(&ns);
    let metric = HttpStub::start().await.unwrap();
    metric.respond_json(200, &json!({"status": "ok"}));
    ns.apply_yaml(&web_template(
        "health",
        &metric.url("/health"),
        json!({"count": 2, "interval": "1s"}),
    ))
    .await
    .unwrap();
    ns.apply_yaml(&rollout_with(
        "web",
        json!([{"setWeight": 50}, {"analysis": {"templates": [{"templateName": "health"}]}}]),
        json!({}),
    ))
    .await
    .unwrap();
    wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;

    set_image(&api, "web", "app:v2").await;
    let ro = wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;
    assert_eq!(
        ro.status.as_ref().unwrap().stable_rs,
        ro.status.as_ref().unwrap().current_pod_hash
    );
    let runs = runs_of(&ns, "Step").await;
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    assert_eq!(
        run.status.as_ref().unwrap().phase,
        Some(AnalysisPhase::Successful)
    );
    let hash = ro
        .status
        .as_ref()
        .unwrap()
        .current_pod_hash
        .clone()
        .unwrap();
    assert_eq!(
        run.metadata.name.as_deref(),
        Some(format!("web-{hash}-2-1").as_str())
    );
    assert!(!metric.requests().is_empty());

    metric.respond_json(200, &json!({"status": "bad"}));
    set_image(&api, "web", "app:v3").await;
    let ro = wait_phase(&api, "web", RolloutPhase::Degraded, TIMEOUT).await;
    let message = ro
        .status
        .as_ref()
        .unwrap()
        .message
        .clone()
        .unwrap_or_default();
    assert!(
        message.contains("RolloutAborted") && message.contains("assessed Failed"),
        "{message}"
    );
    wait_replicas(&ns, "web", &[("app:v2", 2), ("app:v3", 0)], TIMEOUT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_analysis_promotes_a_healthy_metric_and_aborts_a_bad_one() {
    let (_env, ns, _controller) = setup("prometheus").await;
    let api = rollouts(&ns);
    // The scrape target: the test decides the success rate Prometheus sees.
    let target = HttpStub::start().await.unwrap();
    let set_rate = |rate: f64| {
        target.respond(
            200,
            "text/plain; version=0.0.4",
            &format!(
                "# TYPE sluice_demo_success_rate gauge\nsluice_demo_success_rate{{service=\"demo\"}} {rate}\n"
            ),
        )
    };
    set_rate(0.99);
    let prometheus = Prometheus::start(&[target.host_port()]).await.unwrap();
    prometheus
        .wait_for_series("sluice_demo_success_rate", TIMEOUT)
        .await
        .unwrap();
    let template = json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AnalysisTemplate",
        "metadata": {"name": "success-rate"},
        "spec": {
            "args": [{"name": "service"}],
            "metrics": [{
                "name": "success-rate",
                "interval": "2s",
                "count": 2,
                "successCondition": "result[0] >= 0.95",
                "failureCondition": "result[0] < 0.95",
                "provider": {"prometheus": {
                    "address": prometheus.address(),
                    "query": "max(sluice_demo_success_rate{service=\"{{args.service}}\"})"
                }}
            }]
        }
    });
    ns.apply_yaml(&template.to_string()).await.unwrap();
    ns.apply_yaml(&rollout_with(
        "prom",
        json!([
            {"setWeight": 50},
            {"analysis": {
                "templates": [{"templateName": "success-rate"}],
                "args": [{"name": "service", "value": "demo"}]
            }}
        ]),
        json!({}),
    ))
    .await
    .unwrap();
    wait_phase(&api, "prom", RolloutPhase::Healthy, TIMEOUT).await;

    set_image(&api, "prom", "app:v2").await;
    wait_phase(&api, "prom", RolloutPhase::Healthy, TIMEOUT).await;
    let runs = runs_of(&ns, "Step").await;
    assert_eq!(runs.len(), 1);
    let status = runs[0].status.clone().unwrap();
    assert_eq!(status.phase, Some(AnalysisPhase::Successful));
    let measurements = status.metric_results.unwrap()[0]
        .measurements
        .clone()
        .unwrap();
    assert_eq!(measurements.len(), 2);
    assert_eq!(measurements[0].value.as_deref(), Some("[0.99]"));

    set_rate(0.42);
    // Let Prometheus scrape the new value before the next update measures it.
    tokio::time::sleep(Duration::from_secs(3)).await;
    set_image(&api, "prom", "app:v3").await;
    let ro = wait_phase(&api, "prom", RolloutPhase::Degraded, TIMEOUT).await;
    let message = ro.status.unwrap().message.unwrap_or_default();
    assert!(message.contains("assessed Failed"), "{message}");
    wait_replicas(&ns, "prom", &[("app:v2", 2), ("app:v3", 0)], TIMEOUT).await;
}

/// A standalone AnalysisRun with one Job metric.
fn job_run(name: &str, command: &[&str]) -> String {
    job_run_of(name, "busybox", command)
}

fn job_run_of(name: &str, image: &str, command: &[&str]) -> String {
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AnalysisRun",
        "metadata": {"name": name},
        "spec": {"metrics": [{
            "name": "job",
            "provider": {"job": {"spec": {
                "backoffLimit": 0,
                "template": {"spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "check", "image": image, "command": command}]
                }}
            }}}
        }]}
    })
    .to_string()
}

async fn wait_run_phase(api: &Api<AnalysisRun>, name: &str, want: AnalysisPhase) -> AnalysisRun {
    wait_for(
        &format!("analysis run {name} to be {want:?}"),
        TIMEOUT,
        || async {
            let run = api.get(name).await?;
            let phase = run.status.as_ref().and_then(|s| s.phase.clone());
            if phase == Some(want.clone()) {
                Ok(run)
            } else {
                anyhow::bail!("{:?}", run.status)
            }
        },
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_metric_succeeds_with_a_succeeding_job_and_fails_with_a_failing_one() {
    // And, as Argo 1.10, is Inconclusive when the Job's image cannot be pulled (the fake
    // kubelet never pulls an image named `does-not-exist`).
    let (_env, ns, _controller) = setup("job-metric").await;
    let runs = ns.api::<AnalysisRun>();
    ns.apply_yaml(&job_run("job-ok", &["sh", "-c", "sleep 1"]))
        .await
        .unwrap();
    ns.apply_yaml(&job_run("job-bad", &["/bad-command"]))
        .await
        .unwrap();
    ns.apply_yaml(&job_run_of("job-no-image", "does-not-exist:1", &["true"]))
        .await
        .unwrap();
    let ok = wait_run_phase(&runs, "job-ok", AnalysisPhase::Successful).await;
    let bad = wait_run_phase(&runs, "job-bad", AnalysisPhase::Failed).await;
    let no_image = wait_run_phase(&runs, "job-no-image", AnalysisPhase::Inconclusive).await;
    let result = &no_image
        .status
        .as_ref()
        .unwrap()
        .metric_results
        .as_ref()
        .unwrap()[0];
    let message = result.measurements.as_ref().unwrap()[0]
        .message
        .clone()
        .unwrap_or_default();
    assert!(
        message.starts_with("Pod ")
            && message.contains(", container check has terminal error (")
            && message.ends_with('\n'),
        "{message:?}"
    );

    let jobs = ns
        .api::<k8s_openapi::api::batch::v1::Job>()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    for run in [&ok, &bad, &no_image] {
        let uid = run.metadata.uid.clone().unwrap();
        let job = jobs
            .iter()
            .find(|j| j.metadata.name.as_deref() == Some(format!("{uid}.job.1").as_str()))
            .unwrap_or_else(|| {
                panic!(
                    "job {uid}.job.1 in {:?}",
                    jobs.iter().map(|j| &j.metadata.name).collect::<Vec<_>>()
                )
            });
        let labels = job.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("analysisrun.argoproj.io/uid"), Some(&uid));
        let template = job.spec.as_ref().unwrap().template.metadata.as_ref();
        let pod_labels = template.and_then(|m| m.labels.clone()).unwrap_or_default();
        assert_eq!(pod_labels.get("analysisrun.argoproj.io/uid"), Some(&uid));
        let annotations = job.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(
            annotations.get("analysisrun.argoproj.io/name"),
            run.metadata.name.as_ref()
        );
        assert_eq!(
            annotations
                .get("analysisrun.argoproj.io/metric-name")
                .map(String::as_str),
            Some("job")
        );
    }
}

/// The hash the active Service selects.
async fn active_hash(ns: &TestNamespace, service: &str) -> Option<String> {
    let svc = ns
        .api::<k8s_openapi::api::core::v1::Service>()
        .get(service)
        .await
        .unwrap();
    svc.spec?
        .selector?
        .get("rollouts-pod-template-hash")
        .cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blue_green_pre_and_post_promotion_analysis_gate_and_undo_the_switch() {
    let (_env, ns, _controller) = setup("bg-analysis").await;
    let api = rollouts(&ns);
    let pre = HttpStub::start().await.unwrap();
    let post = HttpStub::start().await.unwrap();
    pre.respond_json(200, &json!({"status": "ok"}));
    post.respond_json(200, &json!({"status": "ok"}));
    for (name, stub) in [("pre-check", &pre), ("post-check", &post)] {
        ns.apply_yaml(&web_template(name, &stub.url("/"), json!({"count": 1})))
            .await
            .unwrap();
    }
    ns.apply_yaml(
        &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "bg-active"},
                "spec": {"selector": {"app": "bga"}, "ports": [{"port": 80}]}})
        .to_string(),
    )
    .await
    .unwrap();
    let mut manifest: Value =
        serde_json::from_str(&canary_rollout("bga", 2, "app:v1", json!([]), json!({}))).unwrap();
    manifest["spec"]["strategy"] = json!({"blueGreen": {
        "activeService": "bg-active",
        "scaleDownDelaySeconds": 5,
        "prePromotionAnalysis": {"templates": [{"templateName": "pre-check"}]},
        "postPromotionAnalysis": {"templates": [{"templateName": "post-check"}]}
    }});
    ns.apply_yaml(&manifest.to_string()).await.unwrap();
    let ro = wait_phase(&api, "bga", RolloutPhase::Healthy, TIMEOUT).await;
    let v1 = ro.status.unwrap().current_pod_hash.unwrap();
    assert!(
        runs_of(&ns, "PrePromotion").await.is_empty(),
        "a first deploy is not analysed"
    );

    // Both analyses pass: switched, and the new pods become stable.
    set_image(&api, "bga", "app:v2").await;
    let ro = wait_phase(&api, "bga", RolloutPhase::Healthy, TIMEOUT).await;
    let v2 = ro
        .status
        .as_ref()
        .unwrap()
        .current_pod_hash
        .clone()
        .unwrap();
    assert_eq!(
        ro.status.as_ref().unwrap().stable_rs.as_deref(),
        Some(v2.as_str())
    );
    assert_eq!(
        active_hash(&ns, "bg-active").await.as_deref(),
        Some(v2.as_str())
    );
    for (kind, suffix) in [("PrePromotion", "pre"), ("PostPromotion", "post")] {
        let runs = runs_of(&ns, kind).await;
        assert_eq!(runs.len(), 1, "{kind}");
        assert_eq!(
            runs[0].metadata.name.as_deref(),
            Some(format!("bga-{v2}-2-{suffix}").as_str())
        );
        assert_eq!(
            runs[0].status.as_ref().unwrap().phase,
            Some(AnalysisPhase::Successful)
        );
    }

    // Pre-promotion fails: never switched, aborted.
    pre.respond_json(200, &json!({"status": "bad"}));
    set_image(&api, "bga", "app:v3").await;
    let ro = wait_phase(&api, "bga", RolloutPhase::Degraded, TIMEOUT).await;
    assert!(
        ro.status
            .unwrap()
            .message
            .unwrap_or_default()
            .contains("assessed Failed"),
    );
    assert_eq!(
        active_hash(&ns, "bg-active").await.as_deref(),
        Some(v2.as_str())
    );

    // Post-promotion fails after the switch: traffic goes back to the stable pods.
    pre.respond_json(200, &json!({"status": "ok"}));
    post.respond_json(200, &json!({"status": "bad"}));
    set_image(&api, "bga", "app:v4").await;
    let ro = wait_phase(&api, "bga", RolloutPhase::Degraded, TIMEOUT).await;
    let status = ro.status.unwrap();
    assert!(
        status
            .message
            .unwrap_or_default()
            .contains("assessed Failed")
    );
    assert_eq!(status.stable_rs.as_deref(), Some(v2.as_str()));
    wait_for(
        "the active service back on the stable pods",
        TIMEOUT,
        || async {
            match active_hash(&ns, "bg-active").await {
                Some(h) if h == v2 => Ok(()),
                other => anyhow::bail!("{other:?}"),
            }
        },
    )
    .await
    .unwrap();
    wait_replicas(&ns, "bga", &[("app:v2", 2)], TIMEOUT).await;
    assert_ne!(v1, v2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_template_nesting_a_namespaced_one_with_rollout_args_and_dry_run() {
    let (env, ns, _controller) = setup("cluster-template").await;
    let api = rollouts(&ns);
    let metric = HttpStub::start().await.unwrap();
    metric.respond_json(200, &json!({"status": "ok"}));
    // The nested template takes the URL from an argument the Rollout passes.
    ns.apply_yaml(
        &json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "AnalysisTemplate",
            "metadata": {"name": "inner"},
            "spec": {
                "args": [{"name": "url"}],
                "metrics": [
                    {"name": "web", "count": 1, "successCondition": "result.status == 'ok'",
                     "provider": {"web": {"url": "{{args.url}}"}}},
                    {"name": "shadow", "count": 1, "successCondition": "result.status == 'never'",
                     "provider": {"web": {"url": "{{args.url}}"}}}
                ],
                "dryRun": [{"metricName": "shadow"}]
            }
        })
        .to_string(),
    )
    .await
    .unwrap();
    let cluster_name = format!("outer-{}", ns.name());
    let cluster_templates: Api<sluice_api::analysis::ClusterAnalysisTemplate> =
        Api::all(env.client());
    let outer: sluice_api::analysis::ClusterAnalysisTemplate = serde_json::from_value(json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "ClusterAnalysisTemplate",
        "metadata": {"name": cluster_name},
        "spec": {"templates": [{"templateName": "inner"}]}
    }))
    .unwrap();
    cluster_templates
        .create(&Default::default(), &outer)
        .await
        .unwrap();
    ns.apply_yaml(&rollout_with(
        "nest",
        json!([
            {"setWeight": 50},
            {"analysis": {
                "templates": [{"templateName": cluster_name, "clusterScope": true}],
                "args": [{"name": "url", "value": metric.url("/status")}]
            }}
        ]),
        json!({}),
    ))
    .await
    .unwrap();
    wait_phase(&api, "nest", RolloutPhase::Healthy, TIMEOUT).await;
    set_image(&api, "nest", "app:v2").await;
    wait_phase(&api, "nest", RolloutPhase::Healthy, TIMEOUT).await;

    let runs = runs_of(&ns, "Step").await;
    assert_eq!(runs.len(), 1);
    let status = runs[0].status.clone().unwrap();
    // The dry-run metric failed without failing the run.
    assert_eq!(status.phase, Some(AnalysisPhase::Successful), "{status:?}");
    let dry = status.dry_run_summary.clone().unwrap_or_default();
    assert_eq!(dry.failed, Some(1), "{status:?}");
    let names: Vec<String> = runs[0]
        .spec
        .metrics
        .iter()
        .flatten()
        .filter_map(|m| m.name.clone())
        .collect();
    assert_eq!(names, ["web", "shadow"]);
    assert!(metric.requests().iter().all(|r| r.uri == "/status"));
    let _ = cluster_templates
        .delete(&cluster_name, &Default::default())
        .await;
}
