//! `InvalidSpec` in Argo's words: `The Rollout "NAME" is invalid: <field error>` (the first
//! problem only), in the condition and, prefixed with `InvalidSpec: `, the phase message.

use serde_json::json;
use sluice_api::rollout::{RolloutConditionType, RolloutPhase};

use super::{World, bg_rollout, rollout};

fn invalid_spec_message(w: &World) -> Option<String> {
    w.status()
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == Some(RolloutConditionType::InvalidSpec))
        .and_then(|c| c.message.clone())
}

#[test]
fn a_rollout_without_a_strategy_reads_as_argos_field_error() {
    let mut ro = rollout(2, json!([{"setWeight": 50}]));
    ro.spec.strategy = None;
    let mut w = World::new(ro);
    let plan = w.reconcile();
    assert!(plan.actions.is_empty());
    let expected = "The Rollout \"demo\" is invalid: spec.strategy.strategy: Required value: Rollout has missing field '.spec.strategy.canary or .spec.strategy.blueGreen'";
    assert_eq!(invalid_spec_message(&w).as_deref(), Some(expected));
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    assert_eq!(
        w.status().message.as_deref(),
        Some(format!("InvalidSpec: {expected}").as_str())
    );
}

#[test]
fn a_missing_active_service_reads_as_argos_field_error() {
    let mut w = World::new(bg_rollout(2, json!({"activeService": "x"})));
    w.reconcile();
    assert_eq!(
        invalid_spec_message(&w).as_deref(),
        Some(
            "The Rollout \"demo\" is invalid: spec.strategy.blueGreen.activeService: Invalid value: \"x\": service \"x\" not found"
        )
    );
}

#[test]
fn a_step_out_of_range_reads_as_argos_field_error() {
    let mut w = World::new(rollout(2, json!([{"setWeight": 120}])));
    let plan = w.reconcile();
    assert!(plan.actions.is_empty());
    assert_eq!(
        invalid_spec_message(&w).as_deref(),
        Some(
            "The Rollout \"demo\" is invalid: spec.strategy.steps[0].setWeight: Invalid value: 120: SetWeight needs to be between 0 and 100"
        )
    );
}

#[test]
fn templates_that_do_not_merge_read_as_argos_field_error() {
    let steps = json!([
        {"setWeight": 50},
        {"analysis": {"templates": [{"templateName": "a"}, {"templateName": "b"}]}}
    ]);
    let mut w = World::new(rollout(2, steps));
    w.add_template("a");
    w.add_template("b");
    w.reconcile();
    assert_eq!(
        invalid_spec_message(&w).as_deref(),
        Some(
            "The Rollout \"demo\" is invalid: spec.strategy.canary.steps[1].analysis.templates: Invalid value: \"templateNames: [a b]\": two metrics have the same name 'm'"
        )
    );
}

/// A problem only Sluice looks for does not stop a Rollout Argo runs: a canary without
/// traffic routing that sets `abortScaleDownDelaySeconds` rolls out as under Argo, and a
/// Warning event says what Sluice found, once per generation of the spec.
#[test]
fn a_problem_only_sluice_sees_warns_and_the_rollout_runs() {
    let mut ro = rollout(2, json!([{"setWeight": 50}, {"pause": {}}]));
    ro.metadata.generation = Some(1);
    ro.spec
        .strategy
        .as_mut()
        .and_then(|s| s.canary.as_mut())
        .unwrap()
        .abort_scale_down_delay_seconds = Some(5);
    let mut w = World::new(ro);
    let warnings = |plan: &crate::Plan| {
        plan.events
            .iter()
            .filter(|e| e.reason == crate::reconcile::SPEC_WARNING)
            .map(|e| e.message.clone())
            .collect::<Vec<_>>()
    };
    let first = w.reconcile();
    assert_eq!(
        warnings(&first),
        [
            "The spec runs as Argo Rollouts runs it, but Sluice's checks found: spec.strategy.canary.abortScaleDownDelaySeconds: Invalid value: 5: can only be used with traffic routing"
        ]
    );
    assert!(matches!(first.events[0].type_, crate::EventType::Warning));
    let rest = w.settle_events();
    assert!(!rest.contains(&crate::reconcile::SPEC_WARNING), "{rest:?}");
    assert_eq!(invalid_spec_message(&w), None);
    assert_eq!(w.phase(), RolloutPhase::Healthy);
    // A new generation of the spec is looked at, and warned about, again.
    w.ro.metadata.generation = Some(2);
    assert_eq!(warnings(&w.reconcile()).len(), 1);
}
