//! The end-to-end test harness.
//!
//! ```no_run
//! use std::time::Duration;
//! use k8s_openapi::api::apps::v1::ReplicaSet;
//! use sluice_testenv::harness::{TestEnv, TestNamespace, wait_for_object};
//!
//! # async fn example() {
//! let env = TestEnv::shared().await.unwrap();
//! let ns = TestNamespace::create(&env, "demo").await.unwrap();
//! ns.apply_yaml("apiVersion: apps/v1\nkind: ReplicaSet\n...").await.unwrap();
//! let replicasets = ns.api::<ReplicaSet>();
//! wait_for_object(&replicasets, "web", Duration::from_secs(60), "3 ready replicas", |rs| {
//!     rs.status.as_ref().and_then(|s| s.ready_replicas) == Some(3)
//! })
//! .await
//! .unwrap();
//! # }
//! ```
//!
//! Tests should fail by panicking (`unwrap`, `expect`, `assert!`) rather than by returning an
//! error: a [`TestNamespace`] dropped during a panic is kept and its state is printed.

mod apply;
mod argo;
mod build_script;
mod cluster;
mod crds;
mod namespace;
mod own_plane;
mod plugins;
mod wait;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use kube::Client;
use kube::api::DynamicObject;
use tokio::sync::OnceCell;

pub use apply::{parse_documents, resolve_kind};
pub use argo::{
    ARGO_1_10, ARGO_BIN_ENV, ArgoController, argo_rollouts_binary, argo_rollouts_binary_of,
};
pub use cluster::{ClusterPaths, repo_root};
pub use crds::gateway_api_crds_dir;
pub use namespace::{TestNamespace, dump_namespace};
pub use own_plane::{COMPONENTS, Frozen, OwnControlPlane};
pub use plugins::{PLUGINS_DIR_ENV, plugin_binaries};
pub use wait::{POLL_INTERVAL, wait_for, wait_for_object};

/// Field manager of everything the harness applies.
pub const FIELD_MANAGER: &str = "sluice-e2e";

static CLUSTER: OnceCell<ClusterPaths> = OnceCell::const_new();
static CRDS: OnceCell<()> = OnceCell::const_new();

/// A connection to the shared local control plane (or to an [`OwnControlPlane`]).
///
/// Cheap to clone. The client belongs to the async runtime it was made on, so make a `TestEnv`
/// in every test rather than keeping one in a static.
#[derive(Clone)]
pub struct TestEnv {
    client: Client,
    config: kube::Config,
    paths: Arc<ClusterPaths>,
}

impl TestEnv {
    /// Connects to the local control plane, starting it with `scripts/cluster-up.sh` the first
    /// time in this process (the script is idempotent and serialised by a file lock).
    pub async fn shared() -> anyhow::Result<TestEnv> {
        let paths = CLUSTER
            .get_or_try_init(cluster::ensure_running)
            .await?
            .clone();
        TestEnv::connect(paths).await
    }

    /// Connects to the control plane whose kubeconfig files `paths` names (the shared one, or
    /// an [`OwnControlPlane`]).
    pub(crate) async fn connect(paths: ClusterPaths) -> anyhow::Result<TestEnv> {
        let config = crate::kubeconfig::config_from_file(&paths.kubeconfig).await?;
        let client = Client::try_from(config.clone()).context("building a Kubernetes client")?;
        Ok(TestEnv {
            client,
            config,
            paths: Arc::new(paths),
        })
    }

    /// [`TestEnv::shared`], with the project's CRDs from `manifests/crds/` installed (once per
    /// process, by server-side apply).
    pub async fn with_crds() -> anyhow::Result<TestEnv> {
        let env = TestEnv::shared().await?;
        CRDS.get_or_try_init(|| crds::install(&env)).await?;
        Ok(env)
    }

    /// Installs the CustomResourceDefinitions in `dir/*.yaml` (server-side apply; other
    /// documents are skipped) and waits until each is established. Idempotent.
    pub async fn install_crds(&self, dir: &Path) -> anyhow::Result<()> {
        crds::install_dir(self, dir).await
    }

    /// A client with cluster-admin rights (group `system:masters`).
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The client configuration behind [`TestEnv::client`].
    pub fn config(&self) -> &kube::Config {
        &self.config
    }

    /// A client for the user `sluice-e2e-controller`, who has no rights until a test grants
    /// them with RBAC objects.
    pub async fn controller_client(&self) -> anyhow::Result<Client> {
        crate::kubeconfig::client_from_file(&self.paths.controller_kubeconfig).await
    }

    /// The admin kubeconfig file.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.paths.kubeconfig
    }

    /// The kubeconfig file of the user `sluice-e2e-controller`.
    pub fn controller_kubeconfig_path(&self) -> &Path {
        &self.paths.controller_kubeconfig
    }

    /// The root of the repository.
    pub fn repo_root(&self) -> PathBuf {
        self.paths.repo_root.clone()
    }

    /// Applies every document of a multi-document YAML string by server-side apply, in order.
    /// Namespaced objects go to `namespace` whatever their own metadata says; cluster-scoped
    /// ones ignore it. Returns the objects as stored.
    pub async fn apply_yaml(
        &self,
        namespace: &str,
        yaml: &str,
    ) -> anyhow::Result<Vec<DynamicObject>> {
        apply::apply_yaml(&self.client, namespace, yaml).await
    }
}
