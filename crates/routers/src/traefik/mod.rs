//! Traefik: a weighted `TraefikService` the user creates, whose `spec.weighted.services`
//! lists the canary and the stable Service. Sluice sets their two weights; everything else in
//! the object is the user's.
//!
//! Header, mirror, hash and route-removal operations are no-ops for Traefik, as in Argo, and
//! experiment destinations are ignored: the stable gets 100 − canary.

mod adapter;
mod observed;
mod services;
mod set_weight;

pub use adapter::Traefik;
pub use observed::observed_weight;
pub use set_weight::set_weight;

/// Reason of the event for a TraefikService weight change. Argo publishes no event when it
/// updates the TraefikService (only the Warning `TraefikServiceUpdateError` when the update
/// fails); a caller that wants Argo's event stream exactly leaves events with this reason out,
/// as it does with [`smi::UPDATED_REASON`](crate::smi::UPDATED_REASON).
pub const UPDATED_REASON: &str = "TraefikServiceUpdated";

/// Reason of Argo's Warning when the update of the TraefikService fails; the message is
/// [`update_error_message`].
pub const UPDATE_ERROR_REASON: &str = "TraefikServiceUpdateError";

/// The message of the [`UPDATE_ERROR_REASON`] Warning, as Argo words it.
pub fn update_error_message(name: &str, error: &str) -> String {
    format!("Error updating traefik service {name:?}: {error}")
}

#[cfg(test)]
pub(crate) mod fixtures {
    use serde_json::Value;

    use crate::Desired;

    /// A Rollout splitting traffic between `web-canary` and `web-stable` through the
    /// TraefikService `web-weighted`, at the given canary weight.
    pub fn desired(weight: i32) -> Desired {
        Desired {
            rollout: "web".into(),
            namespace: "shop".into(),
            rollout_uid: "uid-web".into(),
            canary_service: "web-canary".into(),
            stable_service: "web-stable".into(),
            weight,
            max_weight: 100,
            ..Desired::default()
        }
    }

    /// The weighted TraefikService of Argo's Traefik guide, with this Rollout's Services:
    /// no weights yet, as a user writes it before the first canary.
    pub fn traefik_service() -> Value {
        serde_saphyr::from_str(
            "
apiVersion: traefik.io/v1alpha1
kind: TraefikService
metadata:
  name: web-weighted
  namespace: shop
  resourceVersion: '7'
spec:
  weighted:
    services:
    - name: web-stable
      port: 80
    - name: web-canary
      port: 80
",
        )
        .expect("fixture parses")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_error_is_worded_as_argo() {
        assert_eq!(
            update_error_message("web-weighted", "conflict"),
            "Error updating traefik service \"web-weighted\": conflict"
        );
    }
}
