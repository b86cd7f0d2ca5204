//! Canary `experiment` steps with Argo's corpus Rollouts on the real control plane: the step
//! creates the Experiment Argo creates (named `<rollout>-<podHash>-<revision>-<step>`, owned
//! by the Rollout, templates from the stable and canary ReplicaSets), completes when it
//! succeeds (a required analysis done), aborts the update with Argo's message when its
//! analysis fails, and a step skipped by a promotion terminates its Experiment.

use std::time::Duration;

use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use sluice_api::analysis::AnalysisRun;
use sluice_api::experiment::Experiment;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::*;
use sluice_testenv::harness::{TestNamespace, wait_for};

const LONG: Duration = Duration::from_secs(150);

fn experiments(ns: &TestNamespace) -> Api<Experiment> {
    ns.api()
}

fn phase(e: &Experiment) -> Option<String> {
    e.status
        .as_ref()
        .and_then(|s| s.phase.as_ref())
        .map(|p| p.to_string())
}

/// Waits for the only Experiment of the namespace to reach `want`.
async fn wait_experiment(ns: &TestNamespace, want: &str) -> Experiment {
    wait_for(&format!("an Experiment {want}"), LONG, || async {
        let list = experiments(ns).list(&Default::default()).await?.items;
        let e = list.into_iter().next().ok_or(anyhow::anyhow!("none yet"))?;
        anyhow::ensure!(phase(&e).as_deref() == Some(want), "{:?}", phase(&e));
        Ok(e)
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}"))
}

/// Skips the current step, as `kubectl argo rollouts promote` does when nothing is paused.
async fn skip_step(ns: &TestNamespace, name: &str) {
    let api = rollouts(ns);
    let index = api
        .get(name)
        .await
        .unwrap()
        .status
        .and_then(|s| s.current_step_index)
        .unwrap_or(0);
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"currentStepIndex": index + 1}})),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_experiment_step_with_a_required_analysis_completes_the_step() {
    let (_env, ns, _controller) = setup("exp-step").await;
    ns.apply_yaml(&corpus_file(
        "test/e2e/functional/rollout-experiment-analysis.yaml",
    ))
    .await
    .unwrap();
    let api = rollouts(&ns);
    let name = "rollout-experiment";
    wait_phase(&api, name, RolloutPhase::Healthy, TIMEOUT).await;
    let stable = api
        .get(name)
        .await
        .unwrap()
        .status
        .unwrap()
        .stable_rs
        .unwrap();
    set_image(&api, name, "nginx:1.20-alpine").await;
    let running = wait_experiment(&ns, "Running").await;
    let ro = api.get(name).await.unwrap();
    let hash = ro.status.clone().unwrap().current_pod_hash.unwrap();
    let exp_name = running.metadata.name.clone().unwrap();
    assert_eq!(exp_name, format!("{name}-{hash}-2-0"));
    let owner = &running.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Rollout", name)
    );
    assert_eq!(
        running.metadata.annotations.clone().unwrap()["rollout.argoproj.io/revision"],
        "2"
    );
    assert_eq!(
        running.metadata.labels.clone().unwrap()["rollouts-pod-template-hash"],
        hash
    );
    // The analysis gets the Rollout's hashes and the templates' own.
    let run_name = format!("{exp_name}-echo-pod-hash");
    let runs: Api<AnalysisRun> = ns.api();
    let run = wait_for("the Experiment's run", TIMEOUT, || async {
        Ok(runs.get(&run_name).await?)
    })
    .await
    .unwrap();
    let args = run.spec.args.unwrap_or_default();
    let arg = |n: &str| {
        args.iter()
            .find(|a| a.name.as_deref() == Some(n))
            .and_then(|a| a.value.clone())
    };
    assert_eq!(arg("stable-hash").as_deref(), Some(stable.as_str()));
    assert_eq!(arg("latest-hash").as_deref(), Some(hash.as_str()));
    let baseline: k8s_openapi::api::apps::v1::ReplicaSet =
        ns.api().get(&format!("{exp_name}-baseline")).await.unwrap();
    let baseline_hash = baseline
        .metadata
        .labels
        .unwrap_or_default()
        .get("rollouts-pod-template-hash")
        .cloned();
    assert!(baseline_hash.is_some());
    assert_eq!(arg("baseline-hash"), baseline_hash);
    // The required analysis succeeds: the Experiment completes and so does the step; the
    // Rollout pauses at the next step.
    wait_experiment(&ns, "Successful").await;
    wait_phase(&api, name, RolloutPhase::Paused, LONG).await;
    let status = api.get(name).await.unwrap().status.unwrap();
    assert_eq!(status.current_step_index, Some(1));
    assert_eq!(
        status.canary.and_then(|c| c.current_experiment),
        None,
        "a finished Experiment is no longer current"
    );
    promote(&api, name).await;
    wait_phase(&api, name, RolloutPhase::Healthy, LONG).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_experiment_analysis_aborts_the_update_with_argos_message() {
    let (_env, ns, _controller) = setup("exp-fail").await;
    // The fake kubelet fails a container whose command is /bad-command: the coin of
    // `random-fail` comes up "fail" every time.
    let templates = corpus_file("examples/analysis-templates.yaml").replace(
        "command: [sh, -c]\n                args: [FLIP=$(($(($RANDOM%10))%2)) && exit $FLIP]",
        "command: [/bad-command]",
    );
    assert!(templates.contains("/bad-command"));
    ns.apply_yaml(&templates).await.unwrap();
    ns.apply_yaml(&corpus_file("examples/rollout-experiment-step.yaml"))
        .await
        .unwrap();
    let api = rollouts(&ns);
    let name = "rollout-experiment-step";
    wait_phase(&api, name, RolloutPhase::Healthy, TIMEOUT).await;
    set_image(&api, name, "argoproj/rollouts-demo:yellow").await;
    wait_experiment(&ns, "Failed").await;
    wait_phase(&api, name, RolloutPhase::Degraded, LONG).await;
    let status = api.get(name).await.unwrap().status.unwrap();
    assert_eq!(status.abort, Some(true));
    let message = status.message.unwrap_or_default();
    assert!(
        message.starts_with(
            "RolloutAborted: Rollout aborted update to revision 2: Experiment analysis phase is error/failed"
        ),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promoted_experiment_step_terminates_its_experiment() {
    let (_env, ns, _controller) = setup("exp-skip").await;
    ns.apply_yaml(&corpus_file("examples/rollout-baseline-vs-canary.yaml"))
        .await
        .unwrap();
    let api = rollouts(&ns);
    let name = "rollout-baseline-vs-canary";
    wait_phase(&api, name, RolloutPhase::Healthy, TIMEOUT).await;
    set_image(&api, name, "argoproj/rollouts-demo:yellow").await;
    // No duration and no analysis: it runs until the step is left.
    let running = wait_experiment(&ns, "Running").await;
    let templates = running.spec.templates.clone().unwrap();
    let images: Vec<String> = templates
        .iter()
        .map(|t| {
            t.template
                .as_ref()
                .unwrap()
                .spec
                .as_ref()
                .unwrap()
                .containers[0]
                .image
                .clone()
                .unwrap()
        })
        .collect();
    assert_eq!(
        images,
        [
            "argoproj/rollouts-demo:blue",
            "argoproj/rollouts-demo:yellow"
        ],
        "baseline from the stable ReplicaSet, canary from the new one"
    );
    skip_step(&ns, name).await;
    wait_phase(&api, name, RolloutPhase::Healthy, LONG).await;
    wait_for("the Experiment terminated", LONG, || async {
        let e = experiments(&ns)
            .get(&running.metadata.name.clone().unwrap())
            .await?;
        anyhow::ensure!(e.spec.terminate == Some(true), "not yet");
        Ok(())
    })
    .await
    .unwrap();
}

/// `(canary, stable, experiment)` weights of the first HTTP route of a VirtualService; the
/// experiment's destination is whatever host is neither the canary's nor the stable's.
fn vs_three(vs: &serde_json::Value) -> Option<(i64, i64, i64)> {
    let route = vs.pointer("/spec/http/0/route")?.as_array()?;
    let weight_of = |pick: &dyn Fn(&str) -> bool| {
        route
            .iter()
            .filter(|d| {
                pick(
                    d.pointer("/destination/host")
                        .and_then(|h| h.as_str())
                        .unwrap_or(""),
                )
            })
            .map(|d| d.get("weight").and_then(|w| w.as_i64()).unwrap_or(0))
            .sum::<i64>()
    };
    let (canary, stable) = ("istio-host-split-canary", "istio-host-split-stable");
    Some((
        weight_of(&|h| h == canary),
        weight_of(&|h| h == stable),
        weight_of(&|h| h != canary && h != stable),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routed_experiment_step_sends_its_template_the_step_weight() {
    use sluice_e2e::routing::{Recorder, install_router_crds, virtual_services};
    let (env, ns, _controller) = setup("exp-istio").await;
    install_router_crds(&env).await;
    ns.apply_yaml(&corpus_file(
        "test/e2e/istio/istio-host-split-experiment-step.yaml",
    ))
    .await
    .unwrap();
    let api = rollouts(&ns);
    let name = "istio-host-split";
    wait_phase(&api, name, RolloutPhase::Healthy, TIMEOUT).await;
    let recorder = Recorder::start(virtual_services(&ns), "istio-host-split-vsvc", vs_three);
    set_image(&api, name, "nginx:1.20-alpine").await;
    let running = wait_experiment(&ns, "Running").await;
    let exp_name = running.metadata.name.clone().unwrap();
    let service = format!("{exp_name}-experiment-istio");
    // The template's Service gets 20 beside the canary's 10 (setWeight before the step).
    wait_for("the experiment destination routed", TIMEOUT, || async {
        let vs = sluice_e2e::routing::json_of(
            &virtual_services(&ns).get("istio-host-split-vsvc").await?,
        );
        let hosts: Vec<String> = vs
            .pointer("/spec/http/0/route")
            .and_then(|r| r.as_array())
            .into_iter()
            .flatten()
            .filter_map(|d| {
                d.pointer("/destination/host")
                    .and_then(|h| h.as_str())
                    .map(str::to_string)
            })
            .collect();
        anyhow::ensure!(hosts.contains(&service), "{hosts:?}");
        anyhow::ensure!(vs_three(&vs) == Some((10, 70, 20)), "{:?}", vs_three(&vs));
        Ok(())
    })
    .await
    .unwrap();
    // The status says so too: written in the same plan, after the router (a read right after
    // the router's write may come before it).
    let api_ref = &api;
    let additional = wait_for(
        "the status to record the destination",
        TIMEOUT,
        || async move {
            let additional = api_ref
                .get(name)
                .await?
                .status
                .and_then(|s| s.canary)
                .and_then(|c| c.weights)
                .and_then(|w| w.additional)
                .unwrap_or_default();
            anyhow::ensure!(additional.len() == 1, "{additional:?}");
            Ok(additional)
        },
    )
    .await
    .unwrap();
    assert_eq!(
        additional[0].service_name.as_deref(),
        Some(service.as_str())
    );
    assert_eq!(additional[0].weight, Some(20));
    // Leaving the step: the experiment's share goes back, the update completes.
    skip_step(&ns, name).await;
    wait_phase(&api, name, RolloutPhase::Healthy, LONG).await;
    wait_for("the experiment destination gone", TIMEOUT, || async {
        let vs = sluice_e2e::routing::json_of(
            &virtual_services(&ns).get("istio-host-split-vsvc").await?,
        );
        anyhow::ensure!(vs_three(&vs) == Some((0, 100, 0)), "{:?}", vs_three(&vs));
        Ok(())
    })
    .await
    .unwrap();
    let seen = recorder.values().await;
    assert_eq!(seen.first(), Some(&(0, 100, 0)), "{seen:?}");
    assert!(seen.contains(&(10, 90, 0)), "{seen:?}");
    assert!(seen.contains(&(10, 70, 20)), "{seen:?}");
    assert_eq!(seen.last(), Some(&(0, 100, 0)), "{seen:?}");
}
