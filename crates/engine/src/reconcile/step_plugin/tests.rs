use serde_json::json;

use super::*;
use crate::step_plugins::tests::{answer, at};

#[test]
fn an_entry_counts_its_executions_and_tells_each_change_of_phase_once() {
    let mut entries = Vec::new();
    let t0 = at("2026-11-27T08:00:00Z");
    let running = answer(Op::Run, Phase::Running);
    let event = record(&mut entries, &running, t0).unwrap();
    assert_eq!(
        (event.reason, event.message.as_str()),
        (
            "StepPluginTransition",
            "Step plugin step/e2e-test (step 2) transitioned to Running"
        )
    );
    assert_eq!(
        step_plugins::due_at(&entries[0]),
        Some(at("2026-11-27T08:00:30Z"))
    );
    // Running again: no event, one more execution, the started time kept.
    let t1 = at("2026-11-27T08:00:30Z");
    assert!(record(&mut entries, &running, t1).is_none());
    assert_eq!(entries[0].executions, Some(2));
    assert_eq!(entries[0].started_at.as_ref().map(|t| t.0), Some(t0));
    // An error keeps the plugin's status; its message is recorded.
    let mut error = answer(Op::Run, Phase::Error);
    error.status = None;
    error.message = "Run rpc call error: boom".into();
    let event = record(&mut entries, &error, t1).unwrap();
    assert_eq!(event.type_, crate::EventType::Warning);
    assert_eq!(entries[0].status, Some(json!({"n": 1})));
    assert_eq!(
        entries[0].message.as_deref(),
        Some("Run rpc call error: boom")
    );
    // Success ends it, silently for a Run.
    let ok = answer(Op::Run, Phase::Successful);
    assert!(record(&mut entries, &ok, t1).is_none());
    assert_eq!(entries[0].finished_at.as_ref().map(|t| t.0), Some(t1));
    assert_eq!(entries[0].backoff, None);
    // An abort is an entry of its own.
    let abort = answer(Op::Abort, Phase::Successful);
    let event = record(&mut entries, &abort, t1).unwrap();
    assert_eq!(
        event.message,
        "Step plugin step/e2e-test (step 2) aborted (Successful)"
    );
    assert_eq!(entries.len(), 2);
    assert!(step_plugins::entry(&entries, 2, Op::Abort).is_some());
}
