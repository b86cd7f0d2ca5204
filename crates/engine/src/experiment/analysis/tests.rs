use serde_json::{Value, json};
use sluice_api::analysis::AnalysisTemplateSpec;

use super::*;
use crate::experiment::fixtures::{UID, experiment, observed, owned_rs, t, template};
use crate::experiment::observed::claim_replica_sets;
use crate::experiment::state::is_terminating;
use crate::plan::EventType;

fn spec_with(analyses: Value, extra: Value) -> Value {
    let mut spec = json!({"duration": "60s", "templates": [template("base", 1)],
                          "analyses": analyses});
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    spec
}

fn at(args: Value, extra: Value) -> AnalysisTemplateSpec {
    let mut s = json!({"args": args, "metrics": [{"name": "m", "provider": {"job": {}}}]});
    for (k, v) in extra.as_object().unwrap() {
        s[k] = v.clone();
    }
    serde_json::from_value(s).unwrap()
}

fn key(cluster: bool, name: &str) -> TemplateKey {
    TemplateKey {
        cluster_scope: cluster,
        name: name.into(),
    }
}

struct Pass {
    status: ExperimentStatus,
    actions: Vec<ExperimentAction>,
    events: Vec<Event>,
}

fn reconcile(o: &ExperimentObserved) -> Pass {
    let claimed = claim_replica_sets(o, UID).unwrap();
    let mut p = Pass {
        status: o.experiment.status.clone().unwrap_or_default(),
        actions: vec![],
        events: vec![],
    };
    reconcile_analyses(
        o,
        UID,
        &claimed,
        is_terminating(&o.experiment),
        &mut p.status,
        &mut p.actions,
        &mut p.events,
    );
    p
}

/// The world after the templates became available at t=100, with template `t` present.
fn available(analyses: Value, extra: Value, runs_status: Value) -> ExperimentObserved {
    let e = experiment(
        spec_with(analyses, extra),
        json!({"phase": "Running", "availableAt": "1970-01-01T00:01:40Z",
               "analysisRuns": runs_status}),
    );
    let rs = owned_rs(&e, "base", 1, 1);
    let mut o = observed(e, vec![rs], t(120));
    o.analysis_templates
        .insert(key(false, "t"), at(json!([{"name": "hash"}]), json!({})));
    o
}

fn entry(p: &Pass, name: &str) -> ExperimentAnalysisRunStatus {
    p.status
        .analysis_runs
        .iter()
        .flatten()
        .find(|r| r.name.as_deref() == Some(name))
        .cloned()
        .unwrap()
}

#[test]
fn before_available_only_templates_are_checked() {
    let e = experiment(
        spec_with(
            json!([{"name": "a", "templateName": "t"},
                   {"name": "b", "templateName": "gone"},
                   {"name": "c", "templateName": "gone", "clusterScope": true}]),
            json!({}),
        ),
        json!({"phase": "Pending"}),
    );
    let mut o = observed(e, vec![], t(0));
    o.analysis_templates
        .insert(key(false, "t"), at(json!([]), json!({})));
    let p = reconcile(&o);
    assert!(p.actions.is_empty());
    let a = entry(&p, "a");
    assert_eq!(a.analysis_run.as_deref(), Some(""));
    assert_eq!(a.phase.as_ref().map(|p| p.as_str()), Some(""));
    let b = entry(&p, "b");
    assert_eq!(b.phase, Some(AnalysisPhase::Error));
    assert_eq!(
        b.message.as_deref(),
        Some(
            "AnalysisTemplate verification failed for analysis 'b': analysistemplate.argoproj.io \
             \"gone\" not found"
        )
    );
    assert_eq!(
        entry(&p, "c").message.as_deref(),
        Some(
            "ClusterAnalysisTemplate verification failed for analysis 'c': \
             clusteranalysistemplate.argoproj.io \"gone\" not found"
        )
    );
    assert_eq!(p.events.len(), 2);
    assert_eq!(p.events[0].type_, EventType::Warning);
    assert_eq!(p.events[0].reason, "AnalysisRunError");
    assert!(
        p.events[0]
            .message
            .starts_with("AnalysisRun 'b' transitioned from  -> Error: AnalysisTemplate")
    );
    // Serialized as Argo writes it (the CRD requires both fields).
    let json = serde_json::to_value(&a).unwrap();
    assert_eq!(json, json!({"name": "a", "analysisRun": "", "phase": ""}));
}

