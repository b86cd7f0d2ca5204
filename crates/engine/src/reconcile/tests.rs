//! Scenario tests of the reconcile loop: a tiny in-memory world applies each plan (creating
//! and scaling ReplicaSets, with pods becoming available at once unless the revision is
//! "bad") and feeds the result back, with time moved by hand.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};
use serde_json::json;
use sluice_api::rollout::{Rollout, RolloutPhase};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::labels::{EPHEMERAL_METADATA, MANAGED_BY, POD_TEMPLATE_HASH, SCALE_DOWN_DEADLINE};
use crate::observed::{Observed, ReplicaSetExt};
use crate::plan::{Action, Plan};
use sluice_api::analysis::{AnalysisRun, AnalysisRunStatus, AnalysisTemplateSpec};
use sluice_api::common::AnalysisPhase;

struct World {
    ro: Rollout,
    rss: Vec<ReplicaSet>,
    now: Timestamp,
    /// Images whose pods never become available.
    bad_images: Vec<String>,
    writes: usize,
    pods: Vec<Pod>,
    pod_serial: u32,
    services: Vec<k8s_openapi::api::core::v1::Service>,
    runs: Vec<AnalysisRun>,
    templates: crate::observed::AnalysisTemplates,
    /// Router objects, as an API server would hold them (resourceVersion bumped on writes).
    routers: BTreeMap<sluice_routers::kinds::ObjectRef, serde_json::Value>,
    experiments: Vec<sluice_api::experiment::Experiment>,
    settings: crate::Settings,
    progress_held_since: Option<Timestamp>,
    /// ReplicaSets scaled down report their pods gone one reconcile late, as on a cluster:
    /// the ReplicaSet controller deletes the pods, then writes the counts.
    slow_scale_down: bool,
}

fn rollout(replicas: i32, steps: serde_json::Value) -> Rollout {
    serde_json::from_value(json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": "demo", "namespace": "ns", "uid": "uid-1", "generation": 1},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "demo"}},
            "template": {
                "metadata": {"labels": {"app": "demo"}},
                "spec": {"containers": [{"name": "app", "image": "app:v1"}]}
            },
            "strategy": {"canary": {"steps": steps}}
        }
    }))
    .unwrap()
}

impl World {
    fn new(ro: Rollout) -> Self {
        Self {
            ro,
            rss: Vec::new(),
            now: Timestamp::from_second(1_800_000_000).unwrap(),
            bad_images: Vec::new(),
            writes: 0,
            pods: Vec::new(),
            pod_serial: 0,
            services: Vec::new(),
            runs: Vec::new(),
            templates: Default::default(),
            routers: BTreeMap::new(),
            experiments: Vec::new(),
            settings: Default::default(),
            progress_held_since: None,
            slow_scale_down: false,
        }
    }

    fn image_of(rs: &ReplicaSet) -> String {
        rs.spec
            .as_ref()
            .and_then(|s| s.template.as_ref())
            .and_then(|t| t.spec.as_ref())
            .and_then(|s| s.containers.first())
            .and_then(|c| c.image.clone())
            .unwrap_or_default()
    }

