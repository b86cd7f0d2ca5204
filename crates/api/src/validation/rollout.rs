//! Top-level `spec` fields of a Rollout: counts, selector, pod template and workload reference.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::PodTemplateSpec;

use super::{Problems, blue_green, canary, selector};
use crate::RolloutSpec;
use crate::rollout::WorkloadRefScaleDown;

/// Kinds a `workloadRef` may point at.
const WORKLOAD_KINDS: [&str; 3] = ["Deployment", "ReplicaSet", "PodTemplate"];

pub(super) fn check_spec(spec: &RolloutSpec, problems: &mut Problems) {
    check_counts(spec, problems);
    check_selector_and_template(spec, problems);
    match &spec.strategy {
        Some(s) => match (&s.canary, &s.blue_green) {
            (Some(_), Some(_)) => problems.add(
                "spec.strategy.strategy",
                "Invalid value: \"blueGreen: true canary: true\": Multiple Strategies can not be listed",
            ),
            (Some(c), None) => canary::check(c, problems),
            (None, Some(bg)) => blue_green::check(bg, spec, problems),
            (None, None) => missing_strategy(problems),
        },
        None => missing_strategy(problems),
    }
}

/// Argo's wording (a Kubernetes field error) for a Rollout with no strategy.
fn missing_strategy(problems: &mut Problems) {
    problems.add(
        "spec.strategy.strategy",
        "Required value: Rollout has missing field '.spec.strategy.canary or .spec.strategy.blueGreen'",
    );
}

fn check_counts(spec: &RolloutSpec, problems: &mut Problems) {
    non_negative(problems, "spec.replicas", spec.replicas);
    non_negative(problems, "spec.minReadySeconds", spec.min_ready_seconds);
    non_negative(
        problems,
        "spec.revisionHistoryLimit",
        spec.revision_history_limit,
    );
    let min_ready = spec.min_ready_seconds.unwrap_or(0);
    let deadline = spec.progress_deadline_seconds();
    if deadline <= min_ready {
        problems.add(
            "spec.progressDeadlineSeconds",
            format!("must be greater than minReadySeconds ({min_ready}), got {deadline}"),
        );
    }
    if let Some(window) = &spec.rollback_window {
        non_negative(problems, "spec.rollbackWindow.revisions", window.revisions);
    }
    if let Some(analysis) = &spec.analysis {
        non_negative(
            problems,
            "spec.analysis.successfulRunHistoryLimit",
            analysis.successful_run_history_limit,
        );
        non_negative(
            problems,
            "spec.analysis.unsuccessfulRunHistoryLimit",
            analysis.unsuccessful_run_history_limit,
        );
    }
}

/// Reports `path: must not be negative` for a negative value.
pub(super) fn non_negative(problems: &mut Problems, path: &str, value: Option<i32>) {
    if let Some(value) = value
        && value < 0
    {
        problems.add(path, format!("must not be negative, got {value}"));
    }
}

fn check_selector_and_template(spec: &RolloutSpec, problems: &mut Problems) {
    if let Some(workload) = &spec.workload_ref {
        check_workload_ref(workload, problems);
        if spec
            .template
            .as_ref()
            .is_some_and(|t| !is_empty_template(t))
        {
            problems.add(
                "spec.template",
                "must be empty when spec.workloadRef is set; the template comes from the referenced workload",
            );
        }
        if let Some(sel) = &spec.selector {
            selector::check_selector(sel, "spec.selector", problems);
        }
        return;
    }

    let selectable = match &spec.selector {
        None => {
            problems.add("spec.selector", "required unless spec.workloadRef is set");
            false
        }
        Some(sel) => {
            let well_formed = selector::check_selector(sel, "spec.selector", problems);
            if selector::is_empty(sel) {
                problems.add(
                    "spec.selector",
                    "must have matchLabels or matchExpressions; an empty selector would select every pod",
                );
                false
            } else {
                well_formed
            }
        }
    };

    let Some(template) = &spec.template else {
        problems.add("spec.template", "required unless spec.workloadRef is set");
        return;
    };
    if let (true, Some(sel)) = (selectable, &spec.selector) {
        let empty = BTreeMap::new();
        let labels = template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.as_ref())
            .unwrap_or(&empty);
        if !selector::selects(sel, labels) {
            problems.add(
                "spec.template.metadata.labels",
                "must be selected by spec.selector, which they do not match",
            );
        }
    }
    check_pod_spec(template, problems);
}

