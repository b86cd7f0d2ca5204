//! Just enough of the Prometheus text format to read counters and histograms from the API
//! server's and the controller's `/metrics`, and to diff two scrapes.

use std::collections::BTreeMap;

/// One sample: its metric name, labels and value.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Every sample of a scrape (comments and malformed lines are skipped).
pub fn parse(text: &str) -> Vec<Sample> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let (name, labels, rest) = match line.find('{') {
        Some(open) => {
            let close = line.rfind('}')?;
            (
                &line[..open],
                parse_labels(&line[open + 1..close]),
                &line[close + 1..],
            )
        }
        None => {
            let space = line.find(' ')?;
            (&line[..space], BTreeMap::new(), &line[space..])
        }
    };
    let value = rest.split_whitespace().next()?.parse().ok()?;
    Some(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// `a="x",b="y \"q\""` into a map (values unescaped).
fn parse_labels(text: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if key.is_empty() || chars.next() != Some('"') {
            return labels;
        }
        let mut value = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some('n') => value.push('\n'),
                    Some(other) => value.push(other),
                    None => break,
                },
                '"' => break,
                other => value.push(other),
            }
        }
        labels.insert(key.trim().to_string(), value);
    }
}

/// The sum of `metric`'s samples grouped by the key `key_of` gives (samples it maps to
/// `None` are left out).
pub fn sum_by(
    samples: &[Sample],
    metric: &str,
    key_of: impl Fn(&BTreeMap<String, String>) -> Option<String>,
) -> BTreeMap<String, f64> {
    let mut sums = BTreeMap::new();
    for s in samples.iter().filter(|s| s.name == metric) {
        if let Some(key) = key_of(&s.labels) {
            *sums.entry(key).or_insert(0.0) += s.value;
        }
    }
    sums
}

/// `after - before`, key by key (a key missing before counts from zero); zero entries dropped.
pub fn diff(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                (v - before.get(k).unwrap_or(&0.0)).max(0.0).round() as u64,
            )
        })
        .filter(|(_, v)| *v > 0)
        .collect()
}

/// The cumulative buckets (`le` → count) of an unlabelled histogram `metric`.
pub fn histogram(samples: &[Sample], metric: &str) -> Vec<(f64, f64)> {
    let bucket = format!("{metric}_bucket");
    let mut buckets: Vec<(f64, f64)> = Vec::new();
    // Series of other labels (Argo's are one per Rollout) are summed bucket by bucket.
    for (le, value) in samples.iter().filter(|s| s.name == bucket).filter_map(|s| {
        let le = s.labels.get("le")?;
        let le = if le == "+Inf" {
            f64::INFINITY
        } else {
            le.parse().ok()?
        };
        Some((le, s.value))
    }) {
        match buckets.iter_mut().find(|(b, _)| *b == le) {
            Some((_, n)) => *n += value,
            None => buckets.push((le, value)),
        }
    }
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    buckets
}

/// The buckets of observations made between two scrapes of the same histogram.
pub fn histogram_diff(before: &[(f64, f64)], after: &[(f64, f64)]) -> Vec<(f64, f64)> {
    after
        .iter()
        .map(|(le, n)| {
            let was = before
                .iter()
                .find(|(b, _)| b == le)
                .map_or(0.0, |(_, n)| *n);
            (*le, n - was)
        })
        .collect()
}