    /// The ReplicaSet controller and kubelet: pods match spec; available unless bad.
    fn settle_pods(&mut self) {
        for rs in &self.rss {
            let hash = rs.pod_hash().unwrap_or_default().to_string();
            let has_hash = |p: &Pod| {
                p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(POD_TEMPLATE_HASH))
                    == Some(&hash)
            };
            let mut count = self.pods.iter().filter(|p| has_hash(p)).count() as i32;
            while count > rs.spec_replicas() {
                let i = self.pods.iter().position(has_hash).unwrap();
                self.pods.remove(i);
                count -= 1;
            }
            while count < rs.spec_replicas() {
                self.pod_serial += 1;
                // Pods are made from the ReplicaSet's template, as the ReplicaSet controller does.
                let template = rs
                    .spec
                    .as_ref()
                    .and_then(|s| s.template.as_ref())
                    .and_then(|t| t.metadata.clone())
                    .unwrap_or_default();
                let mut labels = template.labels.unwrap_or_default();
                labels.insert(POD_TEMPLATE_HASH.to_string(), hash.clone());
                self.pods.push(Pod {
                    metadata: ObjectMeta {
                        name: Some(format!("{}-{}", rs.name(), self.pod_serial)),
                        creation_timestamp: Some(Time(self.now)),
                        labels: Some(labels),
                        annotations: template.annotations,
                        ..Default::default()
                    },
                    ..Default::default()
                });
                count += 1;
            }
        }
        for rs in &mut self.rss {
            let spec = rs.spec_replicas();
            let counted = rs.status.as_ref().map_or(0, |s| s.replicas);
            if self.slow_scale_down
                && counted > spec
                && rs.status.as_ref().and_then(|s| s.observed_generation) != rs.metadata.generation
            {
                // Seen once more with the old counts; the next look finds them current.
                rs.status.as_mut().unwrap().observed_generation = rs.metadata.generation;
                continue;
            }
            let good = !self.bad_images.contains(&Self::image_of(rs));
            rs.status = Some(ReplicaSetStatus {
                replicas: spec,
                ready_replicas: Some(if good { spec } else { 0 }),
                available_replicas: Some(if good { spec } else { 0 }),
                observed_generation: rs.metadata.generation,
                ..Default::default()
            });
        }
    }

    fn reconcile(&mut self) -> Plan {
        // Pods only when the observe step would list them.
        let pods = if Observed::needs_pods(&self.ro, &self.rss, self.now) {
            self.pods.clone()
        } else {
            Vec::new()
        };
        let observed = Observed {
            rollout: self.ro.clone(),
            replica_sets: self.rss.clone(),
            pods,
            services: self.services.clone(),
            analysis_runs: self.runs.clone(),
            analysis_templates: self.templates.clone(),
            router_objects: self.routers.clone(),
            router_versions: Default::default(),
            experiments: self.experiments.clone(),
            progress_held_since: self.progress_held_since,
            now: self.now,
        };
        let plan = crate::reconcile_with(&observed, &self.settings);
        // What the controller remembers of held-back progress.
        self.progress_held_since = if plan.progress_held {
            self.progress_held_since.or(Some(self.now))
        } else {
            None
        };
        for action in &plan.actions {
            self.writes += 1;
            match action {
                Action::CreateReplicaSet { replica_set } => {
                    assert!(
                        !self.rss.iter().any(|r| r.name() == replica_set.name()),
                        "duplicate ReplicaSet {}",
                        replica_set.name()
                    );
                    let mut rs = (**replica_set).clone();
                    rs.metadata.generation = Some(1);
                    rs.metadata.creation_timestamp = Some(Time(self.now));
                    self.rss.push(rs);
                }
                Action::ScaleReplicaSet {
                    name,
                    to,
                    annotations,
                    ..
                } => {
                    let rs = self.rss.iter_mut().find(|r| r.name() == name).unwrap();
                    rs.spec.as_mut().unwrap().replicas = Some(*to);
                    rs.metadata.generation = Some(rs.metadata.generation.unwrap_or(1) + 1);
                    apply_annotations(rs, annotations);
                }
                Action::ConfirmReplicaSet { .. } => {}
                Action::AnnotateReplicaSet {
                    name, annotations, ..
                } => {
                    let rs = self.rss.iter_mut().find(|r| r.name() == name).unwrap();
                    apply_annotations(rs, annotations);
                }
                Action::DeleteReplicaSet { name, .. } => self.rss.retain(|r| r.name() != name),
                Action::SwitchService {
                    name,
                    pod_hash,
                    rollout,
                    ..
                } => {
                    let svc = self
                        .services
                        .iter_mut()
                        .find(|s| s.metadata.name.as_ref() == Some(name))
                        .unwrap();
                    svc.spec
                        .get_or_insert_with(Default::default)
                        .selector
                        .get_or_insert_with(BTreeMap::new)
                        .insert(POD_TEMPLATE_HASH.to_string(), pod_hash.clone());
                    svc.metadata
                        .annotations
                        .get_or_insert_with(BTreeMap::new)
                        .insert(MANAGED_BY.to_string(), rollout.clone());
                }
                Action::ReleaseService { name, .. } => {
                    let svc = self
                        .services
                        .iter_mut()
                        .find(|s| s.metadata.name.as_ref() == Some(name))
                        .unwrap();
                    if let Some(sel) = svc.spec.as_mut().and_then(|s| s.selector.as_mut()) {
                        sel.remove(POD_TEMPLATE_HASH);
                    }
                    if let Some(a) = svc.metadata.annotations.as_mut() {
                        a.remove(MANAGED_BY);
                    }
                }
                Action::EvictPod { name, .. } => {
                    self.pods.retain(|p| p.metadata.name.as_ref() != Some(name));
                }
                Action::SetReplicaSetPodMetadata {
                    name,
                    labels,
                    annotations,
                    record,
                    ..
                } => {
                    let rs = self.rss.iter_mut().find(|r| r.name() == name).unwrap();
                    let meta = rs
                        .spec
                        .as_mut()
                        .unwrap()
                        .template
                        .as_mut()
                        .unwrap()
                        .metadata
                        .get_or_insert_with(Default::default);
                    apply_changes(&mut meta.labels, labels);
                    apply_changes(&mut meta.annotations, annotations);
                    rs.metadata.generation = Some(rs.metadata.generation.unwrap_or(1) + 1);
                    let record = [(EPHEMERAL_METADATA.to_string(), record.clone())].into();
                    apply_annotations(rs, &record);
                }
                Action::PatchPodMetadata {
                    name,
                    labels,
                    annotations,
                    ..
                } => {
                    let pod = self
                        .pods
                        .iter_mut()
                        .find(|p| p.metadata.name.as_ref() == Some(name))
                        .unwrap();
                    apply_changes(&mut pod.metadata.labels, labels);
                    apply_changes(&mut pod.metadata.annotations, annotations);
                }
                Action::CreateAnalysisRun { run } => {
                    assert!(
                        !self
                            .runs
                            .iter()
                            .any(|r| r.metadata.name == run.metadata.name),
                        "duplicate AnalysisRun {:?}",
                        run.metadata.name
                    );
                    let mut run = (**run).clone();
                    run.metadata.creation_timestamp = Some(Time(self.now));
                    run.metadata.uid = Some(format!("run-uid-{}", self.runs.len()));
                    self.runs.push(run);
                }
                Action::TerminateAnalysisRun { name } => {
                    let run = self.run_mut(name);
                    run.spec.terminate = Some(true);
                }
                Action::AnnotateAnalysisRun {
                    name, annotations, ..
                } => {
                    let run = self.run_mut(name);
                    let a = run.metadata.annotations.get_or_insert_with(BTreeMap::new);
                    for (k, v) in annotations {
                        match v {
                            Some(v) => a.insert(k.clone(), v.clone()),
                            None => a.remove(k),
                        };
                    }
                }
                Action::CreateRouterObject { target, object } => {
                    assert!(!self.routers.contains_key(target), "{target} exists");
                    let mut object = (**object).clone();
                    object["metadata"]["resourceVersion"] = json!("1");
                    self.routers.insert(target.clone(), object);
                }
                Action::UpdateRouterObject { target, object } => {
                    let stored = self.routers.get(target).expect("router object exists");
                    assert_eq!(
                        stored["metadata"]["resourceVersion"],
                        object["metadata"]["resourceVersion"],
                        "{target} written over newer state"
                    );
                    let next = stored["metadata"]["resourceVersion"]
                        .as_str()
                        .and_then(|v| v.parse::<u64>().ok())
                        .unwrap_or(0)
                        + 1;
                    let mut object = (**object).clone();
                    object["metadata"]["resourceVersion"] = json!(next.to_string());
                    self.routers.insert(target.clone(), object);
                }
                Action::DeleteRouterObject { target, .. } => {
                    self.routers.remove(target);
                }
                Action::CreateExperiment { experiment } => {
                    let mut e = (**experiment).clone();
                    e.metadata.uid = e.metadata.name.clone();
                    self.experiments.push(e);
                }
                Action::TerminateExperiment { name } => {
                    for e in &mut self.experiments {
                        if e.metadata.name.as_ref() == Some(name) {
                            e.spec.terminate = Some(true);
                        }
                    }
                }
                Action::DeleteExperiment { name, .. } => {
                    self.experiments
                        .retain(|e| e.metadata.name.as_ref() != Some(name));
                }
                Action::DeleteAnalysisRun { name, .. } => {
                    self.runs.retain(|r| r.metadata.name.as_ref() != Some(name));
                }
                Action::AnnotateRollout { annotations, .. } => {
                    let a = self
                        .ro
                        .metadata
                        .annotations
                        .get_or_insert_with(BTreeMap::new);
                    for (k, v) in annotations {
                        match v {
                            Some(v) => a.insert(k.clone(), v.clone()),
                            None => a.remove(k),
                        };
                    }
                }
            }
        }
        self.ro.status = Some(plan.status.clone());
        self.settle_pods();
        plan
    }

    /// Reconciles until nothing changes any more (at this `now`).
    fn settle(&mut self) -> Plan {
        for _ in 0..50 {
            let before = (self.ro.clone(), self.rss.clone(), self.pods.clone());
            let plan = self.reconcile();
            if before.0 == self.ro && before.1 == self.rss && before.2 == self.pods {
                return plan;
            }
        }
        panic!("did not settle: {:#?}", self.ro.status);
    }

    /// [`Self::settle`], returning the reasons of every event on the way, in order.
    fn settle_events(&mut self) -> Vec<&'static str> {
        let mut reasons = Vec::new();
        for _ in 0..50 {
            let before = (self.ro.clone(), self.rss.clone(), self.pods.clone());
            let plan = self.reconcile();
            reasons.extend(plan.events.iter().map(|e| e.reason));
            if before.0 == self.ro && before.1 == self.rss && before.2 == self.pods {
                return reasons;
            }
        }
        panic!("did not settle: {:#?}", self.ro.status);
    }

    fn advance(&mut self, secs: i64) {
        self.now += SignedDuration::from_secs(secs);
    }

    fn set_image(&mut self, image: &str) {
        let t = self.ro.spec.template.as_mut().unwrap();
        t.spec.as_mut().unwrap().containers[0].image = Some(image.into());
        self.ro.metadata.generation = Some(self.ro.metadata.generation.unwrap() + 1);
    }

    fn status(&self) -> &sluice_api::RolloutStatus {
        self.ro.status.as_ref().unwrap()
    }

    fn phase(&self) -> RolloutPhase {
        self.status().phase.clone().unwrap()
    }

    fn replicas_by_image(&self) -> Vec<(String, i32)> {
        let mut v: Vec<(String, i32)> = self
            .rss
            .iter()
            .map(|rs| (Self::image_of(rs), rs.spec_replicas()))
            .collect();
        v.sort();
        v
    }

    fn promote(&mut self) {
        let s = self.ro.status.as_mut().unwrap();
        s.pause_conditions = None;
    }

    fn run_mut(&mut self, name: &str) -> &mut AnalysisRun {
        self.runs
            .iter_mut()
            .find(|r| r.metadata.name.as_deref() == Some(name))
            .unwrap()
    }

    /// The runs of one `rollout-type`.
    fn runs_of(&self, kind: &str) -> Vec<&AnalysisRun> {
        self.runs
            .iter()
            .filter(|r| {
                r.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("rollout-type"))
                    == Some(&kind.to_string())
            })
            .collect()
    }

    /// What the AnalysisRun controller would report: the newest run of `kind` gets `phase`.
    fn verdict(&mut self, kind: &str, phase: AnalysisPhase, message: &str) {
        let name = self
            .runs_of(kind)
            .last()
            .and_then(|r| r.metadata.name.clone())
            .unwrap_or_else(|| panic!("no {kind} run"));
        let run = self.run_mut(&name);
        run.status = Some(AnalysisRunStatus {
            phase: Some(phase),
            message: (!message.is_empty()).then(|| message.to_string()),
            ..Default::default()
        });
    }

    fn add_template(&mut self, name: &str) {
        let spec: AnalysisTemplateSpec = serde_json::from_value(json!({
            "metrics": [{"name": "m", "interval": "5s", "provider": {"web": {"url": "http://x"}}}]
        }))
        .unwrap();
        self.templates.insert(
            crate::observed::TemplateKey {
                cluster_scope: false,
                name: name.into(),
            },
            spec,
        );
    }

    /// The name of the ReplicaSet running `image`.
    fn rs_named_by_image(&self, image: &str) -> String {
        let rs = self.rss.iter().find(|r| World::image_of(r) == image);
        rs.map(|r| r.name().to_string()).unwrap()
    }

    fn pause_reasons(&self) -> Vec<String> {
        self.status()
            .pause_conditions
            .iter()
            .flatten()
            .filter_map(|p| p.reason.as_ref().map(|r| r.as_str().to_string()))
            .collect()
    }
}

fn apply_annotations(rs: &mut ReplicaSet, annotations: &BTreeMap<String, Option<String>>) {
    apply_changes(&mut rs.metadata.annotations, annotations);
}

/// A merge patch of one string map: `None` removes the key.
fn apply_changes(
    map: &mut Option<BTreeMap<String, String>>,
    changes: &BTreeMap<String, Option<String>>,
) {
    let m = map.get_or_insert_with(BTreeMap::new);
    for (k, v) in changes {
        match v {
            Some(v) => m.insert(k.clone(), v.clone()),
            None => m.remove(k),
        };
    }
}

fn healthy_world(replicas: i32, steps: serde_json::Value) -> World {
    let mut w = World::new(rollout(replicas, steps));
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    w
}

#[test]
fn first_deploy_goes_straight_to_full_and_healthy() {
    let w = healthy_world(5, json!([{"setWeight": 20}, {"pause": {}}]));
    assert_eq!(w.rss.len(), 1);
    assert_eq!(w.replicas_by_image(), vec![("app:v1".into(), 5)]);
    let s = w.status();
    assert_eq!(s.stable_rs, s.current_pod_hash);
    assert_eq!(s.current_step_index, Some(2));
    assert_eq!(s.observed_generation.as_deref(), Some("1"));
    assert_eq!(s.selector.as_deref(), Some("app=demo"));
    let rs = &w.rss[0];
    assert_eq!(
        rs.name(),
        format!("demo-{}", s.current_pod_hash.as_deref().unwrap())
    );
    assert_eq!(rs.revision(), Some(1));
    assert_eq!(
        w.ro.metadata.annotations.as_ref().unwrap()["rollout.argoproj.io/revision"],
        "1"
    );
}

#[test]
fn steady_state_writes_nothing() {
    let mut w = healthy_world(3, json!([{"setWeight": 50}]));
    let before = w.ro.status.clone();
    let plan = w.reconcile();
    assert!(plan.actions.is_empty(), "{:?}", plan.actions);
    assert_eq!(Some(plan.status), before);
    assert!(plan.events.is_empty());
}

