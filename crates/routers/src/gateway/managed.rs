//! Removal of the rules Sluice manages on a route.

use serde_json::Value;

use super::RouteKind;
use super::rules::{is_managed, route_name, rules, with_rules};
use crate::{Desired, Edit, EditResult};

/// The route without its managed rules: those named after a `managedRoutes` entry (or
/// `<entry>-<n>`) and those whose only backend is the canary Service, which includes such a
/// rule the user wrote. TCP and TLS routes have none. `None` when there is nothing to remove.
///
/// The caller applies this only to routes with `useHeaderRoutes`.
pub fn remove_managed_routes(route: &Value, kind: RouteKind, desired: &Desired) -> EditResult {
    if !kind.has_header_routes() {
        return Ok(None);
    }
    let rules = rules(route, kind)?;
    let kept: Vec<Value> = rules
        .iter()
        .filter(|rule| !is_managed(rule, desired))
        .cloned()
        .collect();
    if kept.len() == rules.len() {
        return Ok(None);
    }
    Ok(Some(Edit {
        object: with_rules(route, kept),
        event: (
            kind.updated_reason(),
            format!("{kind} `{}` removed all managed routes.", route_name(route)),
        ),
    }))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::gateway::fixtures::{desired, http_route};

    const CANARY: &str = "argo-rollouts-canary-service";

    #[test]
    fn managed_rules_are_removed() {
        let mut route = http_route();
        let rules = route["spec"]["rules"].as_array_mut().unwrap();
        rules.insert(
            0,
            json!({"name": "header-route", "backendRefs": [{"name": CANARY}]}),
        );
        rules.push(json!({"name": "header-route-3", "backendRefs": [{"name": CANARY}]}));
        // A user rule whose only backend is the canary counts as managed too.
        rules.push(json!({"name": "preview", "backendRefs": [{"name": CANARY}]}));
        let edit = remove_managed_routes(&route, RouteKind::Http, &desired())
            .unwrap()
            .unwrap();
        assert_eq!(edit.object, http_route());
        assert_eq!(
            edit.event,
            (
                "UpdatedHTTPRoute",
                "HTTPRoute `argo-rollouts-http-route` removed all managed routes.".to_string()
            )
        );
    }

    #[test]
    fn nothing_to_remove() {
        assert_eq!(
            remove_managed_routes(&http_route(), RouteKind::Http, &desired()),
            Ok(None)
        );
        let tcp = json!({"spec": {"rules": [{"backendRefs": [{"name": CANARY}]}]}});
        for kind in [RouteKind::Tcp, RouteKind::Tls] {
            assert_eq!(remove_managed_routes(&tcp, kind, &desired()), Ok(None));
        }
        assert!(
            remove_managed_routes(&json!({"spec": {"rules": 1}}), RouteKind::Grpc, &desired())
                .is_err()
        );
    }
}
