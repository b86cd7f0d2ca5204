use serde_json::{Value, json};

use super::*;
use crate::experiment::fixtures::{UID, experiment, observed, owned_rs, t, template};
use crate::experiment::observed::claim_replica_sets;
use crate::experiment::state::is_terminating;
use crate::plan::EventType;

/// Reconciles the first template of `o`.
fn run(o: &ExperimentObserved) -> TemplateOutcome {
    let claimed = claim_replica_sets(o, UID).unwrap();
    let pass = TemplatePass {
        observed: o,
        uid: UID,
        claimed: &claimed,
        terminating: is_terminating(&o.experiment),
    };
    let template = o.experiment.spec.templates.as_ref().unwrap()[0].clone();
    reconcile_template(&pass, &template)
}

/// A recorded template status `code` for `a`, counts `replicas`/`available`, last moved at 0.
fn recorded(code: &str, replicas: i32, available: i32) -> Value {
    json!({"name": "a", "status": code, "replicas": replicas, "updatedReplicas": replicas,
           "readyReplicas": available, "availableReplicas": available,
           "lastTransitionTime": "1970-01-01T00:00:00Z"})
}

/// (name, spec extras, status, rs replicas, rs available, now, wanted code, wanted message)
type Row<'a> = (
    &'a str,
    Value,
    Value,
    i32,
    i32,
    i64,
    &'a str,
    Option<&'a str>,
);

#[test]
fn the_status_table() {
    // (name, spec extras, status extras, rs replicas, rs available, now, want, message)
    let rows: Vec<Row> = vec![
        (
            "available, duration passed",
            json!({"duration": "10s"}),
            json!({"phase": "Running", "availableAt": "1970-01-01T00:00:00Z",
                   "templateStatuses": [recorded("Running", 1, 1)]}),
            1,
            1,
            11,
            "Successful",
            None,
        ),
        (
            "available, at the duration's last second",
            json!({"duration": "10s"}),
            json!({"phase": "Running", "availableAt": "1970-01-01T00:00:00Z",
                   "templateStatuses": [recorded("Running", 1, 1)]}),
            1,
            1,
            10,
            "Successful",
            None,
        ),
        (
            "available, duration not over",
            json!({"duration": "10s"}),
            json!({"phase": "Running", "availableAt": "1970-01-01T00:00:00Z",
                   "templateStatuses": [recorded("Running", 1, 1)]}),
            1,
            1,
            9,
            "Running",
            None,
        ),
        (
            "available, terminating",
            json!({"terminate": true}),
            json!({"phase": "Running",
                   "templateStatuses": [recorded("Running", 0, 0)]}),
            0,
            0,
            5,
            "Successful",
            None,
        ),
        (
            "available, otherwise",
            json!({"duration": "10s"}),
            json!({"phase": "Running", "availableAt": "1970-01-01T00:00:00Z",
                   "templateStatuses": [recorded("Progressing", 1, 0)]}),
            1,
            1,
            5,
            "Running",
            None,
        ),
        (
            "not available, deadline passed",
            json!({}),
            json!({"phase": "Pending",
                   "templateStatuses": [recorded("Progressing", 1, 0)]}),
            1,
            0,
            601,
            "Failed",
            Some("Template 'a' exceeded its progressDeadlineSeconds (600)"),
        ),
        (
            "not available, deadline not yet passed",
            json!({"progressDeadlineSeconds": 30}),
            json!({"phase": "Pending",
                   "templateStatuses": [recorded("Progressing", 1, 0)]}),
            1,
            0,
            29,
            "Progressing",
            None,
        ),
        (
            // The pass at the deadline's second (the one booked for it): exceeded, as Argo's
            // exact time is then past it.
            "not available, at the deadline's second",
            json!({"progressDeadlineSeconds": 30}),
            json!({"phase": "Pending",
                   "templateStatuses": [recorded("Progressing", 1, 0)]}),
            1,
            0,
            30,
            "Failed",
            Some("Template 'a' exceeded its progressDeadlineSeconds (30)"),
        ),
        (
            "not available, terminating",
            json!({"terminate": true}),
            json!({"phase": "Pending",
                   "templateStatuses": [recorded("Progressing", 0, 0)]}),
            1,
            0,
            5,
            "Successful",
            None,
        ),
        (
            "not available, otherwise",
            json!({}),
            json!({"phase": "Pending",
                   "templateStatuses": [recorded("Running", 1, 1)]}),
            1,
            0,
            5,
            "Progressing",
            None,
        ),
    ];
    for (name, spec_extra, status, replicas, available, now, want, message) in rows {
        let mut spec = json!({"templates": [template("a", 1)]});
        for (k, v) in spec_extra.as_object().unwrap() {
            spec[k] = v.clone();
        }
        let e = experiment(spec, status);
        let rs = owned_rs(&e, "a", replicas, available);
        let out = run(&observed(e, vec![rs], t(now)));
        assert_eq!(
            out.status.status.as_ref().map(|s| s.as_str()),
            Some(want),
            "{name}"
        );
        assert_eq!(out.status.message.as_deref(), message, "{name}");
    }
}

