//! Argo's corpus Experiments on the real control plane reach the phases Argo's own suite
//! expects, with Argo's objects on the way: one ReplicaSet per template named
//! `<experiment>-<template>` with the experiment annotations and a pod-template hash, a
//! Service per template that asks for one (ports from the containers), `availableAt` once all
//! templates run, Successful after `duration`, then the ReplicaSets given a scale-down deadline
//! and scaled to 0 and the Services deleted. With analyses: the runs named
//! `<experiment>-<analysis>`, a dry-run failure that does not fail the Experiment, a failing
//! run that does, and an Experiment without a duration that only ends when terminated.

use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::{Patch, PatchParams};
use sluice_api::analysis::AnalysisRun;
use sluice_api::experiment::Experiment;
use sluice_e2e::*;
use sluice_testenv::harness::{TestEnv, TestNamespace, wait_for};

const LONG: Duration = Duration::from_secs(150);

fn experiments(ns: &TestNamespace) -> Api<Experiment> {
    ns.api()
}

/// A corpus file with `generateName` turned into a name (server-side apply needs one).
fn named(file: &str, name: &str) -> String {
    corpus_file(file).replace(&format!("generateName: {name}-"), &format!("name: {name}"))
}

async fn wait_phase(ns: &TestNamespace, name: &str, phase: &str, timeout: Duration) -> Experiment {
    let api = experiments(ns);
    wait_for(&format!("Experiment {name} {phase}"), timeout, || async {
        let e = api.get(name).await?;
        let got = e
            .status
            .as_ref()
            .and_then(|s| s.phase.as_ref())
            .map(|p| p.to_string());
        anyhow::ensure!(got.as_deref() == Some(phase), "{got:?}");
        Ok(e)
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}"))
}

async fn replica_set(ns: &TestNamespace, name: &str) -> ReplicaSet {
    let api: Api<ReplicaSet> = ns.api();
    wait_for(&format!("ReplicaSet {name}"), TIMEOUT, || async {
        Ok(api.get(name).await?)
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}"))
}

/// A plain Experiment: its ReplicaSets while it runs, Successful after its duration, then
/// wound down.
async fn basic(env: TestEnv, file: &'static str, name: &'static str, templates: [&'static str; 2]) {
    let ns = TestNamespace::create(&env, "exp-basic").await.unwrap();
    let _controller = start_controller(&env, &ns);
    ns.apply_yaml(&named(file, name)).await.unwrap();
    let running = wait_phase(&ns, name, "Running", TIMEOUT).await;
    let status = running.status.clone().unwrap_or_default();
    assert!(status.available_at.is_some(), "availableAt once all run");
    for template in templates {
        let rs = replica_set(&ns, &format!("{name}-{template}")).await;
        let annotations = rs.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(annotations["experiment.argoproj.io/name"], name);
        assert_eq!(
            annotations["experiment.argoproj.io/template-name"],
            template
        );
        let labels = rs.metadata.labels.clone().unwrap_or_default();
        assert!(
            labels.contains_key("rollouts-pod-template-hash"),
            "{labels:?}"
        );
        let owner = &rs.metadata.owner_references.clone().unwrap_or_default()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("Experiment", Some(true))
        );
        assert_eq!(rs.spec.as_ref().and_then(|s| s.replicas), Some(1));
    }
    let statuses = status.template_statuses.clone().unwrap_or_default();
    assert_eq!(statuses.len(), 2, "{statuses:?}");
    assert!(
        statuses
            .iter()
            .all(|t| t.status.as_ref().map(|s| s.to_string()).as_deref() == Some("Running")),
        "{statuses:?}"
    );
    // duration: 30s.
    wait_phase(&ns, name, "Successful", LONG).await;
    // Then each ReplicaSet gets its scale-down deadline (30 s by default) and goes to 0.
    let rss: Api<ReplicaSet> = ns.api();
    wait_for("the ReplicaSets scaled to 0", LONG, || async {
        for template in templates {
            let rs = rss.get(&format!("{name}-{template}")).await?;
            let replicas = rs.spec.and_then(|s| s.replicas);
            anyhow::ensure!(replicas == Some(0), "{template}: {replicas:?}");
        }
        Ok(())
    })
    .await
    .unwrap();
}

/// Services per template: named after the template's ReplicaSet or as asked, with the
/// containers' ports, selecting the template's pods; deleted once the template is done.
async fn services(
    env: TestEnv,
    file: &'static str,
    name: &'static str,
    expected: &'static [(&'static str, usize)],
) {
    let ns = TestNamespace::create(&env, "exp-svc").await.unwrap();
    let _controller = start_controller(&env, &ns);
    ns.apply_yaml(&named(file, name)).await.unwrap();
    wait_phase(&ns, name, "Running", TIMEOUT).await;
    let api: Api<Service> = ns.api();
    for (svc, ports) in expected {
        let s = wait_for(&format!("Service {svc}"), TIMEOUT, || async {
            Ok(api.get(svc).await?)
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
        let spec = s.spec.clone().unwrap_or_default();
        assert_eq!(
            spec.ports.clone().unwrap_or_default().len(),
            *ports,
            "{svc}: {spec:?}"
        );
        let selector = spec.selector.clone().unwrap_or_default();
        assert!(
            selector.contains_key("rollouts-pod-template-hash"),
            "{selector:?}"
        );
        let owner = &s.metadata.owner_references.clone().unwrap_or_default()[0];
        assert_eq!(owner.kind, "Experiment");
    }
    let done = wait_phase(&ns, name, "Successful", LONG).await;
    let statuses = done
        .status
        .unwrap_or_default()
        .template_statuses
        .unwrap_or_default();
    assert!(
        statuses.iter().any(|t| t.service_name.is_some()),
        "{statuses:?}"
    );
    wait_for("the Services deleted", LONG, || async {
        for (svc, _) in expected {
            anyhow::ensure!(api.get_opt(svc).await?.is_none(), "{svc} still there");
        }
        Ok(())
    })
    .await
    .unwrap();
}

/// Analyses: dry-run and measurement retention runs do not fail the Experiment.
async fn with_run(env: TestEnv, file: &'static str, name: &'static str, analysis: &'static str) {
    let ns = TestNamespace::create(&env, "exp-run").await.unwrap();
    let _controller = start_controller(&env, &ns);
    // The fake kubelet fails a container whose command is /bad-command: the job metric fails,
    // which a dry run (or retention alone) must not turn into a failed Experiment.
    let manifest = named(file, name).replace("command: [exit, \"1\"]", "command: [/bad-command]");
    ns.apply_yaml(&manifest).await.unwrap();
    let done = wait_phase(&ns, name, "Successful", LONG).await;
    let runs = done
        .status
        .unwrap_or_default()
        .analysis_runs
        .unwrap_or_default();
    let run = runs
        .iter()
        .find(|r| r.name.as_deref() == Some(analysis))
        .unwrap_or_else(|| panic!("{runs:?}"));
    assert_eq!(
        run.analysis_run.as_deref(),
        Some(format!("{name}-{analysis}").as_str())
    );
    let api: Api<AnalysisRun> = ns.api();
    let ar = api.get(&format!("{name}-{analysis}")).await.unwrap();
    assert_eq!(
        ar.metadata.owner_references.unwrap_or_default()[0].kind,
        "Experiment"
    );
}

/// Argo's analysis example: with a failing `random-fail` run the Experiment fails; with both
/// runs passing (and no duration) it runs until terminated, then succeeds.
async fn example_with_analysis(env: TestEnv, failing: bool) {
    let ns = TestNamespace::create(&env, "exp-example").await.unwrap();
    let _controller = start_controller(&env, &ns);
    let mut templates = corpus_file("examples/analysis-templates.yaml");
    if failing {
        // The fake kubelet fails a container whose command is /bad-command: the coin comes
        // up "fail" every time.
        templates = templates
            .replace(
                "args: [FLIP=$(($(($RANDOM%10))%2)) && exit $FLIP]",
                "args: [/bad-command]",
            )
            .replace(
                "command: [sh, -c]\n                args: [/bad-command]",
                "command: [/bad-command]",
            );
    }
    ns.apply_yaml(&templates).await.unwrap();
    ns.apply_yaml(&corpus_file("examples/experiment-with-analysis.yaml"))
        .await
        .unwrap();
    let name = "experiment-with-analysis";
    if failing {
        let failed = wait_phase(&ns, name, "Failed", LONG).await;
        let runs = failed
            .status
            .unwrap_or_default()
            .analysis_runs
            .unwrap_or_default();
        assert!(
            runs.iter().any(|r| r.name.as_deref() == Some("random-fail")
                && r.phase.as_ref().map(|p| p.to_string()).as_deref() == Some("Failed")),
            "{runs:?}"
        );
        return;
    }
    let running = wait_phase(&ns, name, "Running", TIMEOUT).await;
    assert!(running.status.unwrap_or_default().available_at.is_some());
    // Both runs pass, but without a duration or a required analysis nothing ends it.
    wait_for("both runs Successful", LONG, || async {
        let e = experiments(&ns).get(name).await?;
        let runs = e
            .status
            .unwrap_or_default()
            .analysis_runs
            .unwrap_or_default();
        let ok = runs
            .iter()
            .filter(|r| r.phase.as_ref().map(|p| p.to_string()).as_deref() == Some("Successful"))
            .count();
        anyhow::ensure!(ok == 2, "{runs:?}");
        Ok(())
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    wait_phase(&ns, name, "Running", TIMEOUT).await;
    experiments(&ns)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"terminate": true}})),
        )
        .await
        .unwrap();
    wait_phase(&ns, name, "Successful", LONG).await;
}

