//! Hash vectors computed with Go, and properties of the encoder.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::*;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Vector {
    name: String,
    hash: String,
    hash_before_argo19: String,
    go_json: Option<String>,
    collision_count: Option<i32>,
    /// Whether the template survives a round trip through the typed k8s-openapi structs.
    #[serde(default = "yes")]
    typed: bool,
    template: Value,
}

fn yes() -> bool {
    true
}

fn vectors() -> Vec<Vector> {
    serde_saphyr::from_str(include_str!("testdata/vectors.yaml")).unwrap()
}

#[test]
fn vectors_are_numerous_and_distinct() {
    let vectors = vectors();
    assert!(vectors.len() > 30, "{} vectors", vectors.len());
    let mut names: Vec<&str> = vectors.iter().map(|v| v.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), vectors.len(), "duplicate vector names");
}

#[test]
fn go_json_matches_go_bytes() {
    for v in vectors() {
        let Some(expected) = &v.go_json else { continue };
        let actual = String::from_utf8(go_json(&v.template).unwrap()).unwrap();
        assert_eq!(&actual, expected, "vector {}", v.name);
    }
}

#[test]
fn hashes_match_go() {
    for v in vectors() {
        let hash = compute_pod_template_hash_value(&v.template, v.collision_count).unwrap();
        assert_eq!(hash, v.hash, "vector {}", v.name);
    }
}

#[test]
fn hashes_before_argo19_match_go() {
    for v in vectors() {
        let hash = pod_template_hash_as(&v.template, v.collision_count, HashVersion::BeforeArgo19)
            .unwrap();
        assert_eq!(hash, v.hash_before_argo19, "vector {}", v.name);
    }
}

/// The hash Argo Rollouts 1.9.1 itself computed for every distinct pod template of the
/// Rollouts in its own examples and e2e fixtures (shared reference data).
#[test]
fn argo_19_hashes_of_the_corpus_templates() {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Entry {
        file: String,
        rollout: String,
        template: Value,
        argo_hash: String,
    }
    let text = include_str!("testdata/argo-v1.9.1-pod-template-hashes.jsonl");
    let entries: Vec<Entry> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(entries.len(), 51);
    for e in &entries {
        let from_json = compute_pod_template_hash_value(&e.template, None).unwrap();
        assert_eq!(from_json, e.argo_hash, "{} {}", e.file, e.rollout);
        let typed: PodTemplateSpec = serde_json::from_value(e.template.clone()).unwrap();
        let from_typed = compute_pod_template_hash(&typed, None).unwrap();
        assert_eq!(from_typed, e.argo_hash, "{} {} (typed)", e.file, e.rollout);
    }
}

#[test]
fn typed_templates_hash_like_go() {
    let mut checked = 0;
    for v in vectors().into_iter().filter(|v| v.typed) {
        let typed: PodTemplateSpec = serde_json::from_value(v.template.clone())
            .unwrap_or_else(|e| panic!("vector {}: {e}", v.name));
        let hash = compute_pod_template_hash(&typed, v.collision_count).unwrap();
        assert_eq!(hash, v.hash, "vector {}", v.name);
        checked += 1;
    }
    assert!(checked > 25, "only {checked} typed vectors");
}

#[test]
fn argo_public_check_value() {
    let template: PodTemplateSpec = serde_json::from_value(json!({
        "metadata": {"labels": {"name": "red"}},
        "spec": {
            "containers": [{
                "name": "red",
                "image": "red",
                "imagePullPolicy": "Always",
                "terminationMessagePath": "/dev/termination-log"
            }],
            "dnsPolicy": "ClusterFirst",
            "restartPolicy": "Always",
            "securityContext": {}
        }
    }))
    .unwrap();
    // Argo 1.9.0 and later; 1.8 and earlier gave 7bb4fbc896.
    assert_eq!(
        compute_pod_template_hash(&template, None).unwrap(),
        "5f78d78c4d"
    );
    let value = serde_json::to_value(&template).unwrap();
    assert_eq!(
        pod_template_hash_as(&value, None, HashVersion::BeforeArgo19).unwrap(),
        "7bb4fbc896"
    );
    assert_ne!(
        compute_pod_template_hash(&template, Some(1)).unwrap(),
        "5f78d78c4d"
    );
}

