//! The StatefulSet canary, decided on hand-made StatefulSets: what the StatefulSet controller
//! would report at each point is written into the fixture's status.

use jiff::Timestamp;
use serde_json::{Value, json};
use sluice_api::analysis::{AnalysisRun, AnalysisTemplateSpec};
use sluice_api::common::AnalysisPhase;
use sluice_api::rollout::{PauseReason, Rollout, RolloutPhase, RolloutStatus};

use super::*;
use crate::observed::{Observed, TemplateKey};
use crate::plan::{Action, Plan};

const REPLICAS: i32 = 4;

fn rollout(steps: Value, status: Option<RolloutStatus>) -> Rollout {
    let mut ro: Rollout = serde_json::from_value(json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": "db", "namespace": "ns", "generation": 1, "uid": "u-1",
                     "annotations": {STATEFULSET: "db"}},
        "spec": {"strategy": {"canary": {"steps": steps}}}
    }))
    .unwrap();
    ro.status = status;
    ro
}

fn steps() -> Value {
    json!([{"setWeight": 25}, {"pause": {}}, {"setWeight": 50}, {"pause": {"duration": "2s"}}])
}

/// The StatefulSet as its controller reports it: the update and current revisions' hashes,
/// how many pods run the update revision, how many are ready.
fn sts(partition: Option<i32>, update: &str, current: &str, updated: i32, ready: i32) -> Value {
    let mut sts = json!({
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": "ns", "generation": 2, "resourceVersion": "7"},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": {"app": "db"}},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": template(update)
        },
        "status": {
            "observedGeneration": 2,
            "replicas": REPLICAS,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "updatedReplicas": updated,
            "currentReplicas": REPLICAS - updated,
            "updateRevision": format!("db-{update}"),
            "currentRevision": format!("db-{current}")
        }
    });
    if let Some(p) = partition {
        sts["spec"]["updateStrategy"]["rollingUpdate"] = json!({"partition": p});
    }
    sts
}

fn template(hash: &str) -> Value {
    json!({"metadata": {"labels": {"app": "db"}},
           "spec": {"containers": [{"name": "db", "image": format!("db:{hash}")}]}})
}

fn revision(hash: &str, number: i64) -> Value {
    let mut data = json!({"spec": {"template": template(hash)}});
    data["spec"]["template"]["$patch"] = json!("replace");
    json!({"metadata": {"name": format!("db-{hash}")}, "revision": number, "data": data})
}

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).unwrap()
}

fn decide(ro: &Rollout, sts: Option<Value>, now: Timestamp) -> Plan {
    decide_with_runs(ro, sts, &[], now)
}

/// As [`decide`], with the Rollout's AnalysisRuns, and the AnalysisTemplates `t` (of the
/// analysis steps) and `b` (of the background analysis).
fn decide_with_runs(
    ro: &Rollout,
    sts: Option<Value>,
    runs: &[AnalysisRun],
    now: Timestamp,
) -> Plan {
    decide_with(ro, sts, runs, &[], now)
}

/// As [`decide_with_runs`], with the StatefulSet's pods.
fn decide_with(
    ro: &Rollout,
    sts: Option<Value>,
    runs: &[AnalysisRun],
    pods: &[k8s_openapi::api::core::v1::Pod],
    now: Timestamp,
) -> Plan {
    let template: AnalysisTemplateSpec = serde_json::from_value(json!({
        "metrics": [{"name": "m", "provider": {"web": {"url": "http://metrics/"}}}]
    }))
    .unwrap();
    let analysis_templates = ["t", "b"]
        .into_iter()
        .map(|name| {
            let key = TemplateKey {
                cluster_scope: false,
                name: name.into(),
            };
            (key, template.clone())
        })
        .collect();
    let observed = Observed {
        rollout: ro.clone(),
        replica_sets: Vec::new(),
        pods: pods.to_vec(),
        services: Vec::new(),
        analysis_runs: runs.to_vec(),
        analysis_templates,
        router_objects: Default::default(),
        router_versions: Default::default(),
        experiments: Vec::new(),
        workload: None,
        stateful_set: Some(StatefulSetObserved {
            stateful_set: sts,
            revisions: vec![revision("a", 1), revision("b", 2)],
        }),
        progress_held_since: None,
        step_plugin_answers: Vec::new(),
        target_registration: None,
        now,
    };
    crate::reconcile(&observed)
}

/// The StatefulSet the plan writes, if it writes one.
fn written(plan: &Plan) -> Option<&Value> {
    let mut writes = plan.actions.iter().filter_map(|a| match a {
        Action::UpdateStatefulSet { object, .. } => Some(object.as_ref()),
        Action::CreateAnalysisRun { .. }
        | Action::EvictPod { .. }
        | Action::TerminateAnalysisRun { .. }
        | Action::DeleteAnalysisRun { .. }
        | Action::AnnotateAnalysisRun { .. } => None,
        other => panic!("unexpected action {other:?}"),
    });
    let first = writes.next();
    assert!(
        writes.next().is_none(),
        "one write per plan: {:?}",
        plan.actions
    );
    first
}

