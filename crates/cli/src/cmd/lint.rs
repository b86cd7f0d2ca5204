//! `lint -f FILE`: check Rollout manifests offline with the controller's own spec validation,
//! plus what a strict decoder catches: fields of the wrong type and unknown (misspelt) fields,
//! plus Argo's checks of the Services and router objects the file also holds (`lint_refs`).
//! What only Sluice checks (a spec Argo runs as it is, which Sluice runs too) is a warning: it
//! is printed, and does not fail the command.

use std::io::Read as _;
use std::path::Path;

use anyhow::{Context as _, bail};
use serde_json::Value;
use sluice_api::Rollout;
use sluice_api::validation::{RolloutProblems, check_rollout};

use super::emit;
use crate::cli::LintArgs;

pub fn run(args: &LintArgs) -> anyhow::Result<()> {
    let path = &args.filename;
    let shown = if path == Path::new("-") {
        "<stdin>".to_owned()
    } else {
        path.display().to_string()
    };
    let text = read_input(path).with_context(|| format!("reading {shown}"))?;
    let report = lint_text(&text).with_context(|| format!("{shown}: invalid YAML"))?;
    let mut out = String::new();
    for problem in &report.problems {
        out.push_str(&format!("{shown}: {problem}\n"));
    }
    for warning in &report.warnings {
        out.push_str(&format!("{shown}: warning: {warning}\n"));
    }
    let warned = match report.warnings.len() {
        0 => String::new(),
        n => format!(" ({n} warning(s): Argo runs these specs, and so does Sluice)"),
    };
    match (report.problems.len(), report.rollouts) {
        (0, 0) => out.push_str(&format!("{shown}: no Rollout found\n")),
        (0, n) => out.push_str(&format!(
            "{shown}: {n} Rollout(s) checked, no problems found{warned}\n"
        )),
        _ => {}
    }
    emit(&out)?;
    if !report.problems.is_empty() {
        bail!("{shown}: {} problem(s) found", report.problems.len());
    }
    Ok(())
}

pub(super) fn read_input(path: &Path) -> std::io::Result<String> {
    if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        Ok(text)
    } else {
        std::fs::read_to_string(path)
    }
}

/// What linting a manifest found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct LintReport {
    /// Rollouts checked.
    pub rollouts: usize,
    /// One line per problem, naming the document and the rollout.
    pub problems: Vec<String>,
    /// What only Sluice checks: reported, not failing (the controller runs such a Rollout and
    /// says so in a `SpecWarning` event).
    pub warnings: Vec<String>,
}

/// Lints every Rollout of a multi-document YAML text; other kinds are skipped. A text that is
/// not YAML at all is an error.
pub fn lint_text(text: &str) -> Result<LintReport, sluice_api::yaml::YamlError> {
    let mut report = LintReport::default();
    let docs = sluice_api::yaml::from_multi_doc_str(text)?;
    let mut referenced = super::lint_refs::Referenced::default();
    for doc in &docs {
        referenced.add(doc);
    }
    for (index, doc) in docs.into_iter().enumerate() {
        if doc.get("kind").and_then(Value::as_str) != Some("Rollout") {
            continue;
        }
        report.rollouts += 1;
        let name = doc
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("<unnamed>");
        let place = format!("document {}, Rollout {name:?}", index + 1);
        let rollout: Rollout = match serde_json::from_value(doc.clone()) {
            Ok(rollout) => rollout,
            Err(e) => {
                report.problems.push(format!("{place}: {e}"));
                continue;
            }
        };
        let mut unknown = Vec::new();
        match serde_json::to_value(&rollout) {
            Ok(decoded) => unknown_fields(&doc, &decoded, "", &mut unknown),
            Err(e) => report.problems.push(format!("{place}: {e}")),
        }
        for field in unknown {
            report
                .problems
                .push(format!("{place}: unknown field {field:?}"));
        }
        let RolloutProblems { argo, sluice } = check_rollout(&rollout);
        for problem in argo {
            report.problems.push(format!("{place}: {problem}"));
        }
        for warning in sluice {
            report.warnings.push(format!("{place}: {warning}"));
        }
        for problem in super::lint_refs::reference_problems(&rollout, &referenced) {
            report.problems.push(format!("{place}: {problem}"));
        }
    }
    Ok(report)
}

