//! What a provider found, and how it becomes a measurement: timestamps, Argo's error marking
//! and the way Go writes floats.

use std::collections::BTreeMap;

use expr::Value;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use sluice_api::analysis::{Measurement, Metric};
use sluice_api::common::AnalysisPhase;

use super::ProviderError;
use crate::expression::evaluate_metric;

/// What a provider found, before timestamps are added.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub(crate) phase: Option<AnalysisPhase>,
    pub(crate) value: Option<String>,
    pub(crate) message: Option<String>,
    pub(crate) metadata: BTreeMap<String, String>,
    /// When a measurement left Running is to be resumed (none: at the next reconcile).
    pub(crate) resume_at: Option<Time>,
}

impl Outcome {
    /// A value judged against the metric's conditions. A condition that cannot be evaluated
    /// gives Error, keeping the value for the reader.
    pub(crate) fn judged(metric: &Metric, value: impl Into<String>, result: &Value) -> Self {
        let (phase, message) = match evaluate_metric(metric, result) {
            Ok(phase) => (phase, None),
            Err(err) => (AnalysisPhase::Error, Some(err.0)),
        };
        Self {
            phase: Some(phase),
            value: Some(value.into()),
            message,
            ..Default::default()
        }
    }

    /// A measurement still in flight.
    pub(crate) fn running(metadata: BTreeMap<String, String>) -> Self {
        Self {
            phase: Some(AnalysisPhase::Running),
            metadata,
            ..Default::default()
        }
    }

    pub(crate) fn with_metadata(mut self, key: &str, value: impl Into<String>) -> Self {
        self.metadata.insert(key.to_owned(), value.into());
        self
    }
}

pub(crate) fn outcome_to_measurement(
    started: Time,
    outcome: Result<Outcome, ProviderError>,
) -> Measurement {
    let outcome = outcome.unwrap_or_else(|err| Outcome {
        phase: Some(AnalysisPhase::Error),
        message: Some(err.0),
        ..Default::default()
    });
    let phase = outcome.phase.unwrap_or(AnalysisPhase::Error);
    Measurement {
        finished_at: phase.is_completed().then(now),
        phase: Some(phase),
        message: outcome.message,
        started_at: Some(started),
        value: outcome.value,
        metadata: (!outcome.metadata.is_empty()).then_some(outcome.metadata),
        resume_at: outcome.resume_at,
    }
}

/// Marks a measurement as failed with an error, as Argo's `MarkMeasurementError` does.
pub(crate) fn mark_error(mut measurement: Measurement, message: impl Into<String>) -> Measurement {
    measurement.phase = Some(AnalysisPhase::Error);
    measurement.message = Some(message.into());
    if measurement.finished_at.is_none() {
        measurement.finished_at = Some(now());
    }
    measurement
}

/// The current time, in whole seconds as the API server stores it.
pub(crate) fn now() -> Time {
    Time(sluice_api::time::whole_seconds(jiff::Timestamp::now()))
}

/// A float as Go's `strconv.FormatFloat(f, 'f', -1, 64)` writes it (and Prometheus' sample
/// values print): shortest form, no exponent, `NaN`, `+Inf`, `-Inf`.
pub(crate) fn format_float(f: f64) -> String {
    if f.is_nan() {
        "NaN".to_owned()
    } else if f.is_infinite() {
        if f > 0.0 { "+Inf" } else { "-Inf" }.to_owned()
    } else {
        format!("{f}")
    }
}

/// A float as Go's `%v` writes it: the shortest digits, with an exponent of at least two digits
/// (`1e+06`, `1.5e-05`) when the decimal exponent is below -4 or 6 and more; `NaN`, `+Inf`,
/// `-Inf` as such.
pub(crate) fn go_float(f: f64) -> String {
    if !f.is_finite() {
        return format_float(f);
    }
    // `{:e}` gives the shortest digits as `d.ddde<exp>`.
    let scientific = format!("{f:e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if (-4..6).contains(&exponent) {
        return format!("{f}");
    }
    let sign = if exponent < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exponent.unsigned_abs())
}

/// `[a,b,c]`, the way Argo writes a list of floats.
pub(crate) fn format_floats(values: &[f64]) -> String {
    let items: Vec<String> = values.iter().copied().map(format_float).collect();
    format!("[{}]", items.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_as_go_writes_them() {
        assert_eq!(format_float(0.99), "0.99");
        assert_eq!(format_float(1.0), "1");
        assert_eq!(format_float(1e-7), "0.0000001");
        assert_eq!(format_float(f64::NAN), "NaN");
        assert_eq!(format_float(f64::INFINITY), "+Inf");
        assert_eq!(format_float(f64::NEG_INFINITY), "-Inf");
        assert_eq!(format_floats(&[]), "[]");
        assert_eq!(format_floats(&[0.5, 2.0]), "[0.5,2]");
    }

    #[test]
    fn floats_as_go_prints_them_with_percent_v() {
        let cases = [
            (0.99, "0.99"),
            (1.0, "1"),
            (100.0, "100"),
            (123456.0, "123456"),
            (1234567.0, "1.234567e+06"),
            (1e6, "1e+06"),
            (1e21, "1e+21"),
            (0.0001, "0.0001"),
            (0.000001, "1e-06"),
            (0.000015, "1.5e-05"),
            (-2.5e300, "-2.5e+300"),
            (-0.0, "-0"),
            (5e-324, "5e-324"),
            (f64::INFINITY, "+Inf"),
            (f64::NEG_INFINITY, "-Inf"),
            (f64::NAN, "NaN"),
        ];
        for (f, text) in cases {
            assert_eq!(go_float(f), text, "{f:e}");
        }
    }

    #[test]
    fn outcomes_become_measurements() {
        let m = outcome_to_measurement(now(), Err(ProviderError::new("boom")));
        assert_eq!(m.phase, Some(AnalysisPhase::Error));
        assert_eq!(m.message.as_deref(), Some("boom"));
        assert!(m.finished_at.is_some());

        let running = outcome_to_measurement(
            now(),
            Ok(Outcome::running(BTreeMap::from([("k".into(), "v".into())]))),
        );
        assert_eq!(running.phase, Some(AnalysisPhase::Running));
        assert!(running.finished_at.is_none());
        assert_eq!(running.metadata.unwrap()["k"], "v");

        let metric = Metric {
            success_condition: Some("result >".into()),
            ..Default::default()
        };
        let judged =
            outcome_to_measurement(now(), Ok(Outcome::judged(&metric, "1", &Value::Float(1.0))));
        assert_eq!(judged.phase, Some(AnalysisPhase::Error));
        assert_eq!(judged.value.as_deref(), Some("1"));
        assert!(judged.message.unwrap().contains("syntax error"));
    }
}
