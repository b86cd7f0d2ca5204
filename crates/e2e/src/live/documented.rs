//! The differences between Sluice and Argo that `docs/differences-from-argo.md` explains, told
//! from the others at a settle point. Each is recognised by what it changes and nothing else,
//! so that an undocumented difference that comes with it is still reported.

use super::{Action, Snapshot};

/// A retry of an update whose analysis failed analyses again under Sluice (a new run named
/// `<run>.1`); Argo 1.9.1 retries without it. Deliberate: the retried update would otherwise
/// be promoted on nothing but the verdict that failed it.
pub const RETRY_ANALYSES_AGAIN: &str = "a retry analyses again";
/// A restart while an older ReplicaSet waits out its scale-down delay: Argo restarts that
/// ReplicaSet's pods too and then scales it down as "unhealthy" while they start; Sluice
/// leaves it up until its delay ends. Deliberate: the delay is there because those pods may
/// still receive traffic.
pub const RESTART_KEEPS_THE_DELAY: &str = "a restart keeps the scale-down delay";
/// `status.abort` once the update is promoted: Argo leaves it true on a Healthy Rollout after
/// `promote --full` over an aborted update (or an abort of a completed one); Sluice clears it.
pub const ABORT_CLEARED_WHEN_HEALTHY: &str = "abort cleared once Healthy";
/// The AnalysisRuns and Experiments after an undo: Argo names those of the undone-to template
/// by a hash of the template as the undo wrote it (with the API server's defaults) and deletes
/// them, and the completed ones of other revisions, at its next clean-up; Sluice names them by
/// the ReplicaSet's hash and keeps them within the history limits.
pub const UNDO_HISTORY: &str = "runs and experiments after an undo";

/// A blue-green ReplicaSet superseded before it became active (a preview replaced by a newer
/// template, or left by an undo): Argo keeps it until the new update is promoted, and gives it
/// a scale-down delay at the Rollout's full size (scaling a `previewReplicaCount` preview up);
/// Sluice scales it down at once, since no Service selects it any more.
pub const SUPERSEDED_PREVIEW: &str = "a superseded preview is scaled down at once";

/// A scale while the Rollout is paused: Argo's pass for a scaling event only resizes, so its
/// `Available` condition and Progressing reason stay as they were before the scale until its
/// next full pass; Sluice judges them in the pass that resizes. Deliberate: conditions say
/// what the Rollout is now.
pub const CONDITIONS_AFTER_A_PAUSED_SCALE: &str = "conditions judged after a scale while paused";

/// Every key above, for the check that the page explains them all.
pub const ALL: [&str; 6] = [
    RETRY_ANALYSES_AGAIN,
    RESTART_KEEPS_THE_DELAY,
    ABORT_CLEARED_WHEN_HEALTHY,
    UNDO_HISTORY,
    SUPERSEDED_PREVIEW,
    CONDITIONS_AFTER_A_PAUSED_SCALE,
];

/// The keys whose difference also changes the events that follow.
pub const CHANGES_EVENTS: [&str; 4] = [
    RETRY_ANALYSES_AGAIN,
    RESTART_KEEPS_THE_DELAY,
    UNDO_HISTORY,
    SUPERSEDED_PREVIEW,
];

/// What a scenario has done so far that a documented difference depends on.
#[derive(Debug, Default)]
pub struct History {
    pub undone: bool,
    pub restarted: bool,
    /// New templates so far (image changes and undos): from the second on, a blue-green
    /// preview can be superseded.
    pub templates: usize,
    /// The Rollout is blue-green (Argo's world had an active Service at the last settle point).
    pub blue_green: bool,
    /// A retry after which Sluice analysed again: the two updates differ from there on.
    pub reanalysed: bool,
}

impl History {
    /// Records the action just played (`None`: the first deploy), before its settle point is
    /// compared.
    pub fn saw(&mut self, action: Option<&Action>, argo: &Snapshot) {
        self.blue_green = blue_green(argo);
        match action {
            Some(Action::Undo) => {
                self.undone = true;
                self.templates += 1;
            }
            Some(Action::SetImage { .. }) => self.templates += 1,
            Some(Action::Restart) => self.restarted = true,
            _ => {}
        }
    }
}

