//! Canary `plugin` steps: calls asked for, answers recorded in `stepPluginStatuses`, back-off,
//! completion, failure, abort and terminate calls, and a new template starting them over.

use std::time::Duration;

use serde_json::json;
use sluice_api::rollout::{
    RolloutPhase, StepPluginOperation as Op, StepPluginPhase as Phase, StepPluginStatus,
};

use super::{World, rollout};
use crate::waits::Wait;
use crate::{StepPluginAnswer, StepPluginCall};

impl World {
    /// The engine's decision, with the driver's rounds of step plugin calls: the stand-in
    /// plugin answers each call (given how many came before) and the engine decides again.
    pub(super) fn decide(&mut self, observed: &mut crate::Observed) -> crate::Plan {
        let mut plan = crate::reconcile_with(observed, &self.settings);
        for _ in 0..4 {
            let Some(plugin) = self
                .step_plugin
                .filter(|_| !plan.step_plugin_calls.is_empty())
            else {
                break;
            };
            for call in &plan.step_plugin_calls {
                let answer = plugin(call, self.plugin_calls.len());
                self.plugin_calls.push(call.clone());
                observed.step_plugin_answers.push(answer);
            }
            plan = crate::reconcile_with(observed, &self.settings);
        }
        plan
    }
}

/// Running for the step's `runningFor` calls (counted in the status it keeps), then `then`
/// (Successful by default); asks to be left alone 17 s while Running.
fn plugin(call: &StepPluginCall, _: usize) -> StepPluginAnswer {
    let count = call
        .status
        .as_ref()
        .and_then(|s| s["count"].as_i64())
        .unwrap_or(0)
        + 1;
    let running_for = call.config["runningFor"].as_i64().unwrap_or(0);
    let phase = if call.operation != Op::Run {
        Phase::Successful
    } else if count <= running_for {
        Phase::Running
    } else {
        match call.config["then"].as_str() {
            Some("Failed") => Phase::Failed,
            Some("Error") => Phase::Error,
            _ => Phase::Successful,
        }
    };
    StepPluginAnswer {
        call: call.clone(),
        phase: phase.clone(),
        message: if phase == Phase::Failed {
            "canary is bad".into()
        } else {
            String::new()
        },
        requeue_after: Some(Duration::from_secs(17)),
        status: Some(json!({"count": count})),
        disabled: false,
    }
}

fn plugin_rollout(steps: serde_json::Value) -> World {
    let mut w = World::new(rollout(2, steps));
    w.step_plugin = Some(plugin);
    w.settle();
    w
}

fn entries(w: &World) -> Vec<StepPluginStatus> {
    w.status()
        .canary
        .as_ref()
        .and_then(|c| c.step_plugin_statuses.clone())
        .unwrap_or_default()
}

fn step(name: &str, config: serde_json::Value) -> serde_json::Value {
    json!({"plugin": {"name": name, "config": config}})
}

#[test]
fn a_running_plugin_is_asked_again_after_its_backoff_and_its_success_completes_the_step() {
    let mut w = plugin_rollout(json!([
        step("step/e2e-test", json!({"runningFor": 1})),
        step("step/e2e-test", json!({})),
        {"setWeight": 50},
        {"pause": {}}
    ]));
    w.set_image("app:v2");
    let plan = w.settle();
    assert_eq!(w.plugin_calls.len(), 1);
    let e = &entries(&w)[0];
    assert_eq!(
        (
            e.index,
            e.operation.clone(),
            e.phase.clone(),
            e.executions,
            e.backoff.as_deref()
        ),
        (
            Some(0),
            Some(Op::Run),
            Some(Phase::Running),
            Some(1),
            Some("17s")
        )
    );
    assert_eq!(e.status, Some(json!({"count": 1})));
    assert_eq!(w.status().current_step_index, Some(0));
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(22)));
    assert!(
        matches!(
            plan.waits.first(),
            Some(Wait::StepPlugin { step: 0, phase: Some(p), .. }) if p == "Running"
        ),
        "{:?}",
        plan.waits
    );

    // Not before its back-off.
    w.advance(10);
    w.settle();
    assert_eq!(w.plugin_calls.len(), 1);

    // Then Successful: the step completes, and the next plugin step runs in the same pass.
    w.advance(7);
    let events = w.settle_events();
    assert_eq!(w.plugin_calls.len(), 3);
    assert_eq!(w.plugin_calls[1].status, Some(json!({"count": 1})));
    assert_eq!(w.status().current_step_index, Some(3));
    let e = entries(&w);
    assert_eq!(
        e.iter()
            .map(|e| (e.index, e.phase.clone(), e.executions))
            .collect::<Vec<_>>(),
        [
            (Some(0), Some(Phase::Successful), Some(2)),
            (Some(1), Some(Phase::Successful), Some(1))
        ]
    );
    assert!(e[0].finished_at.is_some());
    assert!(!events.contains(&"StepPluginTransition"), "{events:?}");
    assert_eq!(
        events
            .iter()
            .filter(|r| **r == "RolloutStepCompleted")
            .count(),
        3
    );
}

