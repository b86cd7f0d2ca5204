//! AnalysisRun arguments: resolving their values and substituting `{{args.<name>}}` in metrics.

use std::collections::BTreeMap;

use sluice_api::analysis::Metric;
use sluice_api::analysis::placeholders::{self, PlaceholderError};
use sluice_api::common::Argument;

use crate::redact::Redactor;
use crate::secrets::SecretSource;

/// Why arguments could not be resolved or substituted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ArgsError {
    #[error("an argument has no name")]
    Unnamed,
    #[error("argument \"{0}\" was not supplied")]
    NotSupplied(String),
    #[error(
        "argument \"{name}\": valueFrom.fieldRef ({path}) is resolved when the AnalysisRun is \
         created, not while it runs"
    )]
    FieldRef { name: String, path: String },
    #[error("argument \"{name}\": secretKeyRef needs a name and a key")]
    IncompleteSecretRef { name: String },
    #[error("argument \"{name}\": secret \"{secret}\" not found in namespace \"{namespace}\"")]
    SecretNotFound {
        name: String,
        secret: String,
        namespace: String,
    },
    #[error("argument \"{name}\": key \"{key}\" does not exist in secret \"{secret}\"")]
    SecretKeyNotFound {
        name: String,
        secret: String,
        key: String,
    },
    #[error("argument \"{name}\": {message}")]
    SecretLookup { name: String, message: String },
    #[error("failed to resolve {{{{{0}}}}}")]
    Unresolved(String),
    #[error("cannot find end tag \"}}}}\" after \"{0}\"")]
    Unterminated(String),
    #[error("metric {0}")]
    Metric(String),
}

/// Argument values by name, and a redactor for those that came from Secrets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResolvedArgs {
    values: BTreeMap<String, String>,
    redactor: Redactor,
}

impl ResolvedArgs {
    /// Plain values (no secrets), e.g. for tests or already-resolved runs.
    pub fn from_values<I, K, V>(values: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        Self {
            values: values
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            redactor: Redactor::default(),
        }
    }

    /// The value of an argument.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// All values by name.
    pub fn values(&self) -> &BTreeMap<String, String> {
        &self.values
    }

    /// Redacts the values that came from Secrets.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }
}

/// Resolves a run's `args`: a `value` is taken as is, a `valueFrom.secretKeyRef` is read from
/// `namespace` (the AnalysisRun's) and remembered for redaction. Every argument needs a value,
/// used or not, as in Argo.
pub async fn resolve_args(
    args: &[Argument],
    namespace: &str,
    secrets: &dyn SecretSource,
) -> Result<ResolvedArgs, ArgsError> {
    let mut resolved = ResolvedArgs::default();
    for arg in args {
        let name = arg.name.clone().ok_or(ArgsError::Unnamed)?;
        let value = match (&arg.value, &arg.value_from) {
            (Some(value), _) => value.clone(),
            (None, Some(from)) => {
                if let Some(secret_ref) = &from.secret_key_ref {
                    let (Some(secret), Some(key)) = (&secret_ref.name, &secret_ref.key) else {
                        return Err(ArgsError::IncompleteSecretRef { name });
                    };
                    let value = read_secret(&name, namespace, secret, key, secrets).await?;
                    resolved.redactor.add(&value);
                    value
                } else if let Some(field_ref) = &from.field_ref {
                    return Err(ArgsError::FieldRef {
                        name,
                        path: field_ref.field_path.clone().unwrap_or_default(),
                    });
                } else {
                    return Err(ArgsError::NotSupplied(name));
                }
            }
            (None, None) => return Err(ArgsError::NotSupplied(name)),
        };
        resolved.values.insert(name, value);
    }
    Ok(resolved)
}

