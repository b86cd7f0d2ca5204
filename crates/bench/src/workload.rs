//! The objects a run creates and the test of "done" for each: one replica per workload, an
//! image to change, and the same pod template for a Rollout as for its Deployment twin.

use clap::ValueEnum;
use k8s_openapi::api::apps::v1::Deployment;
use serde::Serialize;
use serde_json::{Value, json};
use sluice_api::Rollout;
use sluice_api::rollout::RolloutPhase;

/// What the Rollouts of a run do on an update.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// Canary without steps: the same work as a Deployment's rolling update, and compared
    /// with N Deployments.
    Plain,
    /// Canary with steps: setWeight 50, a 2 s pause, then full promotion.
    Steps,
    /// Blue-green with an active Service per Rollout, promoted automatically.
    BlueGreen,
}

impl Scenario {
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Plain => "plain",
            Scenario::Steps => "steps",
            Scenario::BlueGreen => "blue-green",
        }
    }

    fn strategy(self, name: &str) -> Value {
        match self {
            Scenario::Plain => json!({ "canary": {} }),
            Scenario::Steps => json!({ "canary": { "steps": [
                { "setWeight": 50 },
                { "pause": { "duration": "2s" } },
            ] } }),
            Scenario::BlueGreen => json!({ "blueGreen": {
                "activeService": active_service(name),
                "autoPromotionEnabled": true,
            } }),
        }
    }
}

/// What every workload's name starts with.
pub const NAME_PREFIX: &str = "bench-";

/// The name of the `i`th workload (zero-padded so that listings sort).
pub fn workload_name(i: usize) -> String {
    format!("{NAME_PREFIX}{i:05}")
}

/// The image of revision `revision` (the bench only ever changes the tag).
pub fn image(revision: u32) -> String {
    format!("registry.example/sluice-bench:{revision}")
}

fn active_service(name: &str) -> String {
    format!("{name}-active")
}

fn pod_template(name: &str, revision: u32) -> Value {
    json!({
        "metadata": { "labels": { "app": name } },
        "spec": { "containers": [{
            "name": "app",
            "image": image(revision),
            "resources": { "requests": { "cpu": "1m", "memory": "1Mi" } },
        }] },
    })
}

pub fn rollout(scenario: Scenario, name: &str) -> serde_json::Result<Rollout> {
    serde_json::from_value(rollout_manifest(scenario, name, 1))
}

/// The Rollout `name` of `scenario` running `revision`'s image, as a manifest.
pub fn rollout_manifest(scenario: Scenario, name: &str, revision: u32) -> Value {
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": { "name": name },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": { "app": name } },
            "template": pod_template(name, revision),
            "strategy": scenario.strategy(name),
        },
    })
}

pub fn deployment(name: &str) -> serde_json::Result<Deployment> {
    serde_json::from_value(deployment_manifest(name, 1))
}

/// The Deployment `name` running `revision`'s image, as a manifest.
pub fn deployment_manifest(name: &str, revision: u32) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": name },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": { "app": name } },
            "template": pod_template(name, revision),
        },
    })
}

/// The Services a scenario needs beside each Rollout (blue-green's active Service).
pub fn services(scenario: Scenario, name: &str) -> Vec<Value> {
    match scenario {
        Scenario::BlueGreen => vec![json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": { "name": active_service(name) },
            // Headless: thousands of Services would not fit the local control plane's
            // service IP range, and the controller only ever edits the selector.
            "spec": {
                "clusterIP": "None",
                "selector": { "app": name },
                "ports": [{ "port": 80, "targetPort": 8080 }],
            },
        })],
        Scenario::Plain | Scenario::Steps => Vec::new(),
    }
}

/// The JSON patch that moves a workload to `revision`'s image (a JSON patch, because a
/// merge patch would replace the whole container list and custom resources take no
/// strategic merge).
pub fn image_patch(revision: u32) -> Value {
    json!([{
        "op": "replace",
        "path": "/spec/template/spec/containers/0/image",
        "value": image(revision),
    }])
}

fn runs_image(
    template_containers: Option<&[k8s_openapi::api::core::v1::Container]>,
    revision: u32,
) -> bool {
    let want = image(revision);
    template_containers
        .and_then(|c| c.first())
        .and_then(|c| c.image.as_deref())
        == Some(want.as_str())
}

