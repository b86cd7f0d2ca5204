//! The canary Ingress as it should be, built from the stable Ingress: same TLS, class and
//! rules, but only the rules that route to the stable Service, with those paths sent to the
//! canary Service, plus the ingress-nginx canary annotations.

use serde_json::{Map, Value, json};
use sluice_api::rollout::NginxTrafficRouting;

use super::{annotation_prefix, canary_ingress_name, owner};
use crate::{Desired, RouterError};

/// The class annotation ingress controllers read before `spec.ingressClassName` existed; the
/// canary must be picked up by the same controller as the stable Ingress.
const INGRESS_CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";

/// The whole canary Ingress for `stable` at `desired.weight`. `max_traffic_weight` is the
/// Rollout's `maxTrafficWeight` as written: only when it is set does the Ingress carry
/// `canary-weight-total`.
///
/// The apiVersion and kind are the stable Ingress's (`networking.k8s.io/v1` when absent), and
/// paths are recognised in both the `networking.k8s.io/v1` shape (`backend.service.name`) and
/// the older `extensions/v1beta1` one (`backend.serviceName`).
pub fn desired_canary_ingress(
    stable: &Value,
    cfg: &NginxTrafficRouting,
    max_traffic_weight: Option<i32>,
    desired: &Desired,
) -> Result<Value, RouterError> {
    let stable_name = stable
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .ok_or_else(|| RouterError::new("stable ingress has no metadata.name"))?;
    let rules = canary_rules(stable, stable_name, desired)?;

    let mut spec = Map::new();
    if let Some(tls) = stable
        .pointer("/spec/tls")
        .filter(|t| t.as_array().is_some_and(|a| !a.is_empty()))
    {
        spec.insert("tls".into(), tls.clone());
    }
    if let Some(class) = non_empty_str(stable.pointer("/spec/ingressClassName")) {
        spec.insert("ingressClassName".into(), class.into());
    }
    spec.insert("rules".into(), Value::Array(rules));

    let prefix = annotation_prefix(cfg);
    let mut annotations = Map::new();
    if let Some(class) = stable
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(INGRESS_CLASS_ANNOTATION))
        .and_then(Value::as_str)
    {
        annotations.insert(INGRESS_CLASS_ANNOTATION.into(), class.into());
    }
    for (key, value) in cfg.additional_ingress_annotations.iter().flatten() {
        let key = if key.starts_with(prefix) {
            key.clone()
        } else {
            format!("{prefix}/{key}")
        };
        annotations.insert(key, value.as_str().into());
    }
    for (key, value) in cfg.canary_ingress_annotations.iter().flatten() {
        annotations.insert(key.clone(), value.as_str().into());
    }
    // Set last: the weight is the controller's, whatever the user annotations say.
    annotations.insert(format!("{prefix}/canary"), "true".into());
    annotations.insert(
        format!("{prefix}/canary-weight"),
        desired.weight.to_string().into(),
    );
    if let Some(total) = max_traffic_weight {
        annotations.insert(
            format!("{prefix}/canary-weight-total"),
            total.to_string().into(),
        );
    }

    Ok(json!({
        "apiVersion": non_empty_str(stable.get("apiVersion")).unwrap_or("networking.k8s.io/v1"),
        "kind": non_empty_str(stable.get("kind")).unwrap_or("Ingress"),
        "metadata": {
            "name": canary_ingress_name(&desired.rollout, stable_name),
            "namespace": desired.namespace,
            "ownerReferences": [owner::controller_ref(desired)],
            "annotations": annotations,
        },
        "spec": spec,
    }))
}

fn non_empty_str(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// The stable rules that have a path to the stable Service, with those paths sent to the
/// canary Service. Other paths of such a rule are kept as they are, so the canary Ingress
/// matches exactly the requests the stable one does for that host.
fn canary_rules(
    stable: &Value,
    stable_name: &str,
    desired: &Desired,
) -> Result<Vec<Value>, RouterError> {
    let malformed =
        |what: &str| RouterError::new(format!("ingress `{stable_name}` has malformed {what}"));
    let rules = match stable.pointer("/spec/rules") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(rules)) => rules.as_slice(),
        Some(_) => return Err(malformed("spec.rules")),
    };
    let mut canary = Vec::new();
    for rule in rules {
        let mut rule = rule.clone();
        let paths = match rule.pointer_mut("/http/paths") {
            None | Some(Value::Null) => continue,
            Some(Value::Array(paths)) => paths,
            Some(_) => return Err(malformed("spec.rules[].http.paths")),
        };
        let mut uses_stable = false;
        for path in paths.iter_mut() {
            if let Some(service) = backend_service_mut(path)
                && service.as_str() == Some(desired.stable_service.as_str())
            {
                *service = desired.canary_service.as_str().into();
                uses_stable = true;
            }
        }
        if uses_stable {
            canary.push(rule);
        }
    }
    if canary.is_empty() {
        return Err(RouterError::new(format!(
            "ingress `{stable_name}` has no rules using service {} backend",
            desired.stable_service
        )));
    }
    Ok(canary)
}

