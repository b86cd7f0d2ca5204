//! Route precedence. Istio takes the first HTTP route that matches, so the managed header and
//! mirror routes must come before the catch-all route they refine, in the order of
//! `managedRoutes` (highest precedence first).

use serde_json::Value;

use super::value::{self, Section};

/// Moves the HTTP routes named in `managed` to the front, in `managed` order; every other route
/// keeps its relative order behind them. Without managed routes the order is left as is.
pub(crate) fn order_http_routes(vs: &mut Value, managed: &[String]) {
    if managed.is_empty() {
        return;
    }
    let Some(routes) = value::routes_mut(vs, Section::Http) else {
        return;
    };
    let mut rest = std::mem::take(routes);
    let mut ordered = Vec::with_capacity(rest.len());
    for name in managed {
        let (named, others): (Vec<Value>, Vec<Value>) = rest
            .into_iter()
            .partition(|route| !name.is_empty() && value::name(route) == name);
        ordered.extend(named);
        rest = others;
    }
    ordered.extend(rest);
    *routes = ordered;
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn names(vs: &Value) -> Vec<&str> {
        vs["spec"]["http"]
            .as_array()
            .map(|routes| routes.iter().map(value::name).collect())
            .unwrap_or_default()
    }

    fn vs(names: &[&str]) -> Value {
        let routes: Vec<Value> = names.iter().map(|n| json!({"name": n})).collect();
        json!({"spec": {"http": routes}})
    }

    #[test]
    fn managed_routes_first_in_managed_order() {
        let cases: [(&[&str], &[&str], &[&str]); 5] = [
            (&["primary", "b", "a"], &["a", "b"], &["a", "b", "primary"]),
            (&["a", "primary", "b"], &["b", "a"], &["b", "a", "primary"]),
            (&["x", "primary", "y"], &["a"], &["x", "primary", "y"]),
            (&["primary", "a"], &[], &["primary", "a"]),
            (
                &["", "a", "missing"],
                &["missing", "a", "gone"],
                &["missing", "a", ""],
            ),
        ];
        for (before, managed, after) in cases {
            let managed: Vec<String> = managed.iter().map(|s| s.to_string()).collect();
            let mut object = vs(before);
            order_http_routes(&mut object, &managed);
            assert_eq!(names(&object), after, "{before:?} by {managed:?}");
        }
    }

    #[test]
    fn no_http_section_is_left_alone() {
        let mut object = json!({"spec": {"tcp": []}});
        order_http_routes(&mut object, &["a".to_string()]);
        assert_eq!(object, json!({"spec": {"tcp": []}}));
    }
}
