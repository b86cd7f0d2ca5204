//! Whole passes: the plan applied to a small simulated cluster, pass after pass, for the
//! Experiments of Argo's own examples and end-to-end fixtures.

use std::collections::BTreeMap;
use std::path::PathBuf;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Service;
use serde_json::{Value, json};
use sluice_api::analysis::{AnalysisRun, AnalysisRunStatus};
use sluice_api::common::AnalysisPhase;
use sluice_api::experiment::Experiment;

use super::fixtures::{UID, experiment, observed, owned_rs, t, template};
use super::*;
use crate::labels::SCALE_DOWN_DEADLINE;
use crate::observed::{AnalysisTemplates, ReplicaSetExt, TemplateKey};
use crate::plan::Event;

/// A cluster that does what the plan says, and whose ReplicaSets make their pods available
/// between passes.
struct Sim {
    experiment: Experiment,
    replica_sets: Vec<ReplicaSet>,
    services: Vec<Service>,
    runs: Vec<AnalysisRun>,
    templates: AnalysisTemplates,
    now: Timestamp,
    events: Vec<Event>,
    /// Every Service ever created.
    created_services: Vec<Service>,
    serial: u32,
}

impl Sim {
    fn new(experiment: Experiment, templates: AnalysisTemplates) -> Self {
        Self {
            experiment,
            replica_sets: vec![],
            services: vec![],
            runs: vec![],
            templates,
            now: t(1_700_000_000),
            events: vec![],
            created_services: vec![],
            serial: 0,
        }
    }

    fn observe(&self) -> ExperimentObserved {
        ExperimentObserved {
            experiment: self.experiment.clone(),
            replica_sets: self.replica_sets.clone(),
            services: self.services.clone(),
            analysis_runs: self.runs.clone(),
            analysis_templates: self.templates.clone(),
            now: self.now,
        }
    }

    fn next_version(&mut self) -> String {
        self.serial += 1;
        self.serial.to_string()
    }

    /// One reconcile, applied; then time moves on to the requeue (or a second later, as a
    /// watch event would bring the next pass).
    fn pass(&mut self) -> ExperimentPlan {
        let plan = reconcile_experiment(&self.observe());
        assert_eq!(plan.error, None);
        for action in &plan.actions {
            let version = Some(self.next_version());
            match action {
                ExperimentAction::CreateReplicaSet(rs) => {
                    let mut rs = (**rs).clone();
                    rs.metadata.resource_version = version;
                    self.replica_sets.push(rs);
                }
                ExperimentAction::ScaleReplicaSet {
                    name,
                    resource_version,
                    to,
                    annotations,
                    ..
                } => {
                    let rs = self.rs_mut(name);
                    assert_eq!(&rs.metadata.resource_version, resource_version);
                    rs.spec.as_mut().unwrap().replicas = Some(*to);
                    annotate(rs, annotations);
                    rs.metadata.resource_version = version;
                }
                ExperimentAction::AnnotateReplicaSet {
                    name,
                    resource_version,
                    annotations,
                } => {
                    let rs = self.rs_mut(name);
                    assert_eq!(&rs.metadata.resource_version, resource_version);
                    annotate(rs, annotations);
                    rs.metadata.resource_version = version;
                }
                ExperimentAction::CreateService(svc) => {
                    let mut svc = (**svc).clone();
                    svc.metadata.uid = Some(format!("svc-{}", self.serial));
                    self.created_services.push(svc.clone());
                    self.services.push(svc);
                }
                ExperimentAction::DeleteService { name, uid } => {
                    let before = self.services.len();
                    self.services.retain(|s| {
                        !(s.metadata.name.as_ref() == Some(name) && &s.metadata.uid == uid)
                    });
                    assert_eq!(self.services.len() + 1, before, "{name}");
                }
                ExperimentAction::CreateAnalysisRun(run) => self.runs.push((**run).clone()),
                ExperimentAction::TerminateAnalysisRun { name } => {
                    let run = self
                        .runs
                        .iter_mut()
                        .find(|r| r.metadata.name.as_ref() == Some(name))
                        .unwrap();
                    run.spec.terminate = Some(true);
                }
            }
        }
        // A write brings the next pass at once (the watch); otherwise only the requeue does.
        let wrote =
            !plan.actions.is_empty() || self.experiment.status.as_ref() != Some(&plan.status);
        self.experiment.status = Some(plan.status.clone());
        self.events.extend(plan.events.iter().cloned());
        let step = match plan.requeue_after {
            Some(d) if !wrote => SignedDuration::try_from(d).unwrap(),
            _ => SignedDuration::from_secs(1),
        };
        self.now = self.now.checked_add(step).unwrap();
        plan
    }

