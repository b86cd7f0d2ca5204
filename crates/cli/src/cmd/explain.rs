//! `explain ROLLOUT`: what the rollout waits for, and why, in plain words. The objects are
//! gathered by the controller's own observe step and decided on by the controller's own engine
//! (`sluice_engine::reconcile`), whose plan carries the waits as data; this command only reads
//! and words them. Nothing is written.

mod nodes;
mod words;

use anyhow::{Context as _, anyhow};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use sluice_controller::cluster::{KubeCluster, controlled_by};
use sluice_controller::loops::observe::observe;

use super::{emit, explain as api_error, get_rollout, label_selector, rollouts};
use crate::cli::ExplainArgs;
use crate::kube_target::Target;

pub use words::{Facts, explain_text};

pub async fn run(target: &Target, args: &ExplainArgs) -> anyhow::Result<()> {
    let argv0 = std::env::args_os().next();
    let command = crate::cli::invoked_name(argv0.as_deref());
    emit(&text(target, &args.name, command).await?)
}

/// What rollout `name` waits for, in words, with the commands (`command ...`) that move it
/// on. Shared by the command and the dashboard.
pub async fn text(target: &Target, name: &str, command: &str) -> anyhow::Result<String> {
    let rollout = get_rollout(&rollouts(target), name).await?;
    let params = match label_selector(&rollout) {
        Some(selector) => ListParams::default().labels(&selector),
        None => ListParams::default(),
    };
    let replica_sets: Vec<ReplicaSet> =
        Api::<ReplicaSet>::namespaced(target.client.clone(), &target.namespace)
            .list(&params)
            .await
            .map_err(api_error)
            .context("listing ReplicaSets")?
            .items
            .into_iter()
            .filter(|rs| controlled_by(&rs.metadata, &rollout))
            .collect();
    let now = Timestamp::now();
    let cluster = KubeCluster::new(target.client.clone());
    let observed = observe(&cluster, &rollout, replica_sets, now)
        .await
        .map_err(|e| anyhow!("{e}"))
        .with_context(|| format!("reading the objects of rollout {name:?}"))?;
    let plan = sluice_engine::reconcile(&observed);
    // Pods only for the words: which are not ready, and since when.
    let pods: Vec<Pod> = Api::<Pod>::namespaced(target.client.clone(), &target.namespace)
        .list(&params)
        .await
        .map_err(api_error)
        .context("listing pods")?
        .items;
    let mut out = explain_text(&Facts {
        rollout: &rollout,
        status: &plan.status,
        waits: &plan.waits,
        pods: &pods,
        runs: &observed.analysis_runs,
        now,
        command,
        namespace: &target.namespace,
    });
    // A DaemonSet's pods are the observed ones (its selector, not the Rollout's).
    if let Some(daemon_set) = sluice_engine::daemonset::daemon_set_name(&rollout) {
        out.push_str(&nodes::nodes_text(
            daemon_set,
            &plan.status,
            &observed.pods,
            &plan,
        ));
    }
    Ok(out)
}
