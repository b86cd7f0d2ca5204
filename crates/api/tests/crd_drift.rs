//! The committed CRDs in `manifests/crds/` are exactly what the types generate.

use std::path::Path;

#[test]
fn committed_crds_match_the_types() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../manifests/crds");
    let hint = "run `cargo run -p sluice-api --bin crdgen` to regenerate manifests/crds/";
    let files = sluice_api::crd::render_files().unwrap();
    assert_eq!(files.len(), 6);
    for (name, expected) in files {
        let path = dir.join(&name);
        let committed = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}; {hint}", path.display()));
        assert!(
            committed == expected,
            "{} is out of date with the Rust types; {hint}",
            path.display()
        );
    }
}

#[test]
fn kustomization_lists_every_crd() {
    let files = sluice_api::crd::render_files().unwrap();
    let (_, kustomization) = files
        .iter()
        .find(|(name, _)| name == sluice_api::crd::KUSTOMIZATION_FILE)
        .unwrap();
    let doc = &sluice_api::yaml::from_multi_doc_str(kustomization).unwrap()[0];
    let resources: Vec<&str> = doc["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert_eq!(
        resources,
        [
            "rollout-crd.yaml",
            "experiment-crd.yaml",
            "analysis-run-crd.yaml",
            "analysis-template-crd.yaml",
            "cluster-analysis-template-crd.yaml"
        ]
    );
}