fn written_partition(plan: &Plan) -> Option<i64> {
    written(plan).map(|o| {
        o["spec"]["updateStrategy"]["rollingUpdate"]["partition"]
            .as_i64()
            .unwrap()
    })
}

fn reasons(plan: &Plan) -> Vec<&str> {
    plan.events.iter().map(|e| e.reason).collect()
}

/// Status a reconcile leaves, as the next one reads it.
fn next(ro: &Rollout, plan: &Plan) -> Rollout {
    let mut ro = ro.clone();
    ro.status = Some(plan.status.clone());
    ro
}

#[test]
fn partition_leaves_the_weight_of_the_pods_above_it() {
    for (replicas, weight, partition) in [
        (5, 20, 4),
        (5, 50, 2),
        (5, 100, 0),
        (5, 0, 5),
        (4, 25, 3),
        (4, 50, 2),
        (3, 1, 2),
        (0, 50, 0),
        (4, 250, 0),
        (4, -5, 4),
    ] {
        assert_eq!(
            partition_for(replicas, weight),
            partition,
            "{replicas} at {weight}%"
        );
    }
    assert_eq!(revision_hash("db", "db-7c9f"), "7c9f");
    assert_eq!(revision_hash("db", "other"), "other");
}

#[test]
fn first_adoption_makes_the_current_revision_stable_and_closes_the_partition() {
    let ro = rollout(steps(), None);
    let plan = decide(&ro, Some(sts(None, "a", "a", 4, 4)), at(0));
    let s = &plan.status;
    assert_eq!(s.stable_rs.as_deref(), Some("a"));
    assert_eq!(s.current_pod_hash.as_deref(), Some("a"));
    assert_eq!(s.current_step_index, Some(4));
    assert_eq!(s.phase, Some(RolloutPhase::Healthy));
    assert_eq!(s.selector.as_deref(), Some("app=db"));
    assert_eq!(written_partition(&plan), Some(4));
    // Written with the resourceVersion read, without the status.
    let object = written(&plan).unwrap();
    assert_eq!(object["metadata"]["resourceVersion"], "7");
    assert!(object.get("status").is_none());
    assert_eq!(
        plan.events[0].message,
        "Rollout completed update to revision 1 (a): Initial deploy"
    );
    // Nothing more to do once it is closed.
    let plan = decide(&next(&ro, &plan), Some(sts(Some(4), "a", "a", 4, 4)), at(1));
    assert!(plan.actions.is_empty());
    assert_eq!(plan.status.phase, Some(RolloutPhase::Healthy));
}

/// A Rollout that has adopted revision `a` and is Healthy.
fn healthy() -> Rollout {
    let ro = rollout(steps(), None);
    let plan = decide(&ro, Some(sts(None, "a", "a", 4, 4)), at(0));
    next(&ro, &plan)
}

