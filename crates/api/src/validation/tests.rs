//! Whole-object checks: the public entry points, and every Rollout and analysis object in
//! Argo's examples and end-to-end fixtures.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::test_support::*;
use super::*;

#[test]
fn valid_bases_have_no_problems() {
    assert_problems(spec_problems(json!({})), &[]);
    assert_problems(blue_green_problems(json!({})), &[]);
}

const MISSING_STRATEGY: &str = "spec.strategy.strategy: Required value: Rollout has missing field '.spec.strategy.canary or .spec.strategy.blueGreen'";

#[test]
fn strategy_must_be_exactly_one() {
    assert_problems(
        spec_problems(json!({"strategy": null})),
        &[MISSING_STRATEGY],
    );
    assert_problems(
        spec_problems(json!({"strategy": {"canary": null}})),
        &[MISSING_STRATEGY],
    );
    assert_problems(
        spec_problems(json!({"strategy": {"blueGreen": {"activeService": "a"}}})),
        &[
            "spec.strategy.strategy: Invalid value: \"blueGreen: true canary: true\": Multiple Strategies can not be listed",
        ],
    );
}

#[test]
fn anti_affinity_has_exactly_one_kind() {
    let required = json!({"requiredDuringSchedulingIgnoredDuringExecution": {}});
    let preferred = json!({"preferredDuringSchedulingIgnoredDuringExecution": {"weight": 100}});
    assert_problems(canary_problems(json!({"antiAffinity": required})), &[]);
    assert_problems(blue_green_problems(json!({"antiAffinity": preferred})), &[]);
    let one_of = "AntiAffinity must have exactly one strategy listed";
    assert_problems(
        canary_problems(json!({"antiAffinity": {}})),
        &[&format!(
            "spec.strategy.antiAffinity: Invalid value: \"antiAffinity.PreferredDuringSchedulingIgnoredDuringExecution: false antiAffinity.RequiredDuringSchedulingIgnoredDuringExecution: false\": {one_of}"
        )],
    );
    assert_problems(
        blue_green_problems(json!({"antiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {},
            "preferredDuringSchedulingIgnoredDuringExecution": {"weight": 0}
        }})),
        &[
            &format!(
                "spec.strategy.antiAffinity: Invalid value: \"antiAffinity.PreferredDuringSchedulingIgnoredDuringExecution: true antiAffinity.RequiredDuringSchedulingIgnoredDuringExecution: true\": {one_of}"
            ),
            "spec.strategy.antiAffinity.weight: Invalid value: 0: AntiAffinity weight must be between 1-100",
        ],
    );
    // An unset weight is zero to Argo.
    assert_problems(
        canary_problems(
            json!({"antiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": {}}}),
        ),
        &[
            "spec.strategy.antiAffinity.weight: Invalid value: 0: AntiAffinity weight must be between 1-100",
        ],
    );
}

#[test]
fn argo_checks_come_first_in_its_order() {
    // Argo's canary validator checks the steps before anti-affinity; Sluice's own checks
    // (here a negative delay) follow all of Argo's.
    assert_problems(
        canary_problems(json!({
            "abortScaleDownDelaySeconds": -1,
            "antiAffinity": {},
            "steps": [{"setWeight": 101}],
            "canaryService": "web", "stableService": "web"
        })),
        &[
            "spec.strategy.stableService: Invalid value: \"web\": This rollout uses the same service for the stable and canary services, but two different services are required.",
            "spec.strategy.steps[0].setWeight: Invalid value: 101: SetWeight needs to be between 0 and 100",
            "spec.strategy.antiAffinity: Invalid value: \"antiAffinity.PreferredDuringSchedulingIgnoredDuringExecution: false antiAffinity.RequiredDuringSchedulingIgnoredDuringExecution: false\": AntiAffinity must have exactly one strategy listed",
            "spec.strategy.canary.abortScaleDownDelaySeconds: Invalid value: -1: can only be used with traffic routing",
            "spec.strategy.canary.abortScaleDownDelaySeconds: Invalid value: -1: must be greater than or equal to 0",
        ],
    );
}

