//! Scenario tests of the reconcile loop: a tiny in-memory world applies each plan (creating
//! and scaling ReplicaSets, with pods becoming available at once unless the revision is
//! "bad") and feeds the result back, with time moved by hand.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde_json::json;
use sluice_api::rollout::{Rollout, RolloutPhase};

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
    /// The object a `workloadRef` names (a Deployment: `ScaleDeployment` sets its replicas).
    workload: Option<serde_json::Value>,
    /// A stand-in step plugin (see `tests/step_plugins.rs`), and every call made of it.
    step_plugin: Option<fn(&crate::StepPluginCall, usize) -> crate::StepPluginAnswer>,
    plugin_calls: Vec<crate::StepPluginCall>,
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
            workload: None,
            step_plugin: None,
            plugin_calls: Vec::new(),
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
        let needs_pods = Observed::needs_pods(&self.ro, &self.rss, self.now);
        let pods = self.pods.iter().filter(|_| needs_pods).cloned().collect();
        let mut observed = Observed {
            rollout: self.ro.clone(),
            replica_sets: self.rss.clone(),
            pods,
            services: self.services.clone(),
            analysis_runs: self.runs.clone(),
            analysis_templates: self.templates.clone(),
            router_objects: self.routers.clone(),
            router_versions: Default::default(),
            experiments: self.experiments.clone(),
            workload: self.workload.clone(),
            stateful_set: None,
            daemon_set: None,
            config: None,
            progress_held_since: self.progress_held_since,
            step_plugin_answers: Vec::new(),
            target_registration: None,
            now: self.now,
        };
        let plan = self.decide(&mut observed);
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
                Action::ScaleDeployment { to, .. } => {
                    self.workload.as_mut().unwrap()["spec"]["replicas"] = json!(to);
                }
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
                Action::UpdateStatefulSet { .. } => panic!("no StatefulSet in these tests"),
                Action::UpdateDaemonSet { .. } => panic!("no DaemonSet in these tests"),
                Action::CopyConfig { .. } | Action::OwnConfigCopy { .. } => {
                    panic!("no config rollout in these tests")
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

impl World {
    /// The first ReplicaSet's pod template as `undo` copies it: with the API server's defaults
    /// in it (a `dnsPolicy`, set on the ReplicaSet too) and without the controller's hash label.
    fn template_as_undo_copies_it(&mut self) -> k8s_openapi::api::core::v1::PodTemplateSpec {
        let template = self.rss[0]
            .spec
            .as_mut()
            .and_then(|s| s.template.as_mut())
            .expect("a ReplicaSet with a template");
        template.spec.as_mut().expect("a pod spec").dns_policy = Some("ClusterFirst".into());
        let mut copied = template.clone();
        if let Some(labels) = copied.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
            labels.remove(POD_TEMPLATE_HASH);
        }
        copied
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

mod analysis;
mod bg_world;
use bg_world::*;
mod analysis_retry;
mod announcements;
mod blue_green_updates;
mod bluegreen;
mod canary_updates;
mod durations;
mod fast_undo;
mod invalid_spec;
mod metadata;
mod pause_on_failure;
mod rollback_window;
mod services;
mod status_writes;
mod step_plugins;
mod traffic;
mod waits;
mod workload_ref;

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
