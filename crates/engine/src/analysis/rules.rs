//! Run-level rules that name metrics by pattern: `dryRun` and `measurementRetention`.
//!
//! A rule's `metricName` is a regular expression matched anywhere in the metric name (so
//! `test.*` or a plain name both work), and `*` on its own means every metric. A rule that
//! matches no metric makes the run invalid.

use std::collections::{BTreeMap, BTreeSet};

use regex::Regex;
use sluice_api::common::{DryRun, MeasurementRetention};

/// Compiles a rule pattern. `*` alone matches everything; a pattern that is not a valid
/// regular expression matches nothing.
fn matcher(pattern: &str) -> Option<Regex> {
    if pattern == "*" {
        return Regex::new("").ok();
    }
    Regex::new(pattern).ok()
}

/// Names of the metrics in dry-run mode.
pub(crate) fn dry_run_metrics(
    rules: &[DryRun],
    names: &[&str],
) -> Result<BTreeSet<String>, String> {
    let mut matched = BTreeSet::new();
    for (i, rule) in rules.iter().enumerate() {
        let hits = matching(rule.metric_name.as_deref().unwrap_or_default(), names);
        if hits.is_empty() {
            return Err(format!("dryRun[{i}]: Rule didn't match any metric name(s)"));
        }
        matched.extend(hits.into_iter().map(str::to_owned));
    }
    Ok(matched)
}

/// Measurements to keep per metric, for the metrics a rule names. A later rule overrides an
/// earlier one; a limit of 0 or less leaves the default in place.
pub(crate) fn retention_limits(
    rules: &[MeasurementRetention],
    names: &[&str],
) -> Result<BTreeMap<String, usize>, String> {
    let mut limits = BTreeMap::new();
    for (i, rule) in rules.iter().enumerate() {
        let hits = matching(rule.metric_name.as_deref().unwrap_or_default(), names);
        if hits.is_empty() {
            return Err(format!(
                "measurementRetention[{i}]: Rule didn't match any metric name(s)"
            ));
        }
        let limit = rule
            .limit
            .filter(|l| *l > 0)
            .and_then(|l| usize::try_from(l).ok());
        for name in hits {
            match limit {
                Some(limit) => limits.insert(name.to_owned(), limit),
                None => limits.remove(name),
            };
        }
    }
    Ok(limits)
}

fn matching<'a>(pattern: &str, names: &[&'a str]) -> Vec<&'a str> {
    let Some(re) = matcher(pattern) else {
        return Vec::new();
    };
    names.iter().copied().filter(|n| re.is_match(n)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dry(names: &[&str]) -> Vec<DryRun> {
        names
            .iter()
            .map(|n| DryRun {
                metric_name: Some((*n).to_owned()),
            })
            .collect()
    }

    fn keep(rules: &[(&str, i32)]) -> Vec<MeasurementRetention> {
        rules
            .iter()
            .map(|(n, l)| MeasurementRetention {
                metric_name: Some((*n).to_owned()),
                limit: Some(*l),
            })
            .collect()
    }

    #[test]
    fn dry_run_patterns() {
        let names = ["test-1", "test-2", "latency"];
        let all = dry_run_metrics(&dry(&["*"]), &names).unwrap();
        assert_eq!(all.len(), 3);
        let some = dry_run_metrics(&dry(&["test.*"]), &names).unwrap();
        assert_eq!(
            some,
            BTreeSet::from(["test-1".to_owned(), "test-2".to_owned()])
        );
        let exact = dry_run_metrics(&dry(&["latency"]), &names).unwrap();
        assert_eq!(exact, BTreeSet::from(["latency".to_owned()]));
        assert!(dry_run_metrics(&[], &names).unwrap().is_empty());
    }

    #[test]
    fn unmatched_or_invalid_rule_is_an_error() {
        let names = ["latency"];
        assert_eq!(
            dry_run_metrics(&dry(&["latency", "errors"]), &names).unwrap_err(),
            "dryRun[1]: Rule didn't match any metric name(s)"
        );
        assert_eq!(
            dry_run_metrics(&dry(&["(unclosed"]), &names).unwrap_err(),
            "dryRun[0]: Rule didn't match any metric name(s)"
        );
        assert_eq!(
            retention_limits(&keep(&[("errors", 3)]), &names).unwrap_err(),
            "measurementRetention[0]: Rule didn't match any metric name(s)"
        );
    }

    #[test]
    fn later_retention_rule_wins_and_non_positive_means_default() {
        let names = ["a", "b"];
        let limits = retention_limits(&keep(&[("*", 5), ("b", 2)]), &names).unwrap();
        assert_eq!(limits, BTreeMap::from([("a".into(), 5), ("b".into(), 2)]));
        let limits = retention_limits(&keep(&[("*", 5), ("a", 0)]), &names).unwrap();
        assert_eq!(limits, BTreeMap::from([("b".into(), 5)]));
    }
}
