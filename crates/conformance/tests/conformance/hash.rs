//! The pod-template hash, which names every ReplicaSet: a different hash is a second
//! ReplicaSet for one template, and every pod restarted at a controller swap.

use serde_json::json;
use sluice_api::pod_template_hash::compute_pod_template_hash_value;
use sluice_conformance::generate::template::template;
use sluice_conformance::oracle::{self, ARGO_VERSIONS};
use sluice_conformance::run::compare;

#[test]
fn pod_template_hashes_match_argo() {
    for version in ARGO_VERSIONS {
        compare(
            &format!("hash/{version}"),
            || (template(), proptest::option::of(0i32..3)),
            |(t, collisions)| {
                let answer = oracle::shared(version)
                    .ask(&json!({"op": "hash", "template": t, "collisionCount": collisions}))
                    .map_err(|e| format!("{e:#}"))?;
                let Some(go) = answer["hash"].as_str() else {
                    return Err(format!("Argo {version} could not hash it: {answer}"));
                };
                let sluice = compute_pod_template_hash_value(t, *collisions)
                    .map_err(|e| format!("Sluice could not hash it: {e}"))?;
                if go == sluice {
                    Ok("same hash".into())
                } else {
                    Err(format!("Argo {version}: {go}, Sluice: {sluice}"))
                }
            },
        );
    }
}
