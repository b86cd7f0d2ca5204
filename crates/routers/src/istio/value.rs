//! Reading a VirtualService as untyped JSON without trusting its shape. The object comes from
//! the API server, where a schema-less CRD (or an older Istio version) lets anything through:
//! the shape is checked once, up front, with an error naming the bad path, so the edits that
//! follow can read leniently and never panic.

use serde_json::Value;

use crate::RouterError;

/// One of the route lists of a VirtualService.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Section {
    Http,
    Tls,
    Tcp,
}

impl Section {
    /// The key under `spec`.
    pub(crate) fn key(self) -> &'static str {
        match self {
            Section::Http => "http",
            Section::Tls => "tls",
            Section::Tcp => "tcp",
        }
    }

    /// The name used in messages.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Section::Http => "HTTP",
            Section::Tls => "TLS",
            Section::Tcp => "TCP",
        }
    }
}

fn malformed(path: &str, what: &str) -> RouterError {
    RouterError::new(format!("VirtualService {path} is not {what}"))
}

/// `spec` of an object: `None` when absent or null, an error when it is not an object.
pub(crate) fn spec<'a>(object: &'a Value, kind: &str) -> Result<Option<&'a Value>, RouterError> {
    match object.get("spec") {
        None | Some(Value::Null) => Ok(None),
        Some(spec @ Value::Object(_)) => Ok(Some(spec)),
        Some(_) => Err(RouterError::new(format!("{kind} spec is not an object"))),
    }
}

/// `spec.<section>` of a VirtualService: `None` when absent or null (the section is then not
/// weighted at all), an error when it is not a list of routes whose destinations are well
/// formed.
pub(crate) fn routes(vs: &Value, section: Section) -> Result<Option<&[Value]>, RouterError> {
    let key = section.key();
    let list = match spec(vs, "VirtualService")?.and_then(|spec| spec.get(key)) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(list)) => list,
        Some(_) => return Err(malformed(&format!("spec.{key}"), "a list")),
    };
    for (i, route) in list.iter().enumerate() {
        let path = format!("spec.{key}[{i}]");
        if !route.is_object() {
            return Err(malformed(&path, "an object"));
        }
        check_destinations(route, &path)?;
    }
    Ok(Some(list))
}

/// `spec.<section>` for editing. Only called on an object [`routes`] accepted.
pub(crate) fn routes_mut(vs: &mut Value, section: Section) -> Option<&mut Vec<Value>> {
    vs.get_mut("spec")?.get_mut(section.key())?.as_array_mut()
}

fn check_destinations(route: &Value, path: &str) -> Result<(), RouterError> {
    let list = match route.get("route") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Array(list)) => list,
        Some(_) => return Err(malformed(&format!("{path}.route"), "a list")),
    };
    for (j, destination) in list.iter().enumerate() {
        let path = format!("{path}.route[{j}]");
        if !destination.is_object() {
            return Err(malformed(&path, "an object"));
        }
        match destination.get("destination") {
            None | Some(Value::Null) | Some(Value::Object(_)) => {}
            Some(_) => return Err(malformed(&format!("{path}.destination"), "an object")),
        }
        match destination.get("weight") {
            None | Some(Value::Null) => {}
            Some(weight) if integer(weight).is_some() => {}
            Some(_) => return Err(malformed(&format!("{path}.weight"), "an integer")),
        }
    }
    Ok(())
}

/// A JSON number that holds an integer (`100` or `100.0`).
fn integer(value: &Value) -> Option<i64> {
    if let Some(n) = value.as_i64() {
        return Some(n);
    }
    let f = value.as_f64()?;
    let in_range = f.fract() == 0.0 && f >= i64::MIN as f64 && f <= i64::MAX as f64;
    // The range and fraction were checked just above, so the cast is exact.
    in_range.then_some(f as i64)
}

/// The `name` of a route; unnamed routes read as `""`.
pub(crate) fn name(route: &Value) -> &str {
    route.get("name").and_then(Value::as_str).unwrap_or("")
}

/// The weighted destinations (`route[]`) of a route; none when absent.
pub(crate) fn destinations(route: &Value) -> &[Value] {
    route
        .get("route")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The weighted destinations of a route, for editing.
pub(crate) fn destinations_mut(route: &mut Value) -> Option<&mut Vec<Value>> {
    route.get_mut("route")?.as_array_mut()
}

/// `destination.<field>` of a weighted destination as a string; `""` when absent.
fn destination_str<'a>(destination: &'a Value, field: &str) -> &'a str {
    destination
        .get("destination")
        .and_then(|d| d.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `destination.host` of a weighted destination.
pub(crate) fn host(destination: &Value) -> &str {
    destination_str(destination, "host")
}

/// `destination.subset` of a weighted destination.
pub(crate) fn subset(destination: &Value) -> &str {
    destination_str(destination, "subset")
}

/// `destination.port` of a weighted destination, when set.
pub(crate) fn port(destination: &Value) -> Option<&Value> {
    destination
        .get("destination")
        .and_then(|d| d.get("port"))
        .filter(|port| !port.is_null())
}

/// The weight of a destination; an absent weight counts as 0, as Argo reads it.
pub(crate) fn weight(destination: &Value) -> i64 {
    destination.get("weight").and_then(integer).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn absent_sections_are_none() {
        assert_eq!(routes(&json!({}), Section::Http), Ok(None));
        assert_eq!(routes(&json!({"spec": {}}), Section::Tls), Ok(None));
        assert_eq!(
            routes(&json!({"spec": {"tcp": null}}), Section::Tcp),
            Ok(None)
        );
    }

    #[test]
    fn malformed_shapes_name_the_path() {
        let cases = [
            (json!({"spec": 1}), "VirtualService spec is not an object"),
            (
                json!({"spec": {"http": {}}}),
                "VirtualService spec.http is not a list",
            ),
            (
                json!({"spec": {"http": [1]}}),
                "VirtualService spec.http[0] is not an object",
            ),
            (
                json!({"spec": {"http": [{"route": "x"}]}}),
                "VirtualService spec.http[0].route is not a list",
            ),
            (
                json!({"spec": {"http": [{"route": [{"destination": "x"}]}]}}),
                "VirtualService spec.http[0].route[0].destination is not an object",
            ),
            (
                json!({"spec": {"http": [{"route": [{"weight": "10"}]}]}}),
                "VirtualService spec.http[0].route[0].weight is not an integer",
            ),
            (
                json!({"spec": {"http": [{"route": [{"weight": 1.5}]}]}}),
                "VirtualService spec.http[0].route[0].weight is not an integer",
            ),
        ];
        for (vs, message) in cases {
            assert_eq!(routes(&vs, Section::Http), Err(RouterError::new(message)));
        }
    }

    #[test]
    fn reads_weights_leniently() {
        assert_eq!(weight(&json!({"weight": 30})), 30);
        assert_eq!(weight(&json!({"weight": 30.0})), 30);
        assert_eq!(weight(&json!({})), 0);
        assert_eq!(weight(&json!({"weight": null})), 0);
    }
}
