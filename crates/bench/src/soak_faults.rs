//! The soak under control-plane faults (`--soak-faults`): the soak runs on a control plane of
//! its own (it kills and stops components), the controller talks to it through a
//! [`FaultProxy`] (which can cut its watches and answer for the API server), and each round of
//! image changes meets the next fault of [`CYCLE`] right after the changes are sent, while the
//! controller is busy with them. A round only ends when every Rollout has settled on the new
//! image, so a soak that finishes has finished every update; at the end, the namespace's
//! ReplicaSets are checked ([`check_replica_sets`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};
use serde::Serialize;
use sluice_testenv::fault_proxy::{Action, FaultProxy, Faults, Requests, Rule};
use sluice_testenv::harness::{OwnControlPlane, TestEnv};

/// One fault a round meets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Fault {
    /// kube-apiserver SIGKILLed, started again 10 s later on the same etcd.
    ApiServerKilled,
    /// etcd stopped (SIGSTOP) for 20 s, then continued.
    EtcdStopped,
    /// Every watch the controller has open cut at once.
    WatchesCut,
    /// Every request of the controller answered 429 (with Retry-After) for 30 s.
    Throttled,
    /// Nothing: a round as the plain soak has it, to compare with.
    Quiet,
}

/// The faults in the order rounds meet them, again and again.
pub const CYCLE: [Fault; 5] = [
    Fault::ApiServerKilled,
    Fault::EtcdStopped,
    Fault::WatchesCut,
    Fault::Throttled,
    Fault::Quiet,
];

impl Fault {
    pub fn describe(self) -> &'static str {
        match self {
            Fault::ApiServerKilled => "kube-apiserver killed, restarted 10 s later",
            Fault::EtcdStopped => "etcd stopped for 20 s",
            Fault::WatchesCut => "every watch cut",
            Fault::Throttled => "429 on every request for 30 s",
            Fault::Quiet => "none",
        }
    }
}

/// What the faults need: the control plane they act on and the proxy the controller talks
/// through. Dropping it stops the proxy and the control plane.
pub struct FaultKit {
    proxy: FaultProxy,
    /// Last: the control plane is stopped after the proxy.
    plane: OwnControlPlane,
}

impl FaultKit {
    /// Starts a control plane of the soak's own (with the project's CRDs) and a proxy to it;
    /// returns the kit, a connection for the soak's own requests (direct, without faults) and
    /// a kubeconfig for the controller that goes through the proxy.
    pub async fn start(work_dir: &std::path::Path) -> anyhow::Result<(FaultKit, TestEnv, PathBuf)> {
        let plane = OwnControlPlane::start("soak").await?;
        let env = plane.env().await?;
        let proxy = FaultProxy::start(env.config().clone(), Faults::none()).await?;
        let kubeconfig = work_dir.join("kubeconfig-soak-proxy");
        std::fs::write(&kubeconfig, proxy.kubeconfig())?;
        Ok((FaultKit { proxy, plane }, env, kubeconfig))
    }

    /// Where the control plane keeps its pid files.
    pub fn pid_dir(&self) -> PathBuf {
        self.plane.dir().join("pids")
    }

    /// Injects `fault` and returns when it is over, with what it did.
    pub async fn inject(&self, fault: Fault) -> anyhow::Result<String> {
        Ok(match fault {
            Fault::ApiServerKilled => {
                self.plane.signal("kube-apiserver", "KILL")?;
                tokio::time::sleep(Duration::from_secs(10)).await;
                self.plane.restart_apiserver().await?;
                "restarted".into()
            }
            Fault::EtcdStopped => {
                let frozen = self.plane.freeze("etcd")?;
                tokio::time::sleep(Duration::from_secs(20)).await;
                drop(frozen);
                "continued".into()
            }
            Fault::WatchesCut => format!("{} watches cut", self.proxy.cut_watches()),
            Fault::Throttled => {
                let before = self.throttled();
                self.proxy.set_rules(vec![Rule {
                    path_prefix: "/".into(),
                    requests: Requests::All,
                    action: Action::Status(429),
                }]);
                tokio::time::sleep(Duration::from_secs(30)).await;
                self.proxy.set_rules(Vec::new());
                format!("{} answers 429", self.throttled() - before)
            }
            Fault::Quiet => String::new(),
        })
    }

    fn throttled(&self) -> u64 {
        self.proxy
            .injected()
            .get("rule-status-429")
            .copied()
            .unwrap_or(0)
    }
}

/// The sockets a process holds open (its connections to the API server among them), from
/// `/proc/<pid>/fd`; `None` when the process is gone.
pub fn open_sockets(pid: u32) -> Option<usize> {
    let entries = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    Some(
        entries
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter(|target| target.to_string_lossy().starts_with("socket:"))
            .count(),
    )
}