type Entries = Vec<(String, Value)>;
type Arrangement = dyn Fn(&mut Entries);

/// Rebuilds every object of `value` with its keys in the order `arrange` gives.
fn rearrange(value: &Value, arrange: &Arrangement) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.iter().map(|v| rearrange(v, arrange)).collect()),
        Value::Object(entries) => {
            let mut pairs: Entries = entries
                .iter()
                .map(|(k, v)| (k.clone(), rearrange(v, arrange)))
                .collect();
            arrange(&mut pairs);
            Value::Object(pairs.into_iter().collect::<Map<_, _>>())
        }
        other => other.clone(),
    }
}

#[test]
fn output_is_json_and_independent_of_input_key_order() {
    let arrangements: [&Arrangement; 4] = [
        &|pairs| pairs.reverse(),
        &|pairs| pairs.sort_by(|a, b| a.0.cmp(&b.0)),
        &|pairs| {
            let n = pairs.len();
            pairs.rotate_left(n / 2);
        },
        &|pairs| pairs.sort_by_key(|(k, _)| (k.len(), k.bytes().rev().collect::<Vec<_>>())),
    ];
    for v in vectors() {
        // Raw managedFields JSON keeps its own key order, as in Go.
        if v.name == "managed-fields" {
            continue;
        }
        let reference = go_json(&v.template).unwrap();
        let parsed: Value = serde_json::from_slice(&reference)
            .unwrap_or_else(|e| panic!("vector {}: output is not JSON: {e}", v.name));
        assert!(parsed.is_object(), "vector {}", v.name);
        for arrange in arrangements {
            let shuffled = rearrange(&v.template, arrange);
            assert_eq!(go_json(&shuffled).unwrap(), reference, "vector {}", v.name);
        }
    }
}

#[test]
fn re_encoding_go_output_is_a_fixed_point() {
    // Go's own bytes decode to the same template, so encoding them again changes nothing.
    for v in vectors() {
        let first = go_json(&v.template).unwrap();
        let second = go_json(&serde_json::from_slice(&first).unwrap()).unwrap();
        assert_eq!(first, second, "vector {}", v.name);
    }
}

#[test]
fn zero_values_of_absent_fields() {
    let bytes = go_json(&json!({"spec": {"containers": [{"name": "a"}]}})).unwrap();
    assert_eq!(
        String::from_utf8(bytes).unwrap(),
        concat!(
            r#"{"metadata":{},"#,
            r#""spec":{"containers":[{"name":"a","resources":{}}]}}"#
        )
    );
    let bytes = go_json(&json!({
        "spec": {
            "containers": [{"name": "a", "readinessProbe": {"httpGet": {}}}],
            "hostAliases": [{}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}
        }
    }))
    .unwrap();
    assert_eq!(
        String::from_utf8(bytes).unwrap(),
        concat!(
            r#"{"metadata":{},"#,
            r#""spec":{"containers":[{"name":"a","resources":{},"#,
            r#""readinessProbe":{"httpGet":{"port":0}}}],"affinity":{"nodeAffinity":{"#,
            r#""requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":null}}},"#,
            r#""hostAliases":[{"ip":""}]}}"#
        )
    );
}

