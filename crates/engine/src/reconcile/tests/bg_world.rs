//! The blue-green corner of the test world: a Rollout with an active and a preview Service,
//! and the checks every blue-green test makes of them.

use super::*;

pub(super) fn bg_rollout(replicas: i32, strategy: serde_json::Value) -> Rollout {
    let mut ro = rollout(replicas, json!([]));
    ro.spec.strategy = Some(serde_json::from_value(json!({"blueGreen": strategy})).unwrap());
    ro
}

pub(super) fn service(name: &str) -> k8s_openapi::api::core::v1::Service {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"selector": {"app": "demo"}}
    }))
    .unwrap()
}

impl World {
    pub(super) fn bg(ro: Rollout) -> Self {
        let mut w = World::new(ro);
        w.services = vec![service("active"), service("preview")];
        w
    }

    pub(super) fn selector_of(&self, svc: &str) -> Option<String> {
        self.services
            .iter()
            .find(|s| s.metadata.name.as_deref() == Some(svc))?
            .spec
            .as_ref()?
            .selector
            .as_ref()?
            .get(POD_TEMPLATE_HASH)
            .cloned()
    }

    pub(super) fn image_behind(&self, svc: &str) -> Option<String> {
        let hash = self.selector_of(svc)?;
        self.rss
            .iter()
            .find(|rs| rs.pod_hash() == Some(hash.as_str()))
            .map(World::image_of)
    }

    /// The active Service never selects a ReplicaSet with fewer available pods than desired.
    pub(super) fn assert_active_fully_available(&self) {
        let Some(hash) = self.selector_of("active") else {
            return;
        };
        let rs = self
            .rss
            .iter()
            .find(|rs| rs.pod_hash() == Some(hash.as_str()))
            .expect("active ReplicaSet exists");
        assert!(
            rs.available_replicas() >= self.ro.spec.replicas.unwrap(),
            "active selects {} with {} available",
            rs.name(),
            rs.available_replicas()
        );
    }

    pub(super) fn settle_bg(&mut self) {
        for _ in 0..50 {
            let before = (self.ro.clone(), self.rss.clone(), self.services.clone());
            self.reconcile();
            self.assert_active_fully_available();
            if before.0 == self.ro && before.1 == self.rss && before.2 == self.services {
                return;
            }
        }
        panic!("did not settle: {:#?}", self.ro.status);
    }
}
