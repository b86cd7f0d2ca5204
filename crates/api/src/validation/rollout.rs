//! Top-level `spec` fields of a Rollout: counts, selector, pod template and workload reference.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::PodTemplateSpec;

use super::{
    BadValue, FieldError, NOT_NEGATIVE, Problems, blue_green, canary, non_negative, selector,
    traffic,
};
use crate::RolloutSpec;
use crate::rollout::{WorkloadRef, WorkloadRefScaleDown};

/// Kinds a `workloadRef` may point at.
const WORKLOAD_KINDS: [&str; 3] = ["Deployment", "ReplicaSet", "PodTemplate"];

/// `external_template`: the template, selector and replicas are another object's (a
/// StatefulSet's), as with a `workloadRef`.
pub(super) fn check_spec(spec: &RolloutSpec, external_template: bool, problems: &mut Problems) {
    // Argo resolves the referenced workload before it validates anything else.
    if let Some(workload) = &spec.workload_ref {
        check_workload_kind(workload, problems);
    }
    argo_non_negative(problems, "spec.replicas", Some(spec.replicas.unwrap_or(1)));
    if !external_template {
        check_selector_and_template(spec, problems);
    }
    argo_non_negative(problems, "spec.minReadySeconds", spec.min_ready_seconds);
    argo_non_negative(
        problems,
        "spec.revisionHistoryLimit",
        Some(spec.revision_history_limit()),
    );
    let deadline = spec.progress_deadline_seconds();
    argo_non_negative(problems, "spec.progressDeadlineSeconds", Some(deadline));
    if deadline <= spec.min_ready_seconds.unwrap_or(0) {
        problems.argo(FieldError::invalid(
            "spec.progressDeadlineSeconds",
            deadline,
            "must be greater than minReadySeconds",
        ));
    }
    check_strategy(spec, problems);
    check_sluice_only(spec, problems);
}

fn check_strategy(spec: &RolloutSpec, problems: &mut Problems) {
    let strategy = spec.strategy.as_ref();
    match strategy.map(|s| (&s.canary, &s.blue_green)) {
        Some((Some(_), Some(_))) => problems.argo(FieldError::invalid(
            "spec.strategy.strategy",
            "blueGreen: true canary: true",
            "Multiple Strategies can not be listed",
        )),
        Some((Some(c), None)) => {
            canary::check(c, problems);
            // Checked by Argo's controller as it looks the router's objects up, after the
            // spec validation.
            if let Some(routing) = &c.traffic_routing {
                traffic::check_router_config(routing, problems);
            }
        }
        Some((None, Some(bg))) => blue_green::check(bg, spec, problems),
        Some((None, None)) | None => problems.argo(FieldError::required(
            "spec.strategy.strategy",
            "Rollout has missing field '.spec.strategy.canary or .spec.strategy.blueGreen'",
        )),
    }
}

/// Argo's check of a count that must not be negative (Kubernetes' wording).
pub(super) fn argo_non_negative(problems: &mut Problems, path: &str, value: Option<i32>) {
    if let Some(value) = value
        && value < 0
    {
        problems.argo(FieldError::invalid(path, value, NOT_NEGATIVE));
    }
}

fn check_sluice_only(spec: &RolloutSpec, problems: &mut Problems) {
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
    if let Some(workload) = &spec.workload_ref {
        if workload.name.as_deref().is_none_or(str::is_empty) {
            problems.sluice(FieldError::required("spec.workloadRef.name", ""));
        }
        if let Some(WorkloadRefScaleDown::Other(value)) = &workload.scale_down {
            problems.sluice(FieldError::not_supported(
                "spec.workloadRef.scaleDown",
                value.as_str(),
                &["never", "onsuccess", "progressively"],
            ));
        }
    }
}

/// Argo cannot resolve a workload of another kind; its message names no field.
fn check_workload_kind(workload: &WorkloadRef, problems: &mut Problems) {
    let kind = workload.kind.as_deref().unwrap_or_default();
    if WORKLOAD_KINDS.contains(&kind) {
        return;
    }
    // The group of `apps/v1` is `apps`; the core group (`v1`) is empty.
    let group = workload
        .api_version
        .as_deref()
        .and_then(|v| v.rsplit_once('/'))
        .map_or("", |(group, _)| group);
    problems.argo_unplaced(format!("workload of type {group}/{kind} is not supported"));
}

