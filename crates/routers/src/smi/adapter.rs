//! SMI as a [`TrafficRouter`]: one TrafficSplit, created when missing.

use serde_json::Value;
use sluice_api::rollout::{RolloutTrafficRouting, SmiTrafficRouting};

use crate::edits::Edits;
use crate::kinds::{ObjectRef, RouterKind};
use crate::router::{Calls, TrafficRouter, View};
use crate::{Desired, ObservedWeight};

pub struct Smi;

/// The TrafficSplit's key and the TrafficSplit if it exists.
fn find<'a>(view: &View<'a>) -> Option<(&'a SmiTrafficRouting, ObjectRef, Option<&'a Value>)> {
    let s = view.routing.smi.as_ref()?;
    let key = view.named(
        RouterKind::TrafficSplit,
        &super::traffic_split_name(s, view.name),
    );
    let existing = view.objects.get(&key);
    Some((s, key, existing))
}

impl TrafficRouter for Smi {
    fn key(&self) -> &'static str {
        "smi"
    }

    fn configured(&self, routing: &RolloutTrafficRouting) -> bool {
        routing.smi.is_some()
    }

    fn references(&self, view: &View<'_>) -> Vec<ObjectRef> {
        find(view).map(|(_, key, _)| key).into_iter().collect()
    }

    /// Sluice creates the TrafficSplit: nothing to find first.
    fn check(&self, _view: &View<'_>, _desired: &Desired) -> Result<(), String> {
        Ok(())
    }

    fn observed_weight(&self, view: &View<'_>, desired: &Desired) -> Option<ObservedWeight> {
        match find(view)?.2 {
            Some(ts) => super::observed_weight(ts, desired),
            None => Some(ObservedWeight {
                canary: 0,
                stable: desired.max_weight,
            }),
        }
    }

    fn silent_reasons(&self) -> &'static [&'static str] {
        &[super::UPDATED_REASON]
    }

    fn edit(&self, view: &View<'_>, calls: &Calls<'_>, edits: &mut Edits) -> Result<(), String> {
        let Some((cfg, key, existing)) = find(view) else {
            return Ok(());
        };
        let r = super::set_weight(existing, cfg, &calls.versions.smi, calls.desired);
        edits.apply(&key, existing.is_none(), r)
    }
}