async fn read_secret(
    arg: &str,
    namespace: &str,
    secret: &str,
    key: &str,
    secrets: &dyn SecretSource,
) -> Result<String, ArgsError> {
    let data = secrets
        .get(namespace, secret)
        .await
        .map_err(|err| ArgsError::SecretLookup {
            name: arg.to_owned(),
            message: err.0,
        })?
        .ok_or_else(|| ArgsError::SecretNotFound {
            name: arg.to_owned(),
            secret: secret.to_owned(),
            namespace: namespace.to_owned(),
        })?;
    data.get(key)
        .cloned()
        .ok_or_else(|| ArgsError::SecretKeyNotFound {
            name: arg.to_owned(),
            secret: secret.to_owned(),
            key: key.to_owned(),
        })
}

/// The metric with `{{args.<name>}}` replaced in every string (and map key) of its JSON form.
/// A tag that names no argument is an error, as in Argo.
pub fn resolve_metric(metric: &Metric, args: &ResolvedArgs) -> Result<Metric, ArgsError> {
    let json = serde_json::to_value(metric).map_err(|e| ArgsError::Metric(e.to_string()))?;
    let json = substitute_json(json, &args.values)?;
    serde_json::from_value(json).map_err(|e| ArgsError::Metric(format!("after substitution: {e}")))
}

fn substitute_json(
    value: serde_json::Value,
    args: &BTreeMap<String, String>,
) -> Result<serde_json::Value, ArgsError> {
    use serde_json::Value;
    Ok(match value {
        Value::String(s) => Value::String(substitute(&s, args)?),
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(|v| substitute_json(v, args))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => {
            let mut out = serde_json::Map::with_capacity(map.len());
            for (k, v) in map {
                out.insert(substitute(&k, args)?, substitute_json(v, args)?);
            }
            Value::Object(out)
        }
        other => other,
    })
}

