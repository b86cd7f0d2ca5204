//! Bugs the simulation found, fixed, and kept as regressions: the exact seeds that used to
//! fail now run under every invariant. A recorded-but-unfixed bug (an entry in `KNOWN`) must
//! still reproduce on its seeds, so that its fix is noticed and the entry removed.

use sluice_sim::known_bugs::KNOWN;
use sluice_sim::{real_apply, run, scenarios};

/// Fixed: a scale-down budget counted from a stale ReplicaSet cache. After the stable
/// ReplicaSet was scaled down, the next reconcile still saw it at full availability and
/// scaled the intermediate canary to 0. Plans now confirm every counted ReplicaSet's
/// resourceVersion before any scale-down.
#[test]
fn stale_scale_down_budget_seeds_keep_availability() {
    for (scenario, seeds) in [
        ("supersede", &[5u64, 13, 61, 278][..]),
        ("chaos", &[1022, 1230, 1292][..]),
    ] {
        let s = scenarios::find(scenario).unwrap();
        for &seed in seeds {
            let outcome = run(&s, seed, real_apply);
            assert!(
                outcome.passed(),
                "{scenario} seed {seed}:\n{}",
                outcome.report()
            );
        }
    }
}

/// Fixed, traffic routing: past the last step the router was given all traffic before the
/// canary had its pods; a setWeight below the routed weight never completed (the scale-down
/// floor held the canary while the step waited for it to shrink); with dynamicStableScale an
/// abort raised the stable's weight from a stale cache, and a superseding revision took over
/// the canary Service while the router still sent the previous canary's weight. The weight
/// now waits for the pods (a lower one goes at once), router writes confirm the counted
/// ReplicaSets first, and the canary Service moves only to pods that carry the routed weight.
#[test]
fn traffic_routing_seeds_never_route_ahead_of_the_pods() {
    for (scenario, seeds) in [
        ("istio-host-split", &[1u64, 2, 4][..]),
        (
            "istio-host-split-dynamic-stable-scale",
            &[1, 2, 4, 7, 14, 27, 38, 46, 51, 78][..],
        ),
        ("istio-weight-steps-down", &[1, 2, 4, 7, 11, 16][..]),
    ] {
        let s = scenarios::find(scenario).unwrap();
        for &seed in seeds {
            let outcome = run(&s, seed, real_apply);
            assert!(
                outcome.passed(),
                "{scenario} seed {seed}:\n{}",
                outcome.report()
            );
        }
    }
}

/// Fixed, traffic routing: after an outside edit of the VirtualService and a router write
/// refused with a conflict, a newer revision superseded a canary the router had just taken to
/// 20%, before the stable shrank. The plan put all traffic back on the stable (the new canary
/// had no pods yet) and, in the same plan, scaled the stable down to the 80% recorded and read
/// back before that write. A plan's ReplicaSet sizes now count the weights its own router
/// writes give (those writes land first, and a refused one stops the plan).
#[test]
fn a_plan_routing_traffic_back_to_stable_keeps_the_stable_pods() {
    let s = scenarios::find("istio-host-split-dynamic-stable-scale").unwrap();
    let outcome = run(&s, 559, real_apply);
    assert!(outcome.passed(), "seed 559:\n{}", outcome.report());
}

/// Fixed: a blue-green promotion was lost when the active-Service switch landed but a later
/// write of the same plan conflicted; the next reconcile now records the promotion.
#[test]
fn lost_blue_green_promotion_seeds_promote() {
    let s = scenarios::find("bluegreen-bad-good-bad").unwrap();
    for seed in [9u64, 16, 18] {
        let outcome = run(&s, seed, real_apply);
        assert!(outcome.passed(), "seed {seed}:\n{}", outcome.report());
    }
}

/// Fixed: paused on an Inconclusive background run, the canary still completed setWeight
/// steps (even in the reconcile that added the pause) and, with no pause step left, the whole
/// update. The step machine now holds while an InconclusiveAnalysisRun pause is present.
#[test]
fn inconclusive_background_analysis_seeds_hold_the_update() {
    let s = scenarios::find("inconclusive-background-analysis").unwrap();
    for seed in [0u64, 5, 7] {
        let outcome = run(&s, seed, real_apply);
        assert!(outcome.passed(), "seed {seed}:\n{}", outcome.report());
    }
}