#[test]
fn values_are_shown_as_kubernetes_shows_them() {
    assert_eq!(
        BadValue::from("a \"b\"\n\u{1}").render(),
        r#""a \"b\"\n\x01""#
    );
    assert_eq!(BadValue::from("héllo").render(), "\"héllo\"");
    assert_eq!(BadValue::from(-3).render(), "-3");
    assert_eq!(BadValue::from(true).render(), "true");
    assert_eq!(
        BadValue::json(&json!({"exact": "", "regex": "<a&b>"})).render(),
        r#"{"regex":"\u003ca\u0026b\u003e"}"#
    );
    assert_eq!(
        FieldError::required("spec.x", "").0,
        "spec.x: Required value"
    );
    assert_eq!(
        FieldError::not_supported("spec.x", "b", &["a"]).0,
        "spec.x: Unsupported value: \"b\": supported values: \"a\""
    );
}

fn corpus_root() -> PathBuf {
    crate::corpus::require_argo_corpus_dir().unwrap_or_else(|e| panic!("{e}"))
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
}

/// Every object of the given kind in Argo's examples and e2e fixtures, by file.
fn corpus_objects(kind: &str) -> Vec<(PathBuf, Value)> {
    let root = corpus_root();
    let mut files = Vec::new();
    yaml_files(&root.join("examples"), &mut files);
    yaml_files(&root.join("test"), &mut files);
    files.sort();
    let mut objects = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        // Some fixtures are templates or otherwise not plain YAML; they hold nothing to check.
        let Ok(docs) = crate::yaml::from_multi_doc_str(&text) else {
            continue;
        };
        for doc in docs {
            if doc["kind"] == kind && doc["apiVersion"] == crate::API_VERSION {
                objects.push((file.clone(), doc));
            }
        }
    }
    objects
}

/// Problems found in corpus objects, keyed by `file (name)`.
fn corpus_problems<T: serde::de::DeserializeOwned>(
    kind: &str,
    validate: impl Fn(&T) -> Vec<String>,
) -> Vec<(String, Vec<String>)> {
    let objects = corpus_objects(kind);
    assert!(
        !objects.is_empty(),
        "no {kind} objects found under {:?}",
        corpus_root()
    );
    let total = objects.len();
    let mut read = 0;
    let mut found = Vec::new();
    for (file, doc) in objects {
        let label = format!(
            "{} ({})",
            file.strip_prefix(corpus_root()).unwrap().display(),
            doc["metadata"]["name"].as_str().unwrap_or("?")
        );
        let Ok(object) = serde_json::from_value::<T>(doc) else {
            continue;
        };
        read += 1;
        let problems = validate(&object);
        if !problems.is_empty() {
            found.push((label, problems));
        }
    }
    // Argo's own manifests are all expected to be readable.
    assert_eq!(read, total, "some {kind} objects could not be read");
    found
}

#[test]
fn validation_of_argo_rollouts_never_panics_and_accepts_the_valid_ones() {
    let found = corpus_problems::<Rollout>("Rollout", validate_rollout);
    let report: Vec<String> = found
        .iter()
        .map(|(label, problems)| format!("{label}: {problems:#?}"))
        .collect();
    assert!(
        found.is_empty(),
        "unexpected problems:\n{}",
        report.join("\n")
    );
}

#[test]
fn validation_accepts_argo_analysis_templates() {
    let found = corpus_problems::<AnalysisTemplate>("AnalysisTemplate", validate_analysis_template);
    assert!(found.is_empty(), "unexpected problems: {found:#?}");
    let found = corpus_problems::<ClusterAnalysisTemplate>(
        "ClusterAnalysisTemplate",
        validate_cluster_analysis_template,
    );
    assert!(found.is_empty(), "unexpected problems: {found:#?}");
}

