//! Making a [`KubeCluster`] and setting it up: its write gate, caches, router plugins and API
//! versions, and the flags it acts on.

use std::sync::Arc;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};
use sluice_routers::kinds::{ApiVersions, ObjectRef};

use super::KubeCluster;
use crate::cache::Caches;
use crate::cluster::router_plugins::RouterPlugins;
use crate::leader::fence::WriteGate;

impl KubeCluster {
    /// A writer that always may write.
    pub fn new(client: Client) -> Self {
        Self::with_gate(client, WriteGate::open())
    }

    /// A writer that writes only while `gate` is open.
    pub fn with_gate(client: Client, gate: WriteGate) -> Self {
        Self {
            client,
            gate,
            term: None,
            versions: ApiVersions::default(),
            caches: None,
            router_plugins: None,
            config_rollouts: false,
        }
    }

    /// This writer, reading from `caches` instead of the API server. The caller waits for
    /// them to be ready ([`Caches::ready`]) before deciding on what they hold.
    pub fn with_caches(self, caches: Caches) -> Self {
        Self {
            caches: Some(caches),
            ..self
        }
    }

    /// This writer, with the traffic-router plugins of `argo-rollouts-config`.
    pub fn with_router_plugins(self, plugins: Arc<RouterPlugins>) -> Self {
        Self {
            router_plugins: Some(plugins),
            ..self
        }
    }

    /// The traffic-router plugins (all "not configured" without any).
    pub(super) fn router_plugins(&self) -> Arc<RouterPlugins> {
        self.router_plugins.clone().unwrap_or_default()
    }

    /// This writer, copying ConfigMaps and Secrets for config rollouts when `on`.
    pub fn with_config_rollouts(self, on: bool) -> Self {
        Self {
            config_rollouts: on,
            ..self
        }
    }

    /// This writer, speaking these API versions of the router kinds.
    pub fn with_router_versions(self, versions: ApiVersions) -> Self {
        Self { versions, ..self }
    }

    pub(super) fn router_api(&self, target: &ObjectRef) -> Api<DynamicObject> {
        let kind = target.kind;
        let version = kind.version(&self.versions);
        let resource = ApiResource {
            group: kind.group().to_string(),
            version: version.to_string(),
            api_version: kind.api_version(&self.versions),
            kind: kind.kind().to_string(),
            plural: kind.plural().to_string(),
        };
        Api::namespaced_with(self.client.clone(), &target.namespace, &resource)
    }

    /// This writer, writing only while the leadership term is still `term`.
    pub fn for_term(&self, term: u64) -> Self {
        Self {
            term: Some(term),
            ..self.clone()
        }
    }
}