/// One round of the soak under faults.
#[derive(Clone, Debug, Serialize)]
pub struct FaultRound {
    pub round: u32,
    /// Minutes since the measured time started, at the round's end.
    pub minute: f64,
    pub fault: Fault,
    /// What the fault did (watches cut, answers 429).
    pub injected: String,
    /// From the changes sent to every Rollout settled.
    pub seconds_to_settle: f64,
    pub rss_mib: f64,
    pub sockets: usize,
}

/// What the ReplicaSets of the soak's namespace showed at its end.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ReplicaSetCheck {
    pub rollouts: usize,
    pub replica_sets: usize,
    /// Each a sentence; empty when every check held.
    pub violations: Vec<String>,
}

/// Every Rollout's ReplicaSets: one per template (no two with the same image), each with the
/// pod-template-hash label and the revision annotation the controller writes, and only one
/// with pods (the stable one, everything settled).
pub async fn check_replica_sets(client: &Client, ns: &str) -> anyhow::Result<ReplicaSetCheck> {
    let api: Api<ReplicaSet> = Api::namespaced(client.clone(), ns);
    let list = api.list(&ListParams::default()).await?;
    Ok(judge_replica_sets(&list.items))
}

fn judge_replica_sets(items: &[ReplicaSet]) -> ReplicaSetCheck {
    let mut by_rollout: BTreeMap<String, Vec<&ReplicaSet>> = BTreeMap::new();
    let mut violations = Vec::new();
    for rs in items {
        match rs.owner_references().first() {
            Some(owner) => by_rollout.entry(owner.name.clone()).or_default().push(rs),
            None => violations.push(format!("{} has no owner", rs.name_any())),
        }
    }
    for (rollout, sets) in &by_rollout {
        let mut images = BTreeSet::new();
        let mut with_pods = 0;
        for rs in sets {
            let name = rs.name_any();
            if !rs.labels().contains_key("rollouts-pod-template-hash") {
                violations.push(format!("{name} lost its rollouts-pod-template-hash label"));
            }
            if !rs
                .annotations()
                .contains_key("rollout.argoproj.io/revision")
            {
                violations.push(format!("{name} lost its revision annotation"));
            }
            let image = rs
                .spec
                .as_ref()
                .and_then(|s| s.template.as_ref())
                .and_then(|t| t.spec.as_ref())
                .and_then(|s| s.containers.first())
                .and_then(|c| c.image.clone())
                .unwrap_or_default();
            if !images.insert(image.clone()) {
                violations.push(format!(
                    "{rollout} has a second ReplicaSet for {image} ({name})"
                ));
            }
            if rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0) > 0 {
                with_pods += 1;
            }
        }
        if with_pods != 1 {
            violations.push(format!("{rollout} has {with_pods} ReplicaSets with pods"));
        }
    }
    ReplicaSetCheck {
        rollouts: by_rollout.len(),
        replica_sets: items.len(),
        violations,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rs(name: &str, owner: &str, image: &str, replicas: i32, revision: bool) -> ReplicaSet {
        let mut annotations = json!({});
        if revision {
            annotations["rollout.argoproj.io/revision"] = json!("1");
        }
        serde_json::from_value(json!({
            "metadata": {"name": name,
                "labels": {"rollouts-pod-template-hash": name},
                "annotations": annotations,
                "ownerReferences": [{"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
                                     "name": owner, "uid": "u"}]},
            "spec": {"replicas": replicas, "selector": {},
                     "template": {"spec": {"containers": [{"name": "app", "image": image}]}}}
        }))
        .unwrap()
    }

    #[test]
    fn settled_replica_sets_pass() {
        let check =
            judge_replica_sets(&[rs("a-1", "a", "v1", 0, true), rs("a-2", "a", "v2", 1, true)]);
        assert_eq!(check.violations, Vec::<String>::new());
        assert_eq!((check.rollouts, check.replica_sets), (1, 2));
    }

    #[test]
    fn each_violation_is_found() {
        let second =
            judge_replica_sets(&[rs("a-1", "a", "v2", 0, true), rs("a-2", "a", "v2", 1, true)]);
        assert!(
            second
                .violations
                .iter()
                .any(|v| v.contains("second ReplicaSet")),
            "{second:?}"
        );
        let lost = judge_replica_sets(&[rs("a-1", "a", "v1", 1, false)]);
        assert!(
            lost.violations
                .iter()
                .any(|v| v.contains("revision annotation")),
            "{lost:?}"
        );
        let two =
            judge_replica_sets(&[rs("a-1", "a", "v1", 1, true), rs("a-2", "a", "v2", 1, true)]);
        assert!(
            two.violations
                .iter()
                .any(|v| v.contains("2 ReplicaSets with pods")),
            "{two:?}"
        );
    }

    #[test]
    fn this_process_holds_a_socket_it_opened() {
        let before = open_sockets(std::process::id()).unwrap();
        let _listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        assert_eq!(open_sockets(std::process::id()), Some(before + 1));
        assert_eq!(open_sockets(u32::MAX), None);
    }
}