#[test]
fn validation_of_argo_analysis_runs() {
    let found = corpus_problems::<AnalysisRun>("AnalysisRun", validate_analysis_run);
    assert!(found.is_empty(), "unexpected problems: {found:#?}");
}

#[test]
fn validation_reads_the_basic_argo_examples() {
    let examples = [
        "examples/rollout-canary.yaml",
        "examples/rollout-bluegreen.yaml",
        "examples/rollout-rolling-update.yaml",
        "examples/rollout-analysis-step.yaml",
    ];
    for example in examples {
        let text = std::fs::read_to_string(corpus_root().join(example)).unwrap();
        let rollouts: Vec<Rollout> = crate::yaml::from_multi_doc_str(&text)
            .unwrap()
            .into_iter()
            .filter(|doc| doc["kind"] == "Rollout")
            .map(|doc| serde_json::from_value(doc).unwrap())
            .collect();
        assert_eq!(rollouts.len(), 1, "{example}");
        assert_problems(validate_rollout(&rollouts[0]), &[]);
    }
}

/// Values that tend to break arithmetic and parsing.
fn hostile_values() -> Vec<Value> {
    vec![
        json!(null),
        json!(-1),
        json!(0),
        json!(i32::MAX),
        json!(i32::MIN),
        json!(""),
        json!("-1%"),
        json!("999999999999%"),
        json!("9223372036854775808s"),
        json!({}),
        json!([]),
        json!([{}]),
    ]
}