    fn rs_mut(&mut self, name: &str) -> &mut ReplicaSet {
        self.replica_sets
            .iter_mut()
            .find(|r| r.metadata.name.as_deref() == Some(name))
            .unwrap()
    }

    /// The ReplicaSet controller catches up: every pod wanted is available.
    fn settle(&mut self) {
        for rs in &mut self.replica_sets {
            let n = rs.spec_replicas();
            rs.status = Some(ReplicaSetStatus {
                replicas: n,
                ready_replicas: Some(n),
                available_replicas: Some(n),
                ..Default::default()
            });
        }
    }

    /// The analysis controller: each run gets the phase `phase_of` gives for its analysis;
    /// a run asked to stop ends Successful.
    fn measure(&mut self, phase_of: &dyn Fn(&str) -> Option<AnalysisPhase>) {
        let prefix = format!("{}-", self.experiment.metadata.name.as_deref().unwrap());
        for run in &mut self.runs {
            let analysis = run.metadata.name.as_deref().unwrap()[prefix.len()..].to_owned();
            let current = run.status.as_ref().and_then(|s| s.phase.clone());
            if current.as_ref().is_some_and(AnalysisPhase::is_completed) {
                continue;
            }
            let phase = if run.spec.terminate == Some(true) {
                Some(AnalysisPhase::Successful)
            } else {
                phase_of(&analysis)
            };
            if let Some(phase) = phase {
                run.status = Some(AnalysisRunStatus {
                    phase: Some(phase),
                    ..Default::default()
                });
            }
        }
    }

    fn phase(&self) -> Option<AnalysisPhase> {
        self.experiment
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
    }

    /// Passes until the Experiment is finished and wound down (or `limit` passes).
    fn run_to_end(&mut self, phase_of: &dyn Fn(&str) -> Option<AnalysisPhase>, limit: usize) {
        for _ in 0..limit {
            let plan = self.pass();
            self.settle();
            self.measure(phase_of);
            let done = self.phase().is_some_and(|p| p.is_completed())
                && plan.actions.is_empty()
                && plan.requeue_after.is_none()
                && self.replica_sets.iter().all(|r| r.spec_replicas() == 0)
                && self.services.is_empty();
            if done {
                return;
            }
        }
        panic!(
            "not finished after {limit} passes: {:?}",
            self.experiment.status
        );
    }

    fn reasons(&self) -> Vec<&str> {
        self.events.iter().map(|e| e.reason).collect()
    }
}

fn annotate(rs: &mut ReplicaSet, annotations: &BTreeMap<String, Option<String>>) {
    let map = rs.metadata.annotations.get_or_insert_with(Default::default);
    for (k, v) in annotations {
        match v {
            Some(v) => map.insert(k.clone(), v.clone()),
            None => map.remove(k),
        };
    }
}

fn corpus_docs(rel: &str) -> Vec<Value> {
    let path: PathBuf = sluice_api::corpus::require_argo_corpus_dir()
        .unwrap_or_else(|e| panic!("{e}"))
        .join(rel);
    let text = std::fs::read_to_string(&path).unwrap();
    sluice_api::yaml::from_multi_doc_str(&text).unwrap()
}