#[test]
fn update_walks_through_steps_with_argo_replica_counts() {
    let mut w = healthy_world(
        5,
        json!([{"setWeight": 20}, {"pause": {}}, {"setWeight": 40}, {"pause": {"duration": "40s"}}, {"setWeight": 80}]),
    );
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    assert_eq!(w.status().message.as_deref(), Some("CanaryPauseStep"));
    assert_eq!(w.status().current_step_index, Some(1));
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 4), ("app:v2".into(), 1)]
    );
    // Waiting does not promote an indefinite pause.
    w.advance(3600);
    w.settle();
    assert_eq!(w.status().current_step_index, Some(1));

    w.promote();
    let plan = w.settle();
    assert_eq!(w.status().current_step_index, Some(3));
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 3), ("app:v2".into(), 2)]
    );
    assert_eq!(plan.requeue_after, Some(std::time::Duration::from_secs(40)));
    w.advance(39);
    w.settle();
    assert_eq!(w.status().current_step_index, Some(3));
    w.advance(1);
    w.settle();
    // Past the last step: fully promoted, the old revision scaled away.
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 0), ("app:v2".into(), 5)]
    );
    assert_eq!(w.status().stable_rs, w.status().current_pod_hash);
    assert_eq!(w.status().current_step_index, Some(5));
}

#[test]
fn abort_returns_to_stable_and_retry_resumes() {
    let mut w = healthy_world(4, json!([{"setWeight": 50}, {"pause": {}}]));
    w.set_image("app:v2");
    w.settle();
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 2), ("app:v2".into(), 2)]
    );
    w.ro.status.as_mut().unwrap().abort = Some(true);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    assert!(
        w.status()
            .message
            .as_deref()
            .unwrap()
            .starts_with("RolloutAborted: Rollout aborted update to revision 2")
    );
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 4), ("app:v2".into(), 0)]
    );
    assert!(w.status().aborted_at.is_some());
    assert!(w.status().pause_conditions.is_none());

    w.ro.status.as_mut().unwrap().abort = Some(false);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 2), ("app:v2".into(), 2)]
    );
    w.promote();
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy);
}

#[test]
fn promote_full_on_an_aborted_canary_clears_the_abort_and_promotes() {
    let mut w = healthy_world(4, json!([{"setWeight": 50}, {"pause": {}}]));
    w.set_image("app:v2");
    w.settle();
    w.ro.status.as_mut().unwrap().abort = Some(true);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Degraded);

    w.ro.status.as_mut().unwrap().promote_full = Some(true);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(w.status().abort, None);
    assert_eq!(w.status().aborted_at, None);
    assert_eq!(w.status().promote_full, None);
    assert_eq!(w.status().current_step_index, Some(2));
    assert_eq!(w.status().stable_rs, w.status().current_pod_hash);
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 0), ("app:v2".into(), 4)]
    );
}

#[test]
fn promote_full_skips_remaining_steps() {
    let mut w = healthy_world(
        4,
        json!([{"setWeight": 25}, {"pause": {}}, {"setWeight": 50}, {"pause": {}}]),
    );
    w.set_image("app:v2");
    w.settle();
    w.ro.status.as_mut().unwrap().promote_full = Some(true);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy);
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 0), ("app:v2".into(), 4)]
    );
    assert_eq!(w.status().promote_full, None);
}

#[test]
fn manual_pause_holds_the_step() {
    let mut w = healthy_world(4, json!([{"setWeight": 25}, {"setWeight": 50}]));
    w.ro.spec.paused = Some(true);
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    assert_eq!(w.status().message.as_deref(), Some("manually paused"));
    assert_eq!(w.replicas_by_image(), vec![("app:v1".into(), 4)]);
    w.ro.spec.paused = Some(false);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy);
}

#[test]
fn superseding_revision_completes_and_scales_the_intermediate_down() {
    for replicas in [1, 2, 3, 4, 10] {
        let mut w = healthy_world(replicas, json!([{"setWeight": 50}, {"pause": {}}]));
        w.set_image("app:v2");
        w.settle();
        assert_eq!(w.phase(), RolloutPhase::Paused, "R={replicas}");
        w.set_image("app:v3");
        w.settle();
        assert_eq!(
            w.phase(),
            RolloutPhase::Paused,
            "R={replicas}: {:#?}",
            w.status()
        );
        w.promote();
        w.settle();
        assert_eq!(
            w.phase(),
            RolloutPhase::Healthy,
            "R={replicas}: {:#?}",
            w.status()
        );
        let counts = w.replicas_by_image();
        assert_eq!(
            counts,
            vec![
                ("app:v1".into(), 0),
                ("app:v2".into(), 0),
                ("app:v3".into(), replicas)
            ],
            "R={replicas}"
        );
    }
}

#[test]
fn availability_never_drops_below_max_unavailable_during_update() {
    let mut w = healthy_world(10, json!([{"setWeight": 30}, {"setWeight": 70}]));
    w.set_image("app:v2");
    for _ in 0..40 {
        w.reconcile();
        let available: i32 = w.rss.iter().map(|r| r.available_replicas()).sum();
        // default maxUnavailable 25% of 10 = 2
        assert!(
            available >= 8,
            "available {available}: {:?}",
            w.replicas_by_image()
        );
    }
    assert_eq!(w.phase(), RolloutPhase::Healthy);
}

#[test]
fn bad_revision_times_out_and_aborts_then_good_then_bad_again() {
    let mut ro = rollout(3, json!([{"setWeight": 34}, {"pause": {"duration": 5}}]));
    ro.spec.progress_deadline_seconds = Some(30);
    ro.spec.progress_deadline_abort = Some(true);
    let mut w = World::new(ro);
    w.settle();
    w.bad_images = vec!["app:bad1".into(), "app:bad2".into()];
    for (image, good) in [("app:bad1", false), ("app:v2", true), ("app:bad2", false)] {
        w.set_image(image);
        w.settle();
        // Nothing more happens until time passes.
        w.advance(29);
        w.settle();
        if good {
            w.advance(10);
            w.settle();
            assert_eq!(
                w.phase(),
                RolloutPhase::Healthy,
                "{image}: {:#?}",
                w.status()
            );
            continue;
        }
        assert_eq!(w.phase(), RolloutPhase::Progressing, "{image}");
        w.advance(2);
        w.settle();
        assert_eq!(
            w.phase(),
            RolloutPhase::Degraded,
            "{image}: {:#?}",
            w.status()
        );
        assert_eq!(w.status().abort, Some(true));
        let bad: i32 = w
            .rss
            .iter()
            .filter(|r| World::image_of(r) == image)
            .map(|r| r.spec_replicas())
            .sum();
        assert_eq!(bad, 0, "{image} scaled down after abort");
    }
    // A deadline annotation elsewhere never matters: none is ever written.
    assert!(
        w.rss
            .iter()
            .all(|r| r.annotation(SCALE_DOWN_DEADLINE).is_none())
    );
}

#[test]
fn progress_deadline_abort_turned_on_after_the_deadline_passed_aborts() {
    let mut ro = rollout(3, json!([{"setWeight": 34}, {"pause": {}}]));
    ro.spec.progress_deadline_seconds = Some(30);
    let mut w = World::new(ro);
    w.settle();
    w.bad_images = vec!["app:bad".into()];
    w.set_image("app:bad");
    w.settle();
    w.advance(31);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    assert_eq!(
        w.status().abort,
        None,
        "no abort without progressDeadlineAbort"
    );
    assert!(
        w.status()
            .message
            .as_deref()
            .unwrap()
            .starts_with("ProgressDeadlineExceeded: ReplicaSet \"demo-")
    );

    w.ro.spec.progress_deadline_abort = Some(true);
    w.ro.metadata.generation = Some(w.ro.metadata.generation.unwrap() + 1);
    let plan = w.reconcile();
    assert_eq!(w.status().abort, Some(true));
    assert!(w.status().aborted_at.is_some());
    let reasons: Vec<&str> = plan.events.iter().map(|e| e.reason).collect();
    assert_eq!(reasons, vec!["RolloutAborted"]);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    let bad: i32 = w
        .rss
        .iter()
        .filter(|r| World::image_of(r) == "app:bad")
        .map(|r| r.spec_replicas())
        .sum();
    assert_eq!(bad, 0, "scaled down after the abort");
    let progressing = w
        .status()
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == Some(sluice_api::rollout::RolloutConditionType::Progressing))
        .unwrap();
    assert_eq!(progressing.reason.as_deref(), Some("RolloutAborted"));
    assert!(
        progressing
            .message
            .as_deref()
            .unwrap()
            .starts_with("Rollout aborted update to revision 2: ReplicaSet ")
    );
}

#[test]
fn lowering_replicas_mid_update_with_a_crashing_canary_keeps_surge_and_availability() {
    for (from, to, weight) in [
        (10, 4, 50),
        (10, 2, 50),
        (5, 1, 20),
        (8, 3, 75),
        (10, 5, 90),
    ] {
        let mut w = healthy_world(from, json!([{"setWeight": weight}, {"pause": {}}]));
        w.bad_images = vec!["app:bad".into()];
        w.set_image("app:bad");
        w.settle();
        w.ro.spec.replicas = Some(to);
        w.ro.metadata.generation = Some(w.ro.metadata.generation.unwrap() + 1);
        w.settle();
        let limits = crate::replicas::resolve_surge_limits(None, None, to).unwrap();
        let total: i32 = w.rss.iter().map(|r| r.spec_replicas()).sum();
        let available: i32 = w.rss.iter().map(|r| r.available_replicas()).sum();
        let case = format!("{from}->{to} at {weight}%: {:?}", w.replicas_by_image());
        assert!(total <= to + limits.max_surge, "over maxSurge: {case}");
        assert!(
            available >= to - limits.max_unavailable,
            "under minimum availability: {case}"
        );
    }
}

