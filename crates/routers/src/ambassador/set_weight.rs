//! Create, reweigh or delete the canary Mapping of one base Mapping.

use serde_json::Value;

use super::canary_mapping::canary_mapping;
use super::{check_base, name_of, weight_event};
use crate::kinds::RouterKind;
use crate::{Change, ChangeResult, Desired, Edit, RouterError};

/// The change to the canary Mapping of `base` for `desired.weight`:
///
/// - canary absent, weight 0: `None`.
/// - canary absent, weight > 0: the base must not define a weight ([`check_base`]); the
///   canary copy to create, with `apiVersion` `api_version` and the Mapping kind of `kind`.
/// - canary present with another weight (or none): the canary with `spec.weight` set, the
///   rest as found.
/// - canary present at weight 0 and weight 0 wanted: [`Change::Delete`]. The engine must not
///   make this call until [`DELETE_DELAY_SECONDS`](super::DELETE_DELAY_SECONDS) after it wrote
///   weight 0, so that Ambassador has drained the canary (Argo sleeps that long in between).
/// - canary present at the wanted non-zero weight: `None`.
///
/// Every write and the delete carry Argo's event `CanaryMappingWeightUpdate`,
/// `Set canary mapping weight to <N>`.
pub fn set_weight(
    base: &Value,
    canary: Option<&Value>,
    kind: RouterKind,
    api_version: &str,
    desired: &Desired,
) -> ChangeResult {
    let event = weight_event(desired.weight);
    let Some(canary) = canary else {
        if desired.weight == 0 {
            return Ok(None);
        }
        check_base(base)?;
        let object = canary_mapping(base, kind, api_version, desired)?;
        return Ok(Some(Change::Write(Edit { object, event })));
    };
    let current = canary.pointer("/spec/weight").and_then(Value::as_i64);
    if current == Some(desired.weight.into()) {
        return Ok((desired.weight == 0).then_some(Change::Delete { event }));
    }
    let mut object = canary.clone();
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return Err(RouterError::new(format!(
            "Ambassador mapping {:?} has no spec",
            name_of(canary)
        )));
    };
    spec.insert("weight".into(), desired.weight.into());
    Ok(Some(Change::Write(Edit { object, event })))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::ObservedWeight;
    use crate::ambassador::fixtures::{base_mapping, desired};
    use crate::ambassador::{canary_mapping_name, observed_weight};

    const V2: &str = "getambassador.io/v2";

    fn call(canary: Option<&Value>, weight: i32) -> ChangeResult {
        set_weight(
            &base_mapping(),
            canary,
            RouterKind::AmbassadorMapping,
            V2,
            &desired(weight),
        )
    }

    fn event(weight: i32) -> (&'static str, String) {
        (
            "CanaryMappingWeightUpdate",
            format!("Set canary mapping weight to {weight}"),
        )
    }

    /// The canary Mapping as read back after its creation at `weight`.
    fn live_canary(weight: Value) -> Value {
        json!({
            "apiVersion": V2,
            "kind": "Mapping",
            "metadata": {"name": "echo-canary", "namespace": "demo", "resourceVersion": "40"},
            "spec": {
                "resolver": "endpoint",
                "prefix": "/echo",
                "rewrite": "/echo",
                "service": "echo-canary:80",
                "weight": weight
            }
        })
    }

    #[test]
    fn absent_canary() {
        assert_eq!(call(None, 0), Ok(None));
        let Ok(Some(Change::Write(edit))) = call(None, 30) else {
            panic!("expected a create");
        };
        let mut want = live_canary(json!(30));
        want["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("resourceVersion");
        assert_eq!(edit.object, want);
        assert_eq!(edit.event, event(30));
    }

    #[test]
    fn absent_canary_of_a_weighted_base_is_an_error() {
        let mut base = base_mapping();
        base["spec"]["weight"] = json!(50);
        let got = set_weight(&base, None, RouterKind::AmbassadorMapping, V2, &desired(30));
        assert_eq!(
            got,
            Err(RouterError::new(
                "Ambassador mapping \"echo\" can not define weight"
            ))
        );
        // Weight 0 creates nothing, so the base is not looked at.
        let got = set_weight(&base, None, RouterKind::AmbassadorMapping, V2, &desired(0));
        assert_eq!(got, Ok(None));
    }

    #[test]
    fn present_canary() {
        let cases = [
            // (current weight, desired, expected weight written or None, delete)
            (json!(30), 60, Some(60), false),
            (json!(60), 60, None, false),
            (json!(60), 0, Some(0), false),
            (json!(0), 0, None, true),
            (json!(0), 30, Some(30), false),
            (Value::Null, 0, Some(0), false),
            (json!("0"), 0, Some(0), false),
        ];
        for (current, weight, written, delete) in cases {
            let canary = live_canary(current.clone());
            let got = call(Some(&canary), weight);
            match (got, written, delete) {
                (Ok(Some(Change::Write(edit))), Some(w), false) => {
                    assert_eq!(edit.object, live_canary(json!(w)), "{current} → {weight}");
                    assert_eq!(edit.event, event(weight));
                }
                (Ok(Some(Change::Delete { event: e })), None, true) => {
                    assert_eq!(e, event(0));
                }
                (Ok(None), None, false) => {}
                (got, ..) => panic!("{current} → {weight}: {got:?}"),
            }
        }
    }

    #[test]
    fn present_canary_is_not_checked_against_the_base() {
        let mut base = base_mapping();
        base["spec"]["weight"] = json!(50);
        let canary = live_canary(json!(30));
        let got = set_weight(
            &base,
            Some(&canary),
            RouterKind::AmbassadorMapping,
            V2,
            &desired(60),
        );
        assert!(matches!(got, Ok(Some(Change::Write(_)))), "{got:?}");
    }

    #[test]
    fn canary_without_spec_is_an_error() {
        let canary = json!({"metadata": {"name": "echo-canary"}});
        assert_eq!(
            call(Some(&canary), 30),
            Err(RouterError::new(
                "Ambassador mapping \"echo-canary\" has no spec"
            ))
        );
    }

    /// The corpus' `examples/ambassador` objects through the Rollout's steps (30, 60, 100,
    /// then 0 at promotion): created, reweighed, set to 0, then deleted, each read back.
    #[test]
    fn corpus_example_walks_its_steps() {
        let root = sluice_api::corpus::require_argo_corpus_dir().unwrap_or_else(|e| panic!("{e}"));
        let dir = root.join("examples/ambassador");
        let read = |file: &str| {
            let text = std::fs::read_to_string(dir.join(file)).unwrap();
            sluice_api::yaml::from_multi_doc_str(&text).unwrap()
        };
        let mut base = read("echo-mapping.yaml").remove(0);
        base["metadata"]["namespace"] = json!("demo");
        let rollout = read("rollout.yaml").remove(0);
        let canary_cfg = &rollout["spec"]["strategy"]["canary"];
        assert_eq!(
            canary_cfg["trafficRouting"]["ambassador"]["mappings"],
            json!(["echo"])
        );
        let mut d = desired(0);
        d.canary_service = canary_cfg["canaryService"].as_str().unwrap().into();
        d.stable_service = canary_cfg["stableService"].as_str().unwrap().into();
        let weights: Vec<i32> = canary_cfg["steps"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|s| s["setWeight"].as_i64())
            .map(|w| w as i32)
            .collect();
        assert_eq!(weights, [30, 60, 100]);

        let mut canary: Option<Value> = None;
        for weight in weights.into_iter().chain([0, 0]) {
            d.weight = weight;
            let change = set_weight(
                &base,
                canary.as_ref(),
                RouterKind::AmbassadorMapping,
                V2,
                &d,
            )
            .unwrap();
            match change {
                Some(Change::Write(edit)) => {
                    assert_eq!(edit.object["metadata"]["name"], canary_mapping_name("echo"));
                    assert_eq!(edit.object["spec"]["service"], "echo-canary:80");
                    canary = Some(edit.object);
                }
                Some(Change::Delete { .. }) => canary = None,
                None => panic!("weight {weight}: nothing to do"),
            }
            let want = if canary.is_none() { 0 } else { weight };
            assert_eq!(
                observed_weight(canary.as_ref()),
                ObservedWeight {
                    canary: want,
                    stable: 100 - want
                }
            );
        }
        assert_eq!(canary, None, "deleted after the second weight-0 call");
    }
}