#[test]
fn a_canary_walks_its_partitions_through_the_steps() {
    let ro = healthy();
    // The template changed: revision b, nothing updated yet (partition 4).
    let plan = decide(&ro, Some(sts(Some(4), "b", "a", 0, 4)), at(10));
    assert_eq!(plan.status.current_pod_hash.as_deref(), Some("b"));
    assert_eq!(plan.status.current_step_index, Some(0));
    assert_eq!(written_partition(&plan), Some(3), "setWeight 25 of 4 pods");
    assert!(reasons(&plan).contains(&"RolloutUpdated"));
    assert_eq!(plan.status.phase, Some(RolloutPhase::Progressing));
    let ro = next(&ro, &plan);

    // Partition 3 set, ordinal 3 not yet replaced: the step waits, and looks again soon.
    let plan = decide(&ro, Some(sts(Some(3), "b", "a", 0, 3)), at(11));
    assert!(plan.actions.is_empty());
    assert_eq!(plan.status.current_step_index, Some(0));
    assert_eq!(plan.requeue_after, Some(POD_RECHECK));
    assert!(matches!(
        plan.waits[0],
        crate::Wait::PodsNotAvailable { .. }
    ));

    // Ordinal 3 runs b and is ready: the step completes and the pause step pauses.
    let plan = decide(&ro, Some(sts(Some(3), "b", "a", 1, 4)), at(12));
    assert_eq!(plan.status.current_step_index, Some(1));
    assert_eq!(plan.status.phase, Some(RolloutPhase::Paused));
    let pause = &plan.status.pause_conditions.as_ref().unwrap()[0];
    assert_eq!(pause.reason, Some(PauseReason::CanaryPauseStep));
    assert!(plan.actions.is_empty());
    assert_eq!(plan.status.updated_replicas, Some(1));
    let ro = next(&ro, &plan);

    // Still paused a while later.
    let plan = decide(&ro, Some(sts(Some(3), "b", "a", 1, 4)), at(100));
    assert_eq!(plan.status.current_step_index, Some(1));
    assert!(plan.actions.is_empty());

    // Promoted (the pause conditions cleared): setWeight 50 sets partition 2.
    let mut promoted = ro.clone();
    promoted.status.as_mut().unwrap().pause_conditions = None;
    let plan = decide(&promoted, Some(sts(Some(3), "b", "a", 1, 4)), at(101));
    assert_eq!(plan.status.current_step_index, Some(2));
    assert_eq!(written_partition(&plan), Some(2));
    assert!(reasons(&plan).contains(&"RolloutResumed"));
    let ro = next(&promoted, &plan);

    // Ordinals 2 and 3 on b: the timed pause starts, and runs out by the clock.
    let plan = decide(&ro, Some(sts(Some(2), "b", "a", 2, 4)), at(102));
    assert_eq!(plan.status.current_step_index, Some(3));
    assert_eq!(plan.requeue_after, Some(std::time::Duration::from_secs(2)));
    let ro = next(&ro, &plan);
    let plan = decide(&ro, Some(sts(Some(2), "b", "a", 2, 4)), at(103));
    assert_eq!(plan.status.current_step_index, Some(3));
    assert!(plan.actions.is_empty());
    let plan = decide(&ro, Some(sts(Some(2), "b", "a", 2, 4)), at(104));
    assert_eq!(plan.status.current_step_index, Some(4));
    assert_eq!(
        written_partition(&plan),
        Some(0),
        "past the steps: every pod"
    );
    assert_eq!(plan.status.stable_rs.as_deref(), Some("a"));
    let ro = next(&ro, &plan);

    // Every pod on b, which the StatefulSet controller has made current: b is stable, and
    // the partition is closed for the next update.
    let plan = decide(&ro, Some(sts(Some(0), "b", "a", 3, 4)), at(105));
    assert_eq!(plan.status.stable_rs.as_deref(), Some("a"));
    assert!(plan.actions.is_empty());
    let plan = decide(&ro, Some(sts(Some(0), "b", "b", 4, 4)), at(106));
    assert_eq!(plan.status.stable_rs.as_deref(), Some("b"));
    assert_eq!(written_partition(&plan), Some(4));
    assert_eq!(plan.status.phase, Some(RolloutPhase::Healthy));
    assert!(
        plan.events.iter().any(|e| e.message
            == "Rollout completed update to revision 2 (b): Completed all 4 canary steps"),
        "{:?}",
        plan.events
    );
}

#[test]
fn a_full_promotion_skips_the_steps() {
    let ro = healthy();
    let plan = decide(&ro, Some(sts(Some(4), "b", "a", 0, 4)), at(10));
    let mut ro = next(&ro, &plan);
    ro.status.as_mut().unwrap().promote_full = Some(true);
    let plan = decide(&ro, Some(sts(Some(3), "b", "a", 0, 4)), at(11));
    assert_eq!(written_partition(&plan), Some(0));
}

#[test]
fn a_manual_pause_moves_nothing() {
    let ro = healthy();
    let mut ro = next(
        &ro,
        &decide(&ro, Some(sts(Some(4), "b", "a", 0, 4)), at(10)),
    );
    ro.spec.paused = Some(true);
    let plan = decide(&ro, Some(sts(Some(4), "b", "a", 0, 4)), at(11));
    assert!(plan.actions.is_empty());
    assert_eq!(plan.status.phase, Some(RolloutPhase::Paused));
}

