//! Settings and template parts read as the engine reads them: it turns the YAML into JSON and
//! decodes that with Go's `encoding/json` (through `sigs.k8s.io/yaml`), which matches a field
//! whose name differs only in case when none has the exact name (the documentation itself
//! writes `priorityID` for `priorityId` and `Id`/`Type` in `visibleTo`), takes a YAML number
//! or boolean as its text where it expects a string, and leaves a null as the zero value.
//! A value of another shape (a list for a string, text for a list) is refused.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, de::Error as _};
use serde_json::Value;

/// `obj`'s field `name`, or the one whose name differs only in case.
pub(crate) fn get<'a>(obj: &'a Value, name: &str) -> Option<&'a Value> {
    let map = obj.as_object()?;
    map.get(name).or_else(|| {
        map.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    })
}

/// Renames the fields of `v` whose names differ from one of `fields` only in case, so that
/// serde finds them under the engine's name.
pub(crate) fn fold(v: &mut Value, fields: &[&str]) {
    let Some(map) = v.as_object_mut() else {
        return;
    };
    for field in fields {
        if map.contains_key(*field) {
            continue;
        }
        let other = map.keys().find(|k| k.eq_ignore_ascii_case(field)).cloned();
        if let Some(value) = other.and_then(|k| map.remove(&k)) {
            map.insert((*field).to_owned(), value);
        }
    }
}

/// A scalar as the text Go decodes it to where a string is expected; None for a list or map.
pub(crate) fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Null => Some(String::new()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (_, Some(u), _) => u.to_string(),
            // `1e3` is 1000 in Go's text, not Rust's `1000.0`.
            (_, _, Some(f)) if f.fract() == 0.0 && f.abs() < 9.0e15 => (f as i64).to_string(),
            _ => n.to_string(),
        }),
        Value::Array(_) | Value::Object(_) => None,
    }
}

fn wrong_type(name: &str) -> String {
    format!("{name} has the wrong type")
}

/// The text field `name` of `obj` ("" when absent).
pub(crate) fn string(obj: &Value, name: &str) -> Result<String, String> {
    match get(obj, name) {
        None => Ok(String::new()),
        Some(v) => text(v).ok_or_else(|| wrong_type(name)),
    }
}

/// The list of texts `name` of `obj` (empty when absent or null).
pub(crate) fn strings(obj: &Value, name: &str) -> Result<Vec<String>, String> {
    match get(obj, name) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| text(v).ok_or_else(|| wrong_type(name)))
            .collect(),
        Some(_) => Err(wrong_type(name)),
    }
}

/// The map of texts `name` of `obj` (empty when absent or null).
pub(crate) fn string_map(obj: &Value, name: &str) -> Result<BTreeMap<String, String>, String> {
    match get(obj, name) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| Ok((k.clone(), text(v).ok_or_else(|| wrong_type(name))?)))
            .collect(),
        Some(_) => Err(wrong_type(name)),
    }
}

// serde's `deserialize_with` forms of the above, for settings. The messages start with
// "invalid type" so that `config::redact` reports them as serde's own type errors.

pub(crate) fn de_string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    text(&Value::deserialize(d)?).ok_or_else(|| D::Error::custom("invalid type: expected text"))
}

pub(crate) fn de_strings<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let v = serde_json::json!({ "v": Value::deserialize(d)? });
    strings(&v, "v").map_err(|_| D::Error::custom("invalid type: expected a list of texts"))
}

pub(crate) fn de_string_map<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, String>, D::Error> {
    let v = serde_json::json!({ "v": Value::deserialize(d)? });
    string_map(&v, "v").map_err(|_| D::Error::custom("invalid type: expected a map of texts"))
}

/// The engine's HTTP transport settings (`maxIdleConns`, `maxIdleConnsPerHost`,
/// `maxConnsPerHost`, `idleConnTimeout`), read only so that a value of the wrong type is
/// refused as the engine refuses it: Sluice's shared clients keep their own connection pools.
#[derive(Clone, Default, Deserialize)]
pub(crate) struct TransportOptions {
    #[serde(default, rename = "maxIdleConns")]
    _max_idle_conns: Option<i64>,
    #[serde(default, rename = "maxIdleConnsPerHost")]
    _max_idle_conns_per_host: Option<i64>,
    #[serde(default, rename = "maxConnsPerHost")]
    _max_conns_per_host: Option<i64>,
    #[serde(default, rename = "idleConnTimeout", deserialize_with = "de_string")]
    _idle_conn_timeout: String,
}

/// The names of [`TransportOptions`], for [`fold`].
pub(crate) const TRANSPORT_FIELDS: [&str; 4] = [
    "maxIdleConns",
    "maxIdleConnsPerHost",
    "maxConnsPerHost",
    "idleConnTimeout",
];

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn names_match_in_any_case_the_exact_one_first() {
        let v = json!({"priorityID": "P1", "Id": "a", "id": "b"});
        assert_eq!(get(&v, "priorityId"), Some(&json!("P1")));
        assert_eq!(get(&v, "id"), Some(&json!("b")));
        let mut s = json!({"APIURL": "u", "token": "t"});
        fold(&mut s, &["apiURL", "token", "from"]);
        assert_eq!(s, json!({"apiURL": "u", "token": "t"}));
    }

    #[test]
    fn scalars_are_text_lists_and_maps_are_not() {
        let v = json!({"n": 3, "f": 1.5, "e": 1000.0, "b": true, "z": null, "l": [1, "x"],
            "m": {"k": 2}});
        assert_eq!(string(&v, "n").unwrap(), "3");
        assert_eq!(string(&v, "f").unwrap(), "1.5");
        assert_eq!(string(&v, "e").unwrap(), "1000");
        assert_eq!(string(&v, "b").unwrap(), "true");
        assert_eq!(string(&v, "z").unwrap(), "");
        assert_eq!(string(&v, "absent").unwrap(), "");
        assert_eq!(strings(&v, "l").unwrap(), ["1", "x"]);
        assert_eq!(string_map(&v, "m").unwrap()["k"], "2");
        assert_eq!(string(&v, "l").unwrap_err(), "l has the wrong type");
        assert!(strings(&v, "m").is_err());
        assert!(string_map(&v, "l").is_err());
    }
}
