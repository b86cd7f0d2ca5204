//! What header and mirror routes share: the step's route name, the rendering of string
//! matches, and the edit that swaps the old route of that name for the new one.

use serde_json::{Map, Value};
use sluice_api::rollout::StringMatch;

use super::VIRTUAL_SERVICE_UPDATED;
use super::order::order_http_routes;
use super::value::{self, Section};
use crate::{Edit, EditResult, RouterError};

pub(crate) use crate::router::step_name;

/// An Istio `StringMatch`: whichever of `exact`, `prefix` and `regex` are set (validation lets
/// exactly one through).
pub(crate) fn string_match(m: &StringMatch) -> Value {
    let mut fields = Map::new();
    for (key, v) in [
        ("exact", &m.exact),
        ("prefix", &m.prefix),
        ("regex", &m.regex),
    ] {
        if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
            fields.insert(key.into(), v.into());
        }
    }
    Value::Object(fields)
}

/// Where a new managed route goes in `spec.http`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Placement {
    /// Header routes are appended, then ordered.
    Append,
    /// Mirror routes are prepended, then ordered.
    Prepend,
}

/// Builds a new managed route from the HTTP routes that remain once the old one is removed.
pub(crate) type BuildRoute<'a> = &'a dyn Fn(&[Value]) -> Result<Value, RouterError>;

/// Removes the HTTP routes named `name`, adds `new` (built from the routes that remain) when
/// the step has a match, orders the routes after an addition, and returns the edit when the
/// VirtualService changed. A step without a match only removes, so a VirtualService without the
/// route or without `spec.http` is left alone; adding to a VirtualService without `spec.http`
/// is an error.
pub(crate) fn replace_route(
    vs: &Value,
    vs_name: &str,
    name: &str,
    managed: &[String],
    new: Option<(Placement, BuildRoute<'_>)>,
    message: String,
) -> EditResult {
    let Some(routes) = value::routes(vs, Section::Http)? else {
        return match new {
            None => Ok(None),
            Some(_) => Err(RouterError::new(format!(
                "spec.http not found in VirtualService `{vs_name}`"
            ))),
        };
    };
    let mut kept: Vec<Value> = routes
        .iter()
        .filter(|r| value::name(r) != name)
        .cloned()
        .collect();
    if let Some((placement, build)) = new {
        let route = build(&kept)?;
        match placement {
            Placement::Append => kept.push(route),
            Placement::Prepend => kept.insert(0, route),
        }
    }
    let added = new.is_some();
    let mut object = vs.clone();
    if let Some(routes) = value::routes_mut(&mut object, Section::Http) {
        *routes = kept;
    }
    if added {
        order_http_routes(&mut object, managed);
    }
    if object == *vs {
        return Ok(None);
    }
    Ok(Some(Edit {
        object,
        event: (VIRTUAL_SERVICE_UPDATED, message),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_set_matches_only() {
        let m = StringMatch {
            exact: Some("a".into()),
            prefix: Some(String::new()),
            regex: None,
        };
        assert_eq!(string_match(&m), serde_json::json!({"exact": "a"}));
        assert_eq!(string_match(&StringMatch::default()), serde_json::json!({}));
    }

    #[test]
    fn unnamed_steps_are_refused() {
        assert_eq!(
            step_name(None, "setHeaderRoute"),
            Err(RouterError::new("setHeaderRoute step has no route name"))
        );
        assert!(step_name(Some(""), "setMirrorRoute").is_err());
        assert_eq!(step_name(Some("r"), "setMirrorRoute"), Ok("r"));
    }
}
