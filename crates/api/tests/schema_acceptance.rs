//! Offline schema acceptance: corpus objects are accepted by our CRD schemas without losing a
//! field, and what our types write is accepted by Argo's own CRD schemas.

mod support;

use serde_json::{Value, json};
use support::schema::{paths, sample, validate};
use support::{KINDS, argo_crd, corpus, crd_file_for, open_api_schema, our_crd, round_trip};

fn report(label: &str, findings: &support::schema::Findings) -> Option<String> {
    (!findings.is_clean()).then(|| {
        format!(
            "{label}:\n  errors: {:?}\n  pruned: {:?}",
            findings.errors, findings.pruned
        )
    })
}

#[test]
fn corpus_objects_validate_against_our_schema() {
    let corpus = corpus::load();
    let schemas: Vec<(&str, Value)> = KINDS.iter().map(|k| (*k, our_crd(k))).collect();
    let mut failures = Vec::new();
    let mut count = 0;
    for object in corpus.objects.iter().filter(|o| !o.expected_failure()) {
        let (_, crd) = schemas.iter().find(|(k, _)| *k == object.kind).unwrap();
        count += 1;
        failures.extend(report(
            &object.label(),
            &validate(open_api_schema(crd), &object.value),
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(count > 80, "only {count} corpus objects");
}

#[test]
fn our_serialization_validates_against_argo_schema() {
    let corpus = corpus::load();
    let schemas: Vec<(&str, Value)> = KINDS
        .iter()
        .map(|k| (*k, argo_crd(crd_file_for(k))))
        .collect();
    let mut failures = Vec::new();
    for object in corpus.objects.iter().filter(|o| !o.expected_failure()) {
        let (_, crd) = schemas.iter().find(|(k, _)| *k == object.kind).unwrap();
        let written = round_trip(&object.kind, &object.value).unwrap();
        failures.extend(report(
            &object.label(),
            &validate(open_api_schema(crd), &written),
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Full objects (every Argo field set, status included) pass both schemas.
#[test]
fn full_objects_validate_against_both_schemas() {
    let mut failures = Vec::new();
    for kind in KINDS {
        let argo = argo_crd(crd_file_for(kind));
        let ours = our_crd(kind);
        let mut instance = sample(open_api_schema(&argo), &paths(open_api_schema(&ours)));
        instance["apiVersion"] = json!("argoproj.io/v1alpha1");
        instance["kind"] = json!(kind);
        let written = round_trip(kind, &instance).unwrap();
        failures.extend(report(
            &format!("{kind} vs ours"),
            &validate(open_api_schema(&ours), &written),
        ));
        failures.extend(report(
            &format!("{kind} vs Argo"),
            &validate(open_api_schema(&argo), &written),
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The validator itself rejects what the API server rejects.
#[test]
fn validator_catches_bad_objects() {
    let crd = our_crd("Rollout");
    let schema = open_api_schema(&crd);
    let bad = json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": "x", "anything": 1},
        "spec": {
            "replicas": "three",
            "unknownField": true,
            "strategy": {"canary": {"maxSurge": 1.5, "steps": [{"setWeight": 4294967296_i64}]}},
            "template": {"spec": {"containers": [{"image": "nginx"}]}},
            "restartAt": "yesterday"
        },
        "status": {"pauseConditions": [{"reason": "CanaryPauseStep"}]}
    });
    let findings = validate(schema, &bad);
    let errors = findings.errors.join("\n");
    for expected in [
        ".spec.replicas: expected an integer",
        ".spec.strategy.canary.maxSurge: 1.5 is neither",
        ".spec.strategy.canary.steps[0].setWeight: 4294967296 out of range",
        ".spec.template.spec.containers[0].name: required",
        ".spec.restartAt: \"yesterday\" is not a date-time",
        ".status.pauseConditions[0].startTime: required",
    ] {
        assert!(
            errors.contains(expected),
            "missing {expected:?} in\n{errors}"
        );
    }
    assert_eq!(findings.pruned, [".spec.unknownField"]);
}
