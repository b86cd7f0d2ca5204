//! Spec checks made before anything is reconciled. An invalid Experiment only gets the
//! `InvalidSpec` condition, with Argo's message for the first problem found; the checks run
//! template by template, in Argo's order, so the same first problem is reported.

use std::collections::BTreeSet;

use sluice_api::experiment::{DEFAULT_PROGRESS_DEADLINE_SECONDS, Experiment};

/// The first problem of the spec, in Argo's words; `None` when it is valid.
pub fn verify_spec(experiment: &Experiment) -> Option<String> {
    let name = experiment.metadata.name.as_deref().unwrap_or_default();
    let deadline = experiment
        .spec
        .progress_deadline_seconds
        .unwrap_or(DEFAULT_PROGRESS_DEADLINE_SECONDS);
    let mut seen = BTreeSet::new();
    for (i, template) in experiment.spec.templates.iter().flatten().enumerate() {
        let Some(selector) = &template.selector else {
            // Argo's text says "Rollout" here.
            return Some(format!(
                "Rollout has missing field '.Spec.Templates[{i}].Selector'"
            ));
        };
        // As Argo compares it with an empty selector: a `matchLabels: {}` or
        // `matchExpressions: []` written out is not empty to it.
        let empty = selector.match_labels.is_none() && selector.match_expressions.is_none();
        if empty {
            return Some(format!(
                "This experiment is selecting all pods at index {i}. A non-empty selector is required."
            ));
        }
        if template.min_ready_seconds.unwrap_or(0) > deadline {
            return Some(format!(
                "MinReadySeconds cannot be longer than ProgressDeadlineSeconds. Check template index {i}"
            ));
        }
        let template_name = template.name.as_deref().unwrap_or_default();
        if template_name.is_empty() {
            return Some(format!(
                "Experiment {name} has empty template name at index {i}"
            ));
        }
        if !seen.insert(template_name) {
            return Some(format!(
                "Experiment {name} has repeated template name '{template_name}' in templates"
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn experiment(templates: Value, deadline: Option<i32>) -> Experiment {
        serde_json::from_value(json!({
            "metadata": {"name": "ex"},
            "spec": {"templates": templates, "progressDeadlineSeconds": deadline}
        }))
        .unwrap()
    }

    fn template(name: &str) -> Value {
        json!({"name": name, "selector": {"matchLabels": {"app": "a"}},
               "template": {"metadata": {"labels": {"app": "a"}}}})
    }

    #[test]
    fn argo_messages_in_argo_order() {
        let no_selector = json!({"name": "a"});
        let empty_selector = json!({"name": "a", "selector": {}});
        let slow = json!({"name": "a", "minReadySeconds": 31,
                          "selector": {"matchLabels": {"app": "a"}}});
        let cases: Vec<(Value, Option<i32>, Option<&str>)> = vec![
            (json!([template("a"), template("b")]), None, None),
            (
                json!([template("a"), no_selector]),
                None,
                Some("Rollout has missing field '.Spec.Templates[1].Selector'"),
            ),
            (
                json!([empty_selector]),
                None,
                Some(
                    "This experiment is selecting all pods at index 0. A non-empty selector is required.",
                ),
            ),
            (
                json!([slow.clone()]),
                Some(30),
                Some(
                    "MinReadySeconds cannot be longer than ProgressDeadlineSeconds. Check template index 0",
                ),
            ),
            (json!([slow]), None, None),
            (
                json!([template("")]),
                None,
                Some("Experiment ex has empty template name at index 0"),
            ),
            (
                json!([template("a"), template("b"), template("a")]),
                None,
                Some("Experiment ex has repeated template name 'a' in templates"),
            ),
            (
                json!([{"name": "a", "selector": {"matchExpressions": [
                    {"key": "k", "operator": "Exists"}]}}]),
                None,
                None,
            ),
        ];
        for (templates, deadline, want) in cases {
            let got = verify_spec(&experiment(templates.clone(), deadline));
            assert_eq!(got.as_deref(), want, "{templates}");
        }
    }
}
