//! Fixtures shared by the unit tests.

use serde_json::{Value, json};

/// A canary Rollout of revision 2 at step `step` of three.
pub fn canary(step: i64) -> Value {
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "labels": {"team": "web"},
            "annotations": {
                "rollout.argoproj.io/revision": "2",
                "notifications.argoproj.io/subscribe.on-rollout-step-completed.hook": "",
                "notifications.argoproj.io/subscribe.on-rollout-completed.hook": "",
                "notifications.argoproj.io/subscribe.on-rollout-paused.slack": "releases"
            }
        },
        "spec": {
            "replicas": 3,
            "strategy": {"canary": {"steps": [{"setWeight": 20}, {"pause": {}}, {"setWeight": 60}]}},
            "template": {"spec": {"containers": [
                {"name": "app", "image": "shop/web:2"},
                {"name": "proxy", "image": "envoy:1"}
            ]}}
        },
        "status": {"currentStepIndex": step, "phase": "Progressing", "updatedReplicas": 1}
    })
}