/// The corpus Experiment of `rel` as the API server would hold it, with the
/// AnalysisTemplates of `rel` and of `extra` files.
fn corpus_sim(rel: &str, extra: &[&str]) -> Sim {
    let docs = corpus_docs(rel);
    let mut value = docs
        .iter()
        .find(|d| d["kind"] == "Experiment")
        .unwrap()
        .clone();
    let meta = &mut value["metadata"];
    if meta["name"].is_null() {
        meta["name"] = json!(format!("{}abcde", meta["generateName"].as_str().unwrap()));
    }
    meta["namespace"] = json!("e2e");
    meta["uid"] = json!(UID);
    let experiment: Experiment = serde_json::from_value(value).unwrap();
    let mut templates = AnalysisTemplates::new();
    for doc in docs
        .iter()
        .chain(
            extra
                .iter()
                .flat_map(|f| corpus_docs(f))
                .collect::<Vec<_>>()
                .iter(),
        )
        .filter(|d| d["kind"] == "AnalysisTemplate")
    {
        templates.insert(
            TemplateKey {
                cluster_scope: false,
                name: doc["metadata"]["name"].as_str().unwrap().to_owned(),
            },
            serde_json::from_value(doc["spec"].clone()).unwrap(),
        );
    }
    Sim::new(experiment, templates)
}

const FUNCTIONAL: &str = "test/e2e/functional";

fn never(_: &str) -> Option<AnalysisPhase> {
    None
}

#[test]
fn corpus_experiments_without_analysis_succeed_and_wind_down() {
    for file in [
        "experiment-basic.yaml",
        "experiment-same-template.yaml",
        "experiment-with-service.yaml",
        "experiment-with-service-name.yaml",
        "experiment-with-multiport-service.yaml",
    ] {
        let mut sim = corpus_sim(&format!("{FUNCTIONAL}/{file}"), &[]);
        let templates = sim.experiment.spec.templates.clone().unwrap();
        sim.run_to_end(&never, 40);
        assert_eq!(sim.phase(), Some(AnalysisPhase::Successful), "{file}");
        let status = sim.experiment.status.clone().unwrap();
        assert!(status.available_at.is_some(), "{file}");
        assert_eq!(sim.replica_sets.len(), templates.len(), "{file}");
        for ts in status.template_statuses.iter().flatten() {
            assert_eq!(
                ts.status,
                Some(sluice_api::experiment::TemplateStatusCode::Successful),
                "{file}"
            );
            assert_eq!(ts.available_replicas, Some(0), "{file}");
            assert_eq!(ts.service_name, None, "{file}");
        }
        let reasons = sim.reasons();
        for want in [
            "ExperimentPending",
            "TemplateProgressing",
            "TemplateRunning",
            "ExperimentRunning",
            "TemplateSuccessful",
            "ExperimentSuccessful",
            "ScalingReplicaSet",
        ] {
            assert!(reasons.contains(&want), "{file}: {want} in {reasons:?}");
        }
        // Scale-down waited for the deadline it recorded.
        assert!(
            sim.replica_sets
                .iter()
                .all(|r| r.annotation(SCALE_DOWN_DEADLINE).is_some()),
            "{file}"
        );
        let with_service = templates.iter().any(|t| t.service.is_some());
        assert_eq!(!sim.created_services.is_empty(), with_service, "{file}");
    }
}

#[test]
fn corpus_services_follow_the_container_ports() {
    let cases = [
        (
            "experiment-with-service.yaml",
            "experiment-with-service-test",
            1,
        ),
        ("experiment-with-service-name.yaml", "test-service-name", 1),
        (
            "experiment-with-multiport-service.yaml",
            "experiment-with-multiport-service-test",
            3,
        ),
    ];
    for (file, name, ports) in cases {
        let mut sim = corpus_sim(&format!("{FUNCTIONAL}/{file}"), &[]);
        // Create the RS, scale it up, see the Service made.
        for _ in 0..3 {
            sim.pass();
            sim.settle();
        }
        let [svc] = &sim.created_services[..] else {
            panic!("{file}: {:?}", sim.created_services)
        };
        assert_eq!(svc.metadata.name.as_deref(), Some(name));
        let spec = svc.spec.as_ref().unwrap();
        assert_eq!(spec.ports.as_ref().unwrap().len(), ports, "{file}");
        let hash = sim.replica_sets[0].pod_hash().unwrap();
        assert_eq!(
            spec.selector.as_ref().unwrap()[crate::labels::POD_TEMPLATE_HASH],
            hash
        );
        let ts = &sim
            .experiment
            .status
            .as_ref()
            .unwrap()
            .template_statuses
            .as_ref()
            .unwrap()[0];
        assert_eq!(ts.service_name.as_deref(), Some(name));
        assert_eq!(ts.pod_template_hash.as_deref(), Some(hash));
    }
}