/// The names of the fields in which `s` and `a` differ.
pub fn differing_fields(s: &Snapshot, a: &Snapshot) -> Vec<&'static str> {
    let mut out = Vec::new();
    let mut check = |name, differs: bool| {
        if differs {
            out.push(name);
        }
    };
    check("phase", s.phase != a.phase);
    check("message", s.message != a.message);
    check("step_index", s.step_index != a.step_index);
    check("abort", s.abort != a.abort);
    check("paused", s.paused != a.paused);
    check("conditions", s.conditions != a.conditions);
    check("counts", s.counts != a.counts);
    check("replica_sets", s.replica_sets != a.replica_sets);
    check("selectors", s.selectors != a.selectors);
    check("canary_weight", s.canary_weight != a.canary_weight);
    check("analysis_runs", s.analysis_runs != a.analysis_runs);
    check("experiments", s.experiments != a.experiments);
    out
}

/// The documented differences that together explain how `s` (Sluice) differs from `a` (Argo)
/// after `action` (`None`: the first deploy); empty when they do not.
pub fn explain(
    action: Option<&Action>,
    history: &mut History,
    s: &Snapshot,
    a: &Snapshot,
) -> Vec<&'static str> {
    if history.reanalysed {
        return vec![RETRY_ANALYSES_AGAIN];
    }
    if matches!(action, Some(Action::Retry)) && reanalysed(s, a) {
        history.reanalysed = true;
        return vec![RETRY_ANALYSES_AGAIN];
    }
    let mut fields = differing_fields(s, a);
    let mut keys = Vec::new();
    let history_fields = |f: &&str| matches!(*f, "analysis_runs" | "experiments");
    if history.undone && fields.iter().any(history_fields) {
        fields.retain(|f| !history_fields(f));
        keys.push(UNDO_HISTORY);
    }
    let only = |allowed: &[&str]| fields.iter().all(|f| allowed.contains(f));
    if fields.is_empty() {
        return keys;
    }
    // The older ReplicaSet stays up until its delay ends, also past the next action.
    if history.restarted
        && only(&["counts", "conditions", "replica_sets"])
        && only_older_kept_up(s, a)
        && conditions_alike_but(s, a, &["Healthy", "Progressing"])
    {
        keys.push(RESTART_KEEPS_THE_DELAY);
        return keys;
    }
    if blue_green(a)
        && history.templates >= 2
        && only(&["counts", "replica_sets"])
        && only_superseded_kept_up(s, a)
    {
        keys.push(SUPERSEDED_PREVIEW);
        return keys;
    }
    if only(&["abort"]) && !s.abort && a.abort && a.phase == "Healthy" {
        keys.push(ABORT_CLEARED_WHEN_HEALTHY);
        return keys;
    }
    if matches!(action, Some(Action::Scale(_)))
        && paused(s)
        && paused(a)
        && only(&["conditions"])
        && conditions_alike_but(s, a, &["Available", "Progressing"])
    {
        keys.push(CONDITIONS_AFTER_A_PAUSED_SCALE);
        return keys;
    }
    Vec::new()
}

/// The Rollout is paused: a pause condition, or the Paused condition True (a user's pause).
fn paused(snap: &Snapshot) -> bool {
    !snap.paused.is_empty()
        || snap
            .conditions
            .iter()
            .any(|(kind, status, _)| kind == "Paused" && status == "True")
}

/// The conditions are the same but for those of the types `but`.
fn conditions_alike_but(s: &Snapshot, a: &Snapshot, but: &[&str]) -> bool {
    let others = |snap: &Snapshot| -> Vec<(String, String, String)> {
        snap.conditions
            .iter()
            .filter(|c| !but.contains(&c.0.as_str()))
            .cloned()
            .collect()
    };
    others(s) == others(a)
}

/// The documented difference that explains event lists alike but for Argo's extra scalings:
/// a restart's older ReplicaSet Argo scaled down in steps, or a superseded blue-green preview
/// Argo scaled up for its delay and then down. Both had reached the same sizes by the settle
/// points.
pub fn explain_extra_scalings(history: &History) -> Option<&'static str> {
    if history.restarted {
        Some(RESTART_KEEPS_THE_DELAY)
    } else if history.blue_green && history.templates >= 2 {
        Some(SUPERSEDED_PREVIEW)
    } else {
        None
    }
}

/// Sluice has a run `<name>.<n>` of a retry that Argo has not, next to a failed `<name>`.
fn reanalysed(s: &Snapshot, a: &Snapshot) -> bool {
    s.analysis_runs.keys().any(|name| {
        !a.analysis_runs.contains_key(name)
            && name.rsplit_once('.').is_some_and(|(first, n)| {
                n.chars().all(|c| c.is_ascii_digit())
                    && s.analysis_runs.get(first).map(String::as_str) == Some("Some(Failed)")
            })
    })
}

