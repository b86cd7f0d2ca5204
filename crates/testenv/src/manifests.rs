//! Renders the kustomizations of `manifests/` into the single files users apply
//! (`manifests/install.yaml`, `manifests/namespace-install.yaml`, and the shared dashboard's
//! `manifests/dashboard-install.yaml`), as `kubectl kustomize` would
//! for the features they use: `resources` (files and directories with their own
//! kustomization), objects in kustomize's legacy kind order, keys sorted. Anything else in a
//! kustomization is refused, so that a source needing more than this is noticed. No kustomize
//! binary is needed (a fresh machine has none); where `kubectl` is on the PATH, the tests check
//! that its rendering holds the same objects.

use std::path::Path;

use anyhow::{Context as _, bail};
use serde::Deserialize as _;
use serde_yaml::Value;

/// The rendered files: (output path under `manifests/`, kustomization directory under it).
pub const RENDERED: [(&str, &str); 3] = [
    ("install.yaml", "install"),
    ("namespace-install.yaml", "namespace-install"),
    ("dashboard-install.yaml", "dashboard"),
];

/// Kustomize's legacy order: these kinds first, in this order, the webhook configurations
/// last, every other kind between them by name.
const ORDER_FIRST: [&str; 22] = [
    "Namespace",
    "ResourceQuota",
    "StorageClass",
    "CustomResourceDefinition",
    "ServiceAccount",
    "PodSecurityPolicy",
    "Role",
    "ClusterRole",
    "RoleBinding",
    "ClusterRoleBinding",
    "ConfigMap",
    "Secret",
    "Endpoints",
    "Service",
    "LimitRange",
    "PriorityClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "Deployment",
    "StatefulSet",
    "CronJob",
    "PodDisruptionBudget",
];
const ORDER_LAST: [&str; 2] = [
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

/// Every object of the kustomization in `dir`, in kustomize's legacy order.
pub fn objects(dir: &Path) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    collect(dir, &mut out)?;
    out.sort_by_cached_key(order_key);
    Ok(out.into_iter().map(sorted).collect())
}

/// The rendered text of the kustomization in `dir` (`source` names it in the header).
pub fn render(dir: &Path, source: &str) -> anyhow::Result<String> {
    let mut text = format!(
        "# Rendered from manifests/{source} by `make manifests`: edit the sources, not this file.\n"
    );
    for (i, object) in objects(dir)?.iter().enumerate() {
        if i > 0 {
            text.push_str("---\n");
        }
        text.push_str(&serde_yaml::to_string(object)?);
    }
    Ok(text)
}

/// Every document of a multi-document YAML text, as JSON values (empty documents skipped).
pub fn parse_documents(text: &str) -> anyhow::Result<Vec<serde_json::Value>> {
    let mut out = Vec::new();
    for document in serde_yaml::Deserializer::from_str(text) {
        let value = serde_json::Value::deserialize(document)?;
        if !value.is_null() {
            out.push(value);
        }
    }
    Ok(out)
}

fn collect(dir: &Path, out: &mut Vec<Value>) -> anyhow::Result<()> {
    let file = dir.join("kustomization.yaml");
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    let kustomization: Value =
        serde_yaml::from_str(&text).with_context(|| format!("parsing {}", file.display()))?;
    let Value::Mapping(map) = &kustomization else {
        bail!("{}: not a mapping", file.display());
    };
    for key in map.keys() {
        match key.as_str() {
            Some("apiVersion" | "kind" | "resources") => {}
            other => bail!(
                "{}: `{}` is not supported by this renderer (resources only)",
                file.display(),
                other.unwrap_or("?")
            ),
        }
    }
    let resources = map
        .get("resources")
        .and_then(Value::as_sequence)
        .cloned()
        .unwrap_or_default();
    for resource in resources {
        let Some(name) = resource.as_str() else {
            bail!("{}: a resource that is not a path", file.display());
        };
        let path = dir.join(name);
        if path.is_dir() {
            collect(&path, out)?;
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        for document in serde_yaml::Deserializer::from_str(&text) {
            let value = Value::deserialize(document)
                .with_context(|| format!("parsing {}", path.display()))?;
            if !value.is_null() {
                out.push(value);
            }
        }
    }
    Ok(())
}

fn field<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut v = v;
    for key in path {
        match v.get(*key) {
            Some(next) => v = next,
            None => return "",
        }
    }
    v.as_str().unwrap_or("")
}