/// The backend Service name of an Ingress path, in either API version's shape.
fn backend_service_mut(path: &mut Value) -> Option<&mut Value> {
    let backend = path.get_mut("backend")?;
    if backend.get("service").is_some() {
        backend.pointer_mut("/service/name")
    } else {
        backend.get_mut("serviceName")
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::nginx::fixtures::{cfg, desired, stable_ingress};

    fn map(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, String>> {
        Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn corpus_stable_ingress_gives_the_whole_canary_ingress() {
        let got = desired_canary_ingress(&stable_ingress(), &cfg(), None, &desired()).unwrap();
        assert_eq!(
            got,
            json!({
                "apiVersion": "networking.k8s.io/v1",
                "kind": "Ingress",
                "metadata": {
                    "name": "web-web-ingress-canary",
                    "namespace": "shop",
                    "ownerReferences": [{
                        "apiVersion": "argoproj.io/v1alpha1",
                        "kind": "Rollout",
                        "name": "web",
                        "uid": "uid-web",
                        "controller": true,
                        "blockOwnerDeletion": true
                    }],
                    "annotations": {
                        "kubernetes.io/ingress.class": "nginx",
                        "nginx.ingress.kubernetes.io/canary": "true",
                        "nginx.ingress.kubernetes.io/canary-weight": "10"
                    }
                },
                "spec": {
                    "rules": [{
                        "http": {"paths": [{
                            "path": "/*",
                            "pathType": "Prefix",
                            "backend": {"service": {"name": "web-canary", "port": {"number": 80}}}
                        }]}
                    }]
                }
            })
        );
    }

    #[test]
    fn only_rules_with_a_stable_backend_are_copied() {
        let stable = json!({
            "metadata": {"name": "web-ingress"},
            "spec": {
                "ingressClassName": "nginx",
                "tls": [{"hosts": ["web.example"], "secretName": "web-tls"}],
                "defaultBackend": {"service": {"name": "web-stable", "port": {"number": 80}}},
                "rules": [
                    {"host": "other.example", "http": {"paths": [
                        {"path": "/", "pathType": "Prefix",
                         "backend": {"service": {"name": "other", "port": {"number": 80}}}}
                    ]}},
                    {"host": "web.example", "http": {"paths": [
                        {"path": "/api", "pathType": "Prefix",
                         "backend": {"service": {"name": "web-stable", "port": {"name": "http"}}}},
                        {"path": "/static", "pathType": "Prefix",
                         "backend": {"service": {"name": "assets", "port": {"number": 80}}}}
                    ]}},
                    {"host": "no-http.example"}
                ]
            }
        });
        let got = desired_canary_ingress(&stable, &cfg(), None, &desired()).unwrap();
        assert_eq!(got["apiVersion"], "networking.k8s.io/v1");
        assert_eq!(got["kind"], "Ingress");
        assert_eq!(
            got["spec"],
            json!({
                "tls": [{"hosts": ["web.example"], "secretName": "web-tls"}],
                "ingressClassName": "nginx",
                "rules": [
                    {"host": "web.example", "http": {"paths": [
                        {"path": "/api", "pathType": "Prefix",
                         "backend": {"service": {"name": "web-canary", "port": {"name": "http"}}}},
                        {"path": "/static", "pathType": "Prefix",
                         "backend": {"service": {"name": "assets", "port": {"number": 80}}}}
                    ]}}
                ]
            })
        );
        assert!(
            got["metadata"]["annotations"]
                .get("kubernetes.io/ingress.class")
                .is_none()
        );
    }

    #[test]
    fn extensions_v1beta1_backends() {
        let stable = json!({
            "apiVersion": "extensions/v1beta1",
            "kind": "Ingress",
            "metadata": {"name": "web-ingress"},
            "spec": {"rules": [{"http": {"paths": [
                {"path": "/", "backend": {"serviceName": "web-stable", "servicePort": 80}}
            ]}}]}
        });
        let got = desired_canary_ingress(&stable, &cfg(), None, &desired()).unwrap();
        assert_eq!(got["apiVersion"], "extensions/v1beta1");
        assert_eq!(
            got["spec"]["rules"][0]["http"]["paths"][0]["backend"],
            json!({"serviceName": "web-canary", "servicePort": 80})
        );
    }

    #[test]
    fn no_rule_with_the_stable_service_is_an_error() {
        let mut stable = stable_ingress();
        stable["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"] =
            "other".into();
        let cases = [
            (
                stable,
                "ingress `web-ingress` has no rules using service web-stable backend",
            ),
            (
                json!({"metadata": {"name": "web-ingress"}}),
                "ingress `web-ingress` has no rules using service web-stable backend",
            ),
            (
                json!({"metadata": {"name": "web-ingress"}, "spec": {"rules": {}}}),
                "ingress `web-ingress` has malformed spec.rules",
            ),
            (
                json!({"metadata": {"name": "web-ingress"}, "spec": {"rules": [{"http": {"paths": 3}}]}}),
                "ingress `web-ingress` has malformed spec.rules[].http.paths",
            ),
            (json!({"spec": {}}), "stable ingress has no metadata.name"),
            (json!("junk"), "stable ingress has no metadata.name"),
        ];
        for (stable, want) in cases {
            let got = desired_canary_ingress(&stable, &cfg(), None, &desired());
            assert_eq!(got, Err(RouterError::new(want)), "{stable}");
        }
    }

    #[test]
    fn annotations_per_configuration() {
        struct Case {
            cfg: NginxTrafficRouting,
            max: Option<i32>,
            want: Value,
        }
        let cases = [
            Case {
                cfg: NginxTrafficRouting {
                    annotation_prefix: Some("custom.nginx.org".into()),
                    ..cfg()
                },
                max: None,
                want: json!({
                    "kubernetes.io/ingress.class": "nginx",
                    "custom.nginx.org/canary": "true",
                    "custom.nginx.org/canary-weight": "10"
                }),
            },
            Case {
                // Keys without the prefix get it; keys with it are kept as they are.
                cfg: NginxTrafficRouting {
                    additional_ingress_annotations: map(&[
                        ("canary-by-header", "X-Canary"),
                        ("nginx.ingress.kubernetes.io/canary-by-cookie", "canary"),
                    ]),
                    ..cfg()
                },
                max: None,
                want: json!({
                    "kubernetes.io/ingress.class": "nginx",
                    "nginx.ingress.kubernetes.io/canary-by-header": "X-Canary",
                    "nginx.ingress.kubernetes.io/canary-by-cookie": "canary",
                    "nginx.ingress.kubernetes.io/canary": "true",
                    "nginx.ingress.kubernetes.io/canary-weight": "10"
                }),
            },
            Case {
                // canaryIngressAnnotations are copied without a prefix.
                cfg: NginxTrafficRouting {
                    canary_ingress_annotations: map(&[("my-team.io/owner", "shop")]),
                    ..cfg()
                },
                max: None,
                want: json!({
                    "kubernetes.io/ingress.class": "nginx",
                    "my-team.io/owner": "shop",
                    "nginx.ingress.kubernetes.io/canary": "true",
                    "nginx.ingress.kubernetes.io/canary-weight": "10"
                }),
            },
            Case {
                // The weight annotations win over user ones.
                cfg: NginxTrafficRouting {
                    additional_ingress_annotations: map(&[("canary-weight", "99")]),
                    canary_ingress_annotations: map(&[(
                        "nginx.ingress.kubernetes.io/canary",
                        "false",
                    )]),
                    ..cfg()
                },
                max: None,
                want: json!({
                    "kubernetes.io/ingress.class": "nginx",
                    "nginx.ingress.kubernetes.io/canary": "true",
                    "nginx.ingress.kubernetes.io/canary-weight": "10"
                }),
            },
            Case {
                cfg: cfg(),
                max: Some(1000),
                want: json!({
                    "kubernetes.io/ingress.class": "nginx",
                    "nginx.ingress.kubernetes.io/canary": "true",
                    "nginx.ingress.kubernetes.io/canary-weight": "10",
                    "nginx.ingress.kubernetes.io/canary-weight-total": "1000"
                }),
            },
        ];
        for case in cases {
            let got =
                desired_canary_ingress(&stable_ingress(), &case.cfg, case.max, &desired()).unwrap();
            assert_eq!(got["metadata"]["annotations"], case.want, "{:?}", case.cfg);
            assert!(got["metadata"].get("labels").is_none());
        }
    }
}