#[test]
fn invalid_spec_is_degraded_with_no_writes() {
    let mut ro = rollout(3, json!([{"setWeight": 120}]));
    ro.spec.selector = None;
    let mut w = World::new(ro);
    let plan = w.reconcile();
    assert!(plan.actions.is_empty());
    // Looked at again soon, as Argo does: what made it invalid may appear later.
    assert_eq!(plan.requeue_after, Some(super::INVALID_SPEC_RECHECK));
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    assert!(
        w.status()
            .message
            .as_deref()
            .unwrap()
            .starts_with("InvalidSpec: ")
    );
}

#[test]
fn rollback_to_stable_template_is_immediate() {
    let mut w = healthy_world(4, json!([{"setWeight": 25}, {"pause": {}}]));
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    w.set_image("app:v1");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 4), ("app:v2".into(), 0)]
    );
}

#[test]
fn history_limit_deletes_oldest_idle_replica_sets() {
    let mut ro = rollout(1, json!([]));
    ro.spec.revision_history_limit = Some(1);
    let mut w = World::new(ro);
    w.settle();
    for i in 2..=5 {
        w.set_image(&format!("app:v{i}"));
        w.settle();
    }
    assert_eq!(w.phase(), RolloutPhase::Healthy);
    // current + one idle old revision
    assert_eq!(w.rss.len(), 2, "{:?}", w.replicas_by_image());
    let revisions: Vec<i64> = w.rss.iter().filter_map(|r| r.revision()).collect();
    assert!(
        revisions.contains(&5) && revisions.contains(&4),
        "{revisions:?}"
    );
}

#[test]
fn restart_evicts_old_pods_within_max_unavailable_then_records_it() {
    let mut ro = rollout(4, json!([{"setWeight": 50}]));
    ro.spec
        .strategy
        .as_mut()
        .unwrap()
        .canary
        .as_mut()
        .unwrap()
        .max_unavailable = Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(2));
    let mut w = World::new(ro);
    w.settle();
    let old: Vec<String> = w
        .pods
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(old.len(), 4);
    w.advance(10);
    let at = w.now;
    w.ro.spec.restart_at = Some(Time(at));
    w.ro.metadata.generation = Some(2);
    w.advance(1);
    let plan = w.reconcile();
    let evictions = plan
        .actions
        .iter()
        .filter(|a| matches!(a, Action::EvictPod { .. }))
        .count();
    assert_eq!(evictions, 2, "maxUnavailable 2");
    assert_eq!(w.phase(), RolloutPhase::Progressing);
    assert_eq!(w.status().message.as_deref(), Some("rollout is restarting"));
    w.settle();
    assert_eq!(w.status().restarted_at, Some(Time(at)));
    assert_eq!(w.phase(), RolloutPhase::Healthy);
    assert!(
        w.pods
            .iter()
            .all(|p| !old.contains(p.metadata.name.as_ref().unwrap()))
    );
    assert_eq!(w.pods.len(), 4);
}

#[test]
fn rollback_to_a_template_copied_from_a_replica_set_reuses_it() {
    let mut w = healthy_world(2, json!([{"setWeight": 50}, {"pause": {}}]));
    // The API server fills defaults into ReplicaSet templates; `undo` copies such a template.
    let rs = w.rss[0].clone();
    let mut copied = rs.spec.unwrap().template.unwrap();
    copied
        .metadata
        .as_mut()
        .unwrap()
        .labels
        .as_mut()
        .unwrap()
        .remove(POD_TEMPLATE_HASH);
    copied.spec.as_mut().unwrap().dns_policy = Some("ClusterFirst".into());
    w.rss[0]
        .spec
        .as_mut()
        .unwrap()
        .template
        .as_mut()
        .unwrap()
        .spec
        .as_mut()
        .unwrap()
        .dns_policy = Some("ClusterFirst".into());
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.rss.len(), 2);
    w.ro.spec.template = Some(copied);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(
        w.rss.len(),
        2,
        "no new ReplicaSet for the restored template"
    );
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 2), ("app:v2".into(), 0)]
    );
}

fn bg_rollout(replicas: i32, strategy: serde_json::Value) -> Rollout {
    let mut ro = rollout(replicas, json!([]));
    ro.spec.strategy = Some(serde_json::from_value(json!({"blueGreen": strategy})).unwrap());
    ro
}

fn service(name: &str) -> k8s_openapi::api::core::v1::Service {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"selector": {"app": "demo"}}
    }))
    .unwrap()
}

impl World {
    fn bg(ro: Rollout) -> Self {
        let mut w = World::new(ro);
        w.services = vec![service("active"), service("preview")];
        w
    }

    fn selector_of(&self, svc: &str) -> Option<String> {
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

    fn image_behind(&self, svc: &str) -> Option<String> {
        let hash = self.selector_of(svc)?;
        self.rss
            .iter()
            .find(|rs| rs.pod_hash() == Some(hash.as_str()))
            .map(World::image_of)
    }

    /// The active Service never selects a ReplicaSet with fewer available pods than desired.
    fn assert_active_fully_available(&self) {
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

    fn settle_bg(&mut self) {
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

#[test]
fn blue_green_first_deploy_points_active_and_preview_at_it() {
    let mut w = World::bg(bg_rollout(
        3,
        json!({"activeService": "active", "previewService": "preview"}),
    ));
    w.settle_bg();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v1"));
    assert_eq!(w.image_behind("preview").as_deref(), Some("app:v1"));
    let bg = w.status().blue_green.clone().unwrap();
    assert_eq!(bg.active_selector, w.status().current_pod_hash);
    assert_eq!(w.status().hpa_replicas, Some(3));
    assert!(
        w.status()
            .selector
            .as_deref()
            .unwrap()
            .contains(POD_TEMPLATE_HASH)
    );
    assert_eq!(w.status().current_step_index, None);
}

#[test]
fn blue_green_update_switches_after_full_availability_and_scales_old_down_after_delay() {
    let mut w = World::bg(bg_rollout(
        3,
        json!({"activeService": "active", "previewService": "preview", "scaleDownDelaySeconds": 30}),
    ));
    w.settle_bg();
    w.set_image("app:v2");
    w.settle_bg();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v2"));
    assert_eq!(w.image_behind("preview").as_deref(), Some("app:v2"));
    // The old ReplicaSet waits for its deadline, written as RFC 3339.
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 3), ("app:v2".into(), 3)]
    );
    let old = w
        .rss
        .iter()
        .find(|r| World::image_of(r) == "app:v1")
        .unwrap();
    let deadline = old.annotation(SCALE_DOWN_DEADLINE).unwrap().to_string();
    assert!(
        deadline.ends_with('Z') && !deadline.is_empty(),
        "{deadline}"
    );
    w.advance(29);
    w.settle_bg();
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 3), ("app:v2".into(), 3)]
    );
    w.advance(1);
    w.settle_bg();
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 0), ("app:v2".into(), 3)]
    );
    let old = w
        .rss
        .iter()
        .find(|r| World::image_of(r) == "app:v1")
        .unwrap();
    assert_eq!(
        old.annotation(SCALE_DOWN_DEADLINE),
        None,
        "removed with the scale-down"
    );
}

#[test]
fn blue_green_manual_promotion_with_preview_replica_count() {
    let mut w = World::bg(bg_rollout(
        4,
        json!({"activeService": "active", "previewService": "preview",
               "autoPromotionEnabled": false, "previewReplicaCount": 1}),
    ));
    w.settle_bg();
    w.set_image("app:v2");
    w.settle_bg();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    assert_eq!(w.status().message.as_deref(), Some("BlueGreenPause"));
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 4), ("app:v2".into(), 1)]
    );
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v1"));
    assert_eq!(w.image_behind("preview").as_deref(), Some("app:v2"));
    w.advance(3600);
    w.settle_bg();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    w.promote();
    w.settle_bg();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v2"));
}

#[test]
fn blue_green_auto_promotion_seconds_waits() {
    let mut w = World::bg(bg_rollout(
        2,
        json!({"activeService": "active", "autoPromotionSeconds": 20}),
    ));
    w.settle_bg();
    w.set_image("app:v2");
    w.settle_bg();
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v1"));
    w.advance(20);
    w.settle_bg();
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v2"));
    assert_eq!(w.phase(), RolloutPhase::Healthy);
}

/// Argo's open bug: after an aborted bad revision and a good one, a second bad revision hangs
/// in "active service cutover pending". Here every bad revision is aborted at its deadline.
#[test]
fn blue_green_second_bad_revision_is_aborted_too() {
    let mut ro = bg_rollout(
        2,
        json!({"activeService": "active", "previewService": "preview",
               "scaleDownDelaySeconds": 30, "abortScaleDownDelaySeconds": 30}),
    );
    ro.spec.progress_deadline_seconds = Some(20);
    ro.spec.progress_deadline_abort = Some(true);
    let mut w = World::bg(ro);
    w.settle_bg();
    w.bad_images = vec!["app:bad2".into(), "app:bad4".into()];
    for (image, good, stable) in [
        ("app:bad2", false, "app:v1"),
        ("app:v3", true, "app:v3"),
        ("app:bad4", false, "app:v3"),
    ] {
        w.set_image(image);
        w.settle_bg();
        w.advance(21);
        w.settle_bg();
        if good {
            assert_eq!(
                w.phase(),
                RolloutPhase::Healthy,
                "{image}: {:#?}",
                w.status()
            );
        } else {
            assert_eq!(
                w.phase(),
                RolloutPhase::Degraded,
                "{image}: {:#?}",
                w.status()
            );
            assert_eq!(w.status().abort, Some(true));
            assert_eq!(
                w.image_behind("preview").as_deref(),
                Some(image),
                "the aborted version stays behind the preview"
            );
        }
        assert_eq!(w.image_behind("active").as_deref(), Some(stable), "{image}");
        // Let every delayed scale-down happen.
        w.advance(31);
        w.settle_bg();
        let up: Vec<(String, i32)> = w
            .replicas_by_image()
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .collect();
        assert_eq!(up, vec![(stable.to_string(), 2)], "{image}");
        assert!(
            w.rss
                .iter()
                .all(|r| r.annotation(SCALE_DOWN_DEADLINE) != Some("")),
            "never an empty deadline"
        );
    }
}

