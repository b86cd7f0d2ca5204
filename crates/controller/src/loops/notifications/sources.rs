//! The configuration: the ConfigMap and Secret of the controller's namespace, and with
//! `--self-service-notification-enabled` those of every namespace, watched and parsed again
//! on each change; what cannot be used is logged and published on its ConfigMap.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::StreamExt as _;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference, Secret};
use kube::runtime::watcher;
use sluice_engine::EventType;
use sluice_notifications::{CONFIG_MAP, Config};
use tracing::{debug, info, warn};

use super::{CONFIG_INVALID, Loop};

/// The configuration sources of one namespace as last seen.
#[derive(Default)]
pub(super) struct Sources {
    pub config_map: Option<ConfigMap>,
    pub secret: BTreeMap<String, String>,
    /// What the last parse reported, so that a change is reported once.
    pub reported: Option<Vec<String>>,
}

impl Loop {
    /// Parses the configuration of `namespace` again (every namespace's after a relist) and
    /// reports what cannot be used in it.
    pub(super) async fn reconfigure(
        &mut self,
        sources: &mut BTreeMap<String, Sources>,
        namespace: Option<String>,
    ) {
        let namespaces: Vec<String> = match namespace {
            Some(ns) => vec![ns],
            None => sources.keys().cloned().collect(),
        };
        for ns in namespaces {
            let Some(source) = sources.get_mut(&ns) else {
                continue;
            };
            let own = ns != self.namespace;
            if own && self.self_service.is_none() {
                continue;
            }
            let data: BTreeMap<String, String> = source
                .config_map
                .as_ref()
                .and_then(|cm| cm.data.clone())
                .unwrap_or_default()
                .into_iter()
                .collect();
            let mut config = Config::parse(&data, &source.secret);
            if own {
                config.self_service_namespace = Some(ns.clone());
            }
            self.report_problems(&ns, source, &config).await;
            let config = Arc::new(config);
            if !own {
                self.config = config;
            } else if let Some(configs) = &mut self.self_service {
                if source.config_map.is_none() && source.secret.is_empty() {
                    configs.remove(&ns);
                    sources.remove(&ns);
                } else {
                    configs.insert(ns, config);
                }
            }
        }
        let global = !self.config.subscriptions.is_empty()
            || self
                .self_service
                .iter()
                .flat_map(BTreeMap::values)
                .any(|c| !c.subscriptions.is_empty());
        self.global.store(global, Ordering::Relaxed);
        if self.synced == (true, true) {
            for event in std::mem::take(&mut self.waiting) {
                self.on_event(event).await;
            }
        }
    }

    /// Logs what cannot be used in a namespace's configuration and publishes it as Warning
    /// events on its ConfigMap, once per change.
    async fn report_problems(&self, namespace: &str, source: &mut Sources, config: &Config) {
        let problems: Vec<String> = config.problems.iter().map(ToString::to_string).collect();
        info!(
            namespace,
            triggers = config.triggers.len(),
            templates = config.templates.len(),
            services = config.services.len(),
            problems = problems.len(),
            "notifications configuration loaded"
        );
        if source.reported.as_ref() == Some(&problems) {
            return;
        }
        if let Some(cm) = &source.config_map {
            for problem in &problems {
                warn!(
                    configmap = CONFIG_MAP,
                    namespace, "notifications configuration: {problem}"
                );
                let reference = ObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("ConfigMap".into()),
                    name: Some(CONFIG_MAP.into()),
                    namespace: Some(namespace.to_owned()),
                    uid: cm.metadata.uid.clone(),
                    ..ObjectReference::default()
                };
                if self.gate.is_open()
                    && let Err(e) = self
                        .events
                        .publish(&reference, EventType::Warning, CONFIG_INVALID, problem)
                        .await
                {
                    debug!(error = %e, "could not publish event");
                }
            }
        }
        source.reported = Some(problems);
    }

    /// The configurations a Rollout of `namespace` notifies with: with self-service, its own
    /// namespace's (when there is one), then the controller's.
    pub(super) fn configs_for(&self, namespace: &str) -> Vec<Arc<Config>> {
        let own = self
            .self_service
            .as_ref()
            .filter(|_| namespace != self.namespace)
            .and_then(|configs| configs.get(namespace).cloned());
        own.into_iter().chain([self.config.clone()]).collect()
    }

    /// The configuration a job is sent with: a self-service namespace's or the controller's
    /// (an empty one once that namespace's is gone: its service is then not configured).
    pub(super) fn config_of(&self, namespace: Option<&str>) -> Arc<Config> {
        match namespace {
            None => self.config.clone(),
            Some(ns) => self
                .self_service
                .as_ref()
                .and_then(|configs| configs.get(ns).cloned())
                .unwrap_or_default(),
        }
    }
}

/// A watched object, its deletion, or the end of a (re)list.
pub(super) enum Change<K> {
    Applied(K),
    Deleted(K),
    Listed,
}

pub(super) trait ChangesExt<K>:
    futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Sized
{
    fn applied_objects_or_deleted(
        self,
    ) -> impl futures::Stream<Item = Result<Change<K>, watcher::Error>> {
        self.filter_map(|event| async move {
            match event {
                Ok(watcher::Event::Apply(k) | watcher::Event::InitApply(k)) => {
                    Some(Ok(Change::Applied(k)))
                }
                Ok(watcher::Event::Delete(k)) => Some(Ok(Change::Deleted(k))),
                // A relist applies what it finds (an object deleted while the watch was down
                // stays until the next change).
                Ok(watcher::Event::Init) => None,
                Ok(watcher::Event::InitDone) => Some(Ok(Change::Listed)),
                Err(e) => Some(Err(e)),
            }
        })
    }
}

impl<K, S> ChangesExt<K> for S where
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>>
{
}

/// A Secret's data as strings (`stringData` is folded into `data` by the API server).
pub(super) fn decode(secret: &Secret) -> BTreeMap<String, String> {
    secret
        .data
        .iter()
        .flatten()
        .map(|(k, ByteString(v))| (k.clone(), String::from_utf8_lossy(v).into_owned()))
        .collect()
}