fn check_selector_and_template(spec: &RolloutSpec, problems: &mut Problems) {
    if spec.workload_ref.is_some() {
        // Argo checks the selector's requirements and the template only for a Rollout that
        // carries its own template; it still needs a selector it can evaluate.
        if let Some(sel) = &spec.selector {
            let mut details = Problems::default();
            if !selector::check_selector(sel, "spec.selector", &mut details) {
                invalid_selector(sel, problems);
            }
        }
        if spec
            .template
            .as_ref()
            .is_some_and(|t| !is_empty_template(t))
        {
            problems.argo(FieldError::internal(
                "spec.template",
                "template must be empty for workload reference rollout",
            ));
        }
        return;
    }

    // Whether the template's labels are to be matched against the selector: an empty
    // selector selects everything, a missing one nothing.
    let matchable = match &spec.selector {
        None => {
            problems.argo(FieldError::required(
                "spec.selector",
                "Rollout has missing field '.spec.selector'",
            ));
            true
        }
        Some(sel) => {
            let well_formed = selector::check_selector(sel, "spec.selector", problems);
            let empty = selector::is_empty(sel);
            if empty {
                problems.argo(FieldError::invalid(
                    "spec.selector",
                    selector::selector_value(sel),
                    "empty selector is invalid for deployment",
                ));
            }
            if !well_formed {
                invalid_selector(sel, problems);
                return;
            }
            !empty
        }
    };

    // A missing template is checked as the empty one Argo would see.
    let default_template = PodTemplateSpec::default();
    let template = spec.template.as_ref().unwrap_or(&default_template);
    let labels = template.metadata.as_ref().and_then(|m| m.labels.as_ref());
    let selected = spec
        .selector
        .as_ref()
        .is_some_and(|sel| selector::selects(sel, labels.unwrap_or(&BTreeMap::new())));
    if matchable && !selected {
        // A map, unlike a struct, keeps its empty values in Go's JSON.
        let value =
            BadValue::Json(labels.map_or(serde_json::Value::Null, |l| serde_json::json!(l)));
        problems.argo(FieldError::invalid(
            "spec.template.metadata.labels",
            value,
            "`selector` does not match template `labels`",
        ));
    }
    check_pod_spec(template, problems);
}

/// Kubernetes could not turn the selector into one it evaluates.
fn invalid_selector(
    sel: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    problems: &mut Problems,
) {
    problems.argo(FieldError::invalid(
        "spec.selector",
        selector::selector_value(sel),
        "invalid label selector",
    ));
}

/// The parts of the pod spec a ReplicaSet would be refused for, as Kubernetes words them.
fn check_pod_spec(template: &PodTemplateSpec, problems: &mut Problems) {
    let containers = template
        .spec
        .as_ref()
        .map(|pod| pod.containers.as_slice())
        .unwrap_or_default();
    if containers.is_empty() {
        problems.argo(FieldError::required("spec.template.spec.containers", ""));
    }
    let mut names = BTreeSet::new();
    for (i, container) in containers.iter().enumerate() {
        let at = format!("spec.template.spec.containers[{i}]");
        if container.name.is_empty() {
            problems.argo(FieldError::required(&format!("{at}.name"), ""));
        } else if !names.insert(container.name.as_str()) {
            problems.argo(FieldError::duplicate(
                &format!("{at}.name"),
                container.name.as_str(),
            ));
        }
        if container.image.as_deref().is_none_or(str::is_empty) {
            problems.argo(FieldError::required(&format!("{at}.image"), ""));
        }
    }
    // An unset policy defaults to Always.
    let policy = template
        .spec
        .as_ref()
        .and_then(|pod| pod.restart_policy.as_deref())
        .filter(|p| !p.is_empty());
    if let Some(policy) = policy
        && policy != "Always"
    {
        let at = "spec.template.spec.restartPolicy";
        if !["OnFailure", "Never"].contains(&policy) {
            problems.argo(FieldError::not_supported(
                at,
                policy,
                &["Always", "OnFailure", "Never"],
            ));
        }
        problems.argo(FieldError::not_supported(at, policy, &["Always"]));
    }
}

