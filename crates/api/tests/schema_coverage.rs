//! Our types cover Argo's API field for field: every property path of Argo's v1.9.1 and
//! v1.10.0-rc1 CRD schemas exists in our generated schema (with the same type, for 1.9.1),
//! no field is ours alone, and an instance with every Argo field set survives a trip through
//! our types unchanged.

mod support;

use std::collections::BTreeSet;

use serde_json::{Value, json};
use support::schema::{is_free_form, is_int_or_string, paths, sample};
use support::{
    ARGO_NEWEST, KINDS, argo_1_10_crd, argo_crd, argo_newest_crd, crd_file_for, json_diff,
    open_api_schema, our_crd, round_trip,
};

/// Paths inside embedded Kubernetes types, which come from k8s-openapi and may carry fields of
/// newer Kubernetes releases than the one Argo's CRDs were generated from.
fn inside_kubernetes_type(path: &str) -> bool {
    path.contains(".template.spec.") || path.contains(".job.spec.")
}

fn required(node: &Value) -> BTreeSet<&str> {
    node.get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

#[test]
fn every_argo_property_path_exists_with_the_same_shape() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for kind in KINDS {
        let argo = argo_crd(crd_file_for(kind));
        let ours = our_crd(kind);
        let argo_paths = paths(open_api_schema(&argo));
        let our_paths = paths(open_api_schema(&ours));
        for (path, argo_node) in &argo_paths {
            checked += 1;
            let Some(our_node) = our_paths.get(path) else {
                problems.push(format!("{kind} {path}: missing"));
                continue;
            };
            if is_int_or_string(argo_node) != is_int_or_string(our_node) {
                problems.push(format!("{kind} {path}: int-or-string differs"));
                continue;
            }
            if is_free_form(argo_node) {
                continue;
            }
            for key in ["type", "format", "enum"] {
                if argo_node.get(key) != our_node.get(key) {
                    problems.push(format!(
                        "{kind} {path}: {key} {:?} != ours {:?}",
                        argo_node.get(key),
                        our_node.get(key)
                    ));
                }
            }
            if !inside_kubernetes_type(path) && required(argo_node) != required(our_node) {
                problems.push(format!(
                    "{kind} {path}: required {:?} != ours {:?}",
                    required(argo_node),
                    required(our_node)
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(checked > 5000, "only {checked} paths checked");
}

#[test]
fn every_argo_1_10_property_path_exists() {
    every_property_path_exists("1.10.0-rc1", argo_1_10_crd);
}

/// The same against the CRDs of the newest release, read from its Go module.
#[test]
fn every_property_path_of_the_newest_argo_exists() {
    every_property_path_exists(ARGO_NEWEST, argo_newest_crd);
}

fn every_property_path_exists(release: &str, argo_crd_of: fn(&str) -> Value) {
    let mut missing = Vec::new();
    let mut checked = 0;
    for kind in KINDS {
        let argo = argo_crd_of(crd_file_for(kind));
        let ours = our_crd(kind);
        let our_paths = paths(open_api_schema(&ours));
        for path in paths(open_api_schema(&argo)).keys() {
            checked += 1;
            if !our_paths.contains_key(path) && !inside_kubernetes_type(path) {
                missing.push(format!("{kind} {path}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "fields of Argo {release} Sluice lacks:\n{}",
        missing.join("\n")
    );
    assert!(checked > 5000, "only {checked} paths checked");
}

#[test]
fn no_fields_beyond_argo_outside_kubernetes_types() {
    // Fields of Argo's master, followed ahead of its next release.
    const FROM_ARGO_MASTER: &[&str] = &[".authentication.basicAuth", ".status.duration"];
    let mut extra = Vec::new();
    for kind in KINDS {
        let argo = argo_crd(crd_file_for(kind));
        let ours = our_crd(kind);
        let argo_1_10 = argo_1_10_crd(crd_file_for(kind));
        let mut argo_paths = paths(open_api_schema(&argo));
        // A field Argo 1.10 added is Argo's too.
        argo_paths.extend(paths(open_api_schema(&argo_1_10)));
        for path in paths(open_api_schema(&ours)).keys() {
            let under_free_form = argo_paths
                .iter()
                .any(|(p, node)| is_free_form(node) && path.starts_with(p.as_str()));
            let from_master = FROM_ARGO_MASTER.iter().any(|m| path.contains(m));
            if !argo_paths.contains_key(path)
                && !under_free_form
                && !inside_kubernetes_type(path)
                && !from_master
            {
                extra.push(format!("{kind} {path}"));
            }
        }
    }
    assert!(
        extra.is_empty(),
        "fields Argo does not have:\n{}",
        extra.join("\n")
    );
}

/// An object of the kind with every field of Argo's schema set.
pub fn argo_sample(kind: &str) -> Value {
    let argo = argo_crd(crd_file_for(kind));
    let ours = our_crd(kind);
    let our_paths = paths(open_api_schema(&ours));
    let mut instance = sample(open_api_schema(&argo), &our_paths);
    instance["apiVersion"] = json!("argoproj.io/v1alpha1");
    instance["kind"] = json!(kind);
    instance["metadata"] = json!({"name": "sample", "namespace": "default"});
    instance
}

#[test]
fn instances_with_every_argo_field_round_trip() {
    for kind in KINDS {
        let instance = argo_sample(kind);
        let output = round_trip(kind, &instance).unwrap_or_else(|e| panic!("{kind}: {e}"));
        let diff = json_diff(&instance, &output);
        assert!(diff.is_empty(), "{kind}:\n{}", diff.join("\n"));
        // Sanity: the sample really is big (a full pod template and every strategy field).
        assert!(
            instance.to_string().len() > 10_000,
            "{kind} sample is too small"
        );
    }
}
