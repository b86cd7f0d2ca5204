//! `remove_managed_routes`: taking every header and mirror route out of a VirtualService once
//! the Rollout is promoted, aborted, fully promoted by request, or has a canary without pods.

use serde_json::Value;

use super::VIRTUAL_SERVICE_UPDATED;
use super::value::{self, Section};
use crate::{Edit, EditResult};

/// Removes the HTTP routes named in `route_names` (the names of every `setHeaderRoute` and
/// `setMirrorRoute` step plus `managedRoutes`, built by the caller). Writes only when a route
/// was removed. An empty name never matches, so unnamed user routes are safe.
pub fn remove_managed_routes(vs: &Value, vs_name: &str, route_names: &[String]) -> EditResult {
    let Some(routes) = value::routes(vs, Section::Http)? else {
        return Ok(None);
    };
    let managed = |route: &Value| {
        let name = value::name(route);
        !name.is_empty() && route_names.iter().any(|n| n == name)
    };
    if !routes.iter().any(managed) {
        return Ok(None);
    }
    let kept: Vec<Value> = routes.iter().filter(|r| !managed(r)).cloned().collect();
    let mut object = vs.clone();
    if let Some(routes) = value::routes_mut(&mut object, Section::Http) {
        *routes = kept;
    }
    Ok(Some(Edit {
        object,
        event: (
            VIRTUAL_SERVICE_UPDATED,
            format!("VirtualService `{vs_name}` removed all managed routes."),
        ),
    }))
}

/// Whether the VirtualService has `spec.http`. Argo stops removing managed routes at the first
/// VirtualService without one, leaving later VirtualServices of the Rollout untouched; a caller
/// that reproduces this checks here before moving on to the next VirtualService.
pub fn has_http_routes(vs: &Value) -> bool {
    matches!(value::routes(vs, Section::Http), Ok(Some(_)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::istio::fixtures::*;

    const WITH_MANAGED: &str = "
metadata: {name: vs}
spec:
  http:
  - name: mirror-1
    route: [{destination: {host: stable-service}, weight: 100}]
    mirror: {host: canary-service}
  - name: header-1
    route: [{destination: {host: canary-service}, weight: 100}]
  - name: primary
    route: [{destination: {host: stable-service}, weight: 100}]
  - route: [{destination: {host: stable-service}, weight: 100}]
";

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn removes_the_named_routes_only() {
        let vs = yaml(WITH_MANAGED);
        let Ok(Some(edit)) =
            remove_managed_routes(&vs, "vs", &names(&["header-1", "mirror-1", "gone", ""]))
        else {
            panic!("expected an edit")
        };
        assert_eq!(route_names(&edit.object), ["primary", ""]);
        assert_eq!(
            edit.event,
            (
                "Updated VirtualService",
                "VirtualService `vs` removed all managed routes.".to_string()
            )
        );
        assert_eq!(
            remove_managed_routes(&edit.object, "vs", &names(&["header-1"])),
            Ok(None)
        );
    }

    #[test]
    fn nothing_to_remove() {
        assert_eq!(
            remove_managed_routes(&yaml(WITH_MANAGED), "vs", &[]),
            Ok(None)
        );
        assert_eq!(
            remove_managed_routes(&yaml(TLS_ONLY_VS), "vs", &names(&["h"])),
            Ok(None)
        );
        assert!(!has_http_routes(&yaml(TLS_ONLY_VS)));
        assert!(has_http_routes(&yaml(WITH_MANAGED)));
        assert_eq!(
            remove_managed_routes(&yaml("spec: {http: 1}"), "vs", &names(&["h"])),
            Err(crate::RouterError::new(
                "VirtualService spec.http is not a list"
            ))
        );
    }
}