#[test]
fn abort_restores_the_stable_template_and_keeps_the_partition() {
    let ro = healthy();
    let ro = next(
        &ro,
        &decide(&ro, Some(sts(Some(4), "b", "a", 0, 4)), at(10)),
    );
    let ro = next(
        &ro,
        &decide(&ro, Some(sts(Some(3), "b", "a", 1, 4)), at(11)),
    );
    assert_eq!(ro.status.as_ref().unwrap().current_step_index, Some(1));
    let mut ro = ro;
    ro.status.as_mut().unwrap().abort = Some(true);

    let plan = decide(&ro, Some(sts(Some(3), "b", "a", 1, 4)), at(12));
    let object = written(&plan).unwrap();
    assert_eq!(
        object["spec"]["template"],
        template("a"),
        "no $patch directive"
    );
    assert_eq!(
        object["spec"]["updateStrategy"]["rollingUpdate"]["partition"],
        3
    );
    assert_eq!(plan.status.phase, Some(RolloutPhase::Degraded));
    assert_eq!(
        plan.status.message.as_deref(),
        Some("RolloutAborted: Rollout aborted update to revision 2")
    );
    assert!(reasons(&plan).contains(&"RolloutAborted"));
    assert!(plan.status.pause_conditions.is_none());
    let ro = next(&ro, &plan);

    // The template is a's again (the update revision), ordinal 3 still on b: it rolls back,
    // the Rollout stays aborted on b.
    let mut rolling_back = sts(Some(3), "a", "a", 3, 3);
    rolling_back["spec"]["template"] = template("a");
    let plan = decide(&ro, Some(rolling_back), at(13));
    assert!(plan.actions.is_empty(), "{:?}", plan.actions);
    assert_eq!(plan.status.current_pod_hash.as_deref(), Some("b"));
    assert_eq!(plan.status.phase, Some(RolloutPhase::Degraded));
    assert!(!reasons(&plan).contains(&"RolloutAborted"), "said once");

    // Every pod back on a: the partition closes, the Rollout stays aborted.
    let plan = decide(&ro, Some(sts(Some(3), "a", "a", 4, 4)), at(14));
    assert_eq!(written_partition(&plan), Some(4));
    assert_eq!(plan.status.phase, Some(RolloutPhase::Degraded));
    assert_eq!(plan.status.abort, Some(true));
    let ro = next(&ro, &plan);

    // A new template starts a new update, the abort forgotten.
    let mut c = sts(Some(4), "c", "a", 0, 4);
    c["spec"]["template"] = template("c");
    let plan = decide(&ro, Some(c), at(15));
    assert_eq!(plan.status.abort, None);
    assert_eq!(plan.status.current_pod_hash.as_deref(), Some("c"));
    assert_eq!(written_partition(&plan), Some(3));
}

#[test]
fn a_template_edited_back_to_stable_is_a_rollback_without_steps() {
    let ro = healthy();
    let ro = next(
        &ro,
        &decide(&ro, Some(sts(Some(4), "b", "a", 0, 4)), at(10)),
    );
    let plan = decide(&ro, Some(sts(Some(3), "a", "a", 3, 4)), at(11));
    assert!(reasons(&plan).contains(&"SkipSteps"));
    assert_eq!(plan.status.current_pod_hash.as_deref(), Some("a"));
    // Ordinal 3 is still rolling back: the partition stays until every pod is on a.
    assert!(plan.actions.is_empty());
    let ro = next(&ro, &plan);
    let plan = decide(&ro, Some(sts(Some(3), "a", "a", 4, 4)), at(12));
    assert_eq!(written_partition(&plan), Some(4));
    assert_eq!(plan.status.phase, Some(RolloutPhase::Healthy));
}

#[test]
fn what_cannot_be_driven_is_invalid_spec() {
    let message = |plan: &Plan| plan.status.message.clone().unwrap_or_default();
    let ro = rollout(steps(), None);
    let plan = decide(&ro, None, at(0));
    assert_eq!(
        message(&plan),
        "InvalidSpec: The Rollout \"db\" is invalid: statefulsets.apps \"db\" not found"
    );
    assert_eq!(plan.status.phase, Some(RolloutPhase::Degraded));
    assert!(plan.actions.is_empty());

    let mut on_delete = sts(None, "a", "a", 4, 4);
    on_delete["spec"]["updateStrategy"] = json!({"type": "OnDelete"});
    let plan = decide(&ro, Some(on_delete), at(0));
    assert!(
        message(&plan).contains(
            "StatefulSet \"db\": spec.updateStrategy.type: Unsupported value: \"OnDelete\""
        ),
        "{}",
        message(&plan)
    );
    assert!(plan.actions.is_empty());

    // An analysis naming a template that does not exist, as for any Rollout.
    for (steps, field) in [
        (
            json!([{"setCanaryScale": {"weight": 10}}]),
            "steps[0].setCanaryScale",
        ),
        (
            json!([{"experiment": {"templates": [{"name": "x", "specRef": "canary"}]}}]),
            "steps[0].experiment",
        ),
        (
            json!([{"analysis": {"templates": [{"templateName": "missing"}]}}]),
            "steps[0].analysis.templates: Invalid value: \"missing\": AnalysisTemplate 'missing' not found",
        ),
    ] {
        let plan = decide(
            &rollout(steps, None),
            Some(sts(None, "a", "a", 4, 4)),
            at(0),
        );
        assert!(message(&plan).contains(field), "{}", message(&plan));
        assert!(plan.actions.is_empty());
    }
    let mut blue_green = rollout(steps(), None);
    blue_green.spec.strategy =
        serde_json::from_value(json!({"blueGreen": {"activeService": "a"}})).unwrap();
    let plan = decide(&blue_green, Some(sts(None, "a", "a", 4, 4)), at(0));
    assert!(
        message(&plan).contains("spec.strategy.blueGreen: Forbidden"),
        "{}",
        message(&plan)
    );
    let mut surge = rollout(steps(), None);
    surge
        .spec
        .strategy
        .as_mut()
        .unwrap()
        .canary
        .as_mut()
        .unwrap()
        .max_surge = Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1));
    let plan = decide(&surge, Some(sts(None, "a", "a", 4, 4)), at(0));
    assert!(
        message(&plan).contains("maxSurge: Forbidden"),
        "{}",
        message(&plan)
    );

    // Fixed, the condition goes.
    let plan = decide(
        &next(&ro, &decide(&ro, None, at(0))),
        Some(sts(None, "a", "a", 4, 4)),
        at(1),
    );
    assert_eq!(plan.status.phase, Some(RolloutPhase::Healthy));
}