/// Fixed: the progress deadline ran while the update waited at an experiment step, so an
/// Experiment that outlasted `progressDeadlineSeconds` timed the update out and, with
/// `progressDeadlineAbort`, aborted it. As in Argo, experiment and analysis steps no longer
/// count against the deadline.
#[test]
fn experiment_step_seeds_do_not_time_out() {
    let s = scenarios::find("experiment-step").unwrap();
    for seed in [0u64, 8, 14, 19] {
        let outcome = run(&s, seed, real_apply);
        assert!(outcome.passed(), "seed {seed}:\n{}", outcome.report());
    }
}

/// Fixed: nothing reconciled a Rollout when its Experiment finished (the Rollout controller
/// did not watch Experiments), so the step waited for the resync period: a passed Experiment
/// did not complete its step, a failed one did not abort the update. The Rollout controller
/// now watches the Experiments it owns.
#[test]
fn experiment_step_seeds_act_on_the_verdict() {
    let s = scenarios::find("experiment-step").unwrap();
    for seed in [0u64, 2, 4, 7] {
        let outcome = run(&s, seed, real_apply);
        assert!(outcome.passed(), "seed {seed}:\n{}", outcome.report());
    }
}

/// Fixed: an Experiment's pass started its AnalysisRun as the Rollout terminated the
/// Experiment, and the status write recording the run failed with a 409. Terminating, the
/// Experiment started no run and stopped only those on record, so that one measured on for
/// ever. A terminating Experiment now stops the run it finds measuring for an analysis too.
#[test]
fn interrupted_experiment_seeds_stop_every_run() {
    let s = scenarios::find("interrupted-experiment").unwrap();
    for seed in [134u64, 165, 305] {
        let outcome = run(&s, seed, real_apply);
        assert!(outcome.passed(), "seed {seed}:\n{}", outcome.report());
    }
}

#[test]
fn recorded_unfixed_bugs_still_reproduce() {
    for bug in KNOWN {
        let scenario = scenarios::find(bug.scenario).unwrap();
        for &seed in bug.seeds {
            let outcome = run(&scenario, seed, real_apply);
            assert!(
                outcome
                    .violations
                    .iter()
                    .any(|v| v.invariant == bug.invariant),
                "{} seed {seed} no longer shows {}: fixed? Remove it from KNOWN.\n{}",
                bug.scenario,
                bug.invariant,
                outcome.report()
            );
        }
    }
}

/// Fixed: an update's progress deadline never ran when the status writes of its first
/// reconciles were lost to conflicts and the next one found the same replica counts (a
/// scale-down delay kept the previous revision's pods counted): the Progressing condition
/// still said the previous revision was available. Such a condition now restarts the
/// deadline.
#[test]
fn lost_status_writes_still_run_the_progress_deadline() {
    let s = scenarios::find("bluegreen-bad-good-bad").unwrap();
    let outcome = run(&s, 15709, real_apply);
    assert!(outcome.passed(), "seed 15709:\n{}", outcome.report());
}

/// Fixed: a reconcile whose write met a 409 retried from the same cached copies until the
/// watch caught up (seconds, on a slow watch), so a ReplicaSet that kept being annotated by
/// someone else held the update for over a minute and `progressDeadlineAbort` aborted a good
/// update. The reconcile after a stale view now reads the Rollout and its ReplicaSets from
/// the API server.
#[test]
fn conflicted_chaos_seed_reads_afresh_and_completes() {
    let s = scenarios::find("chaos").unwrap();
    let outcome = run(&s, 32453, real_apply);
    assert!(outcome.passed(), "seed 32453:\n{}", outcome.report());
}

/// Fixed: an update's ReplicaSet created while the ReplicaSet cache had not yet seen the
/// previous update's took that one's revision. Its background AnalysisRun was named after the
/// taken revision, then made again under the next one once the cache caught up and the
/// ReplicaSet's revision was raised: two runs measured one update. A new revision is now
/// above the Rollout's own revision annotation too.
#[test]
fn an_update_over_a_stale_replica_set_cache_gets_a_revision_of_its_own() {
    let s = scenarios::find("superseded-background-analysis").unwrap();
    let outcome = run(&s, 33344, real_apply);
    assert!(outcome.passed(), "seed 33344:\n{}", outcome.report());
}
