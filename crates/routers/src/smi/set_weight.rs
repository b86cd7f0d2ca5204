//! Create the TrafficSplit, or update its spec.

use serde_json::{Value, json};
use sluice_api::rollout::SmiTrafficRouting;

use super::spec::desired_spec;
use super::weight::{parse_weight, weight_value};
use super::{api_version, traffic_split_name, weights_are_quantities};
use crate::nginx::owner;
use crate::{Desired, Edit, EditResult, RouterError};

/// Reason of the event for a TrafficSplit update. Argo publishes no event when it patches an
/// existing TrafficSplit (only `TrafficSplitCreated`); a caller that wants Argo's event
/// stream exactly leaves events with this reason out.
pub const UPDATED_REASON: &str = "TrafficSplitUpdated";

/// The TrafficSplit at `desired`'s weights.
///
/// - `existing` absent: the whole object to create, with a controller reference to the
///   Rollout; event `TrafficSplitCreated`.
/// - present but not controlled by this Rollout: ``Rollout does not own TrafficSplit `<name>` ``.
/// - otherwise: the object with its `spec` replaced (Argo merge-patches the spec alone);
///   `None` when the spec already says the same, weights compared by value so that `"10"`
///   and `10` are equal.
pub fn set_weight(
    existing: Option<&Value>,
    cfg: &SmiTrafficRouting,
    version_flag: &str,
    desired: &Desired,
) -> EditResult {
    let api_version = api_version(version_flag)?;
    let quantity = weights_are_quantities(&api_version);
    let name = traffic_split_name(cfg, &desired.rollout);
    let spec = desired_spec(cfg, desired, quantity);
    let Some(existing) = existing else {
        return Ok(Some(Edit {
            object: json!({
                "apiVersion": api_version,
                "kind": "TrafficSplit",
                "metadata": {
                    "name": name,
                    "namespace": desired.namespace,
                    "ownerReferences": [owner::controller_ref(desired)],
                },
                "spec": spec,
            }),
            event: (
                "TrafficSplitCreated",
                format!("TrafficSplit `{name}` created"),
            ),
        }));
    };
    if !owner::is_controlled_by(existing, &desired.rollout_uid) {
        return Err(RouterError::new(format!(
            "Rollout does not own TrafficSplit `{name}`"
        )));
    }
    let current = existing
        .get("spec")
        .map(|s| normalized(s, quantity))
        .unwrap_or_default();
    if current == spec {
        return Ok(None);
    }
    let mut updated = existing.clone();
    updated
        .as_object_mut()
        .ok_or_else(|| RouterError::new(format!("TrafficSplit `{name}` is malformed")))?
        .insert("spec".into(), spec);
    Ok(Some(Edit {
        object: updated,
        event: (
            UPDATED_REASON,
            format!(
                "TrafficSplit `{name}` set to desiredWeight '{}'",
                desired.weight
            ),
        ),
    }))
}

