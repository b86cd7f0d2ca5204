//! Finding rules and backends in an ApisixRoute, with Argo's errors. Positions are returned
//! so that callers edit a copy through the same path.

use serde_json::Value;

use crate::RouterError;

/// `spec.http` of an ApisixRoute.
pub(super) fn http(route: &Value) -> Result<&[Value], RouterError> {
    match route.pointer("/spec/http") {
        None | Some(Value::Null) => Err(RouterError::new(
            "spec.http was not found in Apisix Route manifest",
        )),
        Some(Value::Array(rules)) => Ok(rules),
        Some(_) => Err(RouterError::new(
            "spec.http is not a list in Apisix Route manifest",
        )),
    }
}

/// The position of the first rule named `rule`.
pub(super) fn rule_position(http: &[Value], rule: &str) -> Result<usize, RouterError> {
    http.iter()
        .position(|r| r.get("name").and_then(Value::as_str) == Some(rule))
        .ok_or_else(|| RouterError::new(format!("Apisix http route rule {rule} not found")))
}

/// `backends` of a rule.
pub(super) fn backends<'a>(rule: &'a Value, name: &str) -> Result<&'a [Value], RouterError> {
    match rule.get("backends") {
        Some(Value::Array(backends)) => Ok(backends),
        _ => Err(RouterError::new(format!(
            "Apisix http route rule {name} has no backends"
        ))),
    }
}

/// The position of the first backend of `service`.
pub(super) fn backend_position(backends: &[Value], service: &str) -> Result<usize, RouterError> {
    backends
        .iter()
        .position(|b| b.get("serviceName").and_then(Value::as_str) == Some(service))
        .ok_or_else(|| RouterError::new(format!("apisix route {service} backend was not found")))
}

/// Sets `weight` on the backend at `/spec/http/<rule>/backends/<backend>` of `route`, a copy
/// of the object the positions were found in.
pub(super) fn set_backend_weight(route: &mut Value, rule: usize, backend: usize, weight: i32) {
    if let Some(b) = route
        .pointer_mut(&format!("/spec/http/{rule}/backends/{backend}"))
        .and_then(Value::as_object_mut)
    {
        b.insert("weight".into(), weight.into());
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn lookups_and_argo_errors() {
        let e = |m: &str| Err::<usize, _>(RouterError::new(m));
        assert_eq!(
            http(&json!({"spec": {}})).map(<[Value]>::len),
            e("spec.http was not found in Apisix Route manifest")
        );
        assert_eq!(
            http(&json!({"spec": {"http": {}}})).map(<[Value]>::len),
            e("spec.http is not a list in Apisix Route manifest")
        );
        let rules = [
            json!(1),
            json!({"name": "a"}),
            json!({"name": "b"}),
            json!({"name": "a"}),
        ];
        assert_eq!(rule_position(&rules, "a"), Ok(1));
        assert_eq!(rule_position(&rules, "b"), Ok(2));
        assert_eq!(
            rule_position(&rules, "c"),
            e("Apisix http route rule c not found")
        );
        assert_eq!(
            backends(&json!({"backends": 1}), "a").map(<[Value]>::len),
            e("Apisix http route rule a has no backends")
        );
        assert_eq!(
            backends(&json!({}), "a").map(<[Value]>::len),
            e("Apisix http route rule a has no backends")
        );
        let backends = [json!({"serviceName": "s"}), json!({"serviceName": "c"})];
        assert_eq!(backend_position(&backends, "c"), Ok(1));
        assert_eq!(
            backend_position(&backends, "x"),
            e("apisix route x backend was not found")
        );
    }

    #[test]
    fn weight_is_set_by_position() {
        let mut route = json!({"spec": {"http": [{"backends": [{"serviceName": "s"}]}]}});
        set_backend_weight(&mut route, 0, 0, 7);
        set_backend_weight(&mut route, 3, 0, 7);
        assert_eq!(
            route,
            json!({"spec": {"http": [{"backends": [{"serviceName": "s", "weight": 7}]}]}})
        );
    }
}
