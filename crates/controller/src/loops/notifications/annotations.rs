//! The loop's records on a Rollout: the pending notifications, and conditional annotation
//! updates.

use kube::Api;
use kube::ResourceExt as _;
use kube::api::{Patch, PatchParams};
use serde_json::{Value as Json, json};
use sluice_api::Rollout;

use super::PENDING;

/// The Rollout's pending notifications.
pub(super) fn pending_of(ro: &Rollout) -> serde_json::Map<String, Json> {
    ro.annotations()
        .get(PENDING)
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default()
}

/// The pending annotation's value (`null` removes it).
pub(super) fn pending_value(pending: &serde_json::Map<String, Json>) -> Option<String> {
    (!pending.is_empty()).then(|| Json::Object(pending.clone()).to_string())
}

/// Sets annotations of a Rollout (a `None` value removes one) from its current state, with a
/// patch conditional on its resourceVersion, read again on a conflict. `change` returning
/// `None` writes nothing.
pub(super) async fn update_annotations(
    api: &Api<Rollout>,
    name: &str,
    mut change: impl FnMut(&Rollout) -> Option<Vec<(String, Option<String>)>>,
) -> Result<(), kube::Error> {
    let mut last = None;
    for _ in 0..5 {
        let Some(ro) = api.get_opt(name).await? else {
            return Ok(());
        };
        let Some(values) = change(&ro) else {
            return Ok(());
        };
        let annotations: serde_json::Map<String, Json> =
            values.into_iter().map(|(k, v)| (k, json!(v))).collect();
        let patch = json!({"metadata": {
            "resourceVersion": ro.resource_version(),
            "annotations": annotations,
        }});
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.is_conflict() => last = Some(kube::Error::Api(s)),
            Err(e) => return Err(e),
        }
    }
    Err(last.expect("a conflict"))
}

/// The Rollout as it was at a pending entry's event: its status then (recorded with the
/// entry), so that a notification taken over later renders its step, weights and phase as
/// they were; an entry without one leaves the Rollout as it is.
pub(super) fn as_at_event(rollout: &Json, entry: &Json) -> Json {
    let mut at_event = rollout.clone();
    if let Some(status) = entry.get("status").filter(|s| s.is_object()) {
        at_event["status"] = status.clone();
    }
    at_event
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn a_pending_entry_renders_with_the_status_of_its_event() {
        let now = json!({"metadata": {"name": "web"}, "status": {"currentStepIndex": 2}});
        let entry = json!({"reason": "RolloutStepCompleted", "status": {"currentStepIndex": 1}});
        assert_eq!(
            super::as_at_event(&now, &entry),
            json!({"metadata": {"name": "web"}, "status": {"currentStepIndex": 1}})
        );
        let older = json!({"reason": "RolloutStepCompleted", "occurrence": "r2.s1.x"});
        assert_eq!(super::as_at_event(&now, &older), now);
    }
}
