//! Argo Rollouts' default catalog of triggers and templates (`notifications-install.yaml` of
//! v1.9.1, shipped in `manifests/`), which a team applies as the ConfigMap.

use std::collections::BTreeMap;

/// The catalog's ConfigMap manifest.
pub const MANIFEST: &str = include_str!("../../../manifests/notifications-install.yaml");

/// The catalog's ConfigMap `data`.
pub fn data() -> BTreeMap<String, String> {
    #[derive(serde::Deserialize)]
    struct ConfigMap {
        data: BTreeMap<String, String>,
    }
    serde_saphyr::from_str::<ConfigMap>(MANIFEST)
        .map(|c| c.data)
        .unwrap_or_default()
}
