//! Every Rollout, AnalysisTemplate, ClusterAnalysisTemplate, AnalysisRun and Experiment in Argo's
//! v1.9.1 examples and e2e fixtures deserializes into our types and serializes back to the same
//! JSON value.

mod support;

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};

use support::{corpus, json_diff, round_trip};

#[test]
fn corpus_objects_round_trip_exactly() {
    let corpus = corpus::load();
    let mut failures = Vec::new();
    let mut per_kind: BTreeMap<&str, usize> = BTreeMap::new();
    for object in corpus.objects.iter().filter(|o| !o.expected_failure()) {
        *per_kind.entry(object.kind.as_str()).or_default() += 1;
        match round_trip(&object.kind, &object.value) {
            Ok(output) => {
                let diff = json_diff(&object.value, &output);
                if !diff.is_empty() {
                    failures.push(format!("{}:\n  {}", object.label(), diff.join("\n  ")));
                }
            }
            Err(err) => failures.push(format!("{}: does not deserialize: {err}", object.label())),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The corpus must actually have been read: these are lower bounds of v1.9.1's content.
    for (kind, minimum) in [
        ("Rollout", 60),
        ("AnalysisTemplate", 10),
        ("ClusterAnalysisTemplate", 1),
        ("AnalysisRun", 1),
        ("Experiment", 5),
    ] {
        let seen = per_kind.get(kind).copied().unwrap_or(0);
        assert!(
            seen >= minimum,
            "only {seen} {kind} objects in the corpus, expected {minimum}+"
        );
    }
}

/// Objects Argo keeps as malformed input (`expectedfailures/`) must either round-trip or be
/// rejected with an error; they must never panic. (The v1.9.1 corpus copy used here may not
/// contain that directory; `tests/malformed.rs` covers such objects directly.)
#[test]
fn expected_failures_fail_cleanly() {
    let corpus = corpus::load();
    for object in corpus.objects.iter().filter(|o| o.expected_failure()) {
        let outcome = catch_unwind(AssertUnwindSafe(|| round_trip(&object.kind, &object.value)));
        match outcome {
            Ok(Ok(output)) => assert_eq!(output, object.value, "{}", object.label()),
            Ok(Err(_)) => {}
            Err(_) => panic!("{} panicked while deserializing", object.label()),
        }
    }
}

/// Files that are not plain YAML are left out, and only those: Helm chart templates and files
/// with unquoted `{{…}}` placeholders.
#[test]
fn only_templates_are_skipped() {
    let corpus = corpus::load();
    let helm: Vec<_> = corpus
        .helm_files
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        helm.iter()
            .all(|p| p.starts_with("examples/helm-blue-green/")),
        "{helm:?}"
    );
    let templated: Vec<_> = corpus
        .templated_files
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    assert_eq!(
        templated,
        ["examples/traffic-management/rollout-linkerd.yaml"]
    );
    // Istio's CRD bundle has multi-line quoted strings indented less than YAML allows.
    assert!(
        corpus
            .unparsed_foreign
            .iter()
            .all(|d| d.starts_with("test/e2e/crds/istio.yaml#")),
        "{:?}",
        corpus.unparsed_foreign
    );
}