/// Steps with an analysis between two weights.
fn analysis_steps() -> Value {
    json!([{"setWeight": 25}, {"analysis": {"templates": [{"templateName": "t"}]}}, {"setWeight": 50}])
}

/// The runs the plan creates, as the API server returns them (created at `now`), in `phase`.
fn created_runs(
    plan: &Plan,
    now: Timestamp,
    phase: AnalysisPhase,
    message: &str,
) -> Vec<AnalysisRun> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateAnalysisRun { run } => Some(run.as_ref().clone()),
            _ => None,
        })
        .map(|mut run| {
            run.metadata.creation_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now));
            with_phase(run, phase.clone(), message)
        })
        .collect()
}

fn with_phase(mut run: AnalysisRun, phase: AnalysisPhase, message: &str) -> AnalysisRun {
    let status = run.status.get_or_insert_with(Default::default);
    status.phase = Some(phase);
    status.message = (!message.is_empty()).then(|| message.to_string());
    run
}

fn step_run(plan: &Plan) -> Option<(String, Option<AnalysisPhase>)> {
    let record = plan
        .status
        .canary
        .as_ref()?
        .current_step_analysis_run_status
        .as_ref()?;
    Some((record.name.clone()?, record.status.clone()))
}

/// A Rollout with `steps` (and `background`) that adopted revision `a`, updated to `b`, and
/// whose first step (setWeight 25) is done: at step 1.
fn at_second_step(steps: Value, background: Option<Value>) -> (Rollout, Plan) {
    let mut ro = rollout(steps, None);
    if let Some(background) = background {
        ro.spec
            .strategy
            .as_mut()
            .unwrap()
            .canary
            .as_mut()
            .unwrap()
            .analysis = Some(serde_json::from_value(background).unwrap());
    }
    let ro = next(&ro, &decide(&ro, Some(sts(None, "a", "a", 4, 4)), at(0)));
    let ro = next(
        &ro,
        &decide(&ro, Some(sts(Some(4), "b", "a", 0, 4)), at(10)),
    );
    let plan = decide(&ro, Some(sts(Some(3), "b", "a", 1, 4)), at(11));
    (ro, plan)
}

#[test]
fn an_analysis_step_measures_the_update_revision_and_its_success_moves_on() {
    let (ro, plan) = at_second_step(analysis_steps(), None);
    assert_eq!(plan.status.current_step_index, Some(1));
    let runs = created_runs(&plan, at(11), AnalysisPhase::Running, "");
    assert_eq!(runs.len(), 1, "{:?}", plan.actions);
    let run = &runs[0];
    // Named and labelled as Argo names a step's run: the revision's hash and number.
    assert_eq!(run.metadata.name.as_deref(), Some("db-b-2-1"));
    let labels = run.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get("rollouts-pod-template-hash").map(String::as_str),
        Some("b")
    );
    assert_eq!(labels.get("step-index").map(String::as_str), Some("1"));
    assert_eq!(
        run.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("rollout.argoproj.io/revision"))
            .map(String::as_str),
        Some("2")
    );
    assert_eq!(
        step_run(&plan),
        Some(("db-b-2-1".into(), Some(AnalysisPhase::Pending)))
    );
    assert!(
        matches!(&plan.waits[0], crate::Wait::AnalysisRunning { run } if run == "db-b-2-1"),
        "{:?}",
        plan.waits
    );
    assert!(
        written(&plan).is_none(),
        "the partition stays while it measures"
    );
    let ro = next(&ro, &plan);

    // Measuring: the step waits on the run, no new one.
    let plan = decide_with_runs(&ro, Some(sts(Some(3), "b", "a", 1, 4)), &runs, at(20));
    assert_eq!(plan.status.current_step_index, Some(1));
    assert!(created_runs(&plan, at(20), AnalysisPhase::Running, "").is_empty());
    assert!(matches!(&plan.waits[0], crate::Wait::AnalysisRunning { run } if run == "db-b-2-1"));
    assert_eq!(plan.status.phase, Some(RolloutPhase::Progressing));
    let ro = next(&ro, &plan);

    // Successful: the step completes, the next weight sets partition 2.
    let done = vec![with_phase(runs[0].clone(), AnalysisPhase::Successful, "")];
    let plan = decide_with_runs(&ro, Some(sts(Some(3), "b", "a", 1, 4)), &done, at(30));
    assert_eq!(plan.status.current_step_index, Some(2));
    assert_eq!(written_partition(&plan), Some(2));
    assert!(
        plan.events
            .iter()
            .any(|e| e.message == "Rollout step 2/3 completed (analysis)"),
        "{:?}",
        plan.events
    );
    // Past the analysis step, its record goes.
    let ro = next(&ro, &plan);
    let plan = decide_with_runs(&ro, Some(sts(Some(2), "b", "a", 2, 4)), &done, at(31));
    assert_eq!(step_run(&plan), None);
}

