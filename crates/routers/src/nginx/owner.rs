//! The controller owner reference to the Rollout on objects a router creates (the canary
//! Ingress, the TrafficSplit), and the check that an existing object is ours before it is
//! changed.

use serde_json::{Value, json};

use crate::Desired;

/// A controller reference to the Rollout: Kubernetes garbage-collects the object with it, and
/// no other controller may adopt it.
pub(crate) fn controller_ref(desired: &Desired) -> Value {
    json!({
        "apiVersion": sluice_api::API_VERSION,
        "kind": "Rollout",
        "name": desired.rollout,
        "uid": desired.rollout_uid,
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

/// Whether the object's controller reference (the first owner reference with
/// `controller: true`) has the Rollout's uid. An object without a controller is not ours.
pub(crate) fn is_controlled_by(object: &Value, rollout_uid: &str) -> bool {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .and_then(|refs| {
            refs.iter()
                .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        })
        .and_then(|r| r.get("uid"))
        .and_then(Value::as_str)
        == Some(rollout_uid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controlled_by_the_first_controller_reference() {
        let owned = |refs: Value| json!({"metadata": {"ownerReferences": refs}});
        let cases = [
            (owned(json!([{"uid": "uid-web", "controller": true}])), true),
            (
                owned(json!([
                    {"uid": "uid-web"},
                    {"uid": "uid-other", "controller": true}
                ])),
                false,
            ),
            (
                owned(json!([{"uid": "uid-web", "controller": false}])),
                false,
            ),
            (owned(json!("not a list")), false),
            (json!({"metadata": {}}), false),
            (json!(null), false),
        ];
        for (object, want) in cases {
            assert_eq!(is_controlled_by(&object, "uid-web"), want, "{object}");
        }
    }

    #[test]
    fn controller_ref_names_the_rollout() {
        let desired = Desired {
            rollout: "web".into(),
            rollout_uid: "u1".into(),
            ..Desired::default()
        };
        assert_eq!(
            controller_ref(&desired),
            json!({
                "apiVersion": "argoproj.io/v1alpha1",
                "kind": "Rollout",
                "name": "web",
                "uid": "u1",
                "controller": true,
                "blockOwnerDeletion": true
            })
        );
    }
}
