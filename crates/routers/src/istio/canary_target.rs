//! Where the managed header and mirror routes send traffic, and which route they take their
//! port (and, for a mirror, their weighted destinations) from.

use serde_json::{Map, Value};
use sluice_api::rollout::IstioDestinationRule;

use super::destination::{Classifier, Role};
use super::value;
use crate::Desired;

/// The first weighted route of the HTTP routes: the route `set_weight` splits traffic on.
///
/// These functions receive the VirtualService name but not its route list, so the weighted
/// route is recognised by its content: the first route that is not a managed route and that
/// reaches both the canary and the stable. Failing that, the first route that is not a managed
/// route. With the usual single primary route, both are that route.
pub(crate) fn first_weighted_route<'a>(
    routes: &'a [Value],
    dr: Option<&IstioDestinationRule>,
    desired: &Desired,
) -> Option<&'a Value> {
    let classifier = Classifier::new(dr, desired);
    let unmanaged = || {
        routes
            .iter()
            .filter(|r| !desired.managed_routes.iter().any(|m| m == value::name(r)))
    };
    let reaches = |route: &Value, role: Role| {
        value::destinations(route)
            .iter()
            .any(|d| classifier.role(d) == role)
    };
    unmanaged()
        .find(|r| reaches(r, Role::Canary) && reaches(r, Role::Stable))
        .or_else(|| unmanaged().next())
}

/// The canary as a route destination.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CanaryTarget {
    host: String,
    subset: Option<String>,
    port: Option<Value>,
}

impl CanaryTarget {
    /// With a DestinationRule, its `spec.host` and the canary subset (the canary Service when
    /// the DR has no host); without one, the canary Service. The port is that of the first
    /// destination of the weighted route, when it names one.
    pub(crate) fn new(
        weighted: Option<&Value>,
        dr_host: Option<&str>,
        dr: Option<&IstioDestinationRule>,
        desired: &Desired,
    ) -> Self {
        let host = dr
            .and(dr_host)
            .filter(|h| !h.is_empty())
            .unwrap_or(&desired.canary_service);
        let subset = dr
            .and_then(|dr| dr.canary_subset_name.clone())
            .filter(|s| !s.is_empty());
        let port = weighted
            .and_then(|route| value::destinations(route).first())
            .and_then(value::port)
            .cloned();
        Self {
            host: host.to_string(),
            subset,
            port,
        }
    }

    /// `{host, port?, subset?}`, the destination of a header route.
    pub(crate) fn header_destination(&self) -> Value {
        let mut fields = Map::new();
        fields.insert("host".into(), self.host.clone().into());
        if let Some(port) = &self.port {
            fields.insert("port".into(), port.clone());
        }
        if let Some(subset) = &self.subset {
            fields.insert("subset".into(), subset.clone().into());
        }
        Value::Object(fields)
    }

    /// `{host, subset?, port?}`, the `mirror` of a mirror route.
    pub(crate) fn mirror_destination(&self) -> Value {
        let mut fields = Map::new();
        fields.insert("host".into(), self.host.clone().into());
        if let Some(subset) = &self.subset {
            fields.insert("subset".into(), subset.clone().into());
        }
        if let Some(port) = &self.port {
            fields.insert("port".into(), port.clone());
        }
        Value::Object(fields)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn desired() -> Desired {
        Desired {
            canary_service: "canary".into(),
            stable_service: "stable".into(),
            managed_routes: vec!["header".into()],
            ..Desired::default()
        }
    }

    #[test]
    fn weighted_route_is_the_unmanaged_one_reaching_both_sides() {
        let routes = [
            json!({"name": "header", "route": [{"destination": {"host": "canary"}}, {"destination": {"host": "stable"}}]}),
            json!({"name": "static", "route": [{"destination": {"host": "stable"}}]}),
            json!({"name": "primary", "route": [{"destination": {"host": "stable"}}, {"destination": {"host": "canary"}}]}),
        ];
        let desired = desired();
        assert_eq!(
            first_weighted_route(&routes, None, &desired).map(value::name),
            Some("primary")
        );
        assert_eq!(
            first_weighted_route(&routes[..2], None, &desired).map(value::name),
            Some("static")
        );
        assert_eq!(first_weighted_route(&routes[..1], None, &desired), None);
    }

    #[test]
    fn target_by_host_or_subset() {
        let route =
            json!({"route": [{"destination": {"host": "stable", "port": {"number": 8080}}}]});
        let dr = IstioDestinationRule {
            canary_subset_name: Some("c".into()),
            ..IstioDestinationRule::default()
        };
        let desired = desired();
        let host_split = CanaryTarget::new(Some(&route), None, None, &desired);
        assert_eq!(
            host_split.header_destination(),
            json!({"host": "canary", "port": {"number": 8080}})
        );
        let subset_split = CanaryTarget::new(None, Some("svc"), Some(&dr), &desired);
        assert_eq!(
            subset_split.mirror_destination(),
            json!({"host": "svc", "subset": "c"})
        );
        let no_dr_host = CanaryTarget::new(None, None, Some(&dr), &desired);
        assert_eq!(
            no_dr_host.header_destination(),
            json!({"host": "canary", "subset": "c"})
        );
    }
}