#[test]
fn a_failed_analysis_aborts_and_rolls_the_updated_ordinals_back() {
    let (ro, plan) = at_second_step(analysis_steps(), None);
    let runs = created_runs(
        &plan,
        at(11),
        AnalysisPhase::Failed,
        "Metric \"m\" assessed Failed due to failed (1) > failureLimit (0)",
    );
    let ro = next(&ro, &plan);

    let plan = decide_with_runs(&ro, Some(sts(Some(3), "b", "a", 1, 4)), &runs, at(20));
    assert_eq!(plan.status.abort, Some(true));
    assert_eq!(plan.status.phase, Some(RolloutPhase::Degraded));
    let message = "RolloutAborted: Rollout aborted update to revision 2: Step-based analysis phase error/failed: Metric \"m\" assessed Failed due to failed (1) > failureLimit (0)";
    assert_eq!(plan.status.message.as_deref(), Some(message));
    assert!(
        reasons(&plan).contains(&"AnalysisRunFailed"),
        "{:?}",
        plan.events
    );
    assert!(reasons(&plan).contains(&"RolloutAborted"));
    // The abort is recorded first: the template is not touched before the status says why
    // (a lost status write would leave the stable template looking like a rollback).
    assert!(written(&plan).is_none(), "{:?}", plan.actions);
    let ro = next(&ro, &plan);
    let plan = decide_with_runs(&ro, Some(sts(Some(3), "b", "a", 1, 4)), &runs, at(20));
    let object = written(&plan).expect("the stable template written back");
    assert_eq!(object["spec"]["template"], template("a"));
    assert_eq!(
        object["spec"]["updateStrategy"]["rollingUpdate"]["partition"],
        3
    );
    assert_eq!(plan.status.message.as_deref(), Some(message));
    assert!(!reasons(&plan).contains(&"RolloutAborted"), "said once");
    let ro = next(&ro, &plan);

    // Still aborted while the ordinals roll back, with the verdict in the message.
    let mut rolling_back = sts(Some(3), "a", "a", 3, 3);
    rolling_back["spec"]["template"] = template("a");
    let plan = decide_with_runs(&ro, Some(rolling_back), &runs, at(21));
    assert_eq!(plan.status.message.as_deref(), Some(message));
    assert!(!reasons(&plan).contains(&"RolloutAborted"), "said once");
}

#[test]
fn an_inconclusive_analysis_holds_the_update_until_resumed_then_measures_again() {
    let (ro, plan) = at_second_step(analysis_steps(), None);
    let runs = created_runs(
        &plan,
        at(11),
        AnalysisPhase::Inconclusive,
        "Metric \"m\" assessed Inconclusive",
    );
    let ro = next(&ro, &plan);

    let plan = decide_with_runs(&ro, Some(sts(Some(3), "b", "a", 1, 4)), &runs, at(20));
    assert_eq!(plan.status.phase, Some(RolloutPhase::Paused));
    let pauses: Vec<_> = plan
        .status
        .pause_conditions
        .iter()
        .flatten()
        .map(|p| p.reason.clone())
        .collect();
    assert_eq!(pauses, vec![Some(PauseReason::InconclusiveAnalysisRun)]);
    assert!(written(&plan).is_none());
    let ro = next(&ro, &plan);

    // Held: no step, no run, however long.
    let plan = decide_with_runs(&ro, Some(sts(Some(3), "b", "a", 1, 4)), &runs, at(600));
    assert!(plan.actions.is_empty(), "{:?}", plan.actions);
    assert!(
        matches!(&plan.waits[0], crate::Wait::AnalysisInconclusive { run } if run == "db-b-2-1"),
        "{:?}",
        plan.waits
    );
    assert_eq!(plan.status.current_step_index, Some(1));

    // Resumed (kubectl sluice promote clears the pause conditions): a new run measures again,
    // and the controller's pause ends.
    let mut resumed = ro.clone();
    resumed.status.as_mut().unwrap().pause_conditions = None;
    let plan = decide_with_runs(&resumed, Some(sts(Some(3), "b", "a", 1, 4)), &runs, at(601));
    let again = created_runs(&plan, at(601), AnalysisPhase::Successful, "");
    assert_eq!(again.len(), 1, "{:?}", plan.actions);
    assert_eq!(again[0].metadata.name.as_deref(), Some("db-b-2-1.1"));
    assert_eq!(plan.status.controller_pause, None);
    assert_eq!(plan.status.current_step_index, Some(1));
    let ro = next(&resumed, &plan);

    // The new run passes: the update goes on.
    let both = [runs[0].clone(), again[0].clone()];
    let plan = decide_with_runs(&ro, Some(sts(Some(3), "b", "a", 1, 4)), &both, at(610));
    assert_eq!(plan.status.current_step_index, Some(2));
    assert_eq!(written_partition(&plan), Some(2));
}