#[test]
fn blue_green_missing_active_service_is_invalid_spec() {
    let mut w = World::new(bg_rollout(2, json!({"activeService": "nope"})));
    let plan = w.reconcile();
    assert!(plan.actions.is_empty());
    // Looked at again soon, as Argo does: what made it invalid may appear later.
    assert_eq!(plan.requeue_after, Some(super::INVALID_SPEC_RECHECK));
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    assert!(
        w.status()
            .message
            .as_deref()
            .unwrap()
            .contains("service \"nope\" not found")
    );
}

#[test]
fn scale_downs_are_preceded_by_confirming_every_counted_replica_set() {
    let mut w = healthy_world(4, json!([{"setWeight": 50}, {"pause": {}}]));
    w.set_image("app:v2");
    let mut saw_scale_down = false;
    let mut saw_self_checked = false;
    for round in 0..20 {
        // As on an API server: every ReplicaSet has a resourceVersion its writes are made on.
        for rs in &mut w.rss {
            rs.metadata.resource_version = Some(format!("{round}"));
        }
        let before = w.rss.clone();
        let plan = w.reconcile();
        let first_scale_down = plan
            .actions
            .iter()
            .position(|a| matches!(a, Action::ScaleReplicaSet { from, to, .. } if to < from));
        if let Some(i) = first_scale_down {
            saw_scale_down = true;
            let confirmed: Vec<&String> = plan.actions[..i]
                .iter()
                .filter_map(|a| match a {
                    Action::ConfirmReplicaSet { name, .. } => Some(name),
                    _ => None,
                })
                .collect();
            // The first scale-down's own resourceVersion precondition confirms its target.
            let checked_by_itself = match &plan.actions[i] {
                Action::ScaleReplicaSet {
                    name,
                    resource_version,
                    ..
                } => Some((name.clone(), resource_version.clone())),
                _ => None,
            };
            for rs in before.iter().filter(|r| r.available_replicas() > 0) {
                let by_itself = rs.metadata.resource_version.is_some()
                    && checked_by_itself
                        == Some((rs.name().to_string(), rs.metadata.resource_version.clone()));
                assert!(
                    confirmed.contains(&&rs.name().to_string()) || by_itself,
                    "{} counted but not confirmed: {:?}",
                    rs.name(),
                    plan.actions
                );
                assert!(
                    !(confirmed.contains(&&rs.name().to_string()) && by_itself),
                    "{} confirmed twice: {:?}",
                    rs.name(),
                    plan.actions
                );
                saw_self_checked |= by_itself;
            }
        }
    }
    assert!(saw_scale_down);
    assert!(
        saw_self_checked,
        "a scale-down confirmed its own ReplicaSet"
    );
}

#[test]
fn blue_green_switch_that_landed_alone_is_recorded_as_promotion() {
    let mut w = World::bg(bg_rollout(2, json!({"activeService": "active"})));
    w.settle_bg();
    w.set_image("app:v2");
    // Reconcile until the new ReplicaSet is fully available, just before the switch.
    for _ in 0..10 {
        w.reconcile();
        let new_up = w
            .rss
            .iter()
            .any(|r| World::image_of(r) == "app:v2" && r.available_replicas() == 2);
        if new_up {
            break;
        }
    }
    // The switch write lands, but nothing else of that plan does.
    let new_hash = w.status().current_pod_hash.clone().unwrap();
    let svc = &mut w.services[0];
    svc.spec
        .as_mut()
        .unwrap()
        .selector
        .as_mut()
        .unwrap()
        .insert(POD_TEMPLATE_HASH.into(), new_hash.clone());
    w.settle_bg();
    assert_eq!(w.status().stable_rs.as_deref(), Some(new_hash.as_str()));
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
}

fn with_background_analysis(mut ro: Rollout, starting_step: i32) -> Rollout {
    let canary = ro.spec.strategy.as_mut().unwrap().canary.as_mut().unwrap();
    canary.analysis = Some(
        serde_json::from_value(json!({
            "templates": [{"templateName": "health"}],
            "startingStep": starting_step
        }))
        .unwrap(),
    );
    ro
}

fn analysis_world(ro: Rollout) -> World {
    let mut w = World::new(ro);
    w.add_template("health");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert!(w.runs.is_empty(), "a first deploy analyses nothing");
    w
}

#[test]
fn inconclusive_background_analysis_holds_the_update_through_a_timed_pause_until_resumed() {
    let ro = with_background_analysis(
        rollout(
            4,
            json!([{"setWeight": 25}, {"pause": {"duration": "30s"}}, {"setWeight": 50}]),
        ),
        0,
    );
    let mut w = analysis_world(ro);
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.runs_of("Background").len(), 1);
    let run = w.runs_of("Background")[0].clone();
    let hash = w.status().current_pod_hash.clone().unwrap();
    let first = format!("demo-{hash}-2");
    assert_eq!(run.metadata.name.as_deref(), Some(first.as_str()));
    assert_eq!(w.status().current_step_index, Some(1), "at the timed pause");

    w.verdict(
        "Background",
        AnalysisPhase::Inconclusive,
        "Metric \"m\" assessed Inconclusive",
    );
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    assert_eq!(
        w.pause_reasons(),
        vec![
            "CanaryPauseStep".to_string(),
            "InconclusiveAnalysisRun".to_string()
        ]
    );
    assert_eq!(
        w.status()
            .canary
            .as_ref()
            .and_then(|c| c.current_background_analysis_run_status.as_ref())
            .and_then(|r| r.status.clone()),
        Some(AnalysisPhase::Inconclusive)
    );
    // The timed step runs out as in Argo; the Inconclusive pause still holds the update: no
    // scaling to the next weight, no new run.
    for _ in 0..10 {
        w.advance(30);
        w.settle();
        assert_eq!(w.phase(), RolloutPhase::Paused);
        assert_eq!(
            w.status().current_step_index,
            Some(2),
            "the timed step completed"
        );
        assert_eq!(
            w.pause_reasons(),
            vec!["InconclusiveAnalysisRun".to_string()]
        );
        assert_eq!(
            w.status().message.as_deref(),
            Some("InconclusiveAnalysisRun")
        );
        assert_eq!(
            w.replicas_by_image(),
            vec![("app:v1".into(), 3), ("app:v2".into(), 1)],
            "held at the old weight"
        );
        assert_eq!(w.runs.len(), 1, "no run is re-created while Inconclusive");
        assert_ne!(w.runs[0].spec.terminate, Some(true), "nor terminated");
    }

    // A resume measures again with a new run; the update goes on meanwhile.
    w.promote();
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(
        w.runs_of("Background")
            .iter()
            .filter_map(|r| r.metadata.name.clone())
            .collect::<Vec<_>>(),
        vec![first.clone(), format!("{first}.1")]
    );
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 0), ("app:v2".into(), 4)]
    );
}

#[test]
fn failed_background_analysis_aborts_with_the_run_message() {
    let ro = with_background_analysis(rollout(4, json!([{"setWeight": 25}, {"pause": {}}])), 0);
    let mut w = analysis_world(ro);
    w.set_image("app:v2");
    w.settle();
    w.verdict(
        "Background",
        AnalysisPhase::Failed,
        "Metric \"m\" assessed Failed due to failed (1) > failureLimit (0)",
    );
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    assert_eq!(w.status().abort, Some(true));
    assert_eq!(
        w.status().message.as_deref(),
        Some(
            "RolloutAborted: Rollout aborted update to revision 2: Background analysis phase error/failed: Metric \"m\" assessed Failed due to failed (1) > failureLimit (0)"
        )
    );
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 4), ("app:v2".into(), 0)]
    );
    // The reason stays on later passes.
    w.advance(5);
    w.settle();
    assert!(
        w.status()
            .message
            .as_deref()
            .unwrap()
            .contains("failureLimit")
    );
}

#[test]
fn background_analysis_waits_for_its_starting_step_and_stops_when_the_update_completes() {
    let ro = with_background_analysis(
        rollout(
            4,
            json!([{"setWeight": 25}, {"pause": {}}, {"setWeight": 50}]),
        ),
        2,
    );
    let mut w = analysis_world(ro);
    w.set_image("app:v2");
    w.settle();
    assert!(w.runs.is_empty(), "step 1 is before startingStep 2");
    w.promote();
    w.settle();
    assert_eq!(w.runs_of("Background").len(), 1);
    assert_eq!(
        w.phase(),
        RolloutPhase::Healthy,
        "background analysis does not block"
    );
    assert_eq!(
        w.runs[0].spec.terminate,
        Some(true),
        "terminated once complete"
    );
}