/// Every path to a value inside `value`, as JSON pointers.
fn pointers(value: &Value, prefix: String, out: &mut Vec<String>) {
    out.push(prefix.clone());
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let key = key.replace('~', "~0").replace('/', "~1");
                pointers(child, format!("{prefix}/{key}"), out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                pointers(child, format!("{prefix}/{i}"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn validation_never_panics_on_mangled_rollouts() {
    let mut checked = 0;
    for (_, doc) in corpus_objects("Rollout") {
        let mut paths = Vec::new();
        pointers(&doc["spec"], "/spec".into(), &mut paths);
        for path in paths {
            for hostile in hostile_values() {
                let mut mangled = doc.clone();
                if let Some(slot) = mangled.pointer_mut(&path) {
                    *slot = hostile;
                }
                // Values of the wrong type are refused when reading, before validation.
                if let Ok(rollout) = serde_json::from_value::<Rollout>(mangled) {
                    validate_rollout(&rollout);
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 5_000, "only {checked} mangled rollouts were read");
}

#[test]
fn validation_never_panics_on_mangled_analysis_templates() {
    let mut checked = 0;
    for (_, doc) in corpus_objects("AnalysisTemplate") {
        let mut paths = Vec::new();
        pointers(&doc["spec"], "/spec".into(), &mut paths);
        for path in paths {
            for hostile in hostile_values() {
                let mut mangled = doc.clone();
                if let Some(slot) = mangled.pointer_mut(&path) {
                    *slot = hostile;
                }
                if let Ok(template) = serde_json::from_value::<AnalysisTemplate>(mangled) {
                    validate_analysis_template(&template);
                    checked += 1;
                }
            }
        }
    }
    assert!(
        checked > 1_000,
        "only {checked} mangled templates were read"
    );
}

/// The first problem of each Rollout, as Argo Rollouts 1.9.1's controller wrote it in the
/// `InvalidSpec` condition of the same Rollout on the local control plane (after `The Rollout
/// "<name>" is invalid: `). The offending value is rendered by its Go type as Kubernetes'
/// field errors render it (apimachinery v0.34): a string quoted, a number or a boolean bare,
/// anything else as `encoding/json` writes it: a `map[string]string` with its keys sorted,
/// an `IntOrString` as a number or a quoted string, a struct without its empty fields, a nil
/// pointer as `null`, a slice as an array. Not Go's `%#v` (`map[string]string{"app":"x"}`),
/// which apimachinery printed before it used JSON and Argo's older test fixtures still show.
#[test]
fn bad_values_render_as_argo_renders_them_by_go_type() {
    let first = |problems: Vec<String>| problems.into_iter().next().unwrap_or_default();
    let istio_route = |name: &str, value: Value| {
        with_istio(json!({
            "trafficRouting": {"managedRoutes": [{"name": "r"}]},
            "steps": [{"setHeaderRoute": {"name": name,
                "match": [{"headerName": "h", "headerValue": value}]}}]
        }))
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            spec_problems(json!({
                "template": {"metadata": {"labels": {"tier": "a", "app": "other"}}}
            })),
            r#"spec.template.metadata.labels: Invalid value: {"app":"other","tier":"a"}: `selector` does not match template `labels`"#,
        ),
        (
            spec_problems(json!({"selector": {"matchLabels": null}})),
            "spec.selector: Invalid value: {}: empty selector is invalid for deployment",
        ),
        (
            canary_problems(json!({"maxSurge": 0, "maxUnavailable": 0})),
            "spec.strategy.maxSurge: Invalid value: 0: MaxSurge and MaxUnavailable both can not be zero",
        ),
        (
            canary_problems(json!({"maxSurge": "0%", "maxUnavailable": "0%"})),
            r#"spec.strategy.maxSurge: Invalid value: "0%": MaxSurge and MaxUnavailable both can not be zero"#,
        ),
        (
            canary_problems(json!({"stableService": "web", "canaryService": "web"})),
            r#"spec.strategy.stableService: Invalid value: "web": This rollout uses the same service for the stable and canary services, but two different services are required."#,
        ),
        (
            canary_problems(json!({"steps": [{"setWeight": 101}]})),
            "spec.strategy.steps[0].setWeight: Invalid value: 101: SetWeight needs to be between 0 and 100",
        ),
        (
            canary_problems(json!({"dynamicStableScale": true})),
            "spec.strategy.dynamicStableScale: Invalid value: true: Canary dynamicStableScale can only be used with traffic routing",
        ),
        (
            canary_problems(json!({"steps": [{"analysis": {
                "templates": [{"templateName": "t"}],
                "args": [{"name": "a", "value": "1"},
                         {"name": "b", "valueFrom": {"fieldRef": {"fieldPath": "metadata.nothing"}}}]
            }}]})),
            r#"spec.strategy.steps[0].analyses: Invalid value: [{"name":"a","value":"1"},{"name":"b","valueFrom":{"fieldRef":{"fieldPath":"metadata.nothing"}}}]: Analyses arguments must refer to valid object metadata supported by downwardAPI"#,
        ),
        (
            canary_problems(istio_route("r", json!({}))),
            "spec.strategy.steps[0].setHeaderRoute.match[0]: Invalid value: {}: StringMatch value missed, match value must have one of the following: exact, regex, prefix",
        ),
        (
            canary_problems(istio_route("r", json!({"prefix": "b", "exact": "a"}))),
            r#"spec.strategy.steps[0].setHeaderRoute.match[0]: Invalid value: {"exact":"a","prefix":"b"}: StringMatch match value must have exactly one of the following: exact, regex, prefix"#,
        ),
        (
            canary_problems(istio_route("other", json!({"exact": "a"}))),
            r#"spec.strategy.steps[0].setHeaderRoute: Invalid value: "other": Steps define a route that does not exist in spec.strategy.canary.trafficRouting.managedRoutes"#,
        ),
        (
            canary_problems(json!({"antiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": {"weight": 0}}})),
            "spec.strategy.antiAffinity.weight: Invalid value: 0: AntiAffinity weight must be between 1-100",
        ),
    ];
    for (problems, argo) in cases {
        assert_eq!(first(problems), argo);
    }
}
