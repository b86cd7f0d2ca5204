//! The pods of each workload's new version, from a watch: when the first one was seen (the
//! ReplicaSet controller created it) and when one was first seen Ready (bound and started:
//! here the fake kubelet does both), so that the wait between a new ReplicaSet and its pods
//! available ([`crate::progress::NewReplicaSetTimes`]) can be told apart into the
//! ReplicaSet controller's creating, the node's starting, and the ReplicaSet controller's
//! reporting.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, ResourceExt};

use crate::progress::{Changes, Following};

/// The label naming a pod's workload (the bench's pod templates carry it).
const WORKLOAD_LABEL: &str = "app";

/// Per workload, after its change: when its first new pod was seen, and when a new pod of it
/// was first seen Ready.
#[derive(Debug, Default, Clone)]
pub struct NewPodTimes {
    pub created: HashMap<String, Duration>,
    pub ready: HashMap<String, Duration>,
}

/// Follows the pods created during a run (see [`NewPodTimes`]).
pub type NewPods = Following<NewPodTimes>;

impl NewPods {
    /// Watches the pods of `api` from now on.
    pub fn watch(api: Api<Pod>, changes: Changes) -> NewPods {
        // New pods not yet seen Ready, by name.
        let mut waiting: HashSet<String> = HashSet::new();
        Following::new_objects(api, move |times: &mut NewPodTimes, pod, seen| {
            let Some(workload) = pod.labels().get(WORKLOAD_LABEL).cloned() else {
                return;
            };
            let Some(latency) = changes.since(&workload, seen) else {
                return;
            };
            let name = pod.name_any();
            if pod.first_sight {
                times.created.entry(workload.clone()).or_insert(latency);
                waiting.insert(name.clone());
            }
            if is_ready(&pod) && waiting.remove(&name) {
                times.ready.entry(workload).or_insert(latency);
            }
        })
    }
}

/// Whether a pod's Ready condition is true.
fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_is_ready_when_its_condition_says_so() {
        let pod = |ready: &str| {
            serde_json::from_value::<Pod>(serde_json::json!({
                "metadata": {"name": "p"},
                "status": {"conditions": [
                    {"type": "PodScheduled", "status": "True"},
                    {"type": "Ready", "status": ready},
                ]},
            }))
            .unwrap()
        };
        assert!(is_ready(&pod("True")));
        assert!(!is_ready(&pod("False")));
        assert!(!is_ready(&Pod::default()), "no status yet");
    }
}
