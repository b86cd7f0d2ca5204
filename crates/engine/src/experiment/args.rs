//! The arguments an Experiment passes to its AnalysisRuns. Only literal values travel (a
//! `valueFrom` on an Experiment argument is dropped; a template's own `valueFrom` still
//! applies), and each value may name facts of the Experiment between `{{` and `}}`:
//! `templates.<t>.podTemplateHash`, `templates.<t>.replicaset.name`, `experiment.availableAt`
//! and `experiment.finishedAt` (RFC 3339). Anything else between the braces is an error, as
//! in Argo, so a typo fails the run instead of measuring the wrong thing.

use std::collections::BTreeMap;

use jiff::Timestamp;
use sluice_api::common::Argument;

/// The facts placeholders can name.
#[derive(Debug, Clone, Default)]
pub struct ArgFacts {
    /// Template name → (pod-template hash, ReplicaSet name), for templates with a ReplicaSet.
    pub templates: BTreeMap<String, (String, String)>,
    pub available_at: Option<Timestamp>,
    /// `availableAt` + duration; `None` without a duration.
    pub finished_at: Option<Timestamp>,
}

impl ArgFacts {
    fn lookup(&self, tag: &str) -> Option<String> {
        match tag {
            "experiment.availableAt" => return self.available_at.map(rfc3339),
            "experiment.finishedAt" => return self.finished_at.map(rfc3339),
            _ => {}
        }
        let rest = tag.strip_prefix("templates.")?;
        if let Some(t) = rest.strip_suffix(".podTemplateHash") {
            return self.templates.get(t).map(|(hash, _)| hash.clone());
        }
        let t = rest.strip_suffix(".replicaset.name")?;
        self.templates.get(t).map(|(_, name)| name.clone())
    }
}

/// Go's `time.RFC3339` of a Kubernetes time: whole seconds, `Z`.
fn rfc3339(t: Timestamp) -> String {
    sluice_api::time::whole_seconds(t).to_string()
}

/// `value` with every `{{tag}}` replaced. The tag is taken verbatim (spaces included).
pub fn resolve_value(value: &str, facts: &ArgFacts) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            return Err(format!(
                "Cannot find end tag=\"}}}}\" in the template=\"{value}\" starting from \"{after}\""
            ));
        };
        let tag = &after[..end];
        let resolved = facts
            .lookup(tag)
            .ok_or_else(|| format!("failed to resolve {{{{{tag}}}}}"))?;
        out.push_str(&resolved);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The Experiment analysis's arguments as they are handed to the run: names and templated
/// values only.
pub fn resolve_args(args: &[Argument], facts: &ArgFacts) -> Result<Vec<Argument>, String> {
    args.iter()
        .map(|a| {
            Ok(Argument {
                name: a.name.clone(),
                value: a
                    .value
                    .as_deref()
                    .map(|v| resolve_value(v, facts))
                    .transpose()?,
                value_from: None,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_api::common::{FieldRef, ValueFrom};

    fn facts() -> ArgFacts {
        ArgFacts {
            templates: [(
                "baseline".to_owned(),
                ("abc123".to_owned(), "ex-baseline".to_owned()),
            )]
            .into(),
            available_at: Some("2024-08-01T15:13:36.5Z".parse().unwrap()),
            finished_at: Some("2024-08-01T15:18:36Z".parse().unwrap()),
        }
    }

    #[test]
    fn placeholders_resolve() {
        let f = facts();
        let cases = [
            ("plain", Ok("plain".to_owned())),
            (
                "{{templates.baseline.podTemplateHash}}",
                Ok("abc123".into()),
            ),
            (
                "rs={{templates.baseline.replicaset.name}}!",
                Ok("rs=ex-baseline!".into()),
            ),
            (
                "{{experiment.availableAt}}/{{experiment.finishedAt}}",
                Ok("2024-08-01T15:13:36Z/2024-08-01T15:18:36Z".into()),
            ),
            (
                "{{templates.canary.podTemplateHash}}",
                Err("failed to resolve {{templates.canary.podTemplateHash}}".to_owned()),
            ),
            (
                "{{ templates.baseline.podTemplateHash }}",
                Err("failed to resolve {{ templates.baseline.podTemplateHash }}".to_owned()),
            ),
            ("{{args.x}}", Err("failed to resolve {{args.x}}".to_owned())),
        ];
        for (input, want) in cases {
            assert_eq!(resolve_value(input, &f), want, "{input}");
        }
        assert!(resolve_value("{{open", &f).unwrap_err().contains("end tag"));
        let no_duration = ArgFacts {
            finished_at: None,
            ..facts()
        };
        assert_eq!(
            resolve_value("{{experiment.finishedAt}}", &no_duration).unwrap_err(),
            "failed to resolve {{experiment.finishedAt}}"
        );
    }

    #[test]
    fn only_values_travel() {
        let args = vec![
            Argument {
                name: Some("hash".into()),
                value: Some("{{templates.baseline.podTemplateHash}}".into()),
                value_from: None,
            },
            Argument {
                name: Some("from".into()),
                value: None,
                value_from: Some(ValueFrom {
                    field_ref: Some(FieldRef {
                        field_path: Some("metadata.name".into()),
                    }),
                    secret_key_ref: None,
                }),
            },
        ];
        let out = resolve_args(&args, &facts()).unwrap();
        assert_eq!(out[0].value.as_deref(), Some("abc123"));
        assert_eq!(out[1].value, None);
        assert_eq!(out[1].value_from, None);
    }
}
