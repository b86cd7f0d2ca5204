//! The entries of `spec.weighted.services`, found by Service name with Argo's errors.

use serde_json::Value;

use crate::RouterError;

/// `spec.weighted.services` of a TraefikService.
pub(super) fn weighted_services(ts: &Value) -> Result<&[Value], RouterError> {
    match ts.pointer("/spec/weighted/services") {
        None | Some(Value::Null) => Err(RouterError::new(
            "spec.weighted.services was not found in traefik service manifest",
        )),
        Some(Value::Array(services)) => Ok(services),
        Some(_) => Err(RouterError::new(
            "spec.weighted.services is not a list in traefik service manifest",
        )),
    }
}

/// The index of the entry named `service`. Entries are read in order up to the match, so an
/// entry without a name before it is an error, as in Argo; entries after it are not looked at.
pub(super) fn position(services: &[Value], service: &str) -> Result<Option<usize>, RouterError> {
    for (i, entry) in services.iter().enumerate() {
        let Some(fields) = entry.as_object() else {
            return Err(RouterError::new(format!(
                "spec.weighted.services[{i}] is not an object in traefik service manifest"
            )));
        };
        match fields.get("name").and_then(Value::as_str) {
            Some(name) if name == service => return Ok(Some(i)),
            Some(_) => {}
            None => return Err(RouterError::new("name field was not found in service")),
        }
    }
    Ok(None)
}

/// The index of the canary entry, then of the stable one; Argo's message when either is
/// missing.
pub(super) fn canary_and_stable(
    services: &[Value],
    canary: &str,
    stable: &str,
) -> Result<(usize, usize), RouterError> {
    let canary = position(services, canary)?
        .ok_or_else(|| RouterError::new("traefik canary service was not found"))?;
    let stable = position(services, stable)?
        .ok_or_else(|| RouterError::new("traefik stable service was not found"))?;
    Ok((canary, stable))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn services_list() {
        let ok = json!({"spec": {"weighted": {"services": [{"name": "a"}]}}});
        assert_eq!(weighted_services(&ok).map(<[Value]>::len), Ok(1));
        let not_found = Err(RouterError::new(
            "spec.weighted.services was not found in traefik service manifest",
        ));
        for ts in [
            json!({}),
            json!({"spec": {"weighted": {}}}),
            json!({"spec": {"weighted": {"services": null}}}),
            json!({"spec": {"mirroring": {"name": "a"}}}),
        ] {
            assert_eq!(
                weighted_services(&ts).map(<[Value]>::len),
                not_found,
                "{ts}"
            );
        }
        let bad = json!({"spec": {"weighted": {"services": {"name": "a"}}}});
        assert_eq!(
            weighted_services(&bad).map(<[Value]>::len),
            Err(RouterError::new(
                "spec.weighted.services is not a list in traefik service manifest"
            ))
        );
    }

    #[test]
    fn entries_by_name() {
        let services = [
            json!({"name": "web-stable"}),
            json!({"name": "web-canary"}),
            json!({"port": 80}),
        ];
        let cases = [
            ("web-stable", Ok(Some(0))),
            ("web-canary", Ok(Some(1))),
            (
                "other",
                Err(RouterError::new("name field was not found in service")),
            ),
        ];
        for (name, want) in cases {
            assert_eq!(position(&services, name), want, "{name}");
        }
        assert_eq!(position(&services[..2], "other"), Ok(None));
        assert_eq!(
            position(&[json!("web-stable")], "web-stable"),
            Err(RouterError::new(
                "spec.weighted.services[0] is not an object in traefik service manifest"
            ))
        );
    }

    #[test]
    fn canary_is_looked_for_first() {
        let both = [json!({"name": "s"}), json!({"name": "c"})];
        assert_eq!(canary_and_stable(&both, "c", "s"), Ok((1, 0)));
        let cases = [
            (vec![], "traefik canary service was not found"),
            (
                vec![json!({"name": "s"})],
                "traefik canary service was not found",
            ),
            (
                vec![json!({"name": "c"})],
                "traefik stable service was not found",
            ),
        ];
        for (services, want) in cases {
            assert_eq!(
                canary_and_stable(&services, "c", "s"),
                Err(RouterError::new(want)),
                "{services:?}"
            );
        }
    }
}