/// The ReplicaSets differ only in older ones (neither stable nor current) that Sluice keeps up
/// and Argo has scaled to zero.
fn only_older_kept_up(s: &Snapshot, a: &Snapshot) -> bool {
    let revisions = s.replica_sets.keys().chain(a.replica_sets.keys());
    revisions
        .into_iter()
        .all(|r| match (s.replica_sets.get(r), a.replica_sets.get(r)) {
            (Some(x), Some(y)) if x == y => true,
            (Some(&(kept, false, false)), Some(&(0, false, false))) => kept > 0,
            _ => false,
        })
}

/// A blue-green Rollout: it has an active Service.
pub fn blue_green(snap: &Snapshot) -> bool {
    snap.selectors.contains_key("active")
}

/// The ReplicaSets differ only in older ones (neither stable nor current, selected by no
/// Service) that Argo keeps larger than Sluice does.
fn only_superseded_kept_up(s: &Snapshot, a: &Snapshot) -> bool {
    let selected = |r: &String| {
        s.selectors
            .values()
            .chain(a.selectors.values())
            .any(|v| v == r)
    };
    let revisions = s.replica_sets.keys().chain(a.replica_sets.keys());
    revisions
        .into_iter()
        .all(|r| match (s.replica_sets.get(r), a.replica_sets.get(r)) {
            (Some(x), Some(y)) if x == y => true,
            (Some(&(ours, false, false)), Some(&(argos, false, false))) => {
                ours < argos && !selected(r)
            }
            _ => false,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As the runner does: the action is recorded, then the settle point explained.
    fn ex(
        h: &mut History,
        action: Option<&Action>,
        s: &Snapshot,
        a: &Snapshot,
    ) -> Vec<&'static str> {
        h.saw(action, a);
        explain(action, h, s, a)
    }

    fn snap() -> Snapshot {
        let mut s = Snapshot {
            phase: "Healthy".into(),
            ..Snapshot::default()
        };
        s.replica_sets.insert("1".into(), (0, false, false));
        s.replica_sets.insert("2".into(), (2, true, true));
        s
    }

    #[test]
    fn the_differences_page_explains_every_key() {
        let page = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../docs/differences-from-argo.md"),
        )
        .unwrap();
        let keys = ALL.iter().chain(&[
            super::super::JOB_CUT_SHORT,
            super::super::EVENTS_PAST_ARGOS_BURST,
        ]);
        for key in keys {
            assert!(
                page.contains(&format!("| `{key}` |")),
                "{key} is not on the page"
            );
        }
    }

    #[test]
    fn a_restart_that_keeps_the_older_pods_is_documented_and_nothing_more() {
        let (mut s, a) = (snap(), snap());
        s.replica_sets.insert("1".into(), (2, false, false));
        s.counts = (4, 2, 4, 4);
        let mut h = History::default();
        assert!(ex(&mut h, Some(&Action::Resume), &s, &a).is_empty());
        assert_eq!(
            ex(&mut h, Some(&Action::Restart), &s, &a),
            [RESTART_KEEPS_THE_DELAY]
        );
        // Still in its delay at the next action; not with the current ReplicaSet's size too.
        assert_eq!(
            ex(&mut h, Some(&Action::Resume), &s, &a),
            [RESTART_KEEPS_THE_DELAY]
        );
        s.replica_sets.insert("2".into(), (1, true, true));
        assert!(ex(&mut h, Some(&Action::Restart), &s, &a).is_empty());
    }

    #[test]
    fn a_retry_that_analyses_again_is_documented_from_there_on() {
        let (mut s, mut a) = (snap(), snap());
        a.analysis_runs
            .insert("web-r2-2".into(), "Some(Failed)".into());
        s.analysis_runs = a.analysis_runs.clone();
        s.analysis_runs
            .insert("web-r2-2.1".into(), "Some(Running)".into());
        let mut h = History::default();
        assert!(ex(&mut h, Some(&Action::Abort), &s, &a).is_empty());
        assert_eq!(
            ex(&mut h, Some(&Action::Retry), &s, &a),
            [RETRY_ANALYSES_AGAIN]
        );
        s.phase = "Degraded".into();
        assert_eq!(
            ex(&mut h, Some(&Action::Resume), &s, &a),
            [RETRY_ANALYSES_AGAIN]
        );
    }

    #[test]
    fn a_superseded_preview_kept_up_by_argo_is_documented_only_for_blue_green() {
        let (mut s, mut a) = (snap(), snap());
        for snap in [&mut s, &mut a] {
            snap.selectors.insert("active".into(), "2".into());
            snap.replica_sets.insert("3".into(), (1, false, true));
            snap.selectors.insert("preview".into(), "3".into());
        }
        s.replica_sets.insert("1".into(), (0, false, false));
        a.replica_sets.insert("1".into(), (2, false, false));
        let mut h = History::default();
        let image = |version| Action::SetImage {
            version,
            fault: super::super::Fault::None,
        };
        // One template: nothing superseded yet.
        assert!(ex(&mut h, Some(&image(2)), &s, &a).is_empty());
        assert_eq!(explain_extra_scalings(&h), None);
        assert_eq!(ex(&mut h, Some(&image(3)), &s, &a), [SUPERSEDED_PREVIEW]);
        assert_eq!(explain_extra_scalings(&h), Some(SUPERSEDED_PREVIEW));
        let mut restarted = History::default();
        restarted.saw(Some(&Action::Restart), &s);
        assert_eq!(
            explain_extra_scalings(&restarted),
            Some(RESTART_KEEPS_THE_DELAY)
        );
        // Not when a Service selects it, nor when Sluice keeps more, nor for a canary.
        let mut selected = a.clone();
        selected.selectors.insert("preview".into(), "1".into());
        assert!(ex(&mut h, Some(&Action::Resume), &s, &selected).is_empty());
        assert!(ex(&mut h, Some(&Action::Resume), &a, &s).is_empty());
        s.selectors.remove("active");
        a.selectors.remove("active");
        assert!(ex(&mut h, Some(&Action::Resume), &s, &a).is_empty());
    }

    #[test]
    fn conditions_judged_after_a_paused_scale_are_documented_only_then() {
        let (mut s, mut a) = (snap(), snap());
        for snap in [&mut s, &mut a] {
            snap.paused = vec!["CanaryPauseStep".into()];
            snap.conditions
                .push(("Paused".into(), "True".into(), "RolloutPaused".into()));
        }
        s.conditions
            .push(("Available".into(), "True".into(), "AvailableReason".into()));
        a.conditions
            .push(("Available".into(), "False".into(), "AvailableReason".into()));
        let mut h = History::default();
        assert_eq!(
            ex(&mut h, Some(&Action::Scale(3)), &s, &a),
            [CONDITIONS_AFTER_A_PAUSED_SCALE]
        );
        // Not after another action, not unpaused, not with another condition or field.
        assert!(ex(&mut h, Some(&Action::Resume), &s, &a).is_empty());
        let mut other = s.clone();
        other
            .conditions
            .push(("InvalidSpec".into(), "True".into(), "InvalidSpec".into()));
        assert!(ex(&mut h, Some(&Action::Scale(3)), &other, &a).is_empty());
        let mut counted = s.clone();
        counted.counts.0 += 1;
        assert!(ex(&mut h, Some(&Action::Scale(3)), &counted, &a).is_empty());
        for snap in [&mut s, &mut a] {
            snap.paused.clear();
            snap.conditions.retain(|c| c.0 != "Paused");
        }
        assert!(ex(&mut h, Some(&Action::Scale(3)), &s, &a).is_empty());
    }

    #[test]
    fn abort_and_undo_differences_are_documented_only_alone() {
        let (mut s, mut a) = (snap(), snap());
        a.abort = true;
        let mut h = History::default();
        assert_eq!(
            ex(&mut h, Some(&Action::PromoteFull), &s, &a),
            [ABORT_CLEARED_WHEN_HEALTHY]
        );
        a.phase = "Degraded".into();
        assert!(ex(&mut h, Some(&Action::PromoteFull), &s, &a).is_empty());
        let mut a = snap();
        s.experiments
            .insert("web-r3-3-0".into(), "Some(Successful)".into());
        assert!(ex(&mut h, Some(&Action::Resume), &s, &a).is_empty());
        assert_eq!(ex(&mut h, Some(&Action::Undo), &s, &a), [UNDO_HISTORY]);
        // With a restart's older ReplicaSet kept up too: both.
        s.replica_sets.insert("1".into(), (2, false, false));
        assert!(ex(&mut h, Some(&Action::Resume), &s, &a).is_empty());
        assert_eq!(
            ex(&mut h, Some(&Action::Restart), &s, &a),
            [UNDO_HISTORY, RESTART_KEEPS_THE_DELAY]
        );
        s.step_index = Some(1);
        assert!(ex(&mut h, Some(&Action::Resume), &s, &a).is_empty());
        a.step_index = Some(1);
        s.abort = true;
        assert!(ex(&mut h, Some(&Action::Resume), &s, &a).is_empty());
    }
}
