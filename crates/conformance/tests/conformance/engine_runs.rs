//! The other half of "never stricter than Argo": a Rollout whose spec Argo accepts is acted on
//! by Sluice's engine. Every generated Rollout that passes Argo's checks (as Sluice makes them,
//! which the validation comparison holds to Argo's code) goes through one reconcile: it must
//! not panic, and it may be refused only for what Argo refuses at run time too (an object it
//! names that does not exist), never for a problem only Sluice's checks see.

use std::panic::{AssertUnwindSafe, catch_unwind};

use k8s_openapi::api::core::v1::Service;
use serde_json::{Value, json};
use sluice_api::Rollout;
use sluice_api::rollout::RolloutConditionType;
use sluice_api::validation::check_rollout;
use sluice_conformance::differences::Differences;
use sluice_conformance::generate::rollout::rollout;
use sluice_conformance::run::compare;
use sluice_engine::Observed;

fn services() -> Vec<Service> {
    ["a", "b", "web", "web-canary", "web-stable"]
        .iter()
        .map(|name| {
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"selector": {"app": "web"}}
            }))
            .unwrap()
        })
        .collect()
}

fn observed(rollout: Rollout) -> Observed {
    Observed {
        services: services(),
        ..Observed::new(rollout, "2026-11-28T00:00:00Z".parse().unwrap())
    }
}

fn check(differences: &Differences, value: &Value) -> Result<String, String> {
    let Ok(ro) = serde_json::from_value::<Rollout>(value.clone()) else {
        return Ok("not read".into());
    };
    if ro.spec.workload_ref.is_some() {
        // Its template is another object's, which this harness does not observe; the
        // workloadRef tests of the engine cover it.
        return Ok("names a workload".into());
    }
    let problems = check_rollout(&ro);
    if problems.blocking().is_some() {
        return Ok("refused by Argo's checks".into());
    }
    let plan = catch_unwind(AssertUnwindSafe(|| sluice_engine::reconcile(&observed(ro))))
        .map_err(|_| "the engine panicked on a spec Argo accepts".to_string())?;
    let invalid = plan
        .status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == Some(RolloutConditionType::InvalidSpec))
        .and_then(|c| c.message.clone());
    match invalid {
        None if problems.sluice.is_empty() => Ok("acted on".into()),
        None => Ok("acted on, with a SpecWarning".into()),
        // Argo too refuses a Rollout whose objects are missing, once it looks them up.
        Some(message) if message.contains("not found") => Ok("waits for an object it names".into()),
        // Argo too stops at a traffic-router plugin its ConfigMap does not list.
        Some(message) if message.contains("not configured in configmap") => {
            Ok("waits for its plugin's configuration".into())
        }
        Some(message) => {
            if let Some(row) = differences.explains(None, Some(&message)) {
                return Ok(format!("documented difference ({row})"));
            }
            Err(format!(
                "Argo accepts the spec; Sluice's engine refuses it: {message}\nSluice's own problems: {:?}",
                problems.sluice
            ))
        }
    }
}

#[test]
fn the_engine_acts_on_every_spec_argo_accepts() {
    let differences = Differences::load("Run time");
    compare("engine-runs", rollout, |value| check(&differences, value));
}