#[test]
fn the_progress_deadline_does_not_run_at_experiment_and_analysis_steps() {
    let steps = json!([
        {"setWeight": 25},
        {"experiment": {"templates": [{"name": "canary", "specRef": "canary"}]}},
        {"analysis": {"templates": [{"templateName": "health"}]}},
        {"setWeight": 50}
    ]);
    let mut ro = rollout(4, steps);
    ro.spec.progress_deadline_seconds = Some(30);
    let mut w = analysis_world(ro);
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.status().current_step_index, Some(1));
    assert_eq!(w.experiments.len(), 1);
    // The Experiment takes longer than the deadline: the update still progresses.
    w.advance(31);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Progressing, "{:#?}", w.status());
    w.experiments[0].status = Some(serde_json::from_value(json!({"phase": "Successful"})).unwrap());
    w.settle();
    assert_eq!(w.status().current_step_index, Some(2));
    // So does the analysis.
    w.advance(31);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Progressing, "{:#?}", w.status());
    w.verdict("Step", AnalysisPhase::Successful, "");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
}

#[test]
fn analysis_step_waits_for_success_and_a_failure_aborts() {
    let steps = json!([
        {"setWeight": 25},
        {"analysis": {"templates": [{"templateName": "health"}]}},
        {"setWeight": 50}
    ]);
    let mut w = analysis_world(rollout(4, steps));
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.status().current_step_index, Some(1));
    let runs = w.runs_of("Step");
    assert_eq!(runs.len(), 1);
    let labels = runs[0].metadata.labels.clone().unwrap();
    assert_eq!(labels["step-index"], "1");
    w.advance(60);
    w.settle();
    assert_eq!(w.status().current_step_index, Some(1), "still measuring");
    assert_eq!(w.runs.len(), 1);
    w.verdict("Step", AnalysisPhase::Successful, "");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());

    w.set_image("app:v3");
    w.settle();
    assert_eq!(
        w.runs_of("Step").len(),
        2,
        "a new revision gets its own run"
    );
    w.verdict(
        "Step",
        AnalysisPhase::Error,
        "Metric \"m\" assessed Error due to consecutiveErrors (5) > consecutiveErrorLimit (4)",
    );
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    assert!(
        w.status()
            .message
            .as_deref()
            .unwrap()
            .contains("consecutiveErrorLimit")
    );
}

#[test]
fn a_resume_after_an_inconclusive_step_analysis_measures_again() {
    let steps = json!([
        {"setWeight": 25},
        {"analysis": {"templates": [{"templateName": "health"}]}}
    ]);
    let mut w = analysis_world(rollout(4, steps));
    w.set_image("app:v2");
    w.settle();
    w.verdict("Step", AnalysisPhase::Inconclusive, "");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    assert_eq!(
        w.status().message.as_deref(),
        Some("InconclusiveAnalysisRun")
    );
    w.advance(600);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    assert_eq!(w.runs.len(), 1);

    // Resumed: a new run for the step; still Inconclusive, it pauses again.
    w.promote();
    w.settle();
    assert_eq!(w.runs_of("Step").len(), 2, "measured again");
    assert_eq!(w.status().current_step_index, Some(1));
    assert_eq!(w.status().controller_pause, None, "the resume was acted on");
    w.verdict("Step", AnalysisPhase::Inconclusive, "");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    assert_eq!(
        w.pause_reasons(),
        vec!["InconclusiveAnalysisRun".to_string()]
    );

    // Resumed again: this time the run fails and the update is aborted.
    w.promote();
    w.settle();
    assert_eq!(w.runs_of("Step").len(), 3);
    w.verdict(
        "Step",
        AnalysisPhase::Failed,
        "Metric \"m\" assessed Failed",
    );
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    assert_eq!(
        w.status().message.as_deref(),
        Some(
            "RolloutAborted: Rollout aborted update to revision 2: Step-based analysis phase error/failed: Metric \"m\" assessed Failed"
        )
    );
}

#[test]
fn a_resume_after_an_inconclusive_step_analysis_passes_on_success() {
    let steps = json!([
        {"setWeight": 25},
        {"analysis": {"templates": [{"templateName": "health"}]}}
    ]);
    let mut w = analysis_world(rollout(4, steps));
    w.set_image("app:v2");
    w.settle();
    w.verdict("Step", AnalysisPhase::Inconclusive, "");
    w.settle();
    w.promote();
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Progressing, "{:#?}", w.status());
    w.verdict("Step", AnalysisPhase::Successful, "");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(w.runs.len(), 2);
}

#[test]
fn a_missing_template_is_an_invalid_spec_that_changes_nothing() {
    let ro = with_background_analysis(rollout(2, json!([{"setWeight": 50}])), 0);
    let mut w = analysis_world(ro);
    w.templates.clear();
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    // Argo's controller reports it as a field error at the analysis's templates.
    assert_eq!(
        w.status().message.as_deref(),
        Some(
            "InvalidSpec: The Rollout \"demo\" is invalid: spec.strategy.canary.analysis.templates: Invalid value: \"health\": AnalysisTemplate 'health' not found"
        )
    );
    assert!(w.runs.is_empty());
}

mod analysis_retry;
mod bluegreen;
mod invalid_spec;
mod metadata;
mod rollback_window;
mod services;
mod traffic;

/// A healthy blue-green Rollout whose `hook` (`prePromotionAnalysis` or
/// `postPromotionAnalysis`) runs the "health" template.
fn bg_analysis_world(hook: &str) -> World {
    let mut strategy = json!({"activeService": "active", "previewService": "preview",
                              "scaleDownDelaySeconds": 10});
    strategy[hook] = json!({"templates": [{"templateName": "health"}]});
    let mut w = World::bg(bg_rollout(2, strategy));
    w.add_template("health");
    w.settle_bg();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert!(w.runs.is_empty(), "a first deploy analyses nothing");
    w
}

#[test]
fn blue_green_pre_promotion_analysis_holds_the_switch_until_it_passes() {
    let mut w = bg_analysis_world("prePromotionAnalysis");
    w.set_image("app:v2");
    w.settle_bg();
    let runs = w.runs_of("PrePromotion");
    assert_eq!(runs.len(), 1, "started once the preview is up");
    let hash = w.status().current_pod_hash.clone().unwrap();
    assert_eq!(
        runs[0].metadata.name.as_deref(),
        Some(format!("demo-{hash}-2-pre").as_str())
    );
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v1"));
    assert_eq!(w.image_behind("preview").as_deref(), Some("app:v2"));
    w.advance(600);
    w.settle_bg();
    assert_eq!(
        w.image_behind("active").as_deref(),
        Some("app:v1"),
        "still waiting"
    );

    w.verdict("PrePromotion", AnalysisPhase::Successful, "");
    w.settle_bg();
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v2"));
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(w.runs.len(), 1);
}

#[test]
fn blue_green_failed_pre_promotion_analysis_aborts_without_switching() {
    let mut w = bg_analysis_world("prePromotionAnalysis");
    w.set_image("app:v2");
    w.settle_bg();
    w.verdict(
        "PrePromotion",
        AnalysisPhase::Failed,
        "Metric \"m\" assessed Failed",
    );
    w.settle_bg();
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v1"));
    assert_eq!(w.image_behind("preview").as_deref(), Some("app:v2"));
}

#[test]
fn blue_green_inconclusive_pre_promotion_pauses_and_a_resume_measures_again() {
    let mut w = bg_analysis_world("prePromotionAnalysis");
    w.set_image("app:v2");
    w.settle_bg();
    w.verdict("PrePromotion", AnalysisPhase::Inconclusive, "");
    w.settle_bg();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    assert!(
        w.pause_reasons()
            .contains(&"InconclusiveAnalysisRun".to_string())
    );
    w.advance(600);
    w.settle_bg();
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v1"));
    w.promote();
    w.settle_bg();
    assert_eq!(
        w.image_behind("active").as_deref(),
        Some("app:v1"),
        "measuring again"
    );
    assert_eq!(w.runs_of("PrePromotion").len(), 2);
    w.verdict("PrePromotion", AnalysisPhase::Successful, "");
    w.settle_bg();
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v2"));
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
}

#[test]
fn blue_green_post_promotion_analysis_keeps_the_old_pods_and_switches_back_on_failure() {
    let mut w = bg_analysis_world("postPromotionAnalysis");
    let v1 = w.status().current_pod_hash.clone();
    w.set_image("app:v2");
    w.settle_bg();
    assert_eq!(
        w.image_behind("active").as_deref(),
        Some("app:v2"),
        "switched"
    );
    assert_eq!(w.runs_of("PostPromotion").len(), 1);
    assert_eq!(
        w.status().stable_rs,
        v1,
        "not stable before the analysis passes"
    );
    // Long past scaleDownDelaySeconds: the previous pods stay while the analysis runs.
    w.advance(60);
    w.settle_bg();
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 2), ("app:v2".into(), 2)]
    );

    w.verdict(
        "PostPromotion",
        AnalysisPhase::Failed,
        "Metric \"m\" assessed Failed",
    );
    w.settle_bg();
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    assert_eq!(
        w.image_behind("active").as_deref(),
        Some("app:v1"),
        "switched back"
    );
    assert_eq!(w.status().stable_rs, v1);

    // A good revision after that: post analysis passes, the new pods become stable.
    w.set_image("app:v3");
    w.settle_bg();
    w.verdict("PostPromotion", AnalysisPhase::Successful, "");
    w.settle_bg();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v3"));
    assert_eq!(w.status().stable_rs, w.status().current_pod_hash);
}

