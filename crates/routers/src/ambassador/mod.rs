//! Ambassador (and Emissary): for every base Mapping the Rollout names, a `<base>-canary`
//! copy pointing at the canary Service with a `weight`; Ambassador sends that share of the
//! base's traffic to it. The base Mapping itself is never written.
//!
//! The canary Mapping has no owner reference (Argo's behaviour: it is deleted by the
//! controller once its weight is back to 0, not garbage-collected). Argo sets the weight to 0,
//! waits 5 seconds inside the reconcile so that Ambassador drains it, then deletes it; Sluice
//! never sleeps in a reconcile: [`set_weight`] first writes weight 0, and only a later call
//! that finds the weight already at 0 returns [`Change::Delete`](crate::Change::Delete). The
//! engine must make that later call at least [`DELETE_DELAY_SECONDS`] after the write of
//! weight 0 (requeue the Rollout after that delay).
//!
//! Events: Argo publishes the Normal [`WEIGHT_UPDATE_REASON`] event once per SetWeight call,
//! for all the Rollout's Mappings together and even when nothing changes; Sluice attaches it
//! to each write or delete of a canary Mapping, so the engine publishes it once per reconcile
//! that changes any of them.
//!
//! Header, mirror, hash and route-removal operations are no-ops for Ambassador, as in Argo,
//! and experiment destinations are ignored.

mod adapter;
mod canary_mapping;
mod check;
mod observed;
mod set_weight;

pub use adapter::Ambassador;
pub use check::check_base;
pub use observed::observed_weight;
pub use set_weight::set_weight;

use crate::RouterError;

/// Reason of the Normal event of a canary Mapping weight change (and of its deletion).
pub const WEIGHT_UPDATE_REASON: &str = "CanaryMappingWeightUpdate";

/// Reason of Argo's Warning for a base Mapping that defines a weight.
pub const CONFIG_ERROR_REASON: &str = "AmbassadorMappingConfigError";

/// Reason of Argo's Warning for a base Mapping that does not exist.
pub const NOT_FOUND_REASON: &str = "AmbassadorMappingNotFound";

/// Seconds Argo waits between setting a canary Mapping's weight to 0 and deleting it.
pub const DELETE_DELAY_SECONDS: u64 = 5;

/// Longest base name kept, so that the name with `-canary` fits the 253 characters of an
/// object name.
const MAX_BASE_LEN: usize = 246;

/// `<base>-canary`, the base cut to 246 bytes (at a character boundary, so that no input
/// makes this panic; object names are ASCII anyway).
pub fn canary_mapping_name(base: &str) -> String {
    let mut cut = base.len().min(MAX_BASE_LEN);
    while !base.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}-canary", &base[..cut])
}

/// The Normal event of a canary Mapping set to `weight`.
fn weight_event(weight: i32) -> (&'static str, String) {
    (
        WEIGHT_UPDATE_REASON,
        format!("Set canary mapping weight to {weight}"),
    )
}

/// The errors of the Rollout's Mappings as one, as Argo joins them: none is `None`, one is
/// itself, more are `<n> errors found: [e1][e2]…`.
pub fn join_errors(errors: Vec<RouterError>) -> Option<RouterError> {
    match errors.len() {
        0 => None,
        1 => errors.into_iter().next(),
        n => {
            let mut message = format!("{n} errors found: ");
            for e in &errors {
                message.push('[');
                message.push_str(&e.0);
                message.push(']');
            }
            Some(RouterError(message))
        }
    }
}

/// `metadata.name` of an object, empty when absent.
fn name_of(object: &serde_json::Value) -> &str {
    object
        .pointer("/metadata/name")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
}

#[cfg(test)]
pub(crate) mod fixtures {
    use serde_json::Value;

    use crate::Desired;

    /// The Rollout of the corpus' `examples/ambassador/rollout.yaml` at the given weight.
    pub fn desired(weight: i32) -> Desired {
        Desired {
            rollout: "echo-rollout".into(),
            namespace: "demo".into(),
            rollout_uid: "uid-echo".into(),
            canary_service: "echo-canary".into(),
            stable_service: "echo-stable".into(),
            weight,
            max_weight: 100,
            ..Desired::default()
        }
    }

    /// `examples/ambassador/echo-mapping.yaml` as read from the API.
    pub fn base_mapping() -> Value {
        serde_saphyr::from_str(
            "
apiVersion: getambassador.io/v2
kind: Mapping
metadata:
  name: echo
  namespace: demo
  uid: uid-base
  resourceVersion: '12'
  labels: {app: echo}
  annotations: {team: web}
spec:
  resolver: endpoint
  prefix: /echo
  rewrite: /echo
  service: echo-stable:80
",
        )
        .expect("fixture parses")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canary_names() {
        assert_eq!(canary_mapping_name("echo"), "echo-canary");
        assert_eq!(canary_mapping_name(""), "-canary");
        let long = "m".repeat(300);
        let name = canary_mapping_name(&long);
        assert_eq!(name.len(), 253);
        assert_eq!(name, format!("{}-canary", "m".repeat(246)));
        let exact = "m".repeat(246);
        assert_eq!(canary_mapping_name(&exact), format!("{exact}-canary"));
        // A multi-byte character across the cut is dropped whole.
        let wide = format!("{}é", "m".repeat(245));
        assert_eq!(
            canary_mapping_name(&wide),
            format!("{}-canary", "m".repeat(245))
        );
    }

    #[test]
    fn errors_are_joined_as_argo() {
        let e = RouterError::new;
        assert_eq!(join_errors(vec![]), None);
        assert_eq!(join_errors(vec![e("one")]), Some(e("one")));
        assert_eq!(
            join_errors(vec![e("one"), e("two")]),
            Some(e("2 errors found: [one][two]"))
        );
    }

    #[test]
    fn weight_event_is_argos() {
        assert_eq!(
            weight_event(30),
            (
                "CanaryMappingWeightUpdate",
                "Set canary mapping weight to 30".to_string()
            )
        );
    }
}
