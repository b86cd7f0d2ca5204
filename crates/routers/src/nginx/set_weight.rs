//! Create or update the canary Ingress for one stable Ingress.

use serde_json::{Map, Value};
use sluice_api::rollout::NginxTrafficRouting;

use super::{desired_canary_ingress, owner};
use crate::{Desired, Edit, EditResult, RouterError};

/// The canary Ingress of `stable` at `desired.weight`.
///
/// - `existing_canary` absent: the whole desired Ingress, to create (no resourceVersion).
/// - present but not controlled by this Rollout: an error; another owner's Ingress is never
///   taken over.
/// - otherwise: the existing Ingress with the desired annotations merged in (annotations it
///   has beyond those are kept, as Argo's merge patch never removes them), labels dropped
///   (the desired Ingress has none) and the spec replaced; `None` when that changes nothing.
pub fn set_weight(
    stable: &Value,
    existing_canary: Option<&Value>,
    cfg: &NginxTrafficRouting,
    max_traffic_weight: Option<i32>,
    desired: &Desired,
) -> EditResult {
    let canary = desired_canary_ingress(stable, cfg, max_traffic_weight, desired)?;
    let name = canary
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let Some(existing) = existing_canary else {
        return Ok(Some(Edit {
            object: canary,
            event: (
                "CreatingCanaryIngress",
                format!(
                    "Creating canary ingress `{name}` with weight `{}`",
                    desired.weight
                ),
            ),
        }));
    };
    if !owner::is_controlled_by(existing, &desired.rollout_uid) {
        return Err(RouterError::new(format!(
            "canary ingress `{name}` controlled by different object"
        )));
    }
    let updated = merged(existing, canary, &name)?;
    if &updated == existing {
        return Ok(None);
    }
    Ok(Some(Edit {
        object: updated,
        event: (
            "PatchingCanaryIngress",
            format!(
                "Updating Ingress `{name}` to desiredWeight '{}'",
                desired.weight
            ),
        ),
    }))
}

/// `existing` with the annotations, labels and spec of `desired` applied as Argo's merge
/// patch does. Empty label maps count as absent, as they do for a typed Ingress.
fn merged(existing: &Value, mut desired: Value, name: &str) -> Result<Value, RouterError> {
    let malformed = || RouterError::new(format!("canary ingress `{name}` is malformed"));
    let mut updated = existing.clone();
    let metadata = updated
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .ok_or_else(malformed)?;
    let mut annotations = match metadata.get("annotations") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(a)) => a.clone(),
        Some(_) => return Err(malformed()),
    };
    if let Some(Value::Object(wanted)) = desired
        .pointer_mut("/metadata/annotations")
        .map(Value::take)
    {
        annotations.extend(wanted);
    }
    metadata.insert("annotations".into(), Value::Object(annotations));
    if metadata
        .get("labels")
        .and_then(Value::as_object)
        .is_some_and(|l| !l.is_empty())
    {
        metadata.remove("labels");
    }
    let spec = desired.get_mut("spec").map(Value::take).unwrap_or_default();
    updated
        .as_object_mut()
        .ok_or_else(malformed)?
        .insert("spec".into(), spec);
    Ok(updated)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::nginx::fixtures::{cfg, desired, stable_ingress};

    /// The canary Ingress as the API server returns it after a create at `weight`.
    fn live_canary(weight: i32) -> Value {
        let mut canary = desired_canary_ingress(
            &stable_ingress(),
            &cfg(),
            None,
            &crate::Desired {
                weight,
                ..desired()
            },
        )
        .unwrap();
        canary["metadata"]["resourceVersion"] = "7".into();
        canary["metadata"]["uid"] = "uid-canary".into();
        canary
    }

    #[test]
    fn absent_canary_is_created() {
        let edit = set_weight(&stable_ingress(), None, &cfg(), None, &desired())
            .unwrap()
            .unwrap();
        assert_eq!(
            edit.event,
            (
                "CreatingCanaryIngress",
                "Creating canary ingress `web-web-ingress-canary` with weight `10`".to_string()
            )
        );
        assert!(edit.object["metadata"].get("resourceVersion").is_none());
        assert_eq!(edit.object["metadata"]["name"], "web-web-ingress-canary");
    }

    #[test]
    fn existing_canary_gets_the_new_weight_and_keeps_foreign_annotations() {
        let mut existing = live_canary(5);
        existing["metadata"]["annotations"]["example.com/note"] = "kept".into();
        existing["metadata"]["labels"] = json!({"team": "shop"});
        existing["spec"]["defaultBackend"] = json!({"service": {"name": "x"}});
        let edit = set_weight(&stable_ingress(), Some(&existing), &cfg(), None, &desired())
            .unwrap()
            .unwrap();
        assert_eq!(
            edit.event,
            (
                "PatchingCanaryIngress",
                "Updating Ingress `web-web-ingress-canary` to desiredWeight '10'".to_string()
            )
        );
        let mut want = live_canary(10);
        want["metadata"]["annotations"]["example.com/note"] = "kept".into();
        assert_eq!(edit.object, want);
        assert_eq!(edit.object["metadata"]["resourceVersion"], "7");
    }

    #[test]
    fn unchanged_canary_is_not_written() {
        let existing = live_canary(10);
        let got = set_weight(&stable_ingress(), Some(&existing), &cfg(), None, &desired());
        assert_eq!(got, Ok(None));
        // An empty label map is the same as none.
        let mut existing = live_canary(10);
        existing["metadata"]["labels"] = json!({});
        let got = set_weight(&stable_ingress(), Some(&existing), &cfg(), None, &desired());
        assert_eq!(got, Ok(None));
    }

    #[test]
    fn canary_weight_total_follows_max_traffic_weight() {
        let existing = live_canary(10);
        let edit = set_weight(
            &stable_ingress(),
            Some(&existing),
            &cfg(),
            Some(200),
            &desired(),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            edit.object["metadata"]["annotations"]["nginx.ingress.kubernetes.io/canary-weight-total"],
            "200"
        );
    }

    #[test]
    fn canary_of_another_owner_is_an_error() {
        let err = Err(RouterError::new(
            "canary ingress `web-web-ingress-canary` controlled by different object",
        ));
        let mut other = live_canary(10);
        other["metadata"]["ownerReferences"][0]["uid"] = "uid-other".into();
        let mut unowned = live_canary(10);
        unowned["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("ownerReferences");
        for existing in [other, unowned] {
            let got = set_weight(&stable_ingress(), Some(&existing), &cfg(), None, &desired());
            assert_eq!(got, err);
        }
    }

    #[test]
    fn malformed_canary_is_an_error() {
        let mut existing = live_canary(10);
        existing["metadata"]["annotations"] = "junk".into();
        let got = set_weight(&stable_ingress(), Some(&existing), &cfg(), None, &desired());
        assert_eq!(
            got,
            Err(RouterError::new(
                "canary ingress `web-web-ingress-canary` is malformed"
            ))
        );
    }

    #[test]
    fn one_canary_per_stable_ingress() {
        let mut second = stable_ingress();
        second["metadata"]["name"] = "web-ingress-internal".into();
        let edit = set_weight(&second, None, &cfg(), None, &desired())
            .unwrap()
            .unwrap();
        assert_eq!(
            edit.object["metadata"]["name"],
            "web-web-ingress-internal-canary"
        );
    }
}