type Scenario = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn corpus_experiments_reach_argos_phases() {
    let env = TestEnv::with_crds().await.expect("local control plane");
    let e = || env.clone();
    let scenarios: Vec<Scenario> = vec![
        Box::pin(basic(
            e(),
            "test/e2e/functional/experiment-basic.yaml",
            "experiment-basic",
            ["baseline", "canary"],
        )),
        Box::pin(basic(
            e(),
            "test/e2e/functional/experiment-same-template.yaml",
            "experiment-same-template",
            ["first", "second"],
        )),
        Box::pin(services(
            e(),
            "test/e2e/functional/experiment-with-service.yaml",
            "experiment-with-service",
            &[("experiment-with-service-test", 1)],
        )),
        Box::pin(services(
            e(),
            "test/e2e/functional/experiment-with-service-name.yaml",
            "experiment-with-service-name",
            &[("test-service-name", 1)],
        )),
        Box::pin(services(
            e(),
            "test/e2e/functional/experiment-with-multiport-service.yaml",
            "experiment-with-multiport-service",
            &[("experiment-with-multiport-service-test", 3)],
        )),
        Box::pin(with_run(
            e(),
            "test/e2e/functional/experiment-dry-run-analysis.yaml",
            "experiment-with-dry-run",
            "dry-run-job",
        )),
        Box::pin(with_run(
            e(),
            "test/e2e/functional/experiment-measurement-retention-analysis.yaml",
            "experiment-with-mr",
            "measurement-retention-job",
        )),
        Box::pin(example_with_analysis(e(), true)),
        Box::pin(example_with_analysis(e(), false)),
    ];
    join_all(scenarios).await;
}
