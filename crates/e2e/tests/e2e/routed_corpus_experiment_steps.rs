//! Every traffic-routed corpus Rollout with an experiment step (ALB, Istio host and subset
//! split, SMI) on the real control plane: Healthy unchanged, then after an image change its
//! Experiment runs with each weighted template recorded in `status.canary.weights.additional`
//! at its weight (and the stable's share reduced by it), and once the steps are through the
//! update completes with the experiment destinations gone. Experiments without a duration run
//! until their step is left, so the walk leaves each experiment step as `promote` does.

use std::time::Duration;

use futures::future::join_all;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use sluice_api::experiment::Experiment;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::routing::install_router_crds;
use sluice_e2e::*;
use sluice_testenv::harness::{TestEnv, TestNamespace, wait_for};

const FILES: &[&str] = &[
    "examples/traffic-routing-experiment-step/istio-host-split-experiment-step.yaml",
    "examples/traffic-routing-experiment-step/rollout-alb-experiment-step.yaml",
    "examples/traffic-routing-experiment-step/rollout-smi-experiment-step.yaml",
    "test/e2e/alb/rollout-alb-experiment-no-setweight.yaml",
    "test/e2e/alb/rollout-alb-experiment.yaml",
    "test/e2e/alb/rollout-alb-multi-ingress-experiment-no-setweight.yaml",
    "test/e2e/alb/rollout-alb-multi-ingress-experiment.yaml",
    "test/e2e/istio/istio-host-split-experiment-step.yaml",
    "test/e2e/istio/istio-subset-split-experiment-step.yaml",
    "test/e2e/smi/rollout-smi-experiment.yaml",
];

const LONG: Duration = Duration::from_secs(150);

/// Walks one file; returns what went wrong, if anything.
async fn walk(env: &TestEnv, file: &str) -> Result<(), String> {
    let prefix: String = file
        .rsplit('/')
        .next()
        .unwrap_or("f")
        .trim_end_matches(".yaml")
        .chars()
        .take(20)
        .collect();
    let ns = TestNamespace::create(env, &prefix)
        .await
        .map_err(|e| e.to_string())?;
    let mut args = controller_args(ns.name());
    // The SMI CRD of Argo's suite serves v1alpha4 only.
    args.traffic_split_api_version = "v1alpha4".into();
    let _controller = start_controller_with_args(env.client(), args);
    ns.apply_yaml(&corpus_file(file))
        .await
        .map_err(|e| format!("{e:#}"))?;
    let api = rollouts(&ns);
    let ro = api
        .list(&Default::default())
        .await
        .map_err(|e| e.to_string())?
        .items
        .into_iter()
        .next()
        .ok_or("no Rollout")?;
    let name = ro.metadata.name.clone().unwrap_or_default();
    let canary = ro
        .spec
        .strategy
        .as_ref()
        .and_then(|s| s.canary.clone())
        .unwrap_or_default();
    let weighted: Vec<(String, i32)> = canary
        .steps
        .iter()
        .flatten()
        .filter_map(|s| s.experiment.as_ref())
        .flat_map(|x| x.templates.iter().flatten())
        .filter_map(|t| Some((t.name.clone()?, t.weight?)))
        .collect();
    let healthy = |what: &'static str| {
        let api = api.clone();
        let name = name.clone();
        async move {
            wait_for(what, LONG, || async {
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
    let image = ro
        .spec
        .template
        .and_then(|t| t.spec?.containers.first()?.image.clone())
        .unwrap_or_default();
    set_image(&api, &name, &format!("{image}-next")).await;
    let experiments: kube::Api<Experiment> = ns.api();
    // The Experiment runs and its weighted templates are routed.
    let exp = wait_for("the Experiment running", LONG, || async {
        let e = experiments
            .list(&Default::default())
            .await?
            .items
            .into_iter()
            .next()
            .ok_or(anyhow::anyhow!("none yet"))?;
        let phase = e
            .status
            .as_ref()
            .and_then(|s| s.phase.as_ref())
            .map(|p| p.to_string());
        anyhow::ensure!(phase.as_deref() == Some("Running"), "{phase:?}");
        Ok(e)
    })
    .await
    .map_err(|e| format!("{e:#}"))?;
    let exp_name = exp.metadata.name.clone().unwrap_or_default();
    if !weighted.is_empty() {
        wait_for("the experiment weights recorded", LONG, || async {
            let s = api.get(&name).await?.status.unwrap_or_default();
            let w = s.canary.and_then(|c| c.weights).unwrap_or_default();
            let additional = w.additional.unwrap_or_default();
            for (template, weight) in &weighted {
                let found = additional.iter().any(|d| {
                    d.weight == Some(*weight)
                        && d.service_name.as_deref().is_some_and(|n| {
                            n.starts_with(&exp_name) && n.ends_with(template.as_str())
                        })
                });
                anyhow::ensure!(found, "{template} at {weight}: {additional:?}");
            }
            let canary_w = w.canary.and_then(|c| c.weight).unwrap_or(0);
            let stable_w = w.stable.and_then(|c| c.weight).unwrap_or(0);
            let extra: i32 = weighted.iter().map(|(_, w)| w).sum();
            anyhow::ensure!(
                canary_w + stable_w + extra == 100,
                "canary {canary_w} + stable {stable_w} + experiments {extra}"
            );
            Ok(())
        })
        .await
        .map_err(|e| format!("{e:#}"))?;
    }
    // Through the remaining steps: leave experiment steps, resume pauses.
    wait_for("the update to complete", LONG, || async {
        let ro = api.get(&name).await?;
        let s = ro.status.clone().unwrap_or_default();
        if s.phase == Some(RolloutPhase::Healthy)
            && s.stable_rs == s.current_pod_hash
            && s.current_pod_hash != first.current_pod_hash
        {
            return Ok(());
        }
        let index = s.current_step_index.unwrap_or(0);
        let at_experiment = ro
            .spec
            .strategy
            .as_ref()
            .and_then(|st| st.canary.as_ref())
            .and_then(|c| c.steps.as_ref())
            .and_then(|steps| steps.get(usize::try_from(index).unwrap_or(0)))
            .is_some_and(|step| step.experiment.is_some());
        let body = if s.pause_conditions.is_some() {
            json!({"status": {"pauseConditions": null, "controllerPause": false, "currentStepIndex": index + 1}})
        } else if at_experiment {
            json!({"status": {"currentStepIndex": index + 1}})
        } else {
            anyhow::bail!("{:?} at step {index}", s.phase);
        };
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(body))
            .await?;
        anyhow::bail!("stepped past {index}")
    })
    .await
    .map_err(|e| format!("{e:#}"))?;
    let done = api
        .get(&name)
        .await
        .map_err(|e| e.to_string())?
        .status
        .unwrap_or_default();
    let additional = done
        .canary
        .and_then(|c| c.weights)
        .and_then(|w| w.additional)
        .unwrap_or_default();
    if !additional.is_empty() {
        return Err(format!("experiment destinations left: {additional:?}"));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn routed_corpus_experiment_steps_route_their_templates_and_complete() {
    let env = TestEnv::with_crds().await.expect("local control plane");
    install_router_crds(&env).await;
    let results = join_all(FILES.iter().map(|f| {
        let env = env.clone();
        async move { (*f, walk(&env, f).await) }
    }))
    .await;
    let failed: Vec<String> = results
        .into_iter()
        .filter_map(|(f, r)| r.err().map(|e| format!("{f}: {e}")))
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
