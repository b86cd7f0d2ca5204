//! Malformed objects (wrong types where Argo's informers must stay alive) are rejected with an
//! error by deserialization, never a panic; unknown fields are ignored.

use serde_json::json;
use sluice_api::{AnalysisRun, AnalysisTemplate, ClusterAnalysisTemplate, Experiment, Rollout};

fn meta() -> serde_json::Value {
    json!({"name": "bad", "namespace": "default"})
}

#[test]
fn wrong_types_are_errors() {
    let rollouts = [
        json!({"metadata": meta(), "spec": {"replicas": "three"}}),
        json!({"metadata": meta(), "spec": {"strategy": {"canary": {"steps": {"setWeight": 10}}}}}),
        json!({"metadata": meta(), "spec": {"strategy": {"canary": {"steps": [{"setWeight": 10.5}]}}}}),
        json!({"metadata": meta(), "spec": {"template": {"spec": {"containers": "nginx"}}}}),
        json!({"metadata": meta(), "spec": {"strategy": {"canary": {"maxSurge": true}}}}),
        json!({"metadata": meta(), "spec": {}, "status": {"observedGeneration": 3}}),
        json!({"metadata": meta()}),
        json!({"metadata": meta(), "spec": []}),
    ];
    for value in rollouts {
        assert!(
            serde_json::from_value::<Rollout>(value.clone()).is_err(),
            "{value}"
        );
    }
    let analysis = json!({"metadata": meta(), "spec": {"metrics": [{"name": "m", "count": [1]}]}});
    assert!(serde_json::from_value::<AnalysisTemplate>(analysis.clone()).is_err());
    assert!(serde_json::from_value::<ClusterAnalysisTemplate>(analysis.clone()).is_err());
    assert!(serde_json::from_value::<AnalysisRun>(analysis).is_err());
    let run = json!({"metadata": meta(), "spec": {"metrics": []}, "status": {"phase": 1}});
    assert!(serde_json::from_value::<AnalysisRun>(run).is_err());
    let exp = json!({"metadata": meta(), "spec": {"templates": [{"replicas": "one"}]}});
    assert!(serde_json::from_value::<Experiment>(exp).is_err());
}

#[test]
fn structurally_valid_but_semantically_wrong_objects_load() {
    // Left to validation: steps with two actions, negative weights, missing selectors.
    let value = json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": meta(),
        "spec": {
            "strategy": {"canary": {"steps": [{"setWeight": -5, "pause": {"duration": "soon"}}]}},
            "somethingNew": {"x": 1}
        }
    });
    let ro: Rollout = serde_json::from_value(value).unwrap();
    let step = &ro.steps()[0];
    assert_eq!(step.action_count(), 2);
    assert!(step.pause.as_ref().unwrap().duration().unwrap().is_err());
}
