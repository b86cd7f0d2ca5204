//! `rollouts.argoproj.io/managed-alb-annotations`: which annotation keys of an Ingress each
//! Rollout owns, `{"<rollout>": ["<key>", …]}`. Several Rollouts may share an Ingress, so the
//! entries of the others are kept as they are. Argo's cleanup of Ingresses whose Rollout is
//! gone reads it to reset the actions that Rollout left behind.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::go_json;
use crate::RouterError;

/// The annotation holding the map.
pub const MANAGED_ANNOTATIONS: &str = "rollouts.argoproj.io/managed-alb-annotations";

/// Keys per Rollout. Sorted by name, as Go writes a map; an entry written as `null` stays
/// `null`.
type Managed = BTreeMap<String, Option<Vec<String>>>;

fn parse(annotations: &Map<String, Value>, ingress: &str) -> Result<Managed, RouterError> {
    let text = match annotations.get(MANAGED_ANNOTATIONS) {
        None | Some(Value::Null) => return Ok(Managed::new()),
        Some(Value::String(s)) if s.is_empty() => return Ok(Managed::new()),
        Some(Value::String(s)) => s,
        Some(_) => return Err(unreadable(ingress, "not a string")),
    };
    serde_json::from_str(text).map_err(|e| unreadable(ingress, &e.to_string()))
}

fn unreadable(ingress: &str, why: &str) -> RouterError {
    RouterError::new(format!(
        "ingress `{ingress}` has an unreadable `{MANAGED_ANNOTATIONS}` annotation: {why}"
    ))
}

fn write(annotations: &mut Map<String, Value>, managed: &Managed) {
    annotations.insert(
        MANAGED_ANNOTATIONS.into(),
        go_json::to_string(managed).into(),
    );
}

/// Records `keys` as owned by `rollout`: appended to its list when not in it yet.
pub(crate) fn add(
    annotations: &mut Map<String, Value>,
    rollout: &str,
    keys: &[&str],
    ingress: &str,
) -> Result<(), RouterError> {
    let mut managed = parse(annotations, ingress)?;
    let list = managed
        .entry(rollout.to_string())
        .or_default()
        .get_or_insert_with(Vec::new);
    for key in keys {
        if !list.iter().any(|k| k == key) {
            list.push((*key).to_string());
        }
    }
    write(annotations, &managed);
    Ok(())
}

/// Drops `keys` from `rollout`'s list. The entry stays, empty if need be, as Argo leaves it;
/// when the Rollout has no entry the annotation is not touched.
pub(crate) fn remove(
    annotations: &mut Map<String, Value>,
    rollout: &str,
    keys: &[&str],
    ingress: &str,
) -> Result<(), RouterError> {
    let mut managed = parse(annotations, ingress)?;
    let Some(entry) = managed.get_mut(rollout) else {
        return Ok(());
    };
    let list = entry.get_or_insert_with(Vec::new);
    list.retain(|k| !keys.contains(&k.as_str()));
    write(annotations, &managed);
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn with(value: Value) -> Map<String, Value> {
        Map::from_iter([(MANAGED_ANNOTATIONS.to_string(), value)])
    }

    fn text(annotations: &Map<String, Value>) -> Option<&str> {
        annotations.get(MANAGED_ANNOTATIONS).and_then(Value::as_str)
    }

    #[test]
    fn adding_keys() {
        let cases = [
            (Map::new(), vec!["k1"], r#"{"ro":["k1"]}"#),
            (with(json!("")), vec!["k1"], r#"{"ro":["k1"]}"#),
            (
                with(json!(r#"{"ro":["k1"]}"#)),
                vec!["k1", "k2"],
                r#"{"ro":["k1","k2"]}"#,
            ),
            // Other Rollouts' entries are kept, the map is written sorted and compact.
            (
                with(json!(r#"{ "zz": ["a"], "other": null }"#)),
                vec!["k1"],
                r#"{"other":null,"ro":["k1"],"zz":["a"]}"#,
            ),
            (
                with(json!(r#"{"ro":null}"#)),
                vec!["k1"],
                r#"{"ro":["k1"]}"#,
            ),
        ];
        for (mut annotations, keys, want) in cases {
            add(&mut annotations, "ro", &keys, "ing").unwrap();
            assert_eq!(text(&annotations), Some(want), "{keys:?}");
        }
    }

    #[test]
    fn removing_keys() {
        let cases = [
            (
                with(json!(r#"{"ro":["a","k1","k2"],"x":["k1"]}"#)),
                Some(r#"{"ro":["a"],"x":["k1"]}"#),
            ),
            (with(json!(r#"{"ro":["k1"]}"#)), Some(r#"{"ro":[]}"#)),
            (with(json!(r#"{"ro":null}"#)), Some(r#"{"ro":[]}"#)),
            // No entry for this Rollout: left exactly as written.
            (
                with(json!(r#"{ "x": ["k1"] }"#)),
                Some(r#"{ "x": ["k1"] }"#),
            ),
            (Map::new(), None),
        ];
        for (mut annotations, want) in cases {
            remove(&mut annotations, "ro", &["k1", "k2"], "ing").unwrap();
            assert_eq!(text(&annotations), want);
        }
    }

    #[test]
    fn unreadable_map_is_an_error() {
        for value in [json!("ro:alb.ingress.kubernetes.io/actions.svc"), json!(3)] {
            let mut annotations = with(value);
            let err = add(&mut annotations, "ro", &["k"], "ing").unwrap_err();
            assert!(
                err.0.starts_with(
                    "ingress `ing` has an unreadable `rollouts.argoproj.io/managed-alb-annotations` annotation: "
                ),
                "{err}"
            );
            assert!(remove(&mut annotations, "ro", &["k"], "ing").is_err());
        }
    }
}
