//! Reads from the controller's watch caches, shaped as the API server would answer them.

use k8s_openapi::api::core::v1::Service;
use kube::Resource;
use kube::runtime::reflector::ObjectRef as StoreRef;
use sluice_api::Rollout;
use sluice_engine::Observed;

use crate::cache::{Caches, managed_by_key};

/// The cached objects of `namespace`, in name order (as the API server lists them). A scan of
/// the whole cache: the Rollout loop reads through the indexed lookups instead.
pub(super) fn in_namespace<K: Resource + Clone>(
    cached: Vec<std::sync::Arc<K>>,
    namespace: &str,
) -> Vec<K> {
    let mut found: Vec<K> = cached
        .iter()
        .filter(|o| o.meta().namespace.as_deref() == Some(namespace))
        .map(|o| (**o).clone())
        .collect();
    found.sort_by(|a, b| a.meta().name.cmp(&b.meta().name));
    found
}

/// Cached objects found by their owner's uid, kept when in the owner's namespace.
pub(super) fn owned<K: Resource + Clone>(found: Vec<std::sync::Arc<K>>, namespace: &str) -> Vec<K> {
    found
        .iter()
        .filter(|o| o.meta().namespace.as_deref() == Some(namespace))
        .map(|o| (**o).clone())
        .collect()
}

/// The Services a Rollout wants, from the cache: those it names, by name, and those filed under
/// its managed-by annotation, in name order.
pub(super) fn cached_rollout_services(caches: &Caches, rollout: &Rollout) -> Vec<Service> {
    let ns = rollout.metadata.namespace.as_deref().unwrap_or_default();
    let mut found = std::collections::BTreeMap::new();
    for name in Observed::service_names(rollout) {
        if let Some(svc) = caches
            .services
            .store()
            .get(&StoreRef::new(&name).within(ns))
        {
            found.insert(name, svc);
        }
    }
    if let Some(name) = rollout.metadata.name.as_deref() {
        for svc in caches.services.find(&managed_by_key(ns, name)) {
            let name = svc.metadata.name.clone().unwrap_or_default();
            found.entry(name).or_insert(svc);
        }
    }
    found
        .into_values()
        .filter(|svc| Observed::wants_service(rollout, svc))
        .map(|svc| (*svc).clone())
        .collect()
}
