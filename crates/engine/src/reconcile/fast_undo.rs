//! `kubectl sluice undo --fast` (Argo's #2168): in an incident, going back to an earlier
//! revision should not wait for the steps, pauses and analyses written for a new version. The
//! command writes the earlier template and, in the same patch, the annotation
//! [`FAST_UNDO`] naming that template's pod-template hash. An update to exactly that hash is
//! then treated as a rollback within `rollbackWindow` is: no steps, pauses or analyses, promoted
//! as soon as its pods are up.
//!
//! The annotation is removed once that revision is stable, or as soon as the template is
//! another one, so that a later update that happens to return to the same template is verified
//! as usual. It is outside `argoproj.io`: Argo ignores it and runs the steps.

use super::World;
use crate::plan::Plan;

/// The pod-template hash an `undo --fast` went back to.
pub const FAST_UNDO: &str = "rollouts.sluice.dev/fast-undo";

impl World<'_> {
    fn fast_undo_hash(&self) -> Option<&str> {
        self.ro
            .metadata
            .annotations
            .as_ref()?
            .get(FAST_UNDO)
            .map(String::as_str)
    }

    /// Whether this update is the one an `undo --fast` asked for.
    pub(super) fn fast_undo(&self) -> bool {
        self.fast_undo_hash() == Some(self.spec.pod_hash.as_str())
    }

    /// Removes an annotation whose undo is over (stable) or superseded (another template).
    pub(super) fn clear_fast_undo(&self, plan: &mut Plan, new_is_stable: bool) {
        if self.fast_undo_hash().is_some() && (new_is_stable || !self.fast_undo()) {
            let rv = self.ro.metadata.resource_version.clone();
            plan.annotate_rollout(rv, FAST_UNDO, None);
        }
    }
}