/// Paths present in `written` but lost when decoding (`decoded` is the decoded object
/// encoded again): fields the API does not have. Nulls count as absent.
pub(super) fn unknown_fields(written: &Value, decoded: &Value, path: &str, out: &mut Vec<String>) {
    match (written, decoded) {
        (Value::Object(written), Value::Object(decoded)) => {
            for (key, value) in written {
                if value.is_null() || (path.is_empty() && key == "status") {
                    continue;
                }
                let field = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match decoded.get(key) {
                    Some(inner) => unknown_fields(value, inner, &field, out),
                    None => out.push(field),
                }
            }
        }
        (Value::Array(written), Value::Array(decoded)) if written.len() == decoded.len() => {
            for (i, (w, d)) in written.iter().zip(decoded).enumerate() {
                unknown_fields(w, d, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "\
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
---
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: web
  creationTimestamp: null
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.25
        ports:
        - containerPort: 80
  strategy:
    canary:
      maxSurge: \"25%\"
      steps:
      - setWeight: 20
      - pause: {duration: 30s}
";

    #[test]
    fn valid_manifest_has_no_problems() {
        let report = lint_text(VALID).unwrap();
        assert_eq!(
            report,
            LintReport {
                rollouts: 1,
                ..LintReport::default()
            }
        );
    }

    #[test]
    fn misspelt_fields_are_reported_with_their_path() {
        let text = VALID
            .replace("      - setWeight: 20", "      - setWieght: 20")
            .replace("  replicas: 2", "  replicas: 2\n  pausd: true");
        let report = lint_text(&text).unwrap();
        assert_eq!(
            report.problems[..2],
            [
                r#"document 2, Rollout "web": unknown field "spec.pausd""#,
                r#"document 2, Rollout "web": unknown field "spec.strategy.canary.steps[0].setWieght""#,
            ]
        );
        // To the API the misspelt step is an empty one, which validation reports too.
        assert_eq!(report.problems.len(), 3);
        assert!(
            report.problems[2].starts_with(
                r#"document 2, Rollout "web": spec.strategy.steps[0]: Invalid value: "#
            )
        );
    }

    #[test]
    fn validation_problems_are_reported() {
        let text = VALID.replace(
            "    canary:\n",
            "    blueGreen: {activeService: web}\n    canary:\n",
        );
        let report = lint_text(&text).unwrap();
        assert_eq!(report.rollouts, 1);
        // In Argo's words, as its own lint command prints them.
        assert_eq!(
            report.problems,
            [
                r#"document 2, Rollout "web": spec.strategy.strategy: Invalid value: "blueGreen: true canary: true": Multiple Strategies can not be listed"#
            ]
        );
    }

    #[test]
    fn what_only_sluice_checks_is_a_warning() {
        // Argo runs a canary without routing that sets abortScaleDownDelaySeconds; so does
        // Sluice, and lint says so without failing.
        let text = VALID.replace(
            "      steps:\n",
            "      abortScaleDownDelaySeconds: 5\n      steps:\n",
        );
        let report = lint_text(&text).unwrap();
        assert_eq!(report.problems, Vec::<String>::new());
        assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
        assert!(
            report.warnings[0].contains("abortScaleDownDelaySeconds"),
            "{:?}",
            report.warnings
        );
    }

    #[test]
    fn wrong_types_are_reported() {
        let report = lint_text(&VALID.replace("replicas: 2", "replicas: two")).unwrap();
        assert_eq!(report.problems.len(), 1);
        assert!(
            report.problems[0].starts_with(r#"document 2, Rollout "web": "#),
            "{report:?}"
        );
    }

    #[test]
    fn broken_yaml_is_an_error() {
        assert!(lint_text("kind: Rollout\nspec: [1, 2\n").is_err());
    }

    #[test]
    fn other_kinds_are_skipped() {
        let report = lint_text("kind: ConfigMap\nmetadata: {name: x}\ndata: {a: b}\n").unwrap();
        assert_eq!(report, LintReport::default());
    }
}
