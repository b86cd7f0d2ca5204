//! Helpers shared by the integration tests: the Argo corpus, a structural-schema validator,
//! schema walking and JSON diffs.
#![allow(dead_code)]

pub mod corpus;
pub mod schema;

use serde_json::Value;

/// Paths (`.a.b[2].c`) where two JSON values differ; empty when equal.
pub fn json_diff(left: &Value, right: &Value) -> Vec<String> {
    let mut out = Vec::new();
    diff_into("", left, right, &mut out);
    out
}

fn diff_into(path: &str, left: &Value, right: &Value, out: &mut Vec<String>) {
    match (left, right) {
        (Value::Object(l), Value::Object(r)) => {
            for (k, lv) in l {
                match r.get(k) {
                    Some(rv) => diff_into(&format!("{path}.{k}"), lv, rv, out),
                    None => out.push(format!("{path}.{k}: only on the left ({lv})")),
                }
            }
            for (k, rv) in r {
                if !l.contains_key(k) {
                    out.push(format!("{path}.{k}: only on the right ({rv})"));
                }
            }
        }
        (Value::Array(l), Value::Array(r)) if l.len() == r.len() => {
            for (i, (lv, rv)) in l.iter().zip(r).enumerate() {
                diff_into(&format!("{path}[{i}]"), lv, rv, out);
            }
        }
        _ if left == right => {}
        _ => out.push(format!("{path}: {left} != {right}")),
    }
}

/// Argo's CRD for the given file name (e.g. `rollout-crd.yaml`) from the corpus.
pub fn argo_crd(file_name: &str) -> Value {
    let path = corpus::corpus_dir().join("manifests/crds").join(file_name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut docs = sluice_api::yaml::from_multi_doc_str(&text).unwrap();
    assert_eq!(docs.len(), 1, "{}", path.display());
    docs.remove(0)
}

/// Argo 1.10's CRD for the given file name, from the newer corpus beside the 1.9.1 one
/// (`../v1.10.0-rc1/manifests/crds/`).
pub fn argo_1_10_crd(file_name: &str) -> Value {
    let path = corpus::corpus_dir()
        .join("../v1.10.0-rc1/manifests/crds")
        .join(file_name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut docs = sluice_api::yaml::from_multi_doc_str(&text).unwrap();
    assert_eq!(docs.len(), 1, "{}", path.display());
    docs.remove(0)
}

/// The newest Argo Rollouts release whose CRDs are compared (the newest that builds here, as
/// the controller and oracle builds use).
pub const ARGO_NEWEST: &str = "1.10.1";

/// Argo's CRD for the given file name as the newest release ships it: from its Go module,
/// fetched into the module cache with `go mod download` (as the scripts that build Argo do).
pub fn argo_newest_crd(file_name: &str) -> Value {
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let module = format!("github.com/argoproj/argo-rollouts@v{ARGO_NEWEST}");
        let out = std::process::Command::new("go")
            .args(["mod", "download", "-json", &module])
            .env("GOTOOLCHAIN", "local")
            .env("GOFLAGS", "-mod=mod")
            .output()
            .unwrap_or_else(|e| panic!("running `go mod download {module}` (Go is needed): {e}"));
        let answer: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("`go mod download -json {module}` answered no JSON: {e}"));
        let dir = answer["Dir"]
            .as_str()
            .unwrap_or_else(|| panic!("could not download {module}: {}", answer["Error"]));
        std::path::PathBuf::from(dir)
    });
    let path = dir.join("manifests/crds").join(file_name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut docs = sluice_api::yaml::from_multi_doc_str(&text).unwrap();
    assert_eq!(docs.len(), 1, "{}", path.display());
    docs.remove(0)
}

/// Our generated CRD for a kind, as JSON.
pub fn our_crd(kind: &str) -> Value {
    let manifest = sluice_api::crd::manifests()
        .unwrap()
        .into_iter()
        .find(|m| m.crd.spec.names.kind == kind)
        .unwrap_or_else(|| panic!("no CRD for {kind}"));
    serde_json::to_value(manifest.crd).unwrap()
}

/// The CRD file name of a kind, as Argo names it.
pub fn crd_file_for(kind: &str) -> &'static str {
    match kind {
        "Rollout" => "rollout-crd.yaml",
        "AnalysisTemplate" => "analysis-template-crd.yaml",
        "ClusterAnalysisTemplate" => "cluster-analysis-template-crd.yaml",
        "AnalysisRun" => "analysis-run-crd.yaml",
        "Experiment" => "experiment-crd.yaml",
        other => panic!("not one of our kinds: {other}"),
    }
}

/// The openAPIV3Schema of the first version of a CRD.
pub fn open_api_schema(crd: &Value) -> &Value {
    &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
}

/// The five kinds of the API.
pub const KINDS: [&str; 5] = [
    "Rollout",
    "AnalysisTemplate",
    "ClusterAnalysisTemplate",
    "AnalysisRun",
    "Experiment",
];

/// Deserializes into the kind's type and serializes back; `Err` when deserialization fails.
pub fn round_trip(kind: &str, value: &Value) -> Result<Value, serde_json::Error> {
    fn via<T: serde::de::DeserializeOwned + serde::Serialize>(
        value: &Value,
    ) -> Result<Value, serde_json::Error> {
        let typed: T = serde_json::from_value(value.clone())?;
        serde_json::to_value(typed)
    }
    match kind {
        "Rollout" => via::<sluice_api::Rollout>(value),
        "AnalysisTemplate" => via::<sluice_api::AnalysisTemplate>(value),
        "ClusterAnalysisTemplate" => via::<sluice_api::ClusterAnalysisTemplate>(value),
        "AnalysisRun" => via::<sluice_api::AnalysisRun>(value),
        "Experiment" => via::<sluice_api::Experiment>(value),
        other => panic!("not one of our kinds: {other}"),
    }
}
