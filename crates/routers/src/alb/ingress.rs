//! The parts of an Ingress the ALB router reads and edits: its annotations and the paths of
//! its rules, in the `networking.k8s.io/v1` shape (`backend.service.name`) or the older
//! `v1beta1` one (`backend.serviceName`).

use serde_json::{Value, json};

use super::PATCHING_REASON;
use crate::{Edit, EditResult};

pub(crate) use crate::ingress::{annotations, name, with_annotations};

/// The Service a path sends its traffic to.
pub(crate) fn backend_name(path: &Value) -> Option<&str> {
    let backend = path.get("backend")?;
    backend
        .pointer("/service/name")
        .or_else(|| backend.get("serviceName"))
        .and_then(Value::as_str)
}

/// The path lists of the rules that have them.
fn paths(ingress: &Value) -> impl Iterator<Item = &Vec<Value>> {
    ingress
        .pointer("/spec/rules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|rule| rule.pointer("/http/paths")?.as_array())
}

/// Whether a path of some rule sends its traffic to `service`.
pub(crate) fn has_backend(ingress: &Value, service: &str) -> bool {
    paths(ingress)
        .flatten()
        .any(|p| backend_name(p) == Some(service))
}

/// Runs `f` on the path list of every rule that has an `http` section; with `create`, a rule
/// whose `http` has no paths gets an empty list first. Rules without `http` route nothing
/// (the default backend takes their traffic) and are left alone.
fn each_paths_mut(ingress: &mut Value, create: bool, mut f: impl FnMut(&mut Vec<Value>)) {
    let Some(rules) = ingress
        .pointer_mut("/spec/rules")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for rule in rules {
        let Some(http) = rule.get_mut("http").and_then(Value::as_object_mut) else {
            continue;
        };
        if create && !matches!(http.get("paths"), Some(Value::Array(_))) {
            http.insert("paths".into(), Value::Array(Vec::new()));
        }
        if let Some(paths) = http.get_mut("paths").and_then(Value::as_array_mut) {
            f(paths);
        }
    }
}

/// Whether the Ingress uses the `v1beta1` backend shape (`serviceName`/`servicePort`).
fn is_legacy(ingress: &Value) -> bool {
    matches!(
        ingress.get("apiVersion").and_then(Value::as_str),
        Some("extensions/v1beta1" | "networking.k8s.io/v1beta1")
    )
}

/// The path that hands a request to the annotation action `route`: `/*` to backend `route`,
/// port name `use-annotation`, which the load balancer controller resolves through
/// `<prefix>/actions.<route>` and `<prefix>/conditions.<route>`.
fn route_path(ingress: &Value, route: &str) -> Value {
    let backend = if is_legacy(ingress) {
        json!({"serviceName": route, "servicePort": "use-annotation"})
    } else {
        json!({"service": {"name": route, "port": {"name": "use-annotation"}}})
    };
    json!({"path": "/*", "pathType": "ImplementationSpecific", "backend": backend})
}

/// Puts the annotation path of `route` first in every rule, unless some path of the Ingress
/// already goes to `route` (then the Ingress is left as it is, as in Argo).
pub(crate) fn insert_route_path(ingress: &mut Value, route: &str) {
    if has_backend(ingress, route) {
        return;
    }
    let path = route_path(ingress, route);
    each_paths_mut(ingress, true, |paths| paths.insert(0, path.clone()));
}

/// Removes every path that goes to `route`.
pub(crate) fn remove_route_paths(ingress: &mut Value, route: &str) {
    each_paths_mut(ingress, false, |paths| {
        paths.retain(|p| backend_name(p) != Some(route));
    });
}

/// Orders the paths of each rule so that those going to a managed route come first, in
/// `managed_routes` order; the others keep their order after them (a stable sort). The load
/// balancer controller gives earlier paths precedence.
pub(crate) fn sort_paths(ingress: &mut Value, managed_routes: &[String]) {
    let rank = |path: &Value| {
        backend_name(path)
            .and_then(|n| managed_routes.iter().position(|r| r == n))
            .unwrap_or(managed_routes.len())
    };
    each_paths_mut(ingress, false, |paths| paths.sort_by_key(rank));
}

/// The edit writing `updated`, or `None` when it equals `original`.
pub(crate) fn finish(original: &Value, updated: Value, message: String) -> EditResult {
    if &updated == original {
        return Ok(None);
    }
    Ok(Some(Edit {
        object: updated,
        event: (PATCHING_REASON, message),
    }))
}

#[cfg(test)]
mod tests {
    use serde_json::Map;

    use super::*;
    use crate::RouterError;
    use crate::alb::fixtures::{ingress, path, route_path as v1_route_path};

    fn with_paths(rules: Value) -> Value {
        let mut i = ingress();
        i["spec"]["rules"] = rules;
        i
    }

    #[test]
    fn backends_in_both_shapes() {
        let v1 = path("/*", "root", json!({"name": "use-annotation"}));
        let legacy = json!({"backend": {"serviceName": "root", "servicePort": 80}});
        assert_eq!(backend_name(&v1), Some("root"));
        assert_eq!(backend_name(&legacy), Some("root"));
        assert_eq!(backend_name(&json!({"backend": {"resource": {}}})), None);
        assert_eq!(backend_name(&json!({})), None);

        let i = with_paths(json!([
            {"host": "a.example.com"},
            {"http": {"paths": [legacy]}},
            {"http": {"paths": [v1]}}
        ]));
        assert!(has_backend(&i, "root"));
        assert!(!has_backend(&i, "other"));
        assert!(!has_backend(&json!({"spec": {"rules": 1}}), "root"));
    }

    #[test]
    fn route_path_is_inserted_first_in_every_rule_once() {
        let a = path("/a", "root", json!({"name": "use-annotation"}));
        let b = path("/b", "root", json!({"number": 80}));
        let mut i = with_paths(json!([
            {"host": "a.example.com", "http": {"paths": [a.clone(), b.clone()]}},
            {"host": "b.example.com", "http": {}},
            {"host": "c.example.com"}
        ]));
        insert_route_path(&mut i, "header-route");
        let want = with_paths(json!([
            {"host": "a.example.com", "http": {"paths": [v1_route_path("header-route"), a, b]}},
            {"host": "b.example.com", "http": {"paths": [v1_route_path("header-route")]}},
            {"host": "c.example.com"}
        ]));
        assert_eq!(i, want);
        // Already there: nothing more is inserted.
        insert_route_path(&mut i, "header-route");
        assert_eq!(i, want);
    }

    #[test]
    fn legacy_ingresses_get_legacy_paths() {
        for api_version in ["extensions/v1beta1", "networking.k8s.io/v1beta1"] {
            let mut i = json!({
                "apiVersion": api_version,
                "spec": {"rules": [{"http": {"paths": [
                    {"path": "/*", "backend": {"serviceName": "root", "servicePort": "use-annotation"}}
                ]}}]}
            });
            insert_route_path(&mut i, "hr");
            assert_eq!(
                i.pointer("/spec/rules/0/http/paths/0").unwrap(),
                &json!({
                    "path": "/*",
                    "pathType": "ImplementationSpecific",
                    "backend": {"serviceName": "hr", "servicePort": "use-annotation"}
                }),
                "{api_version}"
            );
        }
    }

    #[test]
    fn removal_takes_every_path_of_the_route() {
        let root = path("/*", "root", json!({"name": "use-annotation"}));
        let mut i = with_paths(json!([
            {"http": {"paths": [v1_route_path("hr"), root.clone(), v1_route_path("hr")]}},
            {"http": {"paths": [v1_route_path("other"), v1_route_path("hr")]}}
        ]));
        remove_route_paths(&mut i, "hr");
        assert_eq!(
            i,
            with_paths(json!([
                {"http": {"paths": [root]}},
                {"http": {"paths": [v1_route_path("other")]}}
            ]))
        );
    }

    #[test]
    fn managed_routes_first_in_their_order() {
        let managed = vec!["first".to_string(), "second".to_string()];
        let p = |n: &str| path(&format!("/{n}"), n, json!({"number": 80}));
        let cases = [
            (
                vec![p("a"), p("second"), p("b"), p("first")],
                vec![p("first"), p("second"), p("a"), p("b")],
            ),
            (vec![p("b"), p("a")], vec![p("b"), p("a")]),
            (
                vec![p("second"), json!({}), p("first")],
                vec![p("first"), p("second"), json!({})],
            ),
            (vec![], vec![]),
        ];
        for (paths, want) in cases {
            let mut i = with_paths(json!([{"http": {"paths": paths}}]));
            sort_paths(&mut i, &managed);
            assert_eq!(i, with_paths(json!([{"http": {"paths": want}}])));
        }
    }

    #[test]
    fn annotations_are_read_and_replaced() {
        let i = ingress();
        let mut a = annotations(&i).unwrap();
        assert_eq!(a.get("kubernetes.io/ingress.class"), Some(&json!("alb")));
        a.insert("k".into(), "v".into());
        let out = with_annotations(&i, a).unwrap();
        assert_eq!(out["metadata"]["annotations"]["k"], "v");
        assert_eq!(out["metadata"]["name"], "alb-canary-ingress");

        for bare in [
            json!({}),
            json!({"metadata": null}),
            json!({"metadata": {}}),
        ] {
            assert_eq!(annotations(&bare).unwrap(), Map::new());
            assert_eq!(with_annotations(&bare, Map::new()).unwrap(), bare);
            let out = with_annotations(&bare, Map::from_iter([("k".into(), "v".into())]));
            assert_eq!(out.unwrap()["metadata"]["annotations"], json!({"k": "v"}));
        }
        let bad = json!({"metadata": {"name": "x", "annotations": []}});
        assert_eq!(
            annotations(&bad),
            Err(RouterError::new(
                "ingress `x` is malformed: metadata.annotations is not a map"
            ))
        );
        let one = || Map::from_iter([("k".to_string(), json!("v"))]);
        assert!(with_annotations(&json!([]), one()).is_err());
        assert!(with_annotations(&json!({"metadata": 1}), one()).is_err());
    }
}
