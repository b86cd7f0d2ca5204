//! Replica arithmetic of a basic and of a traffic-routed canary: how far the new and the
//! stable ReplicaSets are scaled in one reconcile. A different count is a different number of
//! pods serving users.

use serde_json::{Value, json};
use sluice_api::rollout::CanaryStrategy;
use sluice_conformance::differences::Differences;
use sluice_conformance::generate::replicas::{
    BasicCase, RoutedCase, Rs, basic_case, replica_set, routed_case,
};
use sluice_conformance::oracle::{self, ARGO_VERSIONS};
use sluice_conformance::run::compare;
use sluice_engine::replicas::{
    BasicCanaryInputs, RoutedPosition, RsCounts, basic_canary_counts, resolve_surge_limits,
    routed_canary_counts_at,
};

fn canary(case: &BasicCase) -> Value {
    let steps: Vec<Value> = case
        .steps
        .iter()
        .map(|s| match s {
            Some(w) => json!({"setWeight": w}),
            None => json!({"pause": {}}),
        })
        .collect();
    json!({"maxSurge": case.max_surge, "maxUnavailable": case.max_unavailable, "steps": steps})
}

/// The oracle's input: the Rollout and its ReplicaSets as Argo's controller holds them.
fn argo_request(case: &BasicCase) -> Value {
    let new_rs = case.new_rs.map(|rs| replica_set("new", rs));
    let stable_rs = match case.stable_rs {
        Some(Some(rs)) => Some(replica_set("stable", rs)),
        Some(None) => new_rs.clone(),
        None => None,
    };
    let stable_name = match case.stable_rs {
        Some(Some(_)) => "stable",
        Some(None) => "new",
        None => "",
    };
    let old: Vec<Value> = case
        .others
        .iter()
        .enumerate()
        .map(|(i, rs)| replica_set(&format!("old{i}"), *rs))
        .collect();
    json!({
        "op": "basicCanary",
        "rollout": {
            "spec": {"replicas": case.replicas, "strategy": {"canary": canary(case)}},
            "status": {
                "currentStepIndex": case.step_index,
                "stableRS": stable_name,
                "currentPodHash": "new",
                "abort": case.aborted,
                "promoteFull": case.promote_full,
            },
        },
        "newRS": new_rs, "stableRS": stable_rs, "oldRSs": old,
    })
}

fn sluice(case: &BasicCase) -> Result<(i32, i32), String> {
    let strategy: CanaryStrategy =
        serde_json::from_value(canary(case)).map_err(|e| format!("Sluice cannot read it: {e}"))?;
    let limits = resolve_surge_limits(
        strategy.max_surge.as_ref(),
        strategy.max_unavailable.as_ref(),
        case.replicas,
    )
    .map_err(|e| e.to_string())?;
    let new_is_stable = case.stable_rs == Some(None);
    // The weight as the canary reconcile chooses it.
    let weight = if case.aborted {
        0
    } else if new_is_stable || case.promote_full {
        100
    } else {
        sluice_engine::steps::weight_at(&strategy, case.step_index)
    };
    let counts =
        |rs: sluice_conformance::generate::replicas::Rs| RsCounts::new(rs.spec, rs.available);
    let out = basic_canary_counts(BasicCanaryInputs {
        replicas: case.replicas,
        weight,
        limits,
        new_rs: case.new_rs.map(counts),
        stable_rs: match case.stable_rs {
            Some(Some(rs)) => Some(counts(rs)),
            Some(None) => case.new_rs.map(counts),
            None => None,
        },
        new_is_stable,
        other_spec_total: case.others.iter().map(|rs| rs.spec).sum(),
    });
    Ok((out.canary, out.stable))
}

#[test]
fn basic_canary_counts_match_argo() {
    let differences = Differences::load("Replica arithmetic");
    for version in ARGO_VERSIONS {
        compare(&format!("basic-canary/{version}"), basic_case, |case| {
            if case.aborted && case.promote_full {
                let key = "replicas: abort with promoteFull";
                return match differences.explains(None, Some(key)) {
                    Some(row) => Ok(format!("documented difference ({row})")),
                    None => Err(format!("{key} is not on the differences page")),
                };
            }
            let answer = oracle::shared(version)
                .ask(&argo_request(case))
                .map_err(|e| format!("{e:#}"))?;
            let (Some(c), Some(s)) = (answer["canary"].as_i64(), answer["stable"].as_i64()) else {
                return Err(format!("Argo {version} could not size it: {answer}"));
            };
            let (sc, ss) = sluice(case)?;
            if case.new_rs.is_none() {
                // Without a new ReplicaSet Argo sizes only the stable one; the new one is
                // created (at its own count) in another step, in Sluice as in Argo.
                return if i64::from(ss) == s {
                    Ok("same stable count, no new ReplicaSet yet".into())
                } else {
                    Err(format!(
                        "Argo {version}: stable {s}; Sluice: stable {ss} (no new ReplicaSet)"
                    ))
                };
            }
            if case.stable_rs == Some(None) {
                // The new ReplicaSet is the stable one: only its count is used (Argo's second
                // number is the same ReplicaSet's again, which its caller ignores).
                return if i64::from(sc) == c {
                    Ok("same count, the new ReplicaSet is the stable one".into())
                } else {
                    Err(format!(
                        "Argo {version}: canary {c}; Sluice: canary {sc} (new is stable)"
                    ))
                };
            }
            if (i64::from(sc), i64::from(ss)) == (c, s) {
                Ok("same counts".into())
            } else {
                Err(format!(
                    "Argo {version}: canary {c} stable {s}; Sluice: canary {sc} stable {ss}"
                ))
            }
        });
    }
}

