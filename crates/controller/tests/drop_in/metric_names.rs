//! The metric names Argo's Grafana dashboard reads and Argo's controller serves, against those
//! Sluice's /metrics serves.

use serde_json::Value;

/// Metric names in PromQL expressions: identifiers that are neither functions, keywords,
/// label names nor strings.
pub fn promql_metric_names(expr: &str) -> Vec<String> {
    const KEYWORDS: [&str; 8] = [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "bool",
        "offset",
    ];
    let chars: Vec<char> = expr.chars().collect();
    let mut names = Vec::new();
    let (mut i, mut braces, mut grouping) = (0, 0, false);
    let mut in_label_values = 0;
    while i < chars.len() {
        let c = chars[i];
        // Strings and range or subquery selectors ([10m]) name no metric.
        if let Some(close) = match c {
            '"' => Some('"'),
            '[' => Some(']'),
            _ => None,
        } {
            i += 1;
            while i < chars.len() && chars[i] != close {
                i += 1;
            }
            i += 1;
            continue;
        }
        match c {
            '{' => braces += 1,
            '}' => braces -= 1,
            ')' => grouping = false,
            _ => {}
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let next = chars[i..].iter().find(|c| !c.is_whitespace()).copied();
            let prev = chars[..start]
                .iter()
                .rev()
                .find(|c| !c.is_whitespace())
                .copied();
            if KEYWORDS.contains(&word.as_str()) {
                grouping = word == "by" || word == "without";
            } else if next == Some('(') {
                if word == "label_values" {
                    in_label_values = 1;
                }
            } else if braces == 0 && !grouping && !(in_label_values > 0 && prev == Some(',')) {
                names.push(word);
            }
            continue;
        }
        i += 1;
    }
    names
}

/// The metric names of every query of Argo's dashboard (its datasource query excepted).
pub fn dashboard_metric_names() -> Vec<String> {
    let path = sluice_api::corpus::require_argo_corpus_dir()
        .unwrap()
        .join("examples/dashboard.json");
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    fn exprs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                for (k, v) in map {
                    if let ("expr" | "query", Value::String(s)) = (k.as_str(), v) {
                        out.push(s.clone());
                    }
                    exprs(v, out);
                }
            }
            Value::Array(items) => items.iter().for_each(|v| exprs(v, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    exprs(&dashboard, &mut all);
    let mut names: Vec<String> = all
        .iter()
        .filter(|e| *e != "prometheus")
        .flat_map(|e| promql_metric_names(e))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The series names of an exposition.
pub fn served_names(exposition: &str) -> std::collections::BTreeSet<String> {
    exposition
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap().to_string())
        .collect()
}

/// Argo's series that have no meaning in Sluice, and why (see docs/metrics.md).
pub fn not_served_on_purpose(name: &str) -> Option<&'static str> {
    if name.starts_with("go_") && name != "go_memstats_heap_alloc_bytes" {
        return Some("Go runtime");
    }
    match name {
        "cardinality_enforcement_unexpected_categorizations_total"
        | "disabled_metrics_total"
        | "hidden_metrics_total"
        | "registered_metrics_total" => Some("Kubernetes metrics registry"),
        n if n.starts_with("notification_send") => Some("no notifications yet"),
        n if n == "workqueue_depth" || n.starts_with("workqueue_queue_duration_seconds") => {
            Some("inside kube's scheduler, not observable")
        }
        _ => None,
    }
}

pub fn argo_reference_names(file: &str) -> Vec<String> {
    let path = sluice_api::corpus::require_argo_corpus_dir()
        .unwrap()
        .join("../../reference")
        .join(file);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn dashboard_queries_name_the_metrics_they_read() {
    assert_eq!(
        promql_metric_names(
            r#"time() - max(process_start_time_seconds{job="argo-rollouts-metrics"})"#
        ),
        ["process_start_time_seconds"]
    );
    assert_eq!(
        promql_metric_names(r#"sum(increase(rollout_reconcile_bucket[10m])) by (le)"#),
        ["rollout_reconcile_bucket"]
    );
    assert_eq!(
        promql_metric_names(r#"label_values(rollout_info{namespace="$rollout_namespace"},name)"#),
        ["rollout_info"]
    );
    let names = dashboard_metric_names();
    for name in [
        "process_start_time_seconds",
        "go_memstats_heap_alloc_bytes",
        "rollout_info",
    ] {
        assert!(names.iter().any(|n| n == name), "{names:?}");
    }
}
