//! What a Rollout's info reads of a ReplicaSet: its metadata, three replica counts and the
//! images of its template. A trait, so that the info is built alike from the API's
//! `ReplicaSet` (`get`, read once) and from the compact copy a long-running watch keeps (the
//! dashboard holds thousands, and the rest of a template is most of a ReplicaSet's memory).

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sluice_engine::labels::{POD_TEMPLATE_HASH, REVISION};

pub trait ReplicaSetFacts {
    fn metadata(&self) -> &ObjectMeta;
    /// `spec.replicas` (1 when unset, as the API server defaults it).
    fn desired(&self) -> i32;
    /// `status.replicas`.
    fn current(&self) -> i32;
    /// `status.availableReplicas`.
    fn available(&self) -> i32;
    /// The images of the template's containers, in order.
    fn images(&self) -> Vec<String>;

    fn name(&self) -> &str {
        self.metadata().name.as_deref().unwrap_or_default()
    }

    fn label(&self, key: &str) -> Option<&str> {
        self.metadata()
            .labels
            .as_ref()?
            .get(key)
            .map(String::as_str)
    }

    fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata()
            .annotations
            .as_ref()?
            .get(key)
            .map(String::as_str)
    }

    fn pod_hash(&self) -> Option<&str> {
        self.label(POD_TEMPLATE_HASH)
    }

    fn revision(&self) -> Option<i64> {
        self.annotation(REVISION)?.parse().ok()
    }
}

/// `spec.replicas` as the API server defaults it.
pub(crate) fn desired(replicas: Option<i32>) -> i32 {
    replicas.unwrap_or(1)
}

/// `status.replicas` and `status.availableReplicas`, 0 before the ReplicaSet controller's
/// first report.
pub(crate) fn current_and_available(status: Option<&ReplicaSetStatus>) -> (i32, i32) {
    status.map_or((0, 0), |s| (s.replicas, s.available_replicas.unwrap_or(0)))
}

impl ReplicaSetFacts for ReplicaSet {
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn desired(&self) -> i32 {
        desired(self.spec.as_ref().and_then(|s| s.replicas))
    }

    fn current(&self) -> i32 {
        current_and_available(self.status.as_ref()).0
    }

    fn available(&self) -> i32 {
        current_and_available(self.status.as_ref()).1
    }

    fn images(&self) -> Vec<String> {
        self.spec
            .as_ref()
            .and_then(|s| s.template.as_ref())
            .map(super::container_images)
            .unwrap_or_default()
    }
}

/// References and shared copies read as what they point to.
macro_rules! forward {
    ($($wrapper:ty),*) => {$(
        impl<T: ReplicaSetFacts + ?Sized> ReplicaSetFacts for $wrapper {
            fn metadata(&self) -> &ObjectMeta {
                (**self).metadata()
            }
            fn desired(&self) -> i32 {
                (**self).desired()
            }
            fn current(&self) -> i32 {
                (**self).current()
            }
            fn available(&self) -> i32 {
                (**self).available()
            }
            fn images(&self) -> Vec<String> {
                (**self).images()
            }
        }
    )*};
}
forward!(&T, Arc<T>);