fn order_key(v: &Value) -> (usize, String, String, String, String) {
    let kind = field(v, &["kind"]);
    let rank = match (
        ORDER_FIRST.iter().position(|k| *k == kind),
        ORDER_LAST.iter().position(|k| *k == kind),
    ) {
        (Some(i), _) => i,
        (None, Some(i)) => ORDER_FIRST.len() + 1 + i,
        (None, None) => ORDER_FIRST.len(),
    };
    (
        rank,
        kind.to_string(),
        field(v, &["apiVersion"]).to_string(),
        field(v, &["metadata", "namespace"]).to_string(),
        field(v, &["metadata", "name"]).to_string(),
    )
}

/// Keys sorted at every level, `apiVersion`, `kind` and `metadata` first at the top, as
/// kustomize writes them.
fn sorted(v: Value) -> Value {
    fn sort(v: Value, top: bool) -> Value {
        match v {
            Value::Mapping(map) => {
                let mut entries: Vec<(Value, Value)> = map.into_iter().collect();
                let rank = |k: &Value| {
                    let k = k.as_str().unwrap_or("");
                    let first = if top {
                        ["apiVersion", "kind", "metadata"]
                            .iter()
                            .position(|f| *f == k)
                            .unwrap_or(3)
                    } else {
                        0
                    };
                    (first, k.to_string())
                };
                entries.sort_by_key(|(k, _)| rank(k));
                Value::Mapping(
                    entries
                        .into_iter()
                        .map(|(k, v)| (k, sort(v, false)))
                        .collect(),
                )
            }
            Value::Sequence(items) => {
                Value::Sequence(items.into_iter().map(|v| sort(v, false)).collect())
            }
            other => other,
        }
    }
    sort(v, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn manifests_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../manifests")
    }

    #[test]
    fn rendered_manifests_are_in_sync_with_their_sources() {
        let manifests = manifests_dir();
        for (file, dir) in RENDERED {
            let want = render(&manifests.join(dir), dir).unwrap();
            let have = std::fs::read_to_string(manifests.join(file)).unwrap_or_default();
            assert!(
                have == want,
                "manifests/{file} is not what manifests/{dir} renders: run `make manifests`"
            );
        }
    }

    /// Where kubectl is installed, its kustomize renders the same objects in the same order.
    #[test]
    fn kubectl_kustomize_agrees_where_installed() {
        let manifests = manifests_dir();
        for (_, dir) in RENDERED {
            let ours = objects(&manifests.join(dir)).unwrap();
            let Ok(output) = std::process::Command::new("kubectl")
                .args(["kustomize"])
                .arg(manifests.join(dir))
                .output()
            else {
                // No kubectl: the renderer's own rules are checked by the tests below.
                continue;
            };
            assert!(output.status.success(), "{output:?}");
            let theirs: Vec<Value> = serde_yaml::Deserializer::from_slice(&output.stdout)
                .map(|d| Value::deserialize(d).unwrap())
                .collect();
            assert_eq!(ours.len(), theirs.len(), "{dir}");
            for (a, b) in ours.iter().zip(&theirs) {
                assert_eq!(a, b, "{dir}");
            }
        }
    }

    #[test]
    fn objects_come_in_kustomize_legacy_order_with_sorted_keys() {
        let dir = std::env::temp_dir().join(format!("sluice-render-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(
            dir.join("kustomization.yaml"),
            "resources:\n- a.yaml\n- sub\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("a.yaml"),
            "kind: Deployment\napiVersion: apps/v1\nmetadata: {name: d}\n---\nkind: Widget\napiVersion: x/v1\nmetadata: {name: w}\n",
        )
        .unwrap();
        std::fs::write(dir.join("sub/kustomization.yaml"), "resources: [b.yaml]\n").unwrap();
        std::fs::write(
            dir.join("sub/b.yaml"),
            "kind: ServiceAccount\napiVersion: v1\nmetadata: {name: z, labels: {b: '1', a: '2'}}\n---\nkind: ServiceAccount\napiVersion: v1\nmetadata: {name: a}\n---\nkind: ValidatingWebhookConfiguration\napiVersion: v1\nmetadata: {name: v}\n",
        )
        .unwrap();
        let text = render(&dir, "t").unwrap();
        let kinds: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("kind: "))
            .collect();
        assert_eq!(
            kinds,
            [
                "ServiceAccount",
                "ServiceAccount",
                "Deployment",
                "Widget",
                "ValidatingWebhookConfiguration"
            ]
        );
        assert!(
            text.contains("  labels:\n    a: '2'\n    b: '1'\n  name: z\n"),
            "{text}"
        );
        assert!(text.find("name: a").unwrap() < text.find("name: z").unwrap());

        std::fs::write(
            dir.join("kustomization.yaml"),
            "resources: [a.yaml]\nimages: []\n",
        )
        .unwrap();
        assert!(render(&dir, "t").is_err(), "unsupported fields are refused");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
