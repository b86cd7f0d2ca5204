//! What a weighted destination of a route is to the Rollout: the canary, the stable, an
//! experiment's Service, a subset the user weights by hand, or something unknown. Weighting,
//! validation and reading the weight back all classify destinations the same way.

use serde_json::Value;
use sluice_api::rollout::IstioDestinationRule;

use super::value;
use crate::{Desired, Destination};

/// The role of one destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role<'a> {
    Canary,
    Stable,
    /// An experiment's Service: it gets the template weight.
    Experiment(&'a Destination),
    /// A subset in `additionalSubsetNames`: its weight is the user's and is left alone.
    AdditionalSubset,
    /// Nothing the Rollout knows: removed when it carries weight (a finished experiment).
    Unknown,
}

/// The comparison of a destination host with a Service name uses the host's first DNS label,
/// so `reviews.ns.svc.cluster.local` is the Service `reviews`. A host starting with `.` has an
/// empty first label and matches no Service.
pub(crate) fn host_label(host: &str) -> &str {
    host.split('.').next().unwrap_or("")
}

/// Equality where an empty side never matches: an unset canary Service must not claim every
/// destination without a host.
fn same(a: &str, b: &str) -> bool {
    !a.is_empty() && a == b
}

/// Classifies destinations for one Rollout.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Classifier<'a> {
    canary_service: &'a str,
    stable_service: &'a str,
    canary_subset: &'a str,
    stable_subset: &'a str,
    additional_subsets: &'a [String],
    experiments: &'a [Destination],
}

impl<'a> Classifier<'a> {
    pub(crate) fn new(dr: Option<&'a IstioDestinationRule>, desired: &'a Desired) -> Self {
        Self {
            canary_service: &desired.canary_service,
            stable_service: &desired.stable_service,
            canary_subset: dr
                .and_then(|dr| dr.canary_subset_name.as_deref())
                .unwrap_or(""),
            stable_subset: dr
                .and_then(|dr| dr.stable_subset_name.as_deref())
                .unwrap_or(""),
            additional_subsets: dr
                .and_then(|dr| dr.additional_subset_names.as_deref())
                .unwrap_or(&[]),
            experiments: &desired.additional,
        }
    }

    /// The role of a weighted destination; the first matching rule wins, canary first.
    pub(crate) fn role(&self, destination: &Value) -> Role<'a> {
        let host = host_label(value::host(destination));
        let subset = value::subset(destination);
        if same(host, self.canary_service) || same(subset, self.canary_subset) {
            Role::Canary
        } else if same(host, self.stable_service) || same(subset, self.stable_subset) {
            Role::Stable
        } else if let Some(experiment) = self
            .experiments
            .iter()
            .find(|e| same(host, &e.service_name))
        {
            Role::Experiment(experiment)
        } else if !subset.is_empty() && self.additional_subsets.iter().any(|s| s == subset) {
            Role::AdditionalSubset
        } else {
            Role::Unknown
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn dest(host: &str, subset: Option<&str>) -> Value {
        match subset {
            Some(subset) => json!({"destination": {"host": host, "subset": subset}}),
            None => json!({"destination": {"host": host}}),
        }
    }

    #[test]
    fn classifies_hosts_and_subsets() {
        let desired = Desired {
            canary_service: "canary".into(),
            stable_service: "stable".into(),
            additional: vec![Destination {
                service_name: "exp".into(),
                pod_template_hash: "h".into(),
                weight: 5,
            }],
            ..Desired::default()
        };
        let dr = IstioDestinationRule {
            name: Some("dr".into()),
            canary_subset_name: Some("c".into()),
            stable_subset_name: Some("s".into()),
            additional_subset_names: Some(vec!["extra".into()]),
        };
        let classifier = Classifier::new(Some(&dr), &desired);
        let cases = [
            (dest("canary", None), Role::Canary),
            (dest("canary.ns.svc.cluster.local", None), Role::Canary),
            (dest("stable.ns", None), Role::Stable),
            (dest("svc", Some("c")), Role::Canary),
            (dest("svc", Some("s")), Role::Stable),
            (dest("exp", None), Role::Experiment(&desired.additional[0])),
            (dest("svc", Some("extra")), Role::AdditionalSubset),
            (dest("other", None), Role::Unknown),
            (dest(".canary", None), Role::Unknown),
            (json!({"weight": 3}), Role::Unknown),
        ];
        for (destination, role) in cases {
            assert_eq!(classifier.role(&destination), role, "{destination}");
        }
    }

    #[test]
    fn unset_names_match_nothing() {
        let desired = Desired::default();
        let classifier = Classifier::new(None, &desired);
        assert_eq!(classifier.role(&json!({"destination": {}})), Role::Unknown);
    }
}
