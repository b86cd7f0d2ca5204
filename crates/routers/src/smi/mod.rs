//! Service Mesh Interface: a `TrafficSplit` the Rollout owns, splitting its root Service
//! between the canary, the experiment Services and the stable Service.
//!
//! Header, mirror, hash and route-removal operations are no-ops for SMI, as in Argo.

mod adapter;
mod observed;
mod set_weight;
mod spec;
mod weight;

pub use adapter::Smi;
pub use observed::observed_weight;
pub use set_weight::{UPDATED_REASON, set_weight};

use sluice_api::rollout::SmiTrafficRouting;

use crate::RouterError;

/// API group of the TrafficSplit.
pub const GROUP: &str = "split.smi-spec.io";

/// The version used when `--traffic-split-api-version` is not given.
pub const DEFAULT_VERSION: &str = "v1alpha1";

/// `smi.trafficSplitName`, or the Rollout's name when unset or empty.
pub fn traffic_split_name(cfg: &SmiTrafficRouting, rollout: &str) -> String {
    cfg.traffic_split_name
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or(rollout)
        .to_string()
}

/// The TrafficSplit `apiVersion` for the `--traffic-split-api-version` flag: `v1alpha1`
/// (also when the flag is empty), `v1alpha2`, `v1alpha3`, or `v1alpha4` (the version current
/// SMI implementations serve, with integer weights like v1alpha2 and v1alpha3; Sluice accepts
/// it where Argo stops at v1alpha3).
pub fn api_version(version_flag: &str) -> Result<String, RouterError> {
    match version_flag {
        "" => Ok(format!("{GROUP}/{DEFAULT_VERSION}")),
        "v1alpha1" | "v1alpha2" | "v1alpha3" | "v1alpha4" => Ok(format!("{GROUP}/{version_flag}")),
        other => Err(RouterError::new(format!(
            "Unsupported TrafficSplit API version `{other}`"
        ))),
    }
}

/// Whether backends of this apiVersion carry their weight as a Quantity string (v1alpha1)
/// rather than an integer (later versions).
fn weights_are_quantities(api_version: &str) -> bool {
    api_version.ends_with("/v1alpha1")
}

#[cfg(test)]
pub(crate) mod fixtures {
    use crate::{Desired, Destination};

    /// The Rollout of the corpus' `test/e2e/smi/rollout-smi-experiment.yaml` at a 5% step.
    pub fn desired() -> Desired {
        Desired {
            rollout: "rollout-smi-experiment".into(),
            namespace: "shop".into(),
            rollout_uid: "uid-ro".into(),
            canary_service: "rollout-smi-experiment-canary".into(),
            stable_service: "rollout-smi-experiment-stable".into(),
            weight: 5,
            max_weight: 100,
            ..Desired::default()
        }
    }

    /// The same with the experiment step's template running at weight 5.
    pub fn with_experiment() -> Desired {
        Desired {
            additional: vec![Destination {
                service_name: "rollout-smi-experiment-experiment-smi".into(),
                pod_template_hash: "abc".into(),
                weight: 5,
            }],
            ..desired()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_defaults_to_the_rollout() {
        let named = SmiTrafficRouting {
            traffic_split_name: Some("split".into()),
            ..SmiTrafficRouting::default()
        };
        let empty = SmiTrafficRouting {
            traffic_split_name: Some(String::new()),
            ..SmiTrafficRouting::default()
        };
        assert_eq!(traffic_split_name(&named, "web"), "split");
        assert_eq!(traffic_split_name(&empty, "web"), "web");
        assert_eq!(
            traffic_split_name(&SmiTrafficRouting::default(), "web"),
            "web"
        );
    }

    #[test]
    fn api_versions() {
        let cases = [
            ("", Ok("split.smi-spec.io/v1alpha1")),
            ("v1alpha1", Ok("split.smi-spec.io/v1alpha1")),
            ("v1alpha2", Ok("split.smi-spec.io/v1alpha2")),
            ("v1alpha3", Ok("split.smi-spec.io/v1alpha3")),
            ("v1alpha4", Ok("split.smi-spec.io/v1alpha4")),
            (
                "v1alpha5",
                Err("Unsupported TrafficSplit API version `v1alpha5`"),
            ),
            ("v1", Err("Unsupported TrafficSplit API version `v1`")),
        ];
        for (flag, want) in cases {
            let want = want.map(str::to_string).map_err(RouterError::new);
            assert_eq!(api_version(flag), want, "{flag}");
        }
    }
}
