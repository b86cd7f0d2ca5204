//! Which VirtualRouter a VirtualService sends its traffic through.

use serde_json::Value;

use super::{name_of, not_well_formed};
use crate::RouterError;

const REF_PATH: &str = "spec.provider.virtualRouter.virtualRouterRef";

/// Name and namespace of the VirtualRouter in the VirtualService's
/// `spec.provider.virtualRouter.virtualRouterRef`. The namespace defaults to the
/// VirtualService's, and to the Rollout's when the VirtualService has none either (the
/// VirtualService is read from the Rollout's namespace). A VirtualService without a router
/// reference (one whose provider is a VirtualNode) cannot be weighted: a `not well-formed`
/// field error naming the VirtualService.
pub fn virtual_router_ref(
    vs: &Value,
    rollout_namespace: &str,
) -> Result<(String, String), RouterError> {
    let vs_name = name_of(vs);
    let reference = vs
        .pointer("/spec/provider/virtualRouter/virtualRouterRef")
        .and_then(Value::as_object)
        .ok_or_else(|| not_well_formed(REF_PATH, vs_name))?;
    let name = reference
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| not_well_formed(&format!("{REF_PATH}.name"), vs_name))?;
    let namespace = non_empty(reference.get("namespace"))
        .or_else(|| non_empty(vs.pointer("/metadata/namespace")))
        .unwrap_or(rollout_namespace);
    Ok((name.to_string(), namespace.to_string()))
}

/// A string that is set and not empty.
fn non_empty(value: Option<&Value>) -> Option<&str> {
    value.and_then(Value::as_str).filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn vs(namespace: Option<&str>, reference: Value) -> Value {
        let mut vs = json!({
            "metadata": {"name": "my-svc"},
            "spec": {"provider": {"virtualRouter": {"virtualRouterRef": reference}}}
        });
        if let Some(ns) = namespace {
            vs["metadata"]["namespace"] = ns.into();
        }
        vs
    }

    #[test]
    fn reference_and_namespace_defaults() {
        let ok = |name: &str, ns: &str| Ok((name.to_string(), ns.to_string()));
        let cases = [
            (vs(Some("mesh"), json!({"name": "vr"})), ok("vr", "mesh")),
            (
                vs(Some("mesh"), json!({"name": "vr", "namespace": "routers"})),
                ok("vr", "routers"),
            ),
            (
                vs(Some("mesh"), json!({"name": "vr", "namespace": ""})),
                ok("vr", "mesh"),
            ),
            (vs(None, json!({"name": "vr"})), ok("vr", "ro-ns")),
            (vs(Some(""), json!({"name": "vr"})), ok("vr", "ro-ns")),
        ];
        for (vs, want) in cases {
            assert_eq!(virtual_router_ref(&vs, "ro-ns"), want, "{vs}");
        }
    }

    #[test]
    fn malformed_references() {
        let whole = Err(RouterError::new(
            "spec.provider.virtualRouter.virtualRouterRef: Invalid value: \"my-svc\": \
             not well-formed",
        ));
        let name = Err(RouterError::new(
            "spec.provider.virtualRouter.virtualRouterRef.name: Invalid value: \"my-svc\": \
             not well-formed",
        ));
        let node_provider = json!({
            "metadata": {"name": "my-svc"},
            "spec": {"provider": {"virtualNode": {"virtualNodeRef": {"name": "vn"}}}}
        });
        let cases = [
            (node_provider, whole.clone()),
            (vs(None, json!("vr")), whole.clone()),
            (json!({"metadata": {"name": "my-svc"}}), whole),
            (vs(None, json!({})), name.clone()),
            (vs(None, json!({"name": ""})), name.clone()),
            (vs(None, json!({"name": 3})), name),
        ];
        for (vs, want) in cases {
            assert_eq!(virtual_router_ref(&vs, "ro-ns"), want, "{vs}");
        }
    }
}