#[test]
fn no_set_weight_step_completes_while_paused_on_an_inconclusive_run() {
    let ro = with_background_analysis(
        rollout(
            4,
            json!([{"setWeight": 25}, {"setWeight": 50}, {"setWeight": 75}]),
        ),
        0,
    );
    let mut w = analysis_world(ro);
    // The canary pods are slow: the verdict lands before the first step is reached.
    w.bad_images.push("app:v2".into());
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.status().current_step_index, Some(0));
    w.verdict("Background", AnalysisPhase::Inconclusive, "");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    // The pods come up: still held on step 0, nothing promoted.
    w.bad_images.clear();
    w.settle_pods();
    for _ in 0..5 {
        w.advance(60);
        w.settle();
        assert_eq!(w.status().current_step_index, Some(0), "{:#?}", w.status());
        assert_ne!(w.status().stable_rs, w.status().current_pod_hash);
        assert_eq!(w.phase(), RolloutPhase::Paused);
    }
    w.promote();
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(w.runs.len(), 2, "the resume measured again");
}

#[test]
fn finished_runs_are_kept_to_the_history_limits() {
    let steps = json!([
        {"setWeight": 50},
        {"analysis": {"templates": [{"templateName": "health"}]}}
    ]);
    let mut ro = rollout(2, steps);
    ro.spec.analysis = Some(
        serde_json::from_value(
            json!({"successfulRunHistoryLimit": 2, "unsuccessfulRunHistoryLimit": 1}),
        )
        .unwrap(),
    );
    let mut w = analysis_world(ro);
    for (i, phase) in [
        AnalysisPhase::Successful,
        AnalysisPhase::Failed,
        AnalysisPhase::Successful,
        AnalysisPhase::Failed,
        AnalysisPhase::Successful,
        AnalysisPhase::Successful,
    ]
    .into_iter()
    .enumerate()
    {
        w.advance(10);
        w.set_image(&format!("app:v{}", i + 2));
        w.settle();
        w.verdict("Step", phase, "");
        w.settle();
    }
    let kept: Vec<(String, AnalysisPhase)> = w
        .runs
        .iter()
        .map(|r| {
            (
                r.metadata.annotations.as_ref().unwrap()["rollout.argoproj.io/revision"].clone(),
                r.status.as_ref().unwrap().phase.clone().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kept,
        vec![
            ("5".to_string(), AnalysisPhase::Failed),
            ("6".to_string(), AnalysisPhase::Successful),
            ("7".to_string(), AnalysisPhase::Successful),
        ],
        "newest two successful and newest unsuccessful"
    );
}

/// The events of every reconcile until nothing changes, as (type, reason).
fn settle_typed_events(w: &mut World) -> Vec<(crate::EventType, &'static str)> {
    let mut events = Vec::new();
    for _ in 0..50 {
        let before = (
            w.ro.clone(),
            w.rss.clone(),
            w.pods.clone(),
            w.services.clone(),
        );
        let plan = w.reconcile();
        events.extend(plan.events.iter().map(|e| (e.type_, e.reason)));
        if before
            == (
                w.ro.clone(),
                w.rss.clone(),
                w.pods.clone(),
                w.services.clone(),
            )
        {
            return events;
        }
    }
    panic!("did not settle: {:#?}", w.ro.status);
}

fn normal(reasons: &[&'static str]) -> Vec<(crate::EventType, &'static str)> {
    reasons
        .iter()
        .map(|r| (crate::EventType::Normal, *r))
        .collect()
}

// Argo's order, from its source: the pass that creates a ReplicaSet records the revision
// (`RolloutUpdated`) and the creation at 0 replicas, then writes the reset status
// (`RolloutNotCompleted`, also on a canary's first revision, whose first status has no step
// hash); later passes scale (`ScalingReplicaSet`), step, pause and promote.

#[test]
fn a_canary_with_steps_announces_its_first_deploy_and_an_update_as_argo_does() {
    let mut w = World::new(rollout(
        1,
        json!([{"setWeight": 50}, {"pause": {"duration": 3}}]),
    ));
    assert_eq!(
        settle_typed_events(&mut w),
        normal(&[
            "RolloutUpdated",
            "NewReplicaSetCreated",
            "RolloutNotCompleted",
            "ScalingReplicaSet",
            "RolloutCompleted",
        ])
    );
    assert_eq!(w.phase(), RolloutPhase::Healthy);

    w.set_image("app:v2");
    assert_eq!(
        settle_typed_events(&mut w),
        normal(&[
            "RolloutUpdated",
            "NewReplicaSetCreated",
            "RolloutNotCompleted",
            "ScalingReplicaSet",
            "RolloutStepCompleted",
            "RolloutPaused",
        ])
    );
    // The timed pause ends: the step completes and the Rollout is resumed; the stable pods
    // go, and the update completes.
    w.advance(4);
    assert_eq!(
        settle_typed_events(&mut w),
        normal(&[
            "RolloutStepCompleted",
            "RolloutResumed",
            "ScalingReplicaSet",
            "RolloutCompleted",
        ])
    );
    assert_eq!(w.phase(), RolloutPhase::Healthy);
}

#[test]
fn a_canary_of_four_scales_its_replica_sets_one_at_a_time_as_argo_does() {
    // Argo sizes the stable ReplicaSet first and the new one in a later pass, from the
    // stable's new size (its replica arithmetic worked through for 4 replicas, maxSurge and
    // maxUnavailable 1): the events below, one by one.
    let mut w = healthy_world(
        4,
        json!([{"setWeight": 25}, {"pause": {}}, {"setWeight": 75}, {"pause": {"duration": 1}}]),
    );
    w.set_image("app:v2");
    let v1 = w.rs_named_by_image("app:v1");
    let mut scaling = Vec::new();
    let mut record = |w: &mut World| {
        for _ in 0..20 {
            for e in w.reconcile().events {
                if e.reason == "ScalingReplicaSet" || e.reason == "RolloutCompleted" {
                    scaling.push(e.message.replace(&v1, "v1"));
                }
            }
        }
    };
    record(&mut w);
    w.promote();
    record(&mut w);
    w.advance(2);
    record(&mut w);
    let v2 = w.rs_named_by_image("app:v2");
    let hash = w.status().current_pod_hash.clone().unwrap();
    let scaling: Vec<String> = scaling.iter().map(|m| m.replace(&v2, "v2")).collect();
    assert_eq!(
        scaling,
        [
            "Scaled down ReplicaSet v1 (revision 1) from 4 to 3",
            "Scaled up ReplicaSet v2 (revision 2) from 0 to 1",
            "Scaled down ReplicaSet v1 (revision 1) from 3 to 2",
            "Scaled up ReplicaSet v2 (revision 2) from 1 to 3",
            "Scaled down ReplicaSet v1 (revision 1) from 2 to 1",
            "Scaled down ReplicaSet v1 (revision 1) from 1 to 0",
            "Scaled up ReplicaSet v2 (revision 2) from 3 to 4",
            &format!(
                "Rollout completed update to revision 2 ({hash}): Completed all 4 canary steps"
            ),
        ]
    );
}

#[test]
fn a_plain_canary_announces_its_first_deploy_and_an_update_as_argo_does() {
    let mut w = World::new(rollout(1, json!([])));
    assert_eq!(
        settle_typed_events(&mut w),
        normal(&[
            "RolloutUpdated",
            "NewReplicaSetCreated",
            "RolloutNotCompleted",
            "ScalingReplicaSet",
            "RolloutCompleted",
        ])
    );
    w.advance(60);
    w.set_image("app:v2");
    let plan = w.reconcile();
    let messages: Vec<String> = plan.events.iter().map(|e| e.message.clone()).collect();
    let hash = w.status().current_pod_hash.clone().unwrap();
    assert_eq!(
        messages,
        [
            "Rollout updated to revision 2".to_string(),
            format!("Created ReplicaSet demo-{hash} (revision 2)"),
            format!("Rollout not completed, started update to revision 2 ({hash})"),
            format!("Scaled up ReplicaSet demo-{hash} (revision 2) from 0 to 1"),
        ]
    );
    // Six events in all, as Argo: the stable pod goes once the new one is up.
    assert_eq!(
        settle_typed_events(&mut w),
        normal(&["ScalingReplicaSet", "RolloutCompleted"])
    );
    assert_eq!(w.phase(), RolloutPhase::Healthy);
}

#[test]
fn a_blue_green_rollout_announces_its_first_deploy_and_an_update_as_argo_does() {
    let mut w = World::bg(bg_rollout(
        1,
        json!({"activeService": "active", "scaleDownDelaySeconds": 30}),
    ));
    // No RolloutNotCompleted: the first status already makes the new pods stable.
    assert_eq!(
        settle_typed_events(&mut w),
        normal(&[
            "RolloutUpdated",
            "NewReplicaSetCreated",
            "ScalingReplicaSet",
            "RolloutCompleted",
            "SwitchService",
        ])
    );
    w.advance(60);
    w.set_image("app:v2");
    assert_eq!(
        settle_typed_events(&mut w),
        normal(&[
            "RolloutUpdated",
            "NewReplicaSetCreated",
            "RolloutNotCompleted",
            "ScalingReplicaSet",
            "SwitchService",
            "RolloutCompleted",
        ])
    );
    let hash = w.status().current_pod_hash.clone().unwrap();
    w.advance(30);
    assert_eq!(settle_typed_events(&mut w), normal(&["ScalingReplicaSet"]));
    assert_eq!(w.phase(), RolloutPhase::Healthy);
    assert_eq!(w.status().stable_rs.as_deref(), Some(hash.as_str()));
}

#[test]
fn a_blue_green_preview_service_is_routed_to_a_new_replica_set_as_it_is_created() {
    let mut w = World::bg(bg_rollout(
        1,
        json!({"activeService": "active", "previewService": "preview"}),
    ));
    let plan = w.reconcile();
    let hash = w.status().current_pod_hash.clone().unwrap();
    let events: Vec<String> = plan
        .events
        .iter()
        .map(|e| format!("{}: {}", e.reason, e.message))
        .collect();
    assert_eq!(
        events,
        [
            "RolloutUpdated: Rollout updated to revision 1".to_string(),
            format!("NewReplicaSetCreated: Created ReplicaSet demo-{hash} (revision 1)"),
            format!("SwitchService: Switched selector for service 'preview' from '' to '{hash}'"),
            format!("ScalingReplicaSet: Scaled up ReplicaSet demo-{hash} (revision 1) from 0 to 1"),
            format!(
                "RolloutCompleted: Rollout completed update to revision 1 ({hash}): Initial deploy"
            ),
        ]
    );
    // The ReplicaSet is created before the Service is pointed at it.
    let position = |f: fn(&Action) -> bool| plan.actions.iter().position(f).unwrap();
    assert!(
        position(|a| matches!(a, Action::CreateReplicaSet { .. }))
            < position(|a| matches!(a, Action::SwitchService { .. })),
        "{:#?}",
        plan.actions
    );
    assert_eq!(
        settle_typed_events(&mut w),
        normal(&["SwitchService"]),
        "then the active Service"
    );
    w.advance(60);
    w.set_image("app:v2");
    assert_eq!(
        settle_typed_events(&mut w),
        normal(&[
            "RolloutUpdated",
            "NewReplicaSetCreated",
            "SwitchService",
            "RolloutNotCompleted",
            "ScalingReplicaSet",
            "SwitchService",
            "RolloutCompleted",
        ])
    );
    assert_eq!(w.image_behind("preview").as_deref(), Some("app:v2"));
}

#[test]
fn an_update_superseded_mid_way_is_not_announced_as_not_completed_again() {
    let mut w = healthy_world(2, json!([{"setWeight": 50}, {"pause": {}}]));
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    w.set_image("app:v3");
    // The reset status lifts the pause, which Argo reports with it, before any scaling.
    let reasons: Vec<&str> = w.reconcile().events.iter().map(|e| e.reason).collect();
    assert_eq!(
        reasons[..3],
        ["RolloutUpdated", "NewReplicaSetCreated", "RolloutResumed"],
        "{reasons:?}"
    );
    let reasons = w.settle_events();
    assert!(!reasons.contains(&"RolloutNotCompleted"), "{reasons:?}");
    assert!(!reasons.contains(&"RolloutResumed"), "{reasons:?}");
}

#[test]
fn going_back_to_the_stable_template_mid_update_skips_the_steps_with_argos_events() {
    let mut w = healthy_world(4, json!([{"setWeight": 25}, {"pause": {}}]));
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    w.set_image("app:v1");
    let events = settle_typed_events(&mut w);
    // Argo: the revision, the reset status (steps skipped, the pause lifted; the stable pods
    // are the current ones, so the update is not "not completed"), then the pods.
    assert_eq!(
        events,
        normal(&[
            "RolloutUpdated",
            "SkipSteps",
            "RolloutResumed",
            "ScalingReplicaSet",
            "ScalingReplicaSet",
        ])
    );
    assert_eq!(w.phase(), RolloutPhase::Healthy);
}

#[test]
fn a_new_step_list_on_a_healthy_canary_is_announced_as_skipped_steps() {
    let mut w = healthy_world(2, json!([{"setWeight": 25}, {"pause": {}}]));
    w.ro.spec
        .strategy
        .as_mut()
        .unwrap()
        .canary
        .as_mut()
        .unwrap()
        .steps = Some(serde_json::from_value(json!([{"setWeight": 50}, {"pause": {}}])).unwrap());
    let plan = w.reconcile();
    let events: Vec<(&str, &str)> = plan
        .events
        .iter()
        .map(|e| (e.reason, e.message.as_str()))
        .collect();
    assert_eq!(events, [("SkipSteps", "Rollback to stable ReplicaSets")]);
    assert!(settle_typed_events(&mut w).is_empty());
    assert_eq!(w.phase(), RolloutPhase::Healthy);
}

/// Status writes of an update of one replica, pods ready a second after they are created.
/// An update reconciled a second apart, but for the first gap: the pods come `pods_after`
/// seconds after the new ReplicaSet.
fn status_writes_of_an_update(
    interval: std::time::Duration,
    pods_after: i64,
) -> (usize, Vec<Option<std::time::Duration>>, World) {
    let mut w = World::new(rollout(1, json!([])));
    w.settings.status_write_interval = interval;
    w.settle();
    w.advance(60);
    w.set_image("app:v2");
    let mut writes = 0;
    let mut requeues = Vec::new();
    for i in 0..20 {
        let before = (w.ro.clone(), w.rss.clone());
        let plan = w.reconcile();
        requeues.push(plan.requeue_after);
        if w.ro.status != before.0.status {
            writes += 1;
        }
        if before == (w.ro.clone(), w.rss.clone()) {
            break;
        }
        let first = i == 0;
        w.advance(if first { pods_after } else { 1 });
    }
    (writes, requeues, w)
}

#[test]
fn a_status_write_interval_coalesces_an_updates_progress_into_fewer_writes() {
    let (argo, _, every) = status_writes_of_an_update(std::time::Duration::ZERO, 1);
    let (coalesced, requeues, w) = status_writes_of_an_update(std::time::Duration::from_secs(5), 1);
    assert!(
        coalesced < argo,
        "{coalesced} writes coalesced, {argo} without"
    );
    assert!(coalesced <= 2, "{coalesced}");
    // Held back, the Rollout is looked at again within the interval.
    assert!(
        requeues
            .iter()
            .flatten()
            .all(|d| *d <= std::time::Duration::from_secs(900)),
        "{requeues:?}"
    );
    // Where it ends is the same.
    assert_eq!(w.phase(), RolloutPhase::Healthy);
    let counts = |s: &sluice_api::RolloutStatus| {
        (
            s.replicas,
            s.updated_replicas,
            s.available_replicas,
            s.stable_rs.clone(),
            s.message.clone(),
        )
    };
    assert_eq!(counts(w.status()), counts(every.status()));
}

#[test]
fn progress_long_after_the_new_replica_set_is_written_with_the_completion() {
    // On a busy cluster the pods come long after their ReplicaSet: their arrival is held back
    // and goes out with the completion that follows, not in a write of its own.
    let five = std::time::Duration::from_secs(5);
    let (argo, _, every) = status_writes_of_an_update(std::time::Duration::ZERO, 40);
    let (coalesced, requeues, w) = status_writes_of_an_update(five, 40);
    assert_eq!(coalesced, 2, "the new revision, then the completion");
    assert!(argo > coalesced, "{argo} writes without an interval");
    assert!(
        requeues.iter().flatten().any(|d| *d <= five),
        "{requeues:?}"
    );
    assert_eq!(w.phase(), RolloutPhase::Healthy);
    assert_eq!(w.status().replicas, every.status().replicas);
    assert_eq!(
        w.status().available_replicas,
        every.status().available_replicas
    );
}

#[test]
fn a_promotion_named_only_in_the_status_goes_out_with_the_completion() {
    // A canary without routing, Services or analysis: its promotion is held with the progress
    // until the old pods are gone, and written, with its RolloutCompleted event, once.
    let statuses_and_events = |interval: u64| {
        let mut w = World::new(rollout(1, json!([])));
        w.slow_scale_down = true;
        w.settings.status_write_interval = std::time::Duration::from_secs(interval);
        w.settle();
        w.advance(60);
        w.set_image("app:v2");
        let mut written = Vec::new();
        let mut reasons = Vec::new();
        for _ in 0..20 {
            let before = (w.ro.clone(), w.rss.clone());
            let plan = w.reconcile();
            reasons.extend(plan.events.iter().map(|e| e.reason));
            if w.ro.status != before.0.status {
                let s = w.status();
                written.push((s.phase.clone().unwrap(), s.stable_rs.clone()));
            }
            if before == (w.ro.clone(), w.rss.clone()) {
                break;
            }
            w.advance(1);
        }
        (written, reasons, w)
    };
    let (every, every_reasons, argo) = statuses_and_events(0);
    let (held, held_reasons, w) = statuses_and_events(5);
    let new_hash = w.status().current_pod_hash.clone();
    // Argo's order: the new revision observed, the pods, the promotion while the old pods
    // terminate, the completion.
    assert!(
        every.contains(&(RolloutPhase::Progressing, new_hash.clone())),
        "{every:?}"
    );
    // Coalesced: the new revision observed, then the promotion with the completion.
    assert_eq!(held.len(), 2, "{held:?}");
    assert_eq!(held[1], (RolloutPhase::Healthy, new_hash));
    // The same events, each once: RolloutCompleted is not told while its status is held.
    assert_eq!(held_reasons, every_reasons);
    let completed = held_reasons.iter().filter(|r| **r == "RolloutCompleted");
    assert_eq!(completed.count(), 1, "{held_reasons:?}");
    // Where it ends is the same.
    let end = |w: &World| {
        let s = w.status();
        (
            s.phase.clone(),
            s.stable_rs.clone(),
            s.replicas,
            s.available_replicas,
        )
    };
    assert_eq!(end(&w), end(&argo));
}
