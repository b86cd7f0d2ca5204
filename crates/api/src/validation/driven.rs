//! A Rollout driving a StatefulSet (`rollouts.sluice.dev/statefulset`) or a DaemonSet
//! (`rollouts.sluice.dev/daemonset`): what cannot map onto a StatefulSet's partitioned rolling
//! update, or onto a DaemonSet's node-by-node `OnDelete` update, is refused, each naming its
//! field and why (docs/statefulsets.md, docs/daemonsets.md). The workload itself (its update
//! strategy, whether it exists) is checked by the engine, which reads it.

use super::{FieldError, Problems, rollout::is_empty_template};
use crate::rollout::{
    CONFIG_ROLLOUT_ANNOTATION, CanaryStepAction, DAEMONSET_ANNOTATION, STATEFULSET_ANNOTATION,
};

/// The kind of workload a Rollout drives instead of ReplicaSets of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Driven {
    StatefulSet,
    DaemonSet,
}

impl Driven {
    fn kind(self) -> &'static str {
        match self {
            Self::StatefulSet => "StatefulSet",
            Self::DaemonSet => "DaemonSet",
        }
    }

    fn annotation(self) -> &'static str {
        match self {
            Self::StatefulSet => STATEFULSET_ANNOTATION,
            Self::DaemonSet => DAEMONSET_ANNOTATION,
        }
    }

    fn no_surge(self) -> &'static str {
        match self {
            Self::StatefulSet => "a StatefulSet has no surge: an updated pod replaces the old one",
            Self::DaemonSet => "a DaemonSet has no surge: a node's new pod replaces its old one",
        }
    }
}

/// The workload `rollout` drives, with the name its annotation gives, if it opted in. Both
/// annotations at once are refused by [`check`]; the StatefulSet's is then the one read.
pub(super) fn driven(rollout: &crate::Rollout) -> Option<(Driven, &str)> {
    crate::rollout::stateful_set_name(rollout)
        .map(|name| (Driven::StatefulSet, name))
        .or_else(|| crate::rollout::daemon_set_name(rollout).map(|name| (Driven::DaemonSet, name)))
}

