//! YAML helpers: Kubernetes manifests are usually multi-document YAML.

/// Why a YAML text could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct YamlError(Box<dyn std::error::Error + Send + Sync>);

/// Parses every document of a YAML stream into JSON values. Empty and `null` documents are
/// skipped, so a stream with a leading or trailing `---` gives only the real objects.
pub fn from_multi_doc_str(input: &str) -> Result<Vec<serde_json::Value>, YamlError> {
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(input).map_err(|e| YamlError(Box::new(e)))?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// Renders a value as one YAML document.
pub fn to_string<T: serde::Serialize>(value: &T) -> Result<String, YamlError> {
    serde_saphyr::to_string(value).map_err(|e| YamlError(Box::new(e)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_all_documents() {
        let docs = from_multi_doc_str(
            "---\napiVersion: v1\nkind: Service\n---\n# only a comment\n---\nkind: Rollout\nspec:\n  replicas: 2\n  paused: false\n  ratio: \"5\"\n",
        )
        .unwrap();
        assert_eq!(
            docs,
            [
                json!({"apiVersion": "v1", "kind": "Service"}),
                json!({"kind": "Rollout", "spec": {"replicas": 2, "paused": false, "ratio": "5"}})
            ]
        );
    }

    #[test]
    fn keeps_argo_placeholders_in_strings() {
        let docs =
            from_multi_doc_str("count: \"{{args.count}}\"\nq: sum(x{a=\"{{args.b}}\"})\n").unwrap();
        assert_eq!(docs[0]["count"], "{{args.count}}");
        assert_eq!(docs[0]["q"], "sum(x{a=\"{{args.b}}\"})");
    }

    #[test]
    fn reports_malformed_yaml() {
        assert!(from_multi_doc_str("a: [1, 2\n").is_err());
        // Mapping keys must be strings to become JSON.
        assert!(from_multi_doc_str("a: {{b}}\n").is_err());
    }

    #[test]
    fn writes_yaml_that_reads_back() {
        let value = json!({"a": [1, "two", {"b": null}], "c": "multi\nline"});
        let text = to_string(&value).unwrap();
        assert_eq!(from_multi_doc_str(&text).unwrap(), [value]);
    }
}