#[test]
fn background_analysis_runs_from_its_starting_step_and_its_failure_aborts() {
    let steps = json!([{"setWeight": 25}, {"pause": {}}, {"setWeight": 50}]);
    let background = json!({"templates": [{"templateName": "b"}], "startingStep": 1});
    let mut ro = rollout(steps.clone(), None);
    ro.spec
        .strategy
        .as_mut()
        .unwrap()
        .canary
        .as_mut()
        .unwrap()
        .analysis = Some(serde_json::from_value(background.clone()).unwrap());
    let ro = next(&ro, &decide(&ro, Some(sts(None, "a", "a", 4, 4)), at(0)));
    // At step 0, before the starting step: no run.
    let plan = decide(&ro, Some(sts(Some(4), "b", "a", 0, 4)), at(10));
    assert!(created_runs(&plan, at(10), AnalysisPhase::Running, "").is_empty());
    let ro = next(&ro, &plan);

    // Step 0 done, at the pause (step 1): the pause holds the run back, as in Argo.
    let (ro, plan) = {
        let plan = decide(&ro, Some(sts(Some(3), "b", "a", 1, 4)), at(11));
        assert_eq!(plan.status.current_step_index, Some(1));
        assert!(created_runs(&plan, at(11), AnalysisPhase::Running, "").is_empty());
        let mut promoted = next(&ro, &plan);
        promoted.status.as_mut().unwrap().pause_conditions = None;
        let plan = decide(&promoted, Some(sts(Some(3), "b", "a", 1, 4)), at(12));
        (promoted, plan)
    };
    let runs = created_runs(&plan, at(12), AnalysisPhase::Running, "");
    assert_eq!(runs.len(), 1, "{:?}", plan.actions);
    assert_eq!(runs[0].metadata.name.as_deref(), Some("db-b-2"));
    let ro = next(&ro, &plan);
    assert_eq!(
        ro.status
            .as_ref()
            .unwrap()
            .canary
            .as_ref()
            .unwrap()
            .current_background_analysis_run_status
            .as_ref()
            .and_then(|r| r.name.as_deref()),
        Some("db-b-2")
    );

    // Running beside the steps: they go on.
    let plan = decide_with_runs(&ro, Some(sts(Some(2), "b", "a", 2, 4)), &runs, at(20));
    assert!(created_runs(&plan, at(20), AnalysisPhase::Running, "").is_empty());
    let ro = next(&ro, &plan);

    // Failed: the update is aborted, then (the abort recorded) the stable template written
    // back.
    let failed = vec![with_phase(
        runs[0].clone(),
        AnalysisPhase::Failed,
        "Metric \"m\" assessed Failed",
    )];
    let plan = decide_with_runs(&ro, Some(sts(Some(2), "b", "a", 2, 4)), &failed, at(30));
    assert_eq!(plan.status.abort, Some(true));
    assert!(written(&plan).is_none());
    let ro = next(&ro, &plan);
    let plan = decide_with_runs(&ro, Some(sts(Some(2), "b", "a", 2, 4)), &failed, at(31));
    assert_eq!(written(&plan).unwrap()["spec"]["template"], template("a"));
    assert!(
        plan.status
            .message
            .as_deref()
            .is_some_and(|m| m
                .ends_with("Background analysis phase error/failed: Metric \"m\" assessed Failed")),
        "{:?}",
        plan.status.message
    );
}

#[test]
fn a_completed_update_terminates_its_running_background_analysis() {
    let steps = json!([{"setWeight": 50}]);
    let background = json!({"templates": [{"templateName": "b"}]});
    let mut ro = rollout(steps, None);
    ro.spec
        .strategy
        .as_mut()
        .unwrap()
        .canary
        .as_mut()
        .unwrap()
        .analysis = Some(serde_json::from_value(background).unwrap());
    let ro = next(&ro, &decide(&ro, Some(sts(None, "a", "a", 4, 4)), at(0)));
    let plan = decide(&ro, Some(sts(Some(4), "b", "a", 0, 4)), at(10));
    let runs = created_runs(&plan, at(10), AnalysisPhase::Running, "");
    assert_eq!(runs.len(), 1, "{:?}", plan.actions);
    let ro = next(&ro, &plan);
    // Half the pods on b: past the last step, every pod.
    let plan = decide_with_runs(&ro, Some(sts(Some(2), "b", "a", 2, 4)), &runs, at(20));
    assert_eq!(written_partition(&plan), Some(0));
    let ro = next(&ro, &plan);
    // Every pod on b: b is stable; the run is still read in that reconcile.
    let plan = decide_with_runs(&ro, Some(sts(Some(0), "b", "b", 4, 4)), &runs, at(21));
    assert_eq!(plan.status.stable_rs.as_deref(), Some("b"));
    let ro = next(&ro, &plan);
    // Nothing waits on the run any more: it is terminated.
    let plan = decide_with_runs(&ro, Some(sts(Some(4), "b", "b", 4, 4)), &runs, at(22));
    assert!(
        plan.actions
            .iter()
            .any(|a| matches!(a, Action::TerminateAnalysisRun { name } if name == "db-b-2")),
        "{:?}",
        plan.actions
    );
}