/// The parts of the pod spec a ReplicaSet would be refused for.
fn check_pod_spec(template: &PodTemplateSpec, problems: &mut Problems) {
    let Some(pod) = &template.spec else {
        problems.add("spec.template.spec", "required");
        return;
    };
    if pod.containers.is_empty() {
        problems.add(
            "spec.template.spec.containers",
            "must list at least one container",
        );
    }
    let mut names = BTreeSet::new();
    for (i, container) in pod.containers.iter().enumerate() {
        let at = format!("spec.template.spec.containers[{i}]");
        if container.name.is_empty() {
            problems.add(&format!("{at}.name"), "required");
        } else if !names.insert(container.name.as_str()) {
            problems.add(
                &format!("{at}.name"),
                format!("duplicate container name {:?}", container.name),
            );
        }
        if container.image.as_deref().is_none_or(str::is_empty) {
            problems.add(&format!("{at}.image"), "required");
        }
    }
    if let Some(policy) = &pod.restart_policy
        && policy != "Always"
    {
        problems.add(
            "spec.template.spec.restartPolicy",
            format!("must be Always for a ReplicaSet's pods, got {policy:?}"),
        );
    }
}

/// A template that carries nothing (as left behind by tools that always write the field).
fn is_empty_template(template: &PodTemplateSpec) -> bool {
    template == &PodTemplateSpec::default()
}