#[test]
fn next_code_covers_each_row() {
    use TemplateStatusCode::*;
    // (available, desired, duration passed, terminating, deadline exceeded)
    let rows = [
        ((1, 1, true, false, false), Successful),
        ((1, 1, false, true, false), Successful),
        ((1, 1, false, false, false), Running),
        ((1, 1, false, false, true), Running),
        ((0, 1, false, false, true), Failed),
        ((0, 1, false, true, true), Failed),
        ((0, 1, false, true, false), Successful),
        ((0, 1, false, false, false), Progressing),
        ((0, 1, true, false, false), Progressing),
    ];
    for ((a, d, passed, term, late), want) in rows {
        assert_eq!(
            next_code(a, d, passed, term, late),
            want,
            "{a} {d} {passed} {term} {late}"
        );
    }
}

#[test]
fn finished_templates_keep_their_status() {
    for code in ["Successful", "Failed", "Error"] {
        let e = experiment(
            json!({"templates": [template("a", 1)]}),
            json!({"phase": "Running", "templateStatuses": [
                {"name": "a", "status": code, "message": "m", "replicas": 1, "updatedReplicas": 1,
                 "readyReplicas": 1, "availableReplicas": 1}]}),
        );
        let rs = owned_rs(&e, "a", 1, 1);
        let out = run(&observed(e, vec![rs], t(5000)));
        assert_eq!(out.status.status.as_ref().unwrap().as_str(), code);
        assert!(out.events.iter().all(|e| !e.reason.starts_with("Template")));
        // Its pods are no longer wanted: the scale-down deadline is set.
        assert!(matches!(
            out.actions[..],
            [ExperimentAction::AnnotateReplicaSet { .. }]
        ));
    }
}

#[test]
fn new_template_creates_its_replica_set_at_zero() {
    let e = experiment(json!({"templates": [template("a", 2)]}), json!({}));
    let out = run(&observed(e, vec![], t(100)));
    let [ExperimentAction::CreateReplicaSet(rs)] = &out.actions[..] else {
        panic!("{:?}", out.actions)
    };
    assert_eq!(rs.metadata.name.as_deref(), Some("ex-a"));
    assert_eq!(rs.spec.as_ref().unwrap().replicas, Some(0));
    let st = &out.status;
    assert_eq!(st.status, Some(TemplateStatusCode::Progressing));
    assert_eq!(st.last_transition_time, Some(Time(t(100))));
    assert_eq!(
        (
            st.replicas,
            st.updated_replicas,
            st.ready_replicas,
            st.available_replicas
        ),
        (Some(0), Some(0), Some(0), Some(0))
    );
    assert_eq!(out.events.len(), 1);
    assert_eq!(out.events[0].reason, "TemplateProgressing");
    assert_eq!(
        out.events[0].message,
        "Template 'a' transitioned from  -> Progressing"
    );
}

#[test]
fn created_replica_set_is_scaled_up_on_the_next_pass() {
    let e = experiment(
        json!({"templates": [template("a", 2)]}),
        json!({"phase": "Pending", "templateStatuses": [recorded("Progressing", 0, 0)]}),
    );
    let rs = owned_rs(&e, "a", 0, 0);
    let out = run(&observed(e, vec![rs], t(50)));
    assert!(matches!(
        out.actions[..],
        [ExperimentAction::ScaleReplicaSet { from: 0, to: 2, .. }]
    ));
    assert_eq!(
        out.events[0].message,
        "Scaled up ReplicaSet ex-a from 0 to 2"
    );
    assert_eq!(out.status.last_transition_time, Some(Time(t(50))));
}