#[test]
fn pods_that_never_get_ready_time_out_the_update_and_abort_it_when_asked() {
    for abort in [false, true] {
        let mut ro = rollout(steps(), None);
        ro.spec.progress_deadline_seconds = Some(60);
        ro.spec.progress_deadline_abort = Some(abort);
        let ro = next(&ro, &decide(&ro, Some(sts(None, "a", "a", 4, 4)), at(0)));
        let ro = next(
            &ro,
            &decide(&ro, Some(sts(Some(4), "b", "a", 0, 4)), at(10)),
        );
        // Ordinal 3 replaced, never ready: progress stops at 11.
        let stuck = || Some(sts(Some(3), "b", "a", 1, 3));
        let plan = decide(&ro, stuck(), at(11));
        assert_eq!(plan.status.phase, Some(RolloutPhase::Progressing));
        let ro = next(&ro, &plan);
        let plan = decide(&ro, stuck(), at(40));
        assert_eq!(plan.status.phase, Some(RolloutPhase::Progressing));
        assert!(
            plan.waits
                .iter()
                .any(|w| matches!(w, crate::Wait::ProgressDeadline { .. })),
            "{:?}",
            plan.waits
        );
        // Looked at again for the pods well before the deadline.
        assert!(plan.requeue_after <= Some(std::time::Duration::from_secs(31)));
        let ro = next(&ro, &plan);
        let plan = decide(&ro, stuck(), at(71));
        assert_eq!(
            plan.status.phase,
            Some(RolloutPhase::Degraded),
            "abort {abort}"
        );
        assert!(reasons(&plan).contains(&"RolloutTimedOut"));
        if !abort {
            assert_eq!(
                plan.status.message.as_deref(),
                Some("ProgressDeadlineExceeded: StatefulSet \"db\" has timed out progressing.")
            );
            assert_eq!(plan.status.abort, None);
            assert!(plan.actions.is_empty(), "nothing rolled back");
            continue;
        }
        assert_eq!(plan.status.abort, Some(true));
        assert_eq!(
            plan.status.message.as_deref(),
            Some(
                "RolloutAborted: Rollout aborted update to revision 2: StatefulSet \"db\" has timed out progressing."
            )
        );
        // Recorded first, then the stable template goes back.
        assert!(written(&plan).is_none());
        let ro = next(&ro, &plan);
        let plan = decide(&ro, stuck(), at(72));
        assert_eq!(written(&plan).unwrap()["spec"]["template"], template("a"));
        let ro = next(&ro, &plan);
        // The stable template is back, and ordinal 3, on the aborted revision and not ready,
        // holds the StatefulSet controller: it is evicted (ordinal 2, ready, is not).
        let mut rolling_back = sts(Some(3), "a", "a", 3, 3);
        rolling_back["spec"]["template"] = template("a");
        let pod = |ordinal: i32, revision: &str, ready: bool| {
            serde_json::from_value::<k8s_openapi::api::core::v1::Pod>(json!({
                "metadata": {"name": format!("db-{ordinal}"), "uid": format!("p{ordinal}"),
                             "labels": {"app": "db", "controller-revision-hash": format!("db-{revision}")}},
                "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
            }))
            .unwrap()
        };
        let pods = [pod(2, "a", true), pod(3, "b", false)];
        let plan = decide_with(&ro, Some(rolling_back), &[], &pods, at(73));
        let evicted: Vec<_> = plan
            .actions
            .iter()
            .filter_map(|a| match a {
                Action::EvictPod { name, .. } => Some(name.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(evicted, vec!["db-3"]);
        assert!(reasons(&plan).contains(&"EvictedStuckPod"));
        assert_eq!(
            pods_wanted(
                &ro,
                &StatefulSetObserved {
                    stateful_set: Some(sts(Some(3), "a", "a", 3, 3)),
                    revisions: Vec::new()
                }
            )
            .as_deref(),
            Some("app=db"),
            "the pods are read while aborted"
        );
    }
}