/// A template that carries nothing (as left behind by tools that always write the field).
pub(super) fn is_empty_template(template: &PodTemplateSpec) -> bool {
    template == &PodTemplateSpec::default()
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
                "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
                "spec.minReadySeconds: Invalid value: -2: must be greater than or equal to 0",
                "spec.revisionHistoryLimit: Invalid value: -3: must be greater than or equal to 0",
            ],
        );
        // Sluice's own checks come after Argo's.
        assert_problems(
            spec_problems(json!({
                "replicas": -1,
                "rollbackWindow": {"revisions": -1},
                "analysis": {"successfulRunHistoryLimit": -1, "unsuccessfulRunHistoryLimit": 2}
            })),
            &[
                "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
                "spec.rollbackWindow.revisions: Invalid value: -1: must be greater than or equal to 0",
                "spec.analysis.successfulRunHistoryLimit: Invalid value: -1: must be greater than or equal to 0",
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
            &[
                "spec.progressDeadlineSeconds: Invalid value: 30: must be greater than minReadySeconds",
            ],
        );
        // The deadline defaults to 600 seconds.
        assert_problems(
            spec_problems(json!({"minReadySeconds": 600})),
            &[
                "spec.progressDeadlineSeconds: Invalid value: 600: must be greater than minReadySeconds",
            ],
        );
        assert_problems(
            spec_problems(json!({"progressDeadlineSeconds": -1})),
            &[
                "spec.progressDeadlineSeconds: Invalid value: -1: must be greater than or equal to 0",
                "spec.progressDeadlineSeconds: Invalid value: -1: must be greater than minReadySeconds",
            ],
        );
    }

    #[test]
    fn spec_fields_are_checked_before_the_strategy() {
        assert_problems(
            spec_problems(json!({"minReadySeconds": 600, "strategy": {"canary": {
                "steps": [{"setWeight": 120}]
            }}})),
            &[
                "spec.progressDeadlineSeconds: Invalid value: 600: must be greater than minReadySeconds",
                "spec.strategy.steps[0].setWeight: Invalid value: 120: SetWeight needs to be between 0 and 100",
            ],
        );
    }

    #[test]
    fn selector_is_required_non_empty_and_must_select_the_template() {
        assert_problems(
            spec_problems(json!({"selector": null})),
            &[
                "spec.selector: Required value: Rollout has missing field '.spec.selector'",
                "spec.template.metadata.labels: Invalid value: {\"app\":\"web\"}: `selector` does not match template `labels`",
            ],
        );
        assert_problems(
            spec_problems(json!({"selector": {"matchLabels": null}})),
            &["spec.selector: Invalid value: {}: empty selector is invalid for deployment"],
        );
        assert_problems(
            spec_problems(json!({"selector": {"matchLabels": {"app": "api"}}})),
            &[
                "spec.template.metadata.labels: Invalid value: {\"app\":\"web\"}: `selector` does not match template `labels`",
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
            spec_problems(json!({
                "selector": {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]},
                "template": {"metadata": {"labels": null}}
            })),
            &[
                "spec.template.metadata.labels: Invalid value: null: `selector` does not match template `labels`",
            ],
        );
        // A malformed selector is not also matched against the template.
        assert_problems(
            spec_problems(json!({"selector": {
                "matchExpressions": [{"key": "app", "operator": "Is", "values": ["web"]}]
            }})),
            &[
                "spec.selector.matchExpressions[0].operator: Invalid value: \"Is\": not a valid selector operator",
                "spec.selector: Invalid value: {\"matchLabels\":{\"app\":\"web\"},\"matchExpressions\":[{\"key\":\"app\",\"operator\":\"Is\",\"values\":[\"web\"]}]}: invalid label selector",
            ],
        );
    }

    #[test]
    fn template_is_required_and_must_be_runnable() {
        assert_problems(
            spec_problems(json!({"template": null})),
            &[
                "spec.template.metadata.labels: Invalid value: null: `selector` does not match template `labels`",
                "spec.template.spec.containers: Required value",
            ],
        );
        assert_problems(
            spec_problems(json!({"template": {"spec": {
                "containers": [{"name": "web", "image": "a"}, {"name": "web"}, {"image": "b"}],
                "restartPolicy": "OnFailure"
            }}})),
            &[
                "spec.template.spec.containers[1].name: Duplicate value: \"web\"",
                "spec.template.spec.containers[1].image: Required value",
                "spec.template.spec.containers[2].name: Required value",
                "spec.template.spec.restartPolicy: Unsupported value: \"OnFailure\": supported values: \"Always\"",
            ],
        );
        assert_problems(
            spec_problems(json!({"template": {"spec": {"restartPolicy": "Sometimes"}}})),
            &[
                "spec.template.spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
                "spec.template.spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\"",
            ],
        );
        assert_problems(
            spec_problems(json!({"template": {"spec": {"containers": []}}})),
            &["spec.template.spec.containers: Required value"],
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
                "spec.template: Internal error: template must be empty for workload reference rollout",
            ],
        );
        assert_problems(
            spec_problems(json!({
                "template": null,
                "selector": {"matchLabels": null, "matchExpressions": [{"key": "app", "operator": "In"}]},
                "workloadRef": workload
            })),
            &[
                "spec.selector: Invalid value: {\"matchExpressions\":[{\"key\":\"app\",\"operator\":\"In\"}]}: invalid label selector",
            ],
        );
        // Argo cannot resolve another kind; that is reported first, and names no field.
        assert_problems(
            spec_problems(json!({
                "replicas": -1, "template": null, "selector": null,
                "workloadRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "scaleDown": "later"}
            })),
            &[
                "workload of type apps/StatefulSet is not supported",
                "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
                "spec.workloadRef.name: Required value",
                "spec.workloadRef.scaleDown: Unsupported value: \"later\": supported values: \"never\", \"onsuccess\", \"progressively\"",
            ],
        );
        assert_problems(
            spec_problems(
                json!({"template": null, "selector": null, "workloadRef": {"kind": "Pod", "name": "web"}}),
            ),
            &["workload of type /Pod is not supported"],
        );
    }
}