#[test]
fn creation_timestamp_is_left_out_only_when_zero_and_only_since_argo19() {
    let encode = |meta: Value, version| {
        let template = json!({"metadata": meta, "spec": {"containers": [{"name": "a"}]}});
        let bytes = go_json_as(&template, version).unwrap();
        let text = String::from_utf8(bytes).unwrap();
        text.split_once(",\"spec\"").unwrap().0.to_owned()
    };
    let current = HashVersion::Current;
    let before = HashVersion::BeforeArgo19;
    assert_eq!(encode(json!({}), current), r#"{"metadata":{}"#);
    assert_eq!(
        encode(json!({"creationTimestamp": null}), current),
        r#"{"metadata":{}"#
    );
    let zero = json!({"creationTimestamp": "0001-01-01T00:00:00Z"});
    assert_eq!(encode(zero.clone(), current), r#"{"metadata":{}"#);
    assert_eq!(
        encode(zero, before),
        r#"{"metadata":{"creationTimestamp":null}"#
    );
    assert_eq!(
        encode(json!({}), before),
        r#"{"metadata":{"creationTimestamp":null}"#
    );
    let set = json!({"creationTimestamp": "2026-11-26T10:00:00.5+01:00"});
    assert_eq!(
        encode(set.clone(), current),
        r#"{"metadata":{"creationTimestamp":"2026-11-26T09:00:00Z"}"#
    );
    assert_eq!(
        encode(set, before),
        encode(
            json!({"creationTimestamp": "2026-11-26T09:00:00Z"}),
            current
        )
    );
}

#[test]
fn wrong_json_types_are_errors() {
    let cases = [
        json!([]),
        json!({"spec": {"containers": {}}}),
        json!({"spec": {"containers": [{"name": 1}]}}),
        json!({"spec": {"containers": [{"name": "a", "stdin": "true"}]}}),
        json!({"spec": {"terminationGracePeriodSeconds": 1.5}}),
        json!({"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 1u64 << 32}]}]}}),
        json!({"spec": {"containers": [{"name": "a", "resources": {"limits": {"cpu": "x"}}}]}}),
        json!({"spec": {"containers": [{"name": "a", "resources": {"limits": {"cpu": true}}}]}}),
        json!({"metadata": {"creationTimestamp": "yesterday"}}),
        json!({"metadata": {"labels": {"a": 1}}}),
    ];
    for case in cases {
        assert!(go_json(&case).is_err(), "accepted {case}");
    }
    let err = go_json(
        &json!({"spec": {"containers": [{"name": "a", "resources": {"limits": {"cpu": "1x"}}}]}}),
    )
    .unwrap_err();
    let message = err.to_string();
    assert!(
        message.starts_with(r#"spec.containers.0.resources.limits.cpu: invalid quantity "1x": "#),
        "{message}"
    );
}

#[test]
fn backspace_and_form_feed_use_short_escapes() {
    // Go 1.22 and later (the toolchains Argo Rollouts is built with) write \b and \f.
    let bytes = go_json(&json!({"metadata": {"annotations": {"a": "\u{8}\u{c}"}}})).unwrap();
    assert!(String::from_utf8(bytes).unwrap().contains(r#""a":"\b\f""#));
}

#[test]
fn safe_encode_string_matches_kubernetes() {
    assert_eq!(safe_encode_string("0123456789"), "456789bcdf");
    assert_eq!(safe_encode_string(""), "");
    // One output character per input character, padded with NUL to the byte length.
    assert_eq!(safe_encode_string("é"), "w\0");
}

#[test]
fn collision_count_bytes() {
    // FNV-32a of "{}"-like input differs between no count and count 0.
    let template = json!({});
    let none = compute_pod_template_hash_value(&template, None).unwrap();
    let zero = compute_pod_template_hash_value(&template, Some(0)).unwrap();
    assert_ne!(none, zero);
    let mut fnv = Fnv32a::new();
    fnv.write(&go_json(&template).unwrap());
    fnv.write(&[0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(zero, safe_encode_string(&fnv.sum().to_string()));
}

#[test]
fn json_hash_is_fnv32a_with_go_escaping() {
    use super::{hash_go_ordered_json, safe_encode_string};
    // FNV-1a 32 known values, through SafeEncodeString.
    assert_eq!(hash_go_ordered_json(""), safe_encode_string("2166136261"));
    assert_eq!(hash_go_ordered_json("a"), safe_encode_string("3826002220"));
    assert_eq!(
        hash_go_ordered_json("foobar"),
        safe_encode_string("3214735720")
    );
    // `<`, `>`, `&`, U+2028 and U+2029 are hashed in Go's escaped form.
    assert_eq!(
        hash_go_ordered_json("<a&b>\u{2028}\u{2029}"),
        hash_go_ordered_json("\\u003ca\\u0026b\\u003e\\u2028\\u2029")
    );
}