#[test]
fn corpus_dry_run_and_retention_reach_the_run() {
    for (file, check) in [
        ("experiment-dry-run-analysis.yaml", "dryRun"),
        (
            "experiment-measurement-retention-analysis.yaml",
            "measurementRetention",
        ),
    ] {
        let mut sim = corpus_sim(&format!("{FUNCTIONAL}/{file}"), &[]);
        // The run keeps measuring until the duration ends the Experiment, which stops it.
        sim.run_to_end(&|_| Some(AnalysisPhase::Running), 40);
        assert_eq!(sim.phase(), Some(AnalysisPhase::Successful), "{file}");
        let [run] = &sim.runs[..] else {
            panic!("{file}: {:?}", sim.runs)
        };
        assert_eq!(run.spec.terminate, Some(true), "{file}");
        let spec = serde_json::to_value(&run.spec).unwrap();
        assert_eq!(spec[check][0]["metricName"], "test.*", "{file}");
        assert!(sim.reasons().contains(&"AnalysisRunTerminating"), "{file}");
        // The template names no port: no Service although it asks for one.
        assert!(sim.created_services.is_empty(), "{file}");
    }
}

const WITH_ANALYSIS: &str = "examples/experiment-with-analysis.yaml";
const TEMPLATES: &str = "examples/analysis-templates.yaml";

#[test]
fn corpus_example_with_analysis_fails_with_its_failing_run() {
    let mut sim = corpus_sim(WITH_ANALYSIS, &[TEMPLATES]);
    sim.run_to_end(
        &|a| match a {
            "random-fail" => Some(AnalysisPhase::Failed),
            _ => Some(AnalysisPhase::Successful),
        },
        40,
    );
    assert_eq!(sim.phase(), Some(AnalysisPhase::Failed));
    let status = sim.experiment.status.clone().unwrap();
    let runs = status.analysis_runs.unwrap();
    assert_eq!(runs.len(), 2);
    assert!(sim.reasons().contains(&"AnalysisRunFailed"));
    assert!(sim.reasons().contains(&"ExperimentFailed"));
}

#[test]
fn corpus_example_with_analysis_runs_on_when_its_runs_pass() {
    // No duration and no required analysis: passing runs do not end it.
    let mut sim = corpus_sim(WITH_ANALYSIS, &[TEMPLATES]);
    for _ in 0..20 {
        sim.pass();
        sim.settle();
        sim.measure(&|_| Some(AnalysisPhase::Successful));
    }
    assert_eq!(sim.phase(), Some(AnalysisPhase::Running));
    assert_eq!(sim.runs.len(), 2);
    // Until terminated.
    sim.experiment.spec.terminate = Some(true);
    sim.run_to_end(&|_| Some(AnalysisPhase::Successful), 40);
    assert_eq!(sim.phase(), Some(AnalysisPhase::Successful));
}

#[test]
fn required_analysis_completes_the_experiment() {
    let mut sim = corpus_sim(WITH_ANALYSIS, &[TEMPLATES]);
    let analyses = sim.experiment.spec.analyses.as_mut().unwrap();
    analyses[1].required_for_completion = Some(true);
    sim.run_to_end(
        &|a| match a {
            "pass" => Some(AnalysisPhase::Successful),
            _ => Some(AnalysisPhase::Running),
        },
        40,
    );
    assert_eq!(sim.phase(), Some(AnalysisPhase::Successful));
    let status = sim.experiment.status.clone().unwrap();
    assert_eq!(
        status.message.as_deref(),
        Some(phase::REQUIRED_RUNS_COMPLETED)
    );
    // The other run was stopped.
    assert!(sim.runs.iter().any(|r| r.metadata.name.as_deref()
        == Some("experiment-with-analysis-random-fail")
        && r.spec.terminate == Some(true)));
}