/// Replaces each `{{ tag }}` in `template`; `args.<name>` tags take the argument's value.
/// Whitespace inside the braces is ignored (`{{ args.x }}` works).
pub fn substitute(template: &str, args: &BTreeMap<String, String>) -> Result<String, ArgsError> {
    placeholders::substitute(template, |name| args.get(name).map(String::as_str)).map_err(|e| {
        match e {
            PlaceholderError::Unterminated { snippet } => ArgsError::Unterminated(snippet),
            PlaceholderError::Unresolved { tag } => ArgsError::Unresolved(tag),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::MemorySecrets;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use serde_json::json;
    use sluice_api::common::{FieldRef, SecretKeyRef, ValueFrom};

    fn arg(name: &str, value: &str) -> Argument {
        Argument {
            name: Some(name.into()),
            value: Some(value.into()),
            value_from: None,
        }
    }

    fn secret_arg(name: &str, secret: &str, key: &str) -> Argument {
        Argument {
            name: Some(name.into()),
            value: None,
            value_from: Some(ValueFrom {
                secret_key_ref: Some(SecretKeyRef {
                    name: Some(secret.into()),
                    key: Some(key.into()),
                }),
                field_ref: None,
            }),
        }
    }

    #[tokio::test]
    async fn values_and_secrets() {
        let secrets = MemorySecrets::new();
        secrets.insert(
            "ns",
            "example-secret",
            [("secretUrl", "https://x/token-123")],
        );
        secrets.insert("other", "example-secret", [("secretUrl", "wrong")]);
        let args = [
            arg("interval", "5s"),
            arg("empty", ""),
            secret_arg("secret-url", "example-secret", "secretUrl"),
        ];
        let resolved = resolve_args(&args, "ns", &secrets).await.unwrap();
        assert_eq!(resolved.get("interval"), Some("5s"));
        assert_eq!(resolved.get("empty"), Some(""));
        assert_eq!(resolved.get("secret-url"), Some("https://x/token-123"));
        assert_eq!(
            resolved.redactor().redact("GET https://x/token-123"),
            "GET *****"
        );
        assert_eq!(resolved.redactor().redact("5s"), "5s");
    }

    #[tokio::test]
    async fn missing_values_are_errors() {
        let secrets = MemorySecrets::new();
        secrets.insert("ns", "s", [("k", "v")]);
        let unsupplied = Argument {
            name: Some("x".into()),
            ..Default::default()
        };
        let err = resolve_args(&[unsupplied], "ns", &secrets)
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "argument \"x\" was not supplied");

        let err = resolve_args(&[secret_arg("a", "nope", "k")], "ns", &secrets)
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "argument \"a\": secret \"nope\" not found in namespace \"ns\""
        );
        let err = resolve_args(&[secret_arg("a", "s", "nokey")], "ns", &secrets)
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "argument \"a\": key \"nokey\" does not exist in secret \"s\""
        );

        let field = Argument {
            name: Some("img".into()),
            value: None,
            value_from: Some(ValueFrom {
                secret_key_ref: None,
                field_ref: Some(FieldRef {
                    field_path: Some("metadata.labels['app']".into()),
                }),
            }),
        };
        let err = resolve_args(&[field], "ns", &secrets).await.unwrap_err();
        assert!(matches!(err, ArgsError::FieldRef { .. }), "{err}");
        assert!(err.to_string().contains("metadata.labels['app']"));
    }

    #[test]
    fn substitute_tags() {
        let args = BTreeMap::from([
            ("a".to_owned(), "1".to_owned()),
            ("b-c".to_owned(), "x\"y\n".to_owned()),
        ]);
        assert_eq!(substitute("{{args.a}}", &args).unwrap(), "1");
        assert_eq!(
            substitute("p {{ args.a }}-{{args.b-c}} q", &args).unwrap(),
            "p 1-x\"y\n q"
        );
        assert_eq!(substitute("no tags {", &args).unwrap(), "no tags {");
        assert_eq!(
            substitute("{{args.zz}}", &args).unwrap_err().to_string(),
            "failed to resolve {{args.zz}}"
        );
        assert_eq!(
            substitute("{{inputs.a}}", &args).unwrap_err(),
            ArgsError::Unresolved("inputs.a".into())
        );
        assert!(matches!(
            substitute("x {{args.a", &args),
            Err(ArgsError::Unterminated(_))
        ));
    }

    #[test]
    fn resolve_metric_everywhere() {
        let metric: Metric = serde_json::from_value(json!({
            "name": "webmetric",
            "count": "{{args.analysis-runs}}",
            "interval": "{{args.analysis-interval}}",
            "failureLimit": "{{args.failure-limit}}",
            "successCondition": "result == \"{{args.success-condition}}\"",
            "provider": {
                "job": {
                    "metadata": {"labels": {"{{args.key}}": "{{ args.rev }}"}},
                    "spec": {"template": {"spec": {"containers": [{
                        "name": "c",
                        "args": ["sleep {{args.duration}} && exit {{args.exit-code}}"]
                    }], "restartPolicy": "Never"}}}
                }
            }
        }))
        .unwrap();
        let args = ResolvedArgs::from_values([
            ("analysis-runs", "2"),
            ("analysis-interval", "5s"),
            ("failure-limit", "1"),
            ("success-condition", "It \"worked\"!"),
            ("key", "team"),
            ("rev", "abc"),
            ("duration", "3"),
            ("exit-code", "0"),
        ]);
        let resolved = resolve_metric(&metric, &args).unwrap();
        assert_eq!(resolved.count, Some(IntOrString::String("2".into())));
        assert_eq!(resolved.interval.as_deref(), Some("5s"));
        assert_eq!(
            resolved.success_condition.as_deref(),
            Some("result == \"It \"worked\"!\"")
        );
        let json = serde_json::to_value(&resolved).unwrap();
        assert_eq!(
            json["provider"]["job"]["metadata"]["labels"],
            json!({"team": "abc"})
        );
        assert_eq!(
            json["provider"]["job"]["spec"]["template"]["spec"]["containers"][0]["args"][0],
            "sleep 3 && exit 0"
        );

        let err = resolve_metric(&metric, &ResolvedArgs::default()).unwrap_err();
        assert!(matches!(err, ArgsError::Unresolved(_)), "{err}");
    }
}
