//! Named scenarios: each one replays a failure the original controller is known for, with the
//! seed choosing sizes, timings and which faults are switched on.

mod analysis;
mod bluegreen;
mod chaos;
mod config_rollouts;
mod daemon_sets;
mod experiments;
mod istio;
mod known;
mod notifications;
mod stateful_sets;
mod step_plugins;
mod takeover;

use serde_json::{Value, json};

use crate::analysis_runs::MeasureScript;
use crate::api_model::Kind;
use crate::faults::Faults;
use crate::invariants::Expect;
use crate::kubelet::KubeletConfig;
use crate::notifications::Notify;
use crate::rng::Rng;

/// Everything a run starts from.
#[derive(Debug, Clone)]
pub struct Setup {
    pub rollout: Value,
    /// Objects the Rollout depends on, created with it: Services it routes through,
    /// AnalysisTemplates its analyses (and its Experiments') name, router objects (a
    /// VirtualService).
    pub objects: Vec<(Kind, Value)>,
    pub controllers: usize,
    pub leases: bool,
    pub faults: Faults,
    pub kubelet: KubeletConfig,
    /// What the metric providers report to the AnalysisRun controller.
    pub analysis: MeasureScript,
    pub script: Vec<Step>,
    /// The notifications the leader sends, through the recording service (none: the
    /// notifications loop has nothing to do).
    pub notifications: Option<Notify>,
    pub expect: Expect,
}

/// One user or operator action, taken some time after a condition holds.
#[derive(Debug, Clone)]
pub struct Step {
    pub wait: Wait,
    pub delay_ms: (u64, u64),
    pub op: Op,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wait {
    Now,
    /// The Rollout's status reflects its current spec and shows this phase.
    Phase(&'static str),
    /// The current update has reached this step index.
    CanaryStep(i32),
    /// An update to a revision other than the stable one has reached this step index. For a
    /// Rollout driving a workload whose template the user edits (its own spec, and so its
    /// generation, is unchanged), a finished update's step index says nothing yet.
    UpdateStep(i32),
    /// The Rollout has a pause condition with this reason.
    Paused(&'static str),
    /// The stable ReplicaSet reads the copy of ConfigMap `demo-config` with this content
    /// ([`config_data`]): an update of the ConfigMap alone leaves the Rollout's generation,
    /// and so its phase, as they were until the controller notices it.
    StableConfig(&'static str),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Whoever holds the lease (replica 0 without leases).
    Leader,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    SetImage(String),
    /// A user edits the image of the StatefulSet `demo` (a Rollout driving a StatefulSet takes
    /// its template from there).
    SetStatefulSetImage(String),
    /// A user edits the image of the DaemonSet `demo`.
    SetDaemonSetImage(String),
    /// A user edits ConfigMap `demo-config` to the content [`config_data`] gives this tag.
    SetConfig(&'static str),
    /// The stable revision must read ConfigMap `demo-config` with the content of this tag at
    /// quiescence (what the scenario's inputs dictate, told to the checks).
    ExpectConfig(&'static str),
    /// A node of this name joins the cluster.
    AddNode(String),
    /// The node of this name leaves the cluster.
    RemoveNode(String),
    Crash(Target),
    Partition(Target, u64),
    /// The target's lease requests fail (the API server times out on them) for this long.
    FailLeaseRenewals(Target, u64),
    /// A user resumes a paused Rollout as Argo CD's Resume action does: clears
    /// `status.pauseConditions` through the status endpoint.
    Promote,
    /// A user promotes in full, as `kubectl argo rollouts promote --full` does: sets
    /// `status.promoteFull`.
    PromoteFull,
    /// A user aborts the update, as `kubectl argo rollouts abort` does: sets `status.abort`
    /// through the status endpoint.
    Abort,
    /// The Rollout must still be paused for `reason`, with exactly `background_runs`
    /// background AnalysisRuns for its current pod template.
    ExpectPaused {
        reason: &'static str,
        background_runs: usize,
    },
}

#[derive(Clone, Copy)]
pub struct Scenario {
    pub name: &'static str,
    pub about: &'static str,
    pub build: fn(u64, &mut Rng) -> Setup,
}

impl std::fmt::Debug for Scenario {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

pub fn all() -> Vec<Scenario> {
    let mut v = known::scenarios();
    v.push(bluegreen::scenario());
    v.extend(analysis::scenarios());
    v.extend(experiments::scenarios());
    v.extend(istio::scenarios());
    v.push(chaos::scenario());
    v.extend(takeover::scenarios());
    v.extend(notifications::scenarios());
    v.extend(step_plugins::scenarios());
    v.extend(stateful_sets::scenarios());
    v.extend(daemon_sets::scenarios());
    v.extend(config_rollouts::scenarios());
    v
}

/// The ConfigMap the config-rollout scenario's Rollout reads.
pub const CONFIG_MAP: &str = "demo-config";

/// The content of ConfigMap [`CONFIG_MAP`] at the version `tag`.
pub fn config_data(tag: &str) -> Value {
    json!({"app.properties": format!("version={tag}\n"), "LEVEL": tag})
}

/// The uid standing for the Rollout's in the ownerReferences of objects a scenario starts
/// with (the Rollout's uid is known only once it is created).
pub const ROLLOUT_UID: &str = "<rollout-uid>";

/// Points `obj`'s ownerReferences that name [`ROLLOUT_UID`] at the created Rollout's `uid`.
pub fn own_by_rollout(obj: &mut Value, uid: &Value) {
    if let Some(owners) = obj
        .pointer_mut("/metadata/ownerReferences")
        .and_then(Value::as_array_mut)
    {
        for owner in owners {
            if owner["uid"] == ROLLOUT_UID {
                owner["uid"] = uid.clone();
            }
        }
    }
}

pub fn find(name: &str) -> Option<Scenario> {
    all().into_iter().find(|s| s.name == name)
}

/// The canary steps most scenarios use: three weights with short timed pauses between.
pub fn default_steps() -> Value {
    json!([
        {"setWeight": 25}, {"pause": {"duration": "10s"}},
        {"setWeight": 50}, {"pause": {"duration": "10s"}},
        {"setWeight": 75}, {"pause": {"duration": "5s"}}
    ])
}

pub fn image(tag: &str) -> String {
    format!("app:{tag}")
}

/// A Rollout named `demo` running `app:v1`.
pub fn rollout(replicas: i32, steps: Value) -> Value {
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": "demo", "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "progressDeadlineSeconds": 60,
            "selector": {"matchLabels": {"app": "demo"}},
            "template": {
                "metadata": {"labels": {"app": "demo"}},
                "spec": {"containers": [{"name": "app", "image": image("v1")}]}
            },
            "strategy": {"canary": {"steps": steps}}
        }
    })
}

pub fn kubelet(rng: &mut Rng, bad: &[&str]) -> KubeletConfig {
    KubeletConfig {
        startup_ms: (500, rng.range((1_000, 8_000))),
        bad_images: bad.iter().map(|t| image(t)).collect(),
    }
}

pub fn step(wait: Wait, delay_ms: (u64, u64), op: Op) -> Step {
    Step { wait, delay_ms, op }
}