#[test]
fn last_transition_time_moves_with_the_counts_only() {
    let e = experiment(
        json!({"templates": [template("a", 2)]}),
        json!({"phase": "Pending", "templateStatuses": [recorded("Progressing", 2, 0)]}),
    );
    let same = owned_rs(&e, "a", 2, 0);
    let out = run(&observed(e.clone(), vec![same], t(50)));
    assert_eq!(out.status.last_transition_time, Some(Time(t(0))));
    assert!(out.actions.is_empty() && out.events.is_empty());
    let more = owned_rs(&e, "a", 2, 1);
    let out = run(&observed(e, vec![more], t(50)));
    assert_eq!(out.status.last_transition_time, Some(Time(t(50))));
}

#[test]
fn failure_is_a_warning_with_the_message() {
    let e = experiment(
        json!({"templates": [template("a", 1)]}),
        json!({"phase": "Pending", "templateStatuses": [recorded("Progressing", 1, 0)]}),
    );
    let rs = owned_rs(&e, "a", 1, 0);
    let out = run(&observed(e, vec![rs], t(601)));
    let event = &out.events[0];
    assert_eq!(event.type_, EventType::Warning);
    assert_eq!(event.reason, "TemplateFailed");
    assert_eq!(
        event.message,
        "Template 'a' transitioned from Progressing -> Failed: Template 'a' exceeded its \
         progressDeadlineSeconds (600)"
    );
}

#[test]
fn unbuildable_template_is_an_error() {
    let mut tpl = template("a", 1);
    tpl["template"]["spec"]["containers"][0]["resources"] = json!({"limits": {"cpu": "lots"}});
    let e = experiment(json!({"templates": [tpl]}), json!({}));
    let out = run(&observed(e, vec![], t(0)));
    assert!(out.actions.is_empty());
    assert_eq!(out.status.status, Some(TemplateStatusCode::Error));
    assert!(
        out.status
            .message
            .as_deref()
            .unwrap()
            .starts_with("Failed to create ReplicaSet for template 'a': "),
        "{:?}",
        out.status.message
    );
    assert_eq!(out.events[0].type_, EventType::Warning);
}

#[test]
fn a_name_taken_by_another_replica_set_counts_a_collision() {
    let e = experiment(json!({"templates": [template("a", 1)]}), json!({}));
    let mut foreign = owned_rs(&e, "a", 1, 1);
    foreign.metadata.owner_references = None;
    let out = run(&observed(e, vec![foreign], t(0)));
    assert!(out.actions.is_empty());
    assert_eq!(out.status.collision_count, Some(1));
    assert_eq!(out.status.status, Some(TemplateStatusCode::Progressing));
}

#[test]
fn scale_down_delay_holds_pods_without_failing_the_template() {
    // Terminating long after the template last moved: the hold is not a stalled rollout.
    let e = experiment(
        json!({"templates": [template("a", 1)], "terminate": true, "scaleDownDelaySeconds": 5}),
        json!({"phase": "Running", "templateStatuses": [recorded("Running", 1, 1)]}),
    );
    let rs = owned_rs(&e, "a", 1, 1);
    let out = run(&observed(e, vec![rs], t(5000)));
    assert_eq!(out.status.status, Some(TemplateStatusCode::Successful));
    assert_eq!(out.requeue, Some(Duration::from_secs(5)));
    assert_eq!(out.status.last_transition_time, Some(Time(t(5000))));

    // A deadline recorded before (the status write was lost): held, still not Failed, and
    // the status does not move while waiting (no write per pass).
    let e = experiment(
        json!({"templates": [template("a", 1)], "terminate": true, "scaleDownDelaySeconds": 5}),
        json!({"phase": "Running", "templateStatuses": [recorded("Running", 1, 1)]}),
    );
    let mut rs = owned_rs(&e, "a", 1, 1);
    rs.metadata.annotations.as_mut().unwrap().insert(
        crate::labels::SCALE_DOWN_DEADLINE.into(),
        "1970-01-01T01:23:23Z".into(),
    );
    let out = run(&observed(e, vec![rs], t(5000)));
    assert_eq!(out.status.status, Some(TemplateStatusCode::Successful));
    assert_eq!(out.status.last_transition_time, Some(Time(t(0))));
    assert!(out.actions.is_empty());
    assert_eq!(out.requeue, Some(Duration::from_secs(3)));
}
