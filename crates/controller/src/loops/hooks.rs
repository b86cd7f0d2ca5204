//! What the process around a loop gives it ([`Hooks`]): the write gate, metrics, readiness and
//! a shutdown trigger. The loops receive it from the process (`runtime`) and never reach back.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::runtime::Controller;
use kube::runtime::reflector::Store;
use sluice_api::Rollout;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::cache::store_ready;
use crate::leader::fence::WriteGate;
use crate::serve::health::Health;
use crate::serve::metrics::{Metrics, Queue, Work};

/// What the process around the reconciler gives it: the write gate, metrics, readiness and
/// a shutdown trigger.
#[derive(Clone)]
pub struct Hooks {
    pub gate: WriteGate,
    pub metrics: Option<Arc<Metrics>>,
    pub health: Option<Arc<Health>>,
    /// Graceful shutdown trigger; `None` means SIGINT/SIGTERM.
    pub stop: Option<CancellationToken>,
    /// Only the AnalysisRun loop runs (`--controllers=analysis`): its cache alone makes the
    /// controller ready.
    pub analysis_only: bool,
    /// Argo's RPC plugins of `argo-rollouts-config` (none before the ConfigMap is read).
    pub plugins: Option<Arc<sluice_plugins::PluginHost>>,
    /// The step plugins `argo-rollouts-config` lists as disabled: their steps are skipped.
    pub disabled_step_plugins: Arc<std::collections::BTreeSet<String>>,
}

impl Hooks {
    /// A lone reconciler: always writes, stops on a signal, no metrics.
    pub fn standalone() -> Hooks {
        Hooks {
            gate: WriteGate::open(),
            metrics: None,
            health: None,
            stop: None,
            analysis_only: false,
            plugins: None,
            disabled_step_plugins: Arc::default(),
        }
    }

    pub(crate) fn with_shutdown<K>(&self, controller: Controller<K>) -> Controller<K>
    where
        K: kube::Resource
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned
            + Send
            + Sync
            + 'static,
        K::DynamicType: Eq + std::hash::Hash + Clone,
    {
        match &self.stop {
            Some(stop) => controller.graceful_shutdown_on(stop.clone().cancelled_owned()),
            None => controller.shutdown_on_signal(),
        }
    }

    /// Reports readiness and feeds the Rollout gauges once both caches have synced.
    pub(crate) fn watch_caches(
        &self,
        rollouts: Store<crate::cache::CachedRollout>,
        replica_sets: Store<crate::cache::CachedReplicaSet>,
    ) {
        let (metrics, health) = (self.metrics.clone(), self.health.clone());
        if metrics.is_none() && health.is_none() {
            return;
        }
        tokio::spawn(async move {
            if !store_ready(&rollouts).await || !store_ready(&replica_sets).await {
                return;
            }
            if let Some(m) = metrics {
                m.use_rollout_cache(rollouts);
            }
            if let Some(h) = health {
                h.set_caches_synced();
            }
            info!("caches synced");
        });
    }

    /// Hands the AnalysisRun cache to the metrics once it has synced.
    pub(crate) fn watch_run_cache(&self, runs: Store<sluice_api::analysis::AnalysisRun>) {
        let metrics = self.metrics.clone();
        let health = self.health.clone().filter(|_| self.analysis_only);
        if metrics.is_none() && health.is_none() {
            return;
        }
        tokio::spawn(async move {
            if store_ready(&runs).await {
                if let Some(m) = metrics {
                    m.use_analysis_run_cache(runs);
                }
                if let Some(h) = health {
                    h.set_caches_synced();
                    info!("caches synced");
                }
            }
        });
    }

    /// Hands the Experiment cache to the metrics once it has synced.
    pub(crate) fn watch_experiment_cache(
        &self,
        experiments: Store<sluice_api::experiment::Experiment>,
    ) {
        let Some(metrics) = self.metrics.clone() else {
            return;
        };
        tokio::spawn(async move {
            if store_ready(&experiments).await {
                metrics.use_experiment_cache(experiments);
            }
        });
    }

    /// Records a reconcile of `queue` beginning, for `workqueue_*`; it ends with the guard.
    pub(crate) fn begin_work(&self, queue: Queue) -> Option<Work> {
        self.metrics.as_ref().map(|m| m.begin_work(queue))
    }

    /// Hands the template caches to the metrics once they have synced.
    pub(crate) fn watch_template_caches(
        &self,
        templates: Store<sluice_api::analysis::AnalysisTemplate>,
        cluster_templates: Option<Store<sluice_api::analysis::ClusterAnalysisTemplate>>,
    ) {
        let Some(metrics) = self.metrics.clone() else {
            return;
        };
        tokio::spawn(async move {
            if !store_ready(&templates).await {
                return;
            }
            if let Some(c) = &cluster_templates
                && !store_ready(c).await
            {
                return;
            }
            metrics.use_template_caches(templates, cluster_templates);
        });
    }

    /// Records one reconcile of a loop's object in the metrics of `queue`'s kind
    /// (`rollout_reconcile`, `analysis_run_reconcile`, `experiment_reconcile`, and their
    /// `_error` counters) and in the queue's work.
    pub(crate) fn record_reconcile(
        &self,
        queue: Queue,
        object: &ObjectMeta,
        took: Duration,
        failed: bool,
    ) {
        let Some(m) = &self.metrics else {
            return;
        };
        let namespace = object.namespace.as_deref().unwrap_or_default();
        let name = object.name.as_deref().unwrap_or_default();
        match queue {
            Queue::Rollouts => m.observe_reconcile(namespace, name, took, failed),
            Queue::AnalysisRuns => m.observe_run_reconcile(namespace, name, took, failed),
            Queue::Experiments => m.observe_experiment_reconcile(namespace, name, took, failed),
        }
    }

    pub(crate) fn count_event(&self, ro: &Rollout, type_: &str, reason: &str) {
        if let Some(m) = &self.metrics {
            m.count_event(
                &ro.namespace().unwrap_or_default(),
                &ro.name_any(),
                type_,
                reason,
            );
        }
    }
}