#[test]
fn run_is_built_with_argo_names_labels_and_settings() {
    let mut o = available(
        json!([{"name": "a", "templateName": "t", "args": [
            {"name": "hash", "value": "{{templates.base.podTemplateHash}}"},
            {"name": "rs", "value": "{{templates.base.replicaset.name}}"},
            {"name": "from", "value": "{{experiment.availableAt}}-{{experiment.finishedAt}}"},
            {"name": "undeclared", "value": "x"}]}]),
        json!({"dryRun": [{"metricName": "m"}],
               "measurementRetention": [{"metricName": "m", "limit": 2}],
               "analysisRunMetadata": {"labels": {"team": "t1"}, "annotations": {"note": "n"}}}),
        json!([]),
    );
    o.experiment.metadata.labels =
        Some([(CONTROLLER_INSTANCE_ID.to_owned(), "inst".to_owned())].into());
    o.analysis_templates.insert(
        key(false, "t"),
        at(
            json!([{"name": "hash"}, {"name": "rs"}, {"name": "from"}]),
            json!({}),
        ),
    );
    let hash = o.replica_sets[0].pod_hash().unwrap().to_owned();
    let p = reconcile(&o);
    let [ExperimentAction::CreateAnalysisRun(run)] = &p.actions[..] else {
        panic!("{:?}", p.actions)
    };
    assert_eq!(run.metadata.name.as_deref(), Some("ex-a"));
    assert_eq!(run.metadata.namespace.as_deref(), Some("ns"));
    let owner = &run.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        ("Experiment", "ex", UID)
    );
    assert_eq!(owner.controller, Some(true));
    let labels = run.metadata.labels.as_ref().unwrap();
    assert_eq!(labels.len(), 2);
    assert_eq!(labels[CONTROLLER_INSTANCE_ID], "inst");
    assert_eq!(labels["team"], "t1");
    assert_eq!(run.metadata.annotations.as_ref().unwrap()["note"], "n");
    let args: Vec<(String, String)> = run
        .spec
        .args
        .iter()
        .flatten()
        .map(|a| (a.name.clone().unwrap(), a.value.clone().unwrap()))
        .collect();
    assert_eq!(
        args,
        [
            ("hash".to_owned(), hash),
            ("rs".to_owned(), "ex-base".to_owned()),
            (
                "from".to_owned(),
                "1970-01-01T00:01:40Z-1970-01-01T00:02:40Z".to_owned()
            ),
        ]
    );
    assert_eq!(run.spec.dry_run.as_ref().unwrap().len(), 1);
    assert_eq!(
        run.spec.measurement_retention.as_ref().unwrap()[0].limit,
        Some(2)
    );
    assert_eq!(run.spec.metrics.as_ref().unwrap().len(), 1);
    let a = entry(&p, "a");
    assert_eq!(a.analysis_run.as_deref(), Some("ex-a"));
    assert_eq!(a.phase, Some(AnalysisPhase::Pending));
    assert_eq!(p.events[0].reason, "AnalysisRunPending");
    assert_eq!(
        p.events[0].message,
        "AnalysisRun 'a' transitioned from  -> Pending"
    );
}

#[test]
fn nested_templates_are_expanded() {
    let mut o = available(
        json!([{"name": "a", "templateName": "outer", "args": [{"name": "hash", "value": "h"}]}]),
        json!({}),
        json!([]),
    );
    o.analysis_templates.insert(
        key(false, "outer"),
        serde_json::from_value(json!({"templates": [{"templateName": "t"}]})).unwrap(),
    );
    let p = reconcile(&o);
    let [ExperimentAction::CreateAnalysisRun(run)] = &p.actions[..] else {
        panic!("{:?}", p.actions)
    };
    assert_eq!(
        run.spec.metrics.as_ref().unwrap()[0].name.as_deref(),
        Some("m")
    );
    assert_eq!(
        run.spec.args.as_ref().unwrap()[0].value.as_deref(),
        Some("h")
    );
}

#[test]
fn creation_failures_are_errors_with_argo_messages() {
    let cases = [
        (
            json!([{"name": "a", "templateName": "t", "args": [
                {"name": "hash", "value": "{{templates.nope.podTemplateHash}}"}]}]),
            "Failed to create AnalysisRun for analysis 'a': failed to resolve \
             {{templates.nope.podTemplateHash}}",
        ),
        (
            json!([{"name": "a", "templateName": "gone"}]),
            "Failed to create AnalysisRun for analysis 'a': analysistemplate.argoproj.io \
             \"gone\" not found",
        ),
        (
            json!([{"name": "a", "templateName": "t"}]),
            "Failed to create AnalysisRun for analysis 'a': args.hash was not resolved",
        ),
        (
            json!([{"name": "a", "templateName": "t", "args": [
                {"name": "hash", "value": "{{experiment.finishedAt}}"}]}]),
            "Failed to create AnalysisRun for analysis 'a': failed to resolve \
             {{experiment.finishedAt}}",
        ),
    ];
    for (analyses, want) in cases {
        let mut o = available(analyses.clone(), json!({}), json!([]));
        // Without a duration there is no finishedAt.
        o.experiment.spec.duration = None;
        let p = reconcile(&o);
        assert!(p.actions.is_empty(), "{analyses}");
        let a = entry(&p, "a");
        assert_eq!(a.phase, Some(AnalysisPhase::Error), "{analyses}");
        assert_eq!(a.message.as_deref(), Some(want));
        assert_eq!(p.events[0].type_, EventType::Warning);
    }
}

