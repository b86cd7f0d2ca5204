//! The progress deadline of an update whose pods never get ready.

use super::*;

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
