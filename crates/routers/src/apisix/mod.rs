//! Apache APISIX: the backend weights of the rules of an `ApisixRoute` the user creates, and
//! for `setHeaderRoute` steps a separate ApisixRoute the Rollout owns, copied from the main one,
//! that sends requests with the step's headers to the canary alone.
//!
//! Objects are `apisix.apache.org/v2` ApisixRoutes as read from the API, as JSON. Every
//! function is pure and returns `Ok(None)` when nothing is to be written. Mirror and hash
//! operations are no-ops for APISIX, as in Argo, and experiment destinations are ignored: the
//! stable gets 100 − canary.
//!
//! Events: Argo publishes none when it writes or deletes ApisixRoutes (only the Warning
//! `ApisixRouteUpdateError` when the weight update fails). Sluice's writes carry
//! [`UPDATED_REASON`], [`CREATED_REASON`] or [`DELETED_REASON`], which a caller that wants
//! Argo's event stream exactly leaves out, as it does with
//! [`smi::UPDATED_REASON`](crate::smi::UPDATED_REASON).

mod adapter;
mod exprs;
mod header_route;
mod observed;
mod rules;
mod set_weight;

pub use adapter::Apisix;
pub use header_route::{remove_managed_route, set_header_route};
pub use observed::observed_weight;
pub use set_weight::set_weight;

use serde_json::Value;
use sluice_api::rollout::ApisixTrafficRouting;

/// API version of the ApisixRoute (fixed: Argo has no flag for it).
pub const API_VERSION: &str = "apisix.apache.org/v2";

/// Reason of the event of an ApisixRoute update (weights, or a header route's match).
pub const UPDATED_REASON: &str = "ApisixRouteUpdated";

/// Reason of the event of a header route's creation.
pub const CREATED_REASON: &str = "ApisixRouteCreated";

/// Reason of the event of a header route's deletion.
pub const DELETED_REASON: &str = "ApisixRouteDeleted";

/// Reason of Argo's Warning when the weight update fails; the message is
/// [`update_error_message`].
pub const UPDATE_ERROR_REASON: &str = "ApisixRouteUpdateError";

/// The message of the [`UPDATE_ERROR_REASON`] Warning.
pub fn update_error_message(name: &str, error: &str) -> String {
    format!("Error updating apisix route {name:?}: {error}")
}

/// `apisix.route.name`, empty when unset.
pub fn route_name(cfg: &ApisixTrafficRouting) -> &str {
    cfg.route
        .as_ref()
        .and_then(|r| r.name.as_deref())
        .unwrap_or_default()
}

/// The `spec.http` rule names the Rollout weights: `apisix.route.rules`, or the route's name
/// when the list is absent (an explicit empty list weights nothing, as in Argo). The route's
/// name is `apisix.route.name`, else the object's own.
pub fn rule_names(cfg: &ApisixTrafficRouting, route: &Value) -> Vec<String> {
    if let Some(rules) = cfg.route.as_ref().and_then(|r| r.rules.clone()) {
        return rules;
    }
    let name = Some(route_name(cfg))
        .filter(|n| !n.is_empty())
        .or_else(|| route.pointer("/metadata/name").and_then(Value::as_str))
        .unwrap_or_default();
    vec![name.to_string()]
}

/// `metadata.name` of an object, empty when absent.
fn name_of(object: &Value) -> &str {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

#[cfg(test)]
pub(crate) mod fixtures {
    use serde_json::Value;
    use sluice_api::rollout::{ApisixRoute, ApisixTrafficRouting};

    use crate::Desired;

    /// The Rollout of the corpus' `test/e2e/apisix/rollout-apisix-canary.yaml` at the given
    /// canary weight.
    pub fn desired(weight: i32) -> Desired {
        Desired {
            rollout: "rollout-apisix-canary".into(),
            namespace: "default".into(),
            rollout_uid: "uid-apisix".into(),
            canary_service: "rollout-apisix-canary-canary".into(),
            stable_service: "rollout-apisix-canary-stable".into(),
            weight,
            max_weight: 100,
            managed_routes: vec!["set-header".into()],
            ..Desired::default()
        }
    }

    /// Its `apisix` settings.
    pub fn cfg() -> ApisixTrafficRouting {
        ApisixTrafficRouting {
            route: Some(ApisixRoute {
                name: Some("rollouts-apisix-route".into()),
                rules: Some(vec!["rollouts-apisix".into()]),
            }),
        }
    }

    /// Its ApisixRoute as read from the API.
    pub fn route() -> Value {
        serde_saphyr::from_str(
            "
apiVersion: apisix.apache.org/v2
kind: ApisixRoute
metadata:
  name: rollouts-apisix-route
  namespace: default
  uid: uid-route
  resourceVersion: '31'
  generation: 2
  creationTimestamp: '2024-05-01T10:00:00Z'
  labels: {app: demo}
spec:
  http:
    - name: rollouts-apisix
      match:
        paths:
          - /*
        methods:
          - GET
          - POST
          - PUT
          - DELETE
          - PATCH
        hosts:
          - rollouts-demo.apisix.local
      backends:
        - serviceName: rollout-apisix-canary-stable
          servicePort: 80
          weight: 100
        - serviceName: rollout-apisix-canary-canary
          servicePort: 80
          weight: 0
",
        )
        .expect("fixture parses")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use sluice_api::rollout::ApisixRoute;

    use super::*;
    use crate::apisix::fixtures::{cfg, route};

    #[test]
    fn rules_default_to_the_route_name() {
        let with = |name: Option<&str>, rules: Option<Vec<&str>>| ApisixTrafficRouting {
            route: Some(ApisixRoute {
                name: name.map(str::to_string),
                rules: rules.map(|r| r.into_iter().map(str::to_string).collect()),
            }),
        };
        let named = json!({"metadata": {"name": "from-object"}});
        let cases = [
            (cfg(), vec!["rollouts-apisix"]),
            (with(Some("r"), None), vec!["r"]),
            (with(Some("r"), Some(vec![])), vec![]),
            (with(Some("r"), Some(vec!["a", "b"])), vec!["a", "b"]),
            (with(None, None), vec!["from-object"]),
            (ApisixTrafficRouting::default(), vec!["from-object"]),
        ];
        for (cfg, want) in cases {
            assert_eq!(rule_names(&cfg, &named), want, "{cfg:?}");
        }
        assert_eq!(rule_names(&with(Some("r"), None), &route()), ["r"]);
    }

    #[test]
    fn names() {
        assert_eq!(route_name(&cfg()), "rollouts-apisix-route");
        assert_eq!(route_name(&ApisixTrafficRouting::default()), "");
        assert_eq!(
            update_error_message("r", "boom"),
            "Error updating apisix route \"r\": boom"
        );
    }
}
