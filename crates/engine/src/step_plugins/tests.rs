use super::*;
use serde_json::json;

/// A call of step 2's plugin (the engine's reconcile tests use these too).
pub(crate) fn call(operation: StepPluginOperation) -> StepPluginCall {
    StepPluginCall {
        index: 2,
        name: "step/e2e-test".into(),
        operation,
        config: json!({}),
        status: None,
    }
}

/// Its answer: a 5 s requeue and a status of the plugin's.
pub(crate) fn answer(operation: StepPluginOperation, phase: StepPluginPhase) -> StepPluginAnswer {
    StepPluginAnswer {
        call: call(operation),
        phase,
        message: String::new(),
        requeue_after: Some(Duration::from_secs(5)),
        status: Some(json!({"n": 1})),
        disabled: false,
    }
}

pub(crate) fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

#[test]
fn backoffs_are_argos() {
    let mut a = answer(StepPluginOperation::Run, StepPluginPhase::Running);
    assert_eq!(backoff(&a), Some(RUNNING_BACKOFF));
    a.requeue_after = Some(Duration::from_secs(11));
    assert_eq!(backoff(&a), Some(Duration::from_secs(11)));
    a.phase = StepPluginPhase::Error;
    assert_eq!(backoff(&a), Some(ERROR_BACKOFF));
    a.phase = StepPluginPhase::Successful;
    assert_eq!(backoff(&a), None);
}

#[test]
fn an_entry_is_due_after_its_backoff() {
    let mut e = StepPluginStatus {
        updated_at: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(
            "2026-11-27T08:00:00Z",
        ))),
        backoff: Some("17s".into()),
        ..Default::default()
    };
    assert_eq!(due_at(&e), Some(at("2026-11-27T08:00:17Z")));
    e.backoff = None;
    assert_eq!(due_at(&e), Some(at("2026-11-27T08:00:00Z")));
    e.updated_at = None;
    assert_eq!(due_at(&e), None);
}