/// The spec with every readable backend weight in this version's form, so that comparing it
/// with the desired spec ignores how the weight was spelled.
fn normalized(spec: &Value, quantity: bool) -> Value {
    let mut spec = spec.clone();
    if let Some(backends) = spec.get_mut("backends").and_then(Value::as_array_mut) {
        for backend in backends {
            if let Some(weight) = backend.get_mut("weight")
                && let Some(w) = parse_weight(weight).and_then(|w| i32::try_from(w).ok())
            {
                *weight = weight_value(w, quantity);
            }
        }
    }
    spec
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::smi::fixtures::{desired, with_experiment};

    fn cfg() -> SmiTrafficRouting {
        SmiTrafficRouting {
            traffic_split_name: Some("rollout-smi-experiment-trafficsplit".into()),
            ..SmiTrafficRouting::default()
        }
    }

    /// The TrafficSplit as read back after a create with these backends.
    fn live(api_version: &str, backends: Value) -> Value {
        json!({
            "apiVersion": api_version,
            "kind": "TrafficSplit",
            "metadata": {
                "name": "rollout-smi-experiment-trafficsplit",
                "namespace": "shop",
                "resourceVersion": "3",
                "ownerReferences": [{
                    "apiVersion": "argoproj.io/v1alpha1",
                    "kind": "Rollout",
                    "name": "rollout-smi-experiment",
                    "uid": "uid-ro",
                    "controller": true,
                    "blockOwnerDeletion": true
                }]
            },
            "spec": {"service": "rollout-smi-experiment-stable", "backends": backends}
        })
    }

    #[test]
    fn absent_split_is_created_per_version() {
        let cases = [
            ("", "split.smi-spec.io/v1alpha1", json!("5"), json!("95")),
            (
                "v1alpha2",
                "split.smi-spec.io/v1alpha2",
                json!(5),
                json!(95),
            ),
            (
                "v1alpha3",
                "split.smi-spec.io/v1alpha3",
                json!(5),
                json!(95),
            ),
        ];
        for (flag, api_version, canary, stable) in cases {
            let edit = set_weight(None, &cfg(), flag, &desired()).unwrap().unwrap();
            let mut want = live(
                api_version,
                json!([
                    {"service": "rollout-smi-experiment-canary", "weight": canary},
                    {"service": "rollout-smi-experiment-stable", "weight": stable}
                ]),
            );
            want["metadata"]
                .as_object_mut()
                .unwrap()
                .remove("resourceVersion");
            assert_eq!(edit.object, want, "{flag}");
            assert_eq!(
                edit.event,
                (
                    "TrafficSplitCreated",
                    "TrafficSplit `rollout-smi-experiment-trafficsplit` created".to_string()
                )
            );
        }
    }

    #[test]
    fn existing_split_gets_its_spec_replaced() {
        let existing = live(
            "split.smi-spec.io/v1alpha1",
            json!([
                {"service": "rollout-smi-experiment-canary", "weight": "0"},
                {"service": "rollout-smi-experiment-stable", "weight": "100"}
            ]),
        );
        let edit = set_weight(Some(&existing), &cfg(), "v1alpha1", &with_experiment())
            .unwrap()
            .unwrap();
        let want = live(
            "split.smi-spec.io/v1alpha1",
            json!([
                {"service": "rollout-smi-experiment-canary", "weight": "5"},
                {"service": "rollout-smi-experiment-experiment-smi", "weight": "5"},
                {"service": "rollout-smi-experiment-stable", "weight": "90"}
            ]),
        );
        assert_eq!(edit.object, want);
        assert_eq!(
            edit.event,
            (
                UPDATED_REASON,
                "TrafficSplit `rollout-smi-experiment-trafficsplit` set to desiredWeight '5'"
                    .to_string()
            )
        );
    }

    #[test]
    fn root_service_replaces_the_split_service() {
        let cfg = SmiTrafficRouting {
            root_service: Some("web".into()),
            ..cfg()
        };
        let existing = live(
            "split.smi-spec.io/v1alpha3",
            json!([
                {"service": "rollout-smi-experiment-canary", "weight": 5},
                {"service": "rollout-smi-experiment-stable", "weight": 95}
            ]),
        );
        let edit = set_weight(Some(&existing), &cfg, "v1alpha3", &desired())
            .unwrap()
            .unwrap();
        assert_eq!(edit.object["spec"]["service"], "web");
    }

    #[test]
    fn unchanged_split_is_not_written_whatever_the_weight_spelling() {
        let cases = [
            ("v1alpha1", json!("5"), json!("95")),
            ("v1alpha1", json!(5), json!(95)),
            ("v1alpha3", json!(5), json!(95)),
            ("v1alpha3", json!("5"), json!("95")),
        ];
        for (flag, canary, stable) in cases {
            let existing = live(
                &format!("split.smi-spec.io/{flag}"),
                json!([
                    {"service": "rollout-smi-experiment-canary", "weight": canary},
                    {"service": "rollout-smi-experiment-stable", "weight": stable}
                ]),
            );
            let got = set_weight(Some(&existing), &cfg(), flag, &desired());
            assert_eq!(got, Ok(None), "{existing}");
        }
    }

    #[test]
    fn split_of_another_owner_is_an_error() {
        let err = Err(RouterError::new(
            "Rollout does not own TrafficSplit `rollout-smi-experiment-trafficsplit`",
        ));
        let mut other = live("split.smi-spec.io/v1alpha1", json!([]));
        other["metadata"]["ownerReferences"][0]["uid"] = "uid-other".into();
        let unowned = json!({"metadata": {"name": "rollout-smi-experiment-trafficsplit"}});
        for existing in [other, unowned, json!("junk")] {
            let got = set_weight(Some(&existing), &cfg(), "v1alpha1", &desired());
            assert_eq!(got, err, "{existing}");
        }
    }

    #[test]
    fn unsupported_version_is_an_error() {
        let got = set_weight(None, &cfg(), "v2", &desired());
        assert_eq!(
            got,
            Err(RouterError::new(
                "Unsupported TrafficSplit API version `v2`"
            ))
        );
    }
}
