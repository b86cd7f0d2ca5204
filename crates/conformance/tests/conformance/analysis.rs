//! Analysis: the checks of a metric spec, a metric's phase from its limits, counters and
//! measurements, and a measured value's phase from the success and failure conditions.

use serde_json::{Value, json};
use sluice_api::AnalysisRun;
use sluice_api::analysis::Metric;
use sluice_api::common::AnalysisPhase;
use sluice_conformance::differences::Differences;
use sluice_conformance::generate::analysis::{conditions, metric, metric_specs, result, value};
use sluice_conformance::oracle::{self, ARGO_VERSIONS};
use sluice_conformance::run::compare;
use sluice_engine::analysis::validate_metrics;

fn phase_name(phase: &AnalysisPhase) -> String {
    serde_json::to_value(phase)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

#[test]
fn metric_verdicts_match_argo() {
    for version in ARGO_VERSIONS {
        let strategy = || (metric(), result(), proptest::bool::ANY);
        compare(
            &format!("metric-phase/{version}"),
            strategy,
            |(m, r, terminating)| {
                let answer = oracle::shared(version)
                .ask(&json!({"op": "metricPhase", "metric": m, "result": r, "terminating": terminating}))
                .map_err(|e| format!("{e:#}"))?;
                let Some(argo) = answer["phase"].as_str() else {
                    return Err(format!("Argo {version} could not judge it: {answer}"));
                };
                let run: AnalysisRun = serde_json::from_value(json!({
                    "apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisRun",
                    "metadata": {"name": "r", "namespace": "default"},
                    "spec": {"metrics": [m]},
                    "status": {"phase": "Running", "metricResults": [r]},
                }))
                .map_err(|e| format!("Sluice cannot read it: {e}"))?;
                let phases = match sluice_engine::analysis::metric_phases(&run, *terminating) {
                    Ok(phases) => phases,
                    // Argo judges the counters without looking at the spec; Sluice checks the
                    // spec first, and a run it refuses ends in Error before any verdict.
                    Err(_) => return Ok("spec refused by Sluice before judging".into()),
                };
                let sluice = phases.first().map(phase_name).unwrap_or_default();
                if sluice == argo {
                    Ok(format!("same verdict ({argo})"))
                } else {
                    Err(format!("Argo {version}: {argo:?}, Sluice: {sluice:?}"))
                }
            },
        );
    }
}

#[test]
fn condition_verdicts_match_argo() {
    let differences = Differences::load("Analysis conditions");
    for version in ARGO_VERSIONS {
        compare(
            &format!("evaluate/{version}"),
            || (conditions(), value()),
            |(m, v)| {
                let answer = oracle::shared(version)
                    .ask(&json!({"op": "evaluate", "metric": m, "value": v}))
                    .map_err(|e| format!("{e:#}"))?;
                if let Some(problem) = answer.get("panic").or(answer.get("decodeError")) {
                    return Err(format!("Argo {version} could not judge it: {problem}"));
                }
                let argo_phase = answer["phase"].as_str().unwrap_or_default().to_string();
                let argo_error = answer.get("error").and_then(Value::as_str).is_some();
                let metric: sluice_api::analysis::Metric = serde_json::from_value(m.clone())
                    .map_err(|e| format!("Sluice cannot read it: {e}"))?;
                let sluice =
                    sluice_analysis::evaluate_metric(&metric, &sluice_analysis::json_to_value(v));
                match (&sluice, argo_error) {
                    (Ok(phase), false) if phase_name(phase) == argo_phase => {
                        Ok(format!("same verdict ({argo_phase})"))
                    }
                    (Err(_), true) => Ok("both report an error".into()),
                    _ => {
                        let argo = answer.get("error").and_then(Value::as_str);
                        let sluice = sluice.as_ref().err().map(|e| e.0.as_str());
                        if let Some(row) = differences.explains(argo, sluice) {
                            return Ok(format!("documented difference ({row})"));
                        }
                        Err(format!("Argo {version}: {answer}\nSluice: {sluice:?}"))
                    }
                }
            },
        );
    }
}

/// The checks a template's or run's metrics pass before anything is measured (Argo's
/// `ValidateMetrics`): an AnalysisRun that fails them ends in Error with the message, and a
/// Rollout naming such a template is InvalidSpec.
#[test]
fn metric_specs_are_checked_as_argo_checks_them() {
    for version in ARGO_VERSIONS {
        compare(
            &format!("metric-specs/{version}"),
            metric_specs,
            |metrics| {
                let Ok(parsed) = serde_json::from_value::<Vec<Metric>>(metrics.clone()) else {
                    return Ok("Sluice cannot read it (refused when the object is read)".into());
                };
                let answer = oracle::shared(version)
                    .ask(&json!({"op": "validateMetrics", "metrics": metrics}))
                    .map_err(|e| format!("{e:#}"))?;
                let Some(argo) = answer["error"].as_str() else {
                    return Err(format!("Argo {version} could not check them: {answer}"));
                };
                let sluice = validate_metrics(&parsed).err().unwrap_or_default();
                if sluice == argo {
                    Ok(if argo.is_empty() {
                        "both valid".into()
                    } else {
                        "same error".into()
                    })
                } else {
                    Err(format!("Argo {version}: {argo:?}; Sluice: {sluice:?}"))
                }
            },
        );
    }
}
