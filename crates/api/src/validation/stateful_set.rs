//! A Rollout driving a StatefulSet (`rollouts.sluice.dev/statefulset`): what cannot map onto
//! a StatefulSet's partitioned rolling update is refused, each naming its field and why
//! (docs/statefulsets.md). The StatefulSet itself (its update strategy, whether it exists) is
//! checked by the engine, which reads it.

use super::{FieldError, Problems, rollout::is_empty_template};
use crate::RolloutSpec;
use crate::rollout::CanaryStepAction;

const FROM_STATEFUL_SET: &str = "taken from the StatefulSet the Rollout drives";
const NO_SURGE: &str = "a StatefulSet has no surge: an updated pod replaces the old one";
const NOT_YET: &str = "not supported yet for a Rollout driving a StatefulSet";

pub(super) fn check(spec: &RolloutSpec, name: &str, problems: &mut Problems) {
    let forbid = |problems: &mut Problems, path: &str, detail: &str| {
        problems.argo(FieldError::forbidden(path, detail));
    };
    if name.is_empty() {
        problems.argo(FieldError::required(
            "metadata.annotations[rollouts.sluice.dev/statefulset]",
            "the name of a StatefulSet of the Rollout's namespace",
        ));
    }
    if spec.workload_ref.is_some() {
        forbid(problems, "spec.workloadRef", FROM_STATEFUL_SET);
    }
    if spec
        .template
        .as_ref()
        .is_some_and(|t| !is_empty_template(t))
    {
        forbid(problems, "spec.template", FROM_STATEFUL_SET);
    }
    if spec.selector.is_some() {
        forbid(problems, "spec.selector", FROM_STATEFUL_SET);
    }
    if spec.replicas.is_some() {
        forbid(problems, "spec.replicas", FROM_STATEFUL_SET);
    }
    if spec.restart_at.is_some() {
        forbid(
            problems,
            "spec.restartAt",
            "restart the StatefulSet's pods with `kubectl rollout restart statefulset`, a new revision the steps roll out",
        );
    }
    let Some(strategy) = spec.strategy.as_ref() else {
        return;
    };
    if strategy.blue_green.is_some() {
        forbid(
            problems,
            "spec.strategy.blueGreen",
            "two full sets of a StatefulSet's pods cannot run side by side",
        );
    }
    let Some(canary) = strategy.canary.as_ref() else {
        return;
    };
    let canary_path = "spec.strategy.canary";
    let fields = [
        (
            canary.traffic_routing.is_some(),
            "trafficRouting",
            "routers split traffic by pod-template hash, which a StatefulSet's pods do not carry",
        ),
        (
            canary.canary_service.is_some(),
            "canaryService",
            "Services are switched by pod-template hash, which a StatefulSet's pods do not carry",
        ),
        (
            canary.stable_service.is_some(),
            "stableService",
            "Services are switched by pod-template hash, which a StatefulSet's pods do not carry",
        ),
        (canary.max_surge.is_some(), "maxSurge", NO_SURGE),
        (
            canary.max_unavailable.is_some(),
            "maxUnavailable",
            "the StatefulSet's own spec.updateStrategy.rollingUpdate.maxUnavailable paces its pods",
        ),
        (
            canary.dynamic_stable_scale.is_some(),
            "dynamicStableScale",
            NO_SURGE,
        ),
        (
            canary.anti_affinity.is_some(),
            "antiAffinity",
            "the pods of one StatefulSet are never two ReplicaSets",
        ),
    ];
    for (set, field, detail) in fields {
        if set {
            forbid(problems, &format!("{canary_path}.{field}"), detail);
        }
    }
    for (i, step) in canary.steps.iter().flatten().enumerate() {
        let refused = match step.action() {
            Some(CanaryStepAction::SetCanaryScale(_)) => Some(("setCanaryScale", NO_SURGE)),
            Some(CanaryStepAction::Experiment(_)) => Some((
                "experiment",
                "an experiment runs ReplicaSets of its own; a StatefulSet's would need volume claims of their own",
            )),
            Some(CanaryStepAction::Plugin(_)) => Some(("plugin", NOT_YET)),
            Some(CanaryStepAction::SetHeaderRoute(_)) => Some(("setHeaderRoute", NOT_YET)),
            Some(CanaryStepAction::SetMirrorRoute(_)) => Some(("setMirrorRoute", NOT_YET)),
            Some(
                CanaryStepAction::SetWeight(_)
                | CanaryStepAction::Pause(_)
                | CanaryStepAction::Analysis(_),
            )
            | None => None,
        };
        if let Some((field, detail)) = refused {
            forbid(
                problems,
                &format!("{canary_path}.steps[{i}].{field}"),
                detail,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::Rollout;

    fn problems(spec: Value) -> Vec<String> {
        let rollout: Rollout = serde_json::from_value(json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Rollout",
            "metadata": {"name": "db", "annotations": {"rollouts.sluice.dev/statefulset": "db"}},
            "spec": spec
        }))
        .unwrap();
        crate::validation::validate_rollout(&rollout)
    }

    #[test]
    fn a_rollout_without_template_selector_or_replicas_is_valid() {
        let steps = json!([{"setWeight": 25}, {"pause": {}}, {"pause": {"duration": "2s"}},
            {"analysis": {"templates": [{"templateName": "t"}]}}]);
        let background = json!({"templates": [{"templateName": "b"}], "startingStep": 1});
        assert_eq!(
            problems(json!({"strategy": {"canary": {"steps": steps, "analysis": background}}})),
            Vec::<String>::new()
        );
    }

    #[test]
    fn what_cannot_map_is_refused_naming_the_field() {
        let cases = [
            (
                json!({"strategy": {"blueGreen": {"activeService": "a"}}}),
                "spec.strategy.blueGreen: Forbidden: two full sets",
            ),
            (
                json!({"strategy": {"canary": {"maxSurge": 1}}}),
                "spec.strategy.canary.maxSurge: Forbidden: a StatefulSet has no surge",
            ),
            (
                json!({"strategy": {"canary": {"dynamicStableScale": true}}}),
                "spec.strategy.canary.dynamicStableScale: Forbidden: a StatefulSet has no surge",
            ),
            (
                json!({"strategy": {"canary": {"steps": [{"setCanaryScale": {"weight": 10}}]}}}),
                "spec.strategy.canary.steps[0].setCanaryScale: Forbidden: a StatefulSet has no surge",
            ),
            (
                json!({"strategy": {"canary": {"steps": [{"setWeight": 10},
                    {"experiment": {"templates": [{"name": "a", "specRef": "canary"}]}}]}}}),
                "spec.strategy.canary.steps[1].experiment: Forbidden: an experiment runs",
            ),
            (
                json!({"strategy": {"canary": {"steps": [
                    {"plugin": {"name": "p"}}]}}}),
                "spec.strategy.canary.steps[0].plugin: Forbidden: not supported yet",
            ),
            (
                json!({"strategy": {"canary": {"canaryService": "c", "stableService": "s",
                    "trafficRouting": {"nginx": {"stableIngress": "i"}}}}}),
                "spec.strategy.canary.trafficRouting: Forbidden: routers split traffic",
            ),
            (
                json!({"restartAt": "2026-01-01T00:00:00Z", "strategy": {"canary": {}}}),
                "spec.restartAt: Forbidden: restart the StatefulSet's pods",
            ),
            (
                json!({"replicas": 3, "strategy": {"canary": {}}}),
                "spec.replicas: Forbidden: taken from the StatefulSet",
            ),
            (
                json!({"template": {"spec": {"containers": [{"name": "a", "image": "b"}]}},
                       "strategy": {"canary": {}}}),
                "spec.template: Forbidden: taken from the StatefulSet",
            ),
        ];
        for (spec, expected) in cases {
            let found = problems(spec.clone());
            assert!(
                found.first().is_some_and(|p| p.starts_with(expected)),
                "{spec}: {found:?}"
            );
        }
    }

    #[test]
    fn an_empty_name_is_required() {
        let rollout: Rollout = serde_json::from_value(json!({
            "metadata": {"name": "db", "annotations": {"rollouts.sluice.dev/statefulset": ""}},
            "spec": {"strategy": {"canary": {}}}
        }))
        .unwrap();
        assert_eq!(
            crate::validation::validate_rollout(&rollout),
            vec![
                "metadata.annotations[rollouts.sluice.dev/statefulset]: Required value: the name of a StatefulSet of the Rollout's namespace"
            ]
        );
    }
}
