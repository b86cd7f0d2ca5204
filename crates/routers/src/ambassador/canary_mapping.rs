//! The canary copy of a base Mapping, as created.

use serde_json::{Map, Value, json};

use super::{canary_mapping_name, name_of};
use crate::kinds::RouterKind;
use crate::{Desired, RouterError};

/// The base Mapping copied as `<base>-canary`: `metadata` is only the name and the base's
/// namespace (no labels, annotations or owner reference, as Argo creates it), `spec` is the
/// base's with `service` pointed at the canary Service (the first occurrence of the stable
/// Service's name replaced, so that a port or scheme around it is kept) and `weight` set.
/// The base's `status` is not copied.
///
/// A base whose `service` does not mention the stable Service is copied unchanged, as in
/// Argo: the canary Mapping then routes to the same backend as the base.
pub(super) fn canary_mapping(
    base: &Value,
    kind: RouterKind,
    api_version: &str,
    desired: &Desired,
) -> Result<Value, RouterError> {
    if !matches!(
        kind,
        RouterKind::AmbassadorMapping | RouterKind::AmbassadorXMapping
    ) {
        return Err(RouterError::new(format!(
            "{} is not an Ambassador mapping kind",
            kind.kind()
        )));
    }
    let base_name = name_of(base);
    let mut spec: Map<String, Value> = match base.get("spec") {
        Some(Value::Object(spec)) => spec.clone(),
        _ => {
            return Err(RouterError::new(format!(
                "Ambassador mapping {base_name:?} has no spec"
            )));
        }
    };
    let Some(service) = spec.get("service").and_then(Value::as_str) else {
        return Err(RouterError::new(format!(
            "Ambassador mapping {base_name:?} has no spec.service"
        )));
    };
    let service = if desired.stable_service.is_empty() {
        service.to_string()
    } else {
        service.replacen(&desired.stable_service, &desired.canary_service, 1)
    };
    spec.insert("service".into(), service.into());
    spec.insert("weight".into(), desired.weight.into());
    let namespace = base
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|ns| !ns.is_empty())
        .unwrap_or(&desired.namespace);
    Ok(json!({
        "apiVersion": api_version,
        "kind": kind.kind(),
        "metadata": {
            "name": canary_mapping_name(base_name),
            "namespace": namespace,
        },
        "spec": spec,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ambassador::fixtures::{base_mapping, desired};

    #[test]
    fn copy_of_the_corpus_mapping() {
        let got = canary_mapping(
            &base_mapping(),
            RouterKind::AmbassadorMapping,
            "getambassador.io/v2",
            &desired(30),
        );
        let want = json!({
            "apiVersion": "getambassador.io/v2",
            "kind": "Mapping",
            "metadata": {"name": "echo-canary", "namespace": "demo"},
            "spec": {
                "resolver": "endpoint",
                "prefix": "/echo",
                "rewrite": "/echo",
                "service": "echo-canary:80",
                "weight": 30
            }
        });
        assert_eq!(got, Ok(want));
    }

    #[test]
    fn emissary_kind_and_version() {
        let got = canary_mapping(
            &base_mapping(),
            RouterKind::AmbassadorXMapping,
            "x.getambassador.io/v3alpha1",
            &desired(30),
        )
        .unwrap();
        assert_eq!(got["apiVersion"], "x.getambassador.io/v3alpha1");
        assert_eq!(got["kind"], "AmbassadorMapping");
    }

    #[test]
    fn service_strings() {
        let cases = [
            ("echo-stable", "echo-canary"),
            ("echo-stable:80", "echo-canary:80"),
            (
                "https://echo-stable.demo:443",
                "https://echo-canary.demo:443",
            ),
            // Only the first occurrence, as Argo replaces it.
            ("echo-stable.echo-stable", "echo-canary.echo-stable"),
            ("other:80", "other:80"),
        ];
        for (service, want) in cases {
            let mut base = base_mapping();
            base["spec"]["service"] = service.into();
            let got = canary_mapping(
                &base,
                RouterKind::AmbassadorMapping,
                "getambassador.io/v2",
                &desired(5),
            )
            .unwrap();
            assert_eq!(got["spec"]["service"], want, "{service}");
        }
    }

    #[test]
    fn namespace_defaults_to_the_rollouts() {
        let mut base = base_mapping();
        base["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("namespace");
        let got = canary_mapping(&base, RouterKind::AmbassadorMapping, "v", &desired(5)).unwrap();
        assert_eq!(got["metadata"]["namespace"], "demo");
    }

    #[test]
    fn errors() {
        let mut no_service = base_mapping();
        no_service["spec"]
            .as_object_mut()
            .unwrap()
            .remove("service");
        let cases = [
            (
                base_mapping(),
                RouterKind::Ingress,
                "Ingress is not an Ambassador mapping kind",
            ),
            (
                json!({"metadata": {"name": "echo"}}),
                RouterKind::AmbassadorMapping,
                "Ambassador mapping \"echo\" has no spec",
            ),
            (
                no_service,
                RouterKind::AmbassadorMapping,
                "Ambassador mapping \"echo\" has no spec.service",
            ),
        ];
        for (base, kind, want) in cases {
            assert_eq!(
                canary_mapping(&base, kind, "v", &desired(5)),
                Err(RouterError::new(want)),
                "{base}"
            );
        }
    }
}