/// A Rollout is done when it is Healthy on the spec it now has, runs `revision`'s image,
/// and (canary) has scaled its old ReplicaSets down, as a finished Deployment has.
pub fn rollout_done(ro: &Rollout, scenario: Scenario, revision: u32) -> bool {
    let Some(status) = &ro.status else {
        return false;
    };
    let generation = ro.metadata.generation.map(|g| g.to_string());
    let scaled_down = match scenario {
        // Blue-green keeps the old ReplicaSet for scaleDownDelaySeconds after the switch.
        Scenario::BlueGreen => true,
        Scenario::Plain | Scenario::Steps => status.replicas == Some(1),
    };
    runs_image(
        ro.spec
            .template
            .as_ref()
            .and_then(|t| t.spec.as_ref())
            .map(|s| s.containers.as_slice()),
        revision,
    ) && status.phase == Some(RolloutPhase::Healthy)
        && status.observed_generation.is_some()
        && status.observed_generation == generation
        && status.current_pod_hash.is_some()
        && status.current_pod_hash == status.stable_rs
        && status.available_replicas.unwrap_or(0) >= 1
        && scaled_down
}

/// A Deployment is done as `kubectl rollout status` has it: observed, all replicas updated
/// and available, none of the old ones left.
pub fn deployment_done(d: &Deployment, revision: u32) -> bool {
    let (Some(spec), Some(status)) = (&d.spec, &d.status) else {
        return false;
    };
    let want = spec.replicas.unwrap_or(1);
    runs_image(
        spec.template.spec.as_ref().map(|s| s.containers.as_slice()),
        revision,
    ) && status.observed_generation.is_some()
        && status.observed_generation == d.metadata.generation
        && status.updated_replicas == Some(want)
        && status.replicas == Some(want)
        && status.available_replicas == Some(want)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scenario_makes_a_valid_rollout_with_its_twin_template() {
        for scenario in [Scenario::Plain, Scenario::Steps, Scenario::BlueGreen] {
            let ro = rollout(scenario, &workload_name(7)).unwrap();
            assert_eq!(ro.metadata.name.as_deref(), Some("bench-00007"));
            let d = deployment("bench-00007").unwrap();
            assert_eq!(
                serde_json::to_value(ro.spec.template.as_ref().unwrap()).unwrap(),
                serde_json::to_value(&d.spec.as_ref().unwrap().template).unwrap(),
                "{scenario:?}: a Rollout runs what its Deployment twin runs"
            );
            let problems = sluice_api::validation::validate_rollout(&ro);
            assert!(problems.is_empty(), "{scenario:?}: {problems:?}");
        }
        assert_eq!(services(Scenario::BlueGreen, "b").len(), 1);
        assert!(services(Scenario::Plain, "b").is_empty());
    }

    #[test]
    fn done_needs_the_new_image_healthy_and_the_old_replicas_gone() {
        let mut ro = rollout(Scenario::Plain, "a").unwrap();
        ro.metadata.generation = Some(2);
        let healthy = json!({
            "phase": "Healthy", "observedGeneration": "2", "currentPodHash": "h2",
            "stableRS": "h2", "availableReplicas": 1, "replicas": 1,
        });
        ro.status = serde_json::from_value(healthy.clone()).unwrap();
        assert!(rollout_done(&ro, Scenario::Plain, 1));
        assert!(
            !rollout_done(&ro, Scenario::Plain, 2),
            "still the old image"
        );
        let mut old_left = healthy.clone();
        old_left["replicas"] = json!(2);
        ro.status = serde_json::from_value(old_left).unwrap();
        assert!(!rollout_done(&ro, Scenario::Plain, 1));
        assert!(
            rollout_done(&ro, Scenario::BlueGreen, 1),
            "kept for the delay"
        );
        let mut stale = healthy;
        stale["observedGeneration"] = json!("1");
        ro.status = serde_json::from_value(stale).unwrap();
        assert!(!rollout_done(&ro, Scenario::Plain, 1));

        let mut d = deployment("a").unwrap();
        d.metadata.generation = Some(1);
        d.status = serde_json::from_value(json!({
            "observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1,
        }))
        .unwrap();
        assert!(deployment_done(&d, 1));
        assert!(!deployment_done(&d, 2));
    }
}