fn check_workload_ref(workload: &crate::rollout::WorkloadRef, problems: &mut Problems) {
    if workload.name.as_deref().is_none_or(str::is_empty) {
        problems.add("spec.workloadRef.name", "required");
    }
    match workload.kind.as_deref() {
        None | Some("") => problems.add(
            "spec.workloadRef.kind",
            "required: one of Deployment, ReplicaSet, PodTemplate",
        ),
        Some(kind) if !WORKLOAD_KINDS.contains(&kind) => problems.add(
            "spec.workloadRef.kind",
            format!("must be one of Deployment, ReplicaSet, PodTemplate, got {kind:?}"),
        ),
        Some(_) => {}
    }
    if let Some(WorkloadRefScaleDown::Other(value)) = &workload.scale_down {
        problems.add(
            "spec.workloadRef.scaleDown",
            format!("must be one of never, onsuccess, progressively, got {value:?}"),
        );
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::*;

    #[test]
    fn counts_must_not_be_negative() {
        assert_problems(
            spec_problems(json!({"replicas": 0, "minReadySeconds": 0, "revisionHistoryLimit": 0})),
            &[],
        );
        assert_problems(
            spec_problems(
                json!({"replicas": -1, "minReadySeconds": -2, "revisionHistoryLimit": -3}),
            ),
            &[
                "spec.replicas: must not be negative, got -1",
                "spec.minReadySeconds: must not be negative, got -2",
                "spec.revisionHistoryLimit: must not be negative, got -3",
            ],
        );
        assert_problems(
            spec_problems(json!({
                "rollbackWindow": {"revisions": -1},
                "analysis": {"successfulRunHistoryLimit": -1, "unsuccessfulRunHistoryLimit": 2}
            })),
            &[
                "spec.rollbackWindow.revisions: must not be negative, got -1",
                "spec.analysis.successfulRunHistoryLimit: must not be negative, got -1",
            ],
        );
        assert_problems(
            spec_problems(json!({"rollbackWindow": {"revisions": 3}})),
            &[],
        );
    }

    #[test]
    fn progress_deadline_must_exceed_min_ready_seconds() {
        assert_problems(
            spec_problems(json!({"minReadySeconds": 30, "progressDeadlineSeconds": 31})),
            &[],
        );
        assert_problems(
            spec_problems(json!({"minReadySeconds": 30, "progressDeadlineSeconds": 30})),
            &["spec.progressDeadlineSeconds: must be greater than minReadySeconds (30), got 30"],
        );
        // The deadline defaults to 600 seconds.
        assert_problems(
            spec_problems(json!({"minReadySeconds": 600})),
            &["spec.progressDeadlineSeconds: must be greater than minReadySeconds (600), got 600"],
        );
    }

    #[test]
    fn selector_is_required_non_empty_and_must_select_the_template() {
        assert_problems(
            spec_problems(json!({"selector": null})),
            &["spec.selector: required unless spec.workloadRef is set"],
        );
        assert_problems(
            spec_problems(json!({"selector": {"matchLabels": null}})),
            &[
                "spec.selector: must have matchLabels or matchExpressions; an empty selector would select every pod",
            ],
        );
        assert_problems(
            spec_problems(json!({"selector": {"matchLabels": {"app": "api"}}})),
            &[
                "spec.template.metadata.labels: must be selected by spec.selector, which they do not match",
            ],
        );
        assert_problems(
            spec_problems(json!({"selector": {
                "matchLabels": null,
                "matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "www"]}]
            }})),
            &[],
        );
        assert_problems(
            spec_problems(json!({"selector": {
                "matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]
            }})),
            &[
                "spec.template.metadata.labels: must be selected by spec.selector, which they do not match",
            ],
        );
        // A malformed selector is reported once, not also as a mismatch.
        assert_problems(
            spec_problems(json!({"selector": {
                "matchExpressions": [{"key": "app", "operator": "Is", "values": ["web"]}]
            }})),
            &[
                "spec.selector.matchExpressions[0].operator: must be one of In, NotIn, Exists, DoesNotExist, got \"Is\"",
            ],
        );
    }

    #[test]
    fn template_is_required_and_must_be_runnable() {
        assert_problems(
            spec_problems(json!({"template": null})),
            &["spec.template: required unless spec.workloadRef is set"],
        );
        assert_problems(
            spec_problems(json!({"template": {"spec": {
                "containers": [{"name": "web", "image": "a"}, {"name": "web"}],
                "restartPolicy": "OnFailure"
            }}})),
            &[
                "spec.template.spec.containers[1].name: duplicate container name \"web\"",
                "spec.template.spec.containers[1].image: required",
                "spec.template.spec.restartPolicy: must be Always for a ReplicaSet's pods, got \"OnFailure\"",
            ],
        );
        assert_problems(
            spec_problems(json!({"template": {"spec": {"containers": []}}})),
            &["spec.template.spec.containers: must list at least one container"],
        );
        assert_problems(
            spec_problems(json!({"template": {"spec": {"restartPolicy": "Always"}}})),
            &[],
        );
    }

    #[test]
    fn workload_ref_replaces_template_and_selector() {
        let workload = json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "scaleDown": "onsuccess"});
        assert_problems(
            spec_problems(json!({"template": null, "selector": null, "workloadRef": workload})),
            &[],
        );
        assert_problems(
            spec_problems(json!({"template": null, "workloadRef": workload})),
            &[],
        );
        assert_problems(
            spec_problems(json!({"workloadRef": workload})),
            &[
                "spec.template: must be empty when spec.workloadRef is set; the template comes from the referenced workload",
            ],
        );
        assert_problems(
            spec_problems(
                json!({"template": null, "selector": null, "workloadRef": {"kind": "StatefulSet", "scaleDown": "later"}}),
            ),
            &[
                "spec.workloadRef.name: required",
                "spec.workloadRef.kind: must be one of Deployment, ReplicaSet, PodTemplate, got \"StatefulSet\"",
                "spec.workloadRef.scaleDown: must be one of never, onsuccess, progressively, got \"later\"",
            ],
        );
    }
}