#[test]
fn missing_template_errs_the_experiment_before_any_run() {
    let mut sim = corpus_sim(WITH_ANALYSIS, &[]);
    sim.run_to_end(&never, 40);
    assert_eq!(sim.phase(), Some(AnalysisPhase::Error));
    assert!(sim.runs.is_empty());
    let message = sim.experiment.status.unwrap().message.unwrap();
    assert!(
        message.starts_with("AnalysisTemplate verification failed for analysis 'random-fail'"),
        "{message}"
    );
}

#[test]
fn stalled_template_fails_after_its_progress_deadline() {
    let mut sim = corpus_sim(&format!("{FUNCTIONAL}/experiment-same-template.yaml"), &[]);
    // Pods never become available: no settle. The deadline (30 s) is waited for by requeue.
    for _ in 0..10 {
        sim.pass();
    }
    assert_eq!(sim.phase(), Some(AnalysisPhase::Failed));
    assert_eq!(
        sim.experiment.status.unwrap().message.as_deref(),
        Some("Template 'first' exceeded its progressDeadlineSeconds (30)")
    );
}

#[test]
fn invalid_spec_only_sets_the_condition() {
    let e = experiment(
        json!({"templates": [template("a", 1), template("a", 1)]}),
        json!({}),
    );
    let plan = reconcile_experiment(&observed(e, vec![], t(5)));
    assert!(plan.actions.is_empty() && plan.events.is_empty());
    assert_eq!(plan.status.phase, None);
    let c = &plan.status.conditions.unwrap()[0];
    assert_eq!(c.reason.as_deref(), Some("InvalidSpec"));
    assert_eq!(
        c.message.as_deref(),
        Some("Experiment ex has repeated template name 'a' in templates")
    );
}

#[test]
fn invalid_spec_condition_goes_once_fixed() {
    let e = experiment(
        json!({"templates": [template("a", 1)]}),
        json!({"conditions": [{"type": "InvalidSpec", "status": "True", "reason": "InvalidSpec",
            "message": "m", "lastUpdateTime": "1970-01-01T00:00:00Z",
            "lastTransitionTime": "1970-01-01T00:00:00Z"}]}),
    );
    let plan = reconcile_experiment(&observed(e, vec![], t(5)));
    assert!(
        plan.status
            .conditions
            .iter()
            .flatten()
            .all(|c| c.reason.as_deref() != Some("InvalidSpec"))
    );
}

#[test]
fn undecidable_worlds_are_errors() {
    let e = experiment(json!({"templates": [template("a", 1)]}), json!({}));
    let mut second = owned_rs(&e, "a", 1, 1);
    second.metadata.name = Some("ex-a-2".into());
    let first = owned_rs(&e, "a", 1, 1);
    let plan = reconcile_experiment(&observed(e.clone(), vec![first, second], t(5)));
    assert_eq!(
        plan.error.as_deref(),
        Some("multiple ReplicaSets match single experiment template: a")
    );
    assert!(plan.actions.is_empty());
    let mut no_uid = e;
    no_uid.metadata.uid = None;
    assert!(
        reconcile_experiment(&observed(no_uid, vec![], t(5)))
            .error
            .is_some()
    );
}

