//! An Experiment's spec checks: the InvalidSpec message of its first problem, as Argo's
//! `VerifyExperimentSpec` words it.

use serde_json::json;
use sluice_api::experiment::Experiment;
use sluice_conformance::generate::experiment;
use sluice_conformance::oracle::{self, ARGO_VERSIONS};
use sluice_conformance::run::compare;
use sluice_engine::experiment::verify_spec;

#[test]
fn experiment_specs_are_checked_as_argo_checks_them() {
    for version in ARGO_VERSIONS {
        compare(&format!("experiment-specs/{version}"), experiment, |ex| {
            let Ok(parsed) = serde_json::from_value::<Experiment>(ex.clone()) else {
                return Ok("Sluice cannot read it (refused when the object is read)".into());
            };
            let answer = oracle::shared(version)
                .ask(&json!({"op": "verifyExperiment", "experiment": ex}))
                .map_err(|e| format!("{e:#}"))?;
            let Some(argo) = answer["message"].as_str() else {
                return Err(format!("Argo {version} could not check it: {answer}"));
            };
            let sluice = verify_spec(&parsed).unwrap_or_default();
            if sluice == argo {
                Ok(if argo.is_empty() {
                    "both valid".into()
                } else {
                    "same message".into()
                })
            } else {
                Err(format!("Argo {version}: {argo:?}; Sluice: {sluice:?}"))
            }
        });
    }
}