fn routed_canary(case: &RoutedCase) -> Value {
    let mut canary = json!({
        "steps": case.steps,
        "canaryService": "canary", "stableService": "stable",
        "trafficRouting": {"nginx": {"stableIngress": "web"}},
        "dynamicStableScale": case.dynamic_stable_scale,
    });
    if let Some(n) = case.min_pods_per_replica_set {
        canary["minPodsPerReplicaSet"] = json!(n);
    }
    if let Some(n) = case.abort_delay {
        canary["abortScaleDownDelaySeconds"] = json!(n);
    }
    canary
}

fn routed_request(case: &RoutedCase) -> Value {
    let rs = |name: &str| {
        replica_set(
            name,
            Rs {
                spec: case.replicas,
                available: case.replicas,
            },
        )
    };
    json!({
        "op": "routedCanary",
        "rollout": {
            "spec": {"replicas": case.replicas, "strategy": {"canary": routed_canary(case)}},
            "status": {
                "currentStepIndex": case.step_index,
                "stableRS": if case.new_is_stable { "new" } else { "stable" },
                "currentPodHash": "new",
                "abort": case.aborted,
                "promoteFull": case.promote_full,
            },
        },
        "newRS": rs("new"),
        "stableRS": if case.new_is_stable { rs("new") } else { rs("stable") },
        "weights": case.weights.map(|(c, s)| json!({
            "canary": {"weight": c, "podTemplateHash": "new", "serviceName": "canary"},
            "stable": {"weight": s, "podTemplateHash": "stable", "serviceName": "stable"},
        })),
    })
}

fn routed_sluice(case: &RoutedCase) -> Result<(i32, i32), String> {
    let strategy: CanaryStrategy = serde_json::from_value(routed_canary(case))
        .map_err(|e| format!("Sluice cannot read it: {e}"))?;
    let counts = routed_canary_counts_at(
        &strategy,
        RoutedPosition {
            replicas: case.replicas,
            step_index: case.step_index,
            aborted: case.aborted,
            // Without dynamicStableScale an abort takes all traffic off the canary at once.
            abort_weight: 0,
            promote_full: case.promote_full || case.new_is_stable,
            previous_weights: case.weights,
        },
    );
    Ok((counts.canary, counts.stable))
}

#[test]
fn routed_canary_counts_match_argo() {
    let differences = Differences::load("Replica arithmetic");
    for version in ARGO_VERSIONS {
        compare(&format!("routed-canary/{version}"), routed_case, |case| {
            if case.aborted && case.dynamic_stable_scale {
                let key = "replicas: abort with dynamicStableScale";
                return match differences.explains(None, Some(key)) {
                    Some(row) => Ok(format!("documented difference ({row})")),
                    None => Err(format!("{key} is not on the differences page")),
                };
            }
            if case.aborted && case.promote_full {
                let key = "replicas: abort with promoteFull";
                return match differences.explains(None, Some(key)) {
                    Some(row) => Ok(format!("documented difference ({row})")),
                    None => Err(format!("{key} is not on the differences page")),
                };
            }
            let answer = oracle::shared(version)
                .ask(&routed_request(case))
                .map_err(|e| format!("{e:#}"))?;
            let (Some(c), Some(s)) = (answer["canary"].as_i64(), answer["stable"].as_i64()) else {
                return Err(format!("Argo {version} could not size it: {answer}"));
            };
            let (sc, ss) = routed_sluice(case)?;
            if (i64::from(sc), i64::from(ss)) == (c, s) {
                return Ok("same counts".into());
            }
            let found =
                format!("Argo {version}: canary {c} stable {s}; Sluice: canary {sc} stable {ss}");
            let documented = |key: &str| match differences.explains(None, Some(key)) {
                Some(row) => Ok(format!("documented difference ({row})")),
                None => Err(format!("{found}; {key:?} is not on the differences page")),
            };
            let above = case
                .min_pods_per_replica_set
                .is_some_and(|m| m > case.replicas);
            if version == "1.9.1" && above {
                return documented("replicas: minPodsPerReplicaSet above replicas (1.9)");
            }
            if c < 0 || s < 0 {
                return documented("replicas: negative count");
            }
            Err(found)
        });
    }
}