pub(super) fn check(rollout: &crate::Rollout, driven: Driven, name: &str, problems: &mut Problems) {
    let spec = &rollout.spec;
    let kind = driven.kind();
    let forbid = |problems: &mut Problems, path: &str, detail: &str| {
        problems.argo(FieldError::forbidden(path, detail));
    };
    if name.is_empty() {
        problems.argo(FieldError::required(
            &format!("metadata.annotations[{}]", driven.annotation()),
            &format!("the name of a {kind} of the Rollout's namespace"),
        ));
    }
    if driven == Driven::StatefulSet && crate::rollout::daemon_set_name(rollout).is_some() {
        forbid(
            problems,
            &format!("metadata.annotations[{DAEMONSET_ANNOTATION}]"),
            "a Rollout drives a StatefulSet or a DaemonSet, not both",
        );
    }
    let from_workload = format!("taken from the {kind} the Rollout drives");
    if spec.workload_ref.is_some() {
        forbid(problems, "spec.workloadRef", &from_workload);
    }
    if spec
        .template
        .as_ref()
        .is_some_and(|t| !is_empty_template(t))
    {
        forbid(problems, "spec.template", &from_workload);
    }
    if spec.selector.is_some() {
        forbid(problems, "spec.selector", &from_workload);
    }
    if spec.replicas.is_some() {
        let detail = match driven {
            Driven::StatefulSet => from_workload.clone(),
            Driven::DaemonSet => "a DaemonSet runs a pod on each of its nodes".to_string(),
        };
        forbid(problems, "spec.replicas", &detail);
    }
    if spec.restart_at.is_some() {
        let lower = kind.to_lowercase();
        forbid(
            problems,
            "spec.restartAt",
            &format!(
                "restart the {kind}'s pods with `kubectl rollout restart {lower}`, a new revision the steps roll out"
            ),
        );
    }
    let Some(strategy) = spec.strategy.as_ref() else {
        return;
    };
    if strategy.blue_green.is_some() {
        let detail = match driven {
            Driven::StatefulSet => "two full sets of a StatefulSet's pods cannot run side by side",
            Driven::DaemonSet => {
                "a DaemonSet runs one pod per node: there is no room for a second full set"
            }
        };
        forbid(problems, "spec.strategy.blueGreen", detail);
    }
    let Some(canary) = strategy.canary.as_ref() else {
        return;
    };
    let canary_path = "spec.strategy.canary";
    let by_hash =
        |what: &str| format!("{what} by pod-template hash, which a {kind}'s pods do not carry");
    let no_surge = driven.no_surge();
    let fields = [
        (
            canary.traffic_routing.is_some(),
            "trafficRouting",
            by_hash("routers split traffic"),
        ),
        (
            canary.canary_service.is_some(),
            "canaryService",
            by_hash("Services are switched"),
        ),
        (
            canary.stable_service.is_some(),
            "stableService",
            by_hash("Services are switched"),
        ),
        (canary.max_surge.is_some(), "maxSurge", no_surge.to_string()),
        (
            // A DaemonSet's nodes are replaced within the canary's maxUnavailable.
            canary.max_unavailable.is_some() && driven == Driven::StatefulSet,
            "maxUnavailable",
            "the StatefulSet's own spec.updateStrategy.rollingUpdate.maxUnavailable paces its pods"
                .to_string(),
        ),
        (
            canary.dynamic_stable_scale.is_some(),
            "dynamicStableScale",
            no_surge.to_string(),
        ),
        (
            canary.anti_affinity.is_some(),
            "antiAffinity",
            format!("the pods of one {kind} are never two ReplicaSets"),
        ),
    ];
    for (set, field, detail) in fields {
        if set {
            forbid(problems, &format!("{canary_path}.{field}"), &detail);
        }
    }
    let not_yet = format!("not supported yet for a Rollout driving a {kind}");
    let experiment = match driven {
        Driven::StatefulSet => {
            "an experiment runs ReplicaSets of its own; a StatefulSet's would need volume claims of their own"
        }
        Driven::DaemonSet => {
            "an experiment runs ReplicaSets of its own; a node agent's second copy would collide with it on its node"
        }
    };
    for (i, step) in canary.steps.iter().flatten().enumerate() {
        let refused = match step.action() {
            // A DaemonSet's canary may be a number of nodes.
            Some(CanaryStepAction::SetCanaryScale(scale))
                if driven == Driven::DaemonSet
                    && scale.replicas.is_some()
                    && scale.weight.is_none()
                    && scale.match_traffic_weight != Some(true) =>
            {
                None
            }
            Some(CanaryStepAction::SetCanaryScale(_)) => match driven {
                Driven::StatefulSet => Some(("setCanaryScale", no_surge)),
                Driven::DaemonSet => Some((
                    "setCanaryScale",
                    "a DaemonSet's canary is a number of its nodes: setCanaryScale.replicas alone",
                )),
            },
            Some(CanaryStepAction::Experiment(_)) => Some(("experiment", experiment)),
            Some(CanaryStepAction::Plugin(_)) => Some(("plugin", not_yet.as_str())),
            Some(CanaryStepAction::SetHeaderRoute(_)) => Some(("setHeaderRoute", not_yet.as_str())),
            Some(CanaryStepAction::SetMirrorRoute(_)) => Some(("setMirrorRoute", not_yet.as_str())),
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

#[cfg(test)]
mod daemon_set_tests {
    use serde_json::{Value, json};

    use crate::Rollout;

    fn rollout(annotations: Value, spec: Value) -> Rollout {
        serde_json::from_value(json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Rollout",
            "metadata": {"name": "agent", "annotations": annotations},
            "spec": spec
        }))
        .unwrap()
    }

    fn problems(spec: Value) -> Vec<String> {
        crate::validation::validate_rollout(&rollout(
            json!({"rollouts.sluice.dev/daemonset": "agent"}),
            spec,
        ))
    }

    #[test]
    fn node_counts_and_max_unavailable_are_a_daemon_sets_canary() {
        let steps = json!([{"setWeight": 25}, {"pause": {}}, {"setCanaryScale": {"replicas": 3}},
            {"analysis": {"templates": [{"templateName": "t"}]}}]);
        let spec = json!({"strategy": {"canary": {"steps": steps, "maxUnavailable": "50%"}}});
        assert_eq!(problems(spec), Vec::<String>::new());
    }

    #[test]
    fn what_cannot_map_onto_nodes_is_refused_naming_the_field() {
        let cases = [
            (
                json!({"strategy": {"blueGreen": {"activeService": "a"}}}),
                "spec.strategy.blueGreen: Forbidden: a DaemonSet runs one pod per node",
            ),
            (
                json!({"strategy": {"canary": {"maxSurge": 1}}}),
                "spec.strategy.canary.maxSurge: Forbidden: a DaemonSet has no surge",
            ),
            (
                json!({"strategy": {"canary": {"steps": [{"setCanaryScale": {"weight": 10}}]}}}),
                "spec.strategy.canary.steps[0].setCanaryScale: Forbidden: a DaemonSet's canary is a number of its nodes",
            ),
            (
                json!({"strategy": {"canary": {"steps": [
                    {"setCanaryScale": {"replicas": 1, "matchTrafficWeight": true}}]}}}),
                "spec.strategy.canary.steps[0].setCanaryScale: Forbidden: a DaemonSet's canary",
            ),
            (
                json!({"strategy": {"canary": {"steps": [{"setWeight": 10},
                    {"experiment": {"templates": [{"name": "a", "specRef": "canary"}]}}]}}}),
                "spec.strategy.canary.steps[1].experiment: Forbidden: an experiment runs",
            ),
            (
                json!({"strategy": {"canary": {"canaryService": "c", "stableService": "s",
                    "trafficRouting": {"nginx": {"stableIngress": "i"}}}}}),
                "spec.strategy.canary.trafficRouting: Forbidden: routers split traffic by pod-template hash, which a DaemonSet's pods",
            ),
            (
                json!({"replicas": 3, "strategy": {"canary": {}}}),
                "spec.replicas: Forbidden: a DaemonSet runs a pod on each of its nodes",
            ),
            (
                json!({"restartAt": "2026-01-01T00:00:00Z", "strategy": {"canary": {}}}),
                "spec.restartAt: Forbidden: restart the DaemonSet's pods with `kubectl rollout restart daemonset`",
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
    fn an_empty_name_is_required_and_both_kinds_at_once_refused() {
        let found = crate::validation::validate_rollout(&rollout(
            json!({"rollouts.sluice.dev/daemonset": ""}),
            json!({"strategy": {"canary": {}}}),
        ));
        assert_eq!(
            found,
            vec![
                "metadata.annotations[rollouts.sluice.dev/daemonset]: Required value: the name of a DaemonSet of the Rollout's namespace"
            ]
        );
        let found = crate::validation::validate_rollout(&rollout(
            json!({"rollouts.sluice.dev/daemonset": "a", "rollouts.sluice.dev/statefulset": "b"}),
            json!({"strategy": {"canary": {}}}),
        ));
        assert_eq!(
            found,
            vec![
                "metadata.annotations[rollouts.sluice.dev/daemonset]: Forbidden: a Rollout drives a StatefulSet or a DaemonSet, not both"
            ]
        );
    }
}

/// Config rollouts (`rollouts.sluice.dev/config-rollout`) are off, with a warning, for a value
/// other than `"true"` or `"false"` and for a Rollout whose pod template is a driven
/// workload's (that workload's own controller starts its pods). Never refused: Argo runs such
/// a Rollout, ignoring the annotation, and so does Sluice.
pub(super) fn check_config_rollout(
    rollout: &crate::Rollout,
    driven: Option<Driven>,
    problems: &mut Problems,
) {
    let Some(value) = crate::rollout::config_rollout(rollout) else {
        return;
    };
    let path = format!("metadata.annotations[{CONFIG_ROLLOUT_ANNOTATION}]");
    let problem = match (value, driven) {
        ("true", Some(driven)) => Some(format!(
            "the pod template is the {}'s; config rollouts are off for this Rollout",
            driven.kind()
        )),
        ("true" | "false", _) => None,
        _ => Some("must be \"true\" or \"false\"; config rollouts are off for this Rollout".into()),
    };
    if let Some(detail) = problem {
        problems.sluice(FieldError::invalid(&path, value, &detail));
    }
}