#[test]
fn a_failed_plugin_aborts_with_argos_message_and_the_plugins_that_ran_are_told() {
    let mut w = plugin_rollout(json!([
        step("step/e2e-test", json!({})),
        step("step/e2e-test", json!({"then": "Failed"})),
    ]));
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.status().abort, Some(true));
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    assert!(
        w.status()
            .message
            .as_deref()
            .is_some_and(|m| m.ends_with("Step Plugin 2 (step/e2e-test) failed: canary is bad")),
        "{:?}",
        w.status().message
    );
    // Run, Run, then Abort of the step that succeeded (the failed one is not aborted).
    let ops: Vec<_> = w
        .plugin_calls
        .iter()
        .map(|c| (c.index, c.operation.clone()))
        .collect();
    assert_eq!(ops, [(0, Op::Run), (1, Op::Run), (0, Op::Abort)]);
    let abort = entries(&w)
        .into_iter()
        .find(|e| e.operation == Some(Op::Abort))
        .unwrap();
    assert_eq!(
        (abort.index, abort.phase.clone()),
        (Some(0), Some(Phase::Successful))
    );
    // Told once.
    w.advance(60);
    w.settle();
    assert_eq!(w.plugin_calls.len(), 3);

    // A retry runs the steps again from the start, with fresh statuses.
    w.ro.status.as_mut().unwrap().abort = None;
    w.settle();
    let ops: Vec<_> = w.plugin_calls[3..]
        .iter()
        .map(|c| (c.index, c.operation.clone(), c.status.clone()))
        .collect();
    assert_eq!(
        ops[..2],
        [(0, Op::Run, None), (1, Op::Run, None)],
        "{:?}",
        w.plugin_calls
    );
}

#[test]
fn an_error_is_retried_after_thirty_seconds_and_a_full_promotion_terminates_a_running_plugin() {
    let mut w = plugin_rollout(json!([step("step/e2e-test", json!({"runningFor": 5}))]));
    w.set_image("app:v2");
    w.settle();
    assert_eq!(entries(&w)[0].phase, Some(Phase::Running));
    w.ro.status.as_mut().unwrap().promote_full = Some(true);
    w.settle();
    let ops: Vec<_> = w.plugin_calls.iter().map(|c| c.operation.clone()).collect();
    assert_eq!(ops, [Op::Run, Op::Terminate]);
    assert_eq!(w.phase(), RolloutPhase::Healthy);

    let mut w = plugin_rollout(json!([step("step/e2e-test", json!({"then": "Error"}))]));
    w.set_image("app:v2");
    let plan = w.settle();
    let e = &entries(&w)[0];
    assert_eq!(
        (e.phase.clone(), e.backoff.as_deref()),
        (Some(Phase::Error), Some("30s"))
    );
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(30)));
    assert_eq!(w.plugin_calls.len(), 1);
    w.advance(30);
    w.settle();
    assert_eq!(w.plugin_calls.len(), 2);
    assert_eq!(entries(&w)[0].executions, Some(2));
}

#[test]
fn a_disabled_plugin_is_skipped_and_a_new_template_starts_the_statuses_over() {
    let mut w = World::new(rollout(
        2,
        json!([step("step/disabled", json!({})), {"pause": {}}]),
    ));
    w.step_plugin = Some(|call, _| StepPluginAnswer {
        call: call.clone(),
        phase: Phase::Successful,
        message: String::new(),
        requeue_after: None,
        status: None,
        disabled: true,
    });
    w.settle();
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.status().current_step_index, Some(1));
    assert_eq!(entries(&w)[0].disabled, Some(true));
    w.set_image("app:v3");
    w.step_plugin = None;
    w.reconcile();
    assert!(entries(&w).is_empty(), "{:?}", entries(&w));
}