#[test]
fn requeue_at_the_end_of_the_duration_or_the_progress_deadline() {
    // Running, 60 s duration from t=100, at t=130: back at t=160.
    let e = experiment(
        json!({"duration": "60s", "templates": [template("a", 1)]}),
        json!({"phase": "Running", "availableAt": "1970-01-01T00:01:40Z",
               "templateStatuses": [{"name": "a", "status": "Running", "replicas": 1,
                   "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1}]}),
    );
    let rs = owned_rs(&e, "a", 1, 1);
    let plan = reconcile_experiment(&observed(e, vec![rs], t(130)));
    assert_eq!(plan.requeue_after, Some(std::time::Duration::from_secs(30)));
    // Progressing since t=100 with a 600 s deadline, at t=130: back at t=700.
    let e = experiment(
        json!({"templates": [template("a", 1)]}),
        json!({"phase": "Pending",
               "templateStatuses": [{"name": "a", "status": "Progressing", "replicas": 1,
                   "updatedReplicas": 1, "readyReplicas": 0, "availableReplicas": 0,
                   "lastTransitionTime": "1970-01-01T00:01:40Z"}]}),
    );
    let rs = owned_rs(&e, "a", 1, 0);
    let plan = reconcile_experiment(&observed(e, vec![rs], t(130)));
    assert_eq!(
        plan.requeue_after,
        Some(std::time::Duration::from_secs(570))
    );
    // Terminating: no deadline requeue.
    let e = experiment(
        json!({"terminate": true, "templates": [template("a", 1)]}),
        json!({"phase": "Running", "templateStatuses": [{"name": "a", "status": "Running",
            "replicas": 0, "updatedReplicas": 0, "readyReplicas": 0, "availableReplicas": 0}]}),
    );
    let rs = owned_rs(&e, "a", 0, 0);
    let plan = reconcile_experiment(&observed(e, vec![rs], t(130)));
    assert_eq!(plan.requeue_after, None);
}

#[test]
fn the_pass_booked_for_the_end_of_the_duration_completes_it() {
    // Two templates, all pods available since t=100, duration 15 s.
    let running = |name: &str, n: i32| {
        json!({"name": name, "status": "Running", "replicas": n, "updatedReplicas": n,
               "readyReplicas": n, "availableReplicas": n,
               "lastTransitionTime": "1970-01-01T00:01:40Z"})
    };
    let e = experiment(
        json!({"duration": "15s", "templates": [template("a", 1), template("b", 2)]}),
        json!({"phase": "Running", "availableAt": "1970-01-01T00:01:40Z",
               "templateStatuses": [running("a", 1), running("b", 2)]}),
    );
    let rss = vec![owned_rs(&e, "a", 1, 1), owned_rs(&e, "b", 2, 2)];
    let at = |now| reconcile_experiment(&observed(e.clone(), rss.clone(), t(now)));
    let secs = std::time::Duration::from_secs;
    // Nothing else will happen to it: the plan books the pass at the end of the duration.
    let plan = at(100);
    assert_eq!(plan.requeue_after, Some(secs(15)));
    assert_eq!(plan.status.phase, Some(AnalysisPhase::Running));
    let plan = at(114);
    assert_eq!(plan.requeue_after, Some(secs(1)));
    assert_eq!(plan.status.phase, Some(AnalysisPhase::Running));
    // That pass, its time read to the second, finds the duration over.
    let plan = at(115);
    assert_eq!(plan.status.phase, Some(AnalysisPhase::Successful));
    for ts in plan.status.template_statuses.iter().flatten() {
        assert_eq!(
            ts.status,
            Some(sluice_api::experiment::TemplateStatusCode::Successful)
        );
    }
    let reasons: Vec<&str> = plan.events.iter().map(|e| e.reason).collect();
    assert_eq!(
        reasons,
        [
            "TemplateSuccessful",
            "TemplateSuccessful",
            "ExperimentSuccessful"
        ]
    );
}

#[test]
fn a_standalone_experiment_ends_on_time_with_no_event_but_its_requeues() {
    let e = experiment(
        json!({"duration": "15s", "templates": [template("a", 1), template("b", 2)]}),
        json!({}),
    );
    let mut sim = Sim::new(e, AnalysisTemplates::new());
    for _ in 0..10 {
        sim.pass();
        sim.settle();
        if sim.phase() == Some(AnalysisPhase::Running) {
            break;
        }
    }
    let status = sim.experiment.status.clone().unwrap();
    let available_at = status.available_at.expect("available").0;
    // From here only the plan's own writes (their watch events) and requeues bring passes.
    for _ in 0..10 {
        let now = sim.now;
        let before = sim.experiment.status.clone();
        let plan = sim.pass();
        if plan.status.phase == Some(AnalysisPhase::Successful) {
            assert_eq!(now, available_at + SignedDuration::from_secs(15));
            return;
        }
        let wrote = !plan.actions.is_empty() || before.as_ref() != Some(&plan.status);
        assert!(
            wrote || plan.requeue_after.is_some(),
            "at {now} the Experiment is {:?} and nothing brings it back",
            plan.status.phase
        );
    }
    panic!("not Successful: {:?}", sim.experiment.status);
}