/// The `q` quantile of cumulative buckets, interpolated linearly inside its bucket as
/// Prometheus' `histogram_quantile` does; `None` without observations. A quantile in the
/// `+Inf` bucket is reported as the largest finite bound.
pub fn quantile(buckets: &[(f64, f64)], q: f64) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut lower = (0.0, 0.0);
    for &(le, count) in buckets {
        if count >= rank {
            if le.is_infinite() {
                return Some(lower.0);
            }
            let in_bucket = count - lower.1;
            let fraction = if in_bucket > 0.0 {
                (rank - lower.1) / in_bucket
            } else {
                1.0
            };
            return Some(lower.0 + (le - lower.0) * fraction);
        }
        lower = (le, count);
    }
    Some(lower.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRAPE: &str = r#"# HELP apiserver_request_total Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",group="apps",resource="replicasets",subresource="",verb="PATCH",version="v1"} 12
apiserver_request_total{code="409",component="apiserver",group="argoproj.io",resource="rollouts",subresource="status",verb="PATCH",version="v1alpha1"} 3
apiserver_request_total{code="200",component="apiserver",group="argoproj.io",resource="rollouts",subresource="status",verb="PATCH",version="v1alpha1"} 7
sluice_rollout_reconcile_seconds_bucket{le="0.001"} 2
sluice_rollout_reconcile_seconds_bucket{le="0.01"} 8
sluice_rollout_reconcile_seconds_bucket{le="+Inf"} 10
sluice_leader 1
odd_label{msg="a \"quoted\", b"} 4.5 1700000000
"#;

    #[test]
    fn samples_labels_and_values_are_read() {
        let samples = parse(SCRAPE);
        assert_eq!(samples.len(), 8);
        assert_eq!(samples[6].name, "sluice_leader");
        assert_eq!(samples[6].value, 1.0);
        assert_eq!(samples[7].labels["msg"], r#"a "quoted", b"#);
        assert_eq!(samples[7].value, 4.5);
    }

    #[test]
    fn requests_are_summed_by_verb_and_resource_and_diffed() {
        let samples = parse(SCRAPE);
        let by = |l: &BTreeMap<String, String>| Some(format!("{} {}", l["verb"], l["resource"]));
        let sums = sum_by(&samples, "apiserver_request_total", by);
        assert_eq!(sums["PATCH rollouts"], 10.0);
        assert_eq!(sums["PATCH replicasets"], 12.0);
        let before = BTreeMap::from([("PATCH rollouts".to_string(), 4.0)]);
        let d = diff(&before, &sums);
        assert_eq!(d["PATCH rollouts"], 6);
        assert_eq!(d["PATCH replicasets"], 12);
    }

    #[test]
    fn quantiles_interpolate_within_buckets() {
        let samples = parse(SCRAPE);
        let h = histogram(&samples, "sluice_rollout_reconcile_seconds");
        assert_eq!(h, vec![(0.001, 2.0), (0.01, 8.0), (f64::INFINITY, 10.0)]);
        // The median (rank 5) lies half-way through the (0.001, 0.01] bucket (2 → 8).
        let p50 = quantile(&h, 0.5).unwrap();
        assert!((p50 - 0.0055).abs() < 1e-9, "{p50}");
        // p99 falls in +Inf: the largest finite bound.
        assert_eq!(quantile(&h, 0.99), Some(0.01));
        let since = histogram_diff(&[(0.001, 2.0), (0.01, 2.0), (f64::INFINITY, 2.0)], &h);
        assert_eq!(since, vec![(0.001, 0.0), (0.01, 6.0), (f64::INFINITY, 8.0)]);
        assert_eq!(quantile(&[(0.01, 0.0), (f64::INFINITY, 0.0)], 0.5), None);
    }

    #[test]
    fn a_histogram_of_several_series_is_summed_by_bucket() {
        let samples = parse(
            "rollout_reconcile_bucket{name=\"a\",le=\"0.01\"} 1\n\
             rollout_reconcile_bucket{name=\"a\",le=\"+Inf\"} 2\n\
             rollout_reconcile_bucket{name=\"b\",le=\"0.01\"} 3\n\
             rollout_reconcile_bucket{name=\"b\",le=\"+Inf\"} 3\n",
        );
        let h = histogram(&samples, "rollout_reconcile");
        assert_eq!(h, vec![(0.01, 4.0), (f64::INFINITY, 5.0)]);
    }
}
