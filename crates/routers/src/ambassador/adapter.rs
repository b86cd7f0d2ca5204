//! Ambassador as a [`TrafficRouter`]: a weighted `-canary` copy of each Mapping, deleted once
//! its weight has been 0 for a while.

use serde_json::Value;
use sluice_api::rollout::RolloutTrafficRouting;

use crate::edits::Edits;
use crate::kinds::ObjectRef;
use crate::router::{Calls, TrafficRouter, View, widest};
use crate::{Change, ChangeResult, Desired, ObservedWeight};

pub struct Ambassador;

/// How long a canary Mapping stays at weight 0 before it is deleted, so that Ambassador has
/// stopped sending it requests (Argo waits as long inside its reconcile).
const DRAIN: std::time::Duration = std::time::Duration::from_secs(5);

/// When a canary Mapping was set to weight 0: the delete waits on it, without a clock or a
/// sleep in the engine.
const ZERO_WEIGHT_SINCE: &str = "rollouts.sluice.dev/zero-weight-since";

/// (base Mapping, the canary Mapping's key, the canary Mapping if it exists), with each base
/// Mapping checked when `check`.
type Found<'a> = Vec<(&'a Value, ObjectRef, Option<&'a Value>)>;

fn find<'a>(view: &View<'a>, check: bool) -> Result<Found<'a>, String> {
    let kind = view.versions.ambassador_kind();
    let mut mappings = Vec::new();
    let bases = view
        .routing
        .ambassador
        .iter()
        .flat_map(|a| a.mappings.iter().flatten());
    for base in bases {
        let key = view.named(kind, base);
        let obj = view.find("ambassador.mappings", &key)?;
        if check {
            // Argo places this error at the Mapping's own field.
            super::check_base(obj)
                .map_err(|e| format!("spec.weight: Invalid value: \"{base}\": {e}"))?;
        }
        let canary_key = view.named(kind, &super::canary_mapping_name(base));
        let canary = view.objects.get(&canary_key);
        mappings.push((obj, canary_key, canary));
    }
    Ok(mappings)
}

/// A canary Mapping's change: a Mapping set to weight 0 is stamped with the time, and deleted
/// only once it has been at 0 for [`DRAIN`].
fn drained_change(
    edits: &mut Edits,
    key: &ObjectRef,
    existing: Option<&Value>,
    result: ChangeResult,
    now: jiff::Timestamp,
) -> Result<(), String> {
    match result.map_err(|e| e.to_string())? {
        Some(Change::Write(mut edit)) => {
            if edit.object.pointer("/spec/weight").and_then(Value::as_i64) == Some(0)
                && let Some(meta) = edit.object["metadata"].as_object_mut()
            {
                let annotations = meta
                    .entry("annotations")
                    .or_insert_with(|| Value::Object(Default::default()));
                annotations[ZERO_WEIGHT_SINCE] = Value::String(now.to_string());
                edits.requeue = Some(DRAIN);
            }
            edits.apply(key, existing.is_none(), Ok(Some(edit)))
        }
        Some(Change::Delete { event }) => {
            let since = existing
                .and_then(|o| o.pointer("/metadata/annotations"))
                .and_then(|a| a.get(ZERO_WEIGHT_SINCE))
                .and_then(Value::as_str)
                .and_then(|t| t.parse::<jiff::Timestamp>().ok());
            let waited = since.map(|s| now.duration_since(s));
            let drain = jiff::SignedDuration::try_from(DRAIN).unwrap_or_default();
            match (since, waited) {
                // Times are whole seconds: strictly more than the drain in whole seconds is
                // at least the drain in real time.
                (Some(_), Some(w)) if w > drain => {
                    edits.change(key, existing, Ok(Some(Change::Delete { event })))
                }
                (Some(_), Some(w)) => {
                    let left = (drain - w).unsigned_abs() + std::time::Duration::from_secs(1);
                    edits.requeue = Some(left.max(std::time::Duration::from_secs(1)));
                    Ok(())
                }
                // At 0 since an unknown time (set by another controller): stamp it now.
                _ => {
                    let Some(mut object) = existing.cloned() else {
                        return Ok(());
                    };
                    object["metadata"]["annotations"][ZERO_WEIGHT_SINCE] =
                        Value::String(now.to_string());
                    edits.requeue = Some(DRAIN);
                    edits.stamp(key, object);
                    Ok(())
                }
            }
        }
        other => edits.change(key, existing, Ok(other)),
    }
}

impl TrafficRouter for Ambassador {
    fn key(&self) -> &'static str {
        "ambassador"
    }

    fn configured(&self, routing: &RolloutTrafficRouting) -> bool {
        routing.ambassador.is_some()
    }

    fn references(&self, view: &View<'_>) -> Vec<ObjectRef> {
        let kind = view.versions.ambassador_kind();
        let bases = view
            .routing
            .ambassador
            .iter()
            .flat_map(|a| a.mappings.iter().flatten());
        bases
            .flat_map(|base| {
                [
                    view.named(kind, base),
                    view.named(kind, &super::canary_mapping_name(base)),
                ]
            })
            .collect()
    }

    fn check(&self, view: &View<'_>, _desired: &Desired) -> Result<(), String> {
        find(view, true).map(|_| ())
    }

    fn observed_weight(&self, view: &View<'_>, _desired: &Desired) -> Option<ObservedWeight> {
        let mappings = find(view, false).ok()?;
        widest(
            mappings
                .iter()
                .map(|(_, _, canary)| Some(super::observed_weight(*canary))),
        )
    }

    fn edit(&self, view: &View<'_>, calls: &Calls<'_>, edits: &mut Edits) -> Result<(), String> {
        for (base, canary_key, canary) in find(view, false)? {
            let api_version = canary_key.kind.api_version(calls.versions);
            let r = super::set_weight(base, canary, canary_key.kind, &api_version, calls.desired);
            drained_change(edits, &canary_key, canary, r, calls.now)?;
        }
        Ok(())
    }
}