fn run(name: &str, owner: &str, phase: Option<&str>, spec: Value) -> AnalysisRun {
    serde_json::from_value(json!({
        "metadata": {"name": name, "ownerReferences": [{"apiVersion": "argoproj.io/v1alpha1",
            "kind": "Experiment", "name": "ex", "uid": owner, "controller": true}]},
        "spec": spec,
        "status": phase.map(|p| json!({"phase": p, "message": "said"}))
    }))
    .unwrap()
}

#[test]
fn taken_names_get_a_suffix_and_an_equal_run_is_reused() {
    let analyses =
        json!([{"name": "a", "templateName": "t", "args": [{"name": "hash", "value": "h"}]}]);
    let mut o = available(analyses.clone(), json!({}), json!([]));
    o.analysis_runs = vec![
        run("ex-a", "someone", None, json!({"metrics": []})),
        run("ex-a.1", UID, Some("Successful"), json!({"metrics": []})),
    ];
    let p = reconcile(&o);
    let [ExperimentAction::CreateAnalysisRun(created)] = &p.actions[..] else {
        panic!("{:?}", p.actions)
    };
    assert_eq!(created.metadata.name.as_deref(), Some("ex-a.2"));

    // The same run made earlier (its status record lost): reused, nothing created.
    let mut same = (**created).clone();
    same.metadata.name = Some("ex-a.2".into());
    o.analysis_runs.push(same);
    let p = reconcile(&o);
    assert!(p.actions.is_empty());
    assert_eq!(entry(&p, "a").analysis_run.as_deref(), Some("ex-a.2"));
}

#[test]
fn run_phase_and_message_are_copied_with_an_event() {
    let o = |phase: Option<&str>| {
        let mut o = available(
            json!([{"name": "a", "templateName": "t"}]),
            json!({}),
            json!([{"name": "a", "analysisRun": "ex-a", "phase": "Pending"}]),
        );
        o.analysis_runs = vec![run("ex-a", UID, phase, json!({}))];
        o
    };
    let p = reconcile(&o(Some("Running")));
    let a = entry(&p, "a");
    assert_eq!(a.phase, Some(AnalysisPhase::Running));
    assert_eq!(a.message.as_deref(), Some("said"));
    assert_eq!(
        (p.events[0].reason, p.events[0].message.as_str()),
        (
            "AnalysisRunRunning",
            "AnalysisRun 'a' transitioned from Pending -> Running: said"
        )
    );
    let p = reconcile(&o(Some("Failed")));
    assert_eq!(p.events[0].type_, EventType::Warning);
    assert_eq!(p.events[0].reason, "AnalysisRunFailed");
    // Not yet picked up by the analysis controller: still Pending, no event.
    let p = reconcile(&o(None));
    assert_eq!(entry(&p, "a").phase, Some(AnalysisPhase::Pending));
    assert!(p.events.is_empty());
}

#[test]
fn terminating_stops_unfinished_runs_and_starts_none() {
    let world = |phase: &str, terminate: bool, recorded: Value| {
        let mut o = available(
            json!([{"name": "a", "templateName": "t"}]),
            json!({"terminate": true}),
            recorded,
        );
        o.analysis_runs = vec![run(
            "ex-a",
            UID,
            Some(phase),
            json!({"terminate": terminate}),
        )];
        o
    };
    let recorded = json!([{"name": "a", "analysisRun": "ex-a", "phase": "Running"}]);
    let p = reconcile(&world("Running", false, recorded.clone()));
    assert_eq!(
        p.actions,
        [ExperimentAction::TerminateAnalysisRun {
            name: "ex-a".into()
        }]
    );
    assert_eq!(
        (p.events[0].reason, p.events[0].message.as_str()),
        ("AnalysisRunTerminating", "Terminating a (ex-a)")
    );
    assert!(
        reconcile(&world("Running", true, recorded.clone()))
            .actions
            .is_empty()
    );
    assert!(
        reconcile(&world("Successful", false, recorded))
            .actions
            .is_empty()
    );
    // No run yet: none is started.
    let p = reconcile(&world("Running", false, json!([])));
    assert!(p.actions.is_empty());
    assert_eq!(entry(&p, "a").analysis_run.as_deref(), Some(""));
}

#[test]
fn terminating_stops_a_run_whose_record_was_lost() {
    let analyses =
        json!([{"name": "a", "templateName": "t", "args": [{"name": "hash", "value": "h"}]}]);
    let o = available(analyses.clone(), json!({}), json!([]));
    let [ExperimentAction::CreateAnalysisRun(created)] = &reconcile(&o).actions[..] else {
        panic!("no run started")
    };
    // Started, but the status write recording it conflicted with the terminate.
    let mut o = available(analyses, json!({"terminate": true}), json!([]));
    let mut measuring = (**created).clone();
    measuring.status = Some(serde_json::from_value(json!({"phase": "Running"})).unwrap());
    o.analysis_runs = vec![measuring];
    let p = reconcile(&o);
    assert_eq!(
        p.actions,
        [ExperimentAction::TerminateAnalysisRun {
            name: "ex-a".into()
        }]
    );
    let a = entry(&p, "a");
    assert_eq!(a.analysis_run.as_deref(), Some("ex-a"));
    assert_eq!(a.phase, Some(AnalysisPhase::Running));
}
