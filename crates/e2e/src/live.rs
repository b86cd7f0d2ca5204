//! Live differential scenarios: one generated Rollout and a script of user actions and pod
//! faults, played at the same time under Argo Rollouts' own controller and under Sluice, each in
//! its own namespace of the same control plane, with the traces compared at every settle point.
//!
//! A scenario comes from a seed alone, so a difference is replayed by its seed
//! (`cargo run -p sluice-e2e --bin sluice-live-conformance -- --start SEED --scenarios 1`).
//! What is compared at a settle point, once both controllers have observed the action and
//! nothing has changed for a few seconds: the phase and message, the step index, the abort and
//! pause state, the conditions (type, status, reason), the replica counts, each ReplicaSet's
//! size by revision and the Service selectors by revision; and at the end, the Rollout's events
//! as (type, reason): all in order but the scalings, and the number of scalings.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use sluice_api::Rollout;
use sluice_engine::reconcile::SPEC_WARNING;

use crate::harness::TestNamespace;

/// A deterministic stream of numbers from a seed (SplitMix64).
struct Dice(u64);

impl Dice {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// What a user (or a cluster) does to the Rollout between settle points.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// A new image; `broken` ones never get Ready (an image pull failure).
    SetImage {
        version: u32,
        broken: bool,
    },
    Promote,
    PromoteFull,
    Abort,
    Retry,
    Pause,
    Resume,
    Scale(i32),
}

/// One generated scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub seed: u64,
    pub blue_green: bool,
    pub replicas: i32,
    /// The Rollout's `spec.strategy.<canary|blueGreen>`.
    pub strategy: Value,
    pub progress_deadline: Option<(i64, bool)>,
    pub actions: Vec<Action>,
}

impl Scenario {
    /// The scenario of `seed`.
    pub fn generate(seed: u64) -> Scenario {
        let mut d = Dice(seed);
        let blue_green = d.chance(30);
        let replicas = 1 + d.below(3) as i32;
        let strategy = if blue_green {
            let mut bg = json!({"activeService": "active", "scaleDownDelaySeconds": 2});
            if d.chance(50) {
                bg["previewService"] = json!("preview");
            }
            if d.chance(50) {
                bg["autoPromotionEnabled"] = json!(false);
            }
            if d.chance(25) {
                bg["previewReplicaCount"] = json!(1);
            }
            bg
        } else {
            let mut steps = Vec::new();
            for _ in 0..d.below(4) {
                steps.push(match d.below(4) {
                    0 | 1 => {
                        let weight = [20, 34, 50, 75][d.below(4) as usize];
                        json!({ "setWeight": weight })
                    }
                    2 => json!({"pause": {}}),
                    _ => json!({"pause": {"duration": "2s"}}),
                });
            }
            let mut canary = json!({"steps": steps});
            if d.chance(30) {
                let surge = [json!(0), json!(1), json!("50%")][d.below(3) as usize].clone();
                canary["maxSurge"] = surge;
                canary["maxUnavailable"] = json!(1);
            }
            if d.chance(15) {
                // Argo runs it without traffic routing; so must Sluice.
                canary["abortScaleDownDelaySeconds"] = json!(5);
            }
            canary
        };
        let progress_deadline = d
            .chance(25)
            .then(|| (10 + d.below(10) as i64, d.chance(50)));
        let mut actions = Vec::new();
        let mut version = 1;
        for _ in 0..(2 + d.below(4)) {
            let action = match d.below(10) {
                0..=3 => {
                    version += 1;
                    Action::SetImage {
                        version,
                        broken: d.chance(20),
                    }
                }
                4 => Action::Promote,
                5 => Action::PromoteFull,
                6 => Action::Abort,
                7 => Action::Retry,
                8 => {
                    if d.chance(50) {
                        Action::Pause
                    } else {
                        Action::Resume
                    }
                }
                _ => Action::Scale(1 + d.below(3) as i32),
            };
            actions.push(action);
        }
        // Every scenario updates at least once.
        if !actions.iter().any(|a| matches!(a, Action::SetImage { .. })) {
            actions.insert(
                0,
                Action::SetImage {
                    version: 2,
                    broken: false,
                },
            );
        }
        Scenario {
            seed,
            blue_green,
            replicas,
            strategy,
            progress_deadline,
            actions,
        }
    }

    fn image(version: u32, broken: bool) -> String {
        if broken {
            format!("registry.invalid/app:does-not-exist-{version}")
        } else {
            format!("registry.invalid/app:{version}")
        }
    }

    /// The Rollout and the Services it names, as YAML documents (JSON is YAML).
    pub fn manifests(&self) -> String {
        let mut spec = json!({
            "replicas": self.replicas,
            "revisionHistoryLimit": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": Self::image(1, false)}]}
            },
            "strategy": if self.blue_green {
                json!({"blueGreen": self.strategy})
            } else {
                json!({"canary": self.strategy})
            },
        });
        if let Some((seconds, abort)) = self.progress_deadline {
            spec["progressDeadlineSeconds"] = json!(seconds);
            spec["progressDeadlineAbort"] = json!(abort);
        }
        let rollout = json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
            "metadata": {"name": "web"}, "spec": spec,
        });
        // The Services first, as a person would create them: a Rollout whose Service is
        // missing is InvalidSpec until it appears, which both controllers handle, but Argo
        // then can lose an event to a write conflict (a race no scenario means to compare).
        let mut docs = Vec::new();
        for name in ["active", "preview"] {
            docs.push(
                json!({
                    "apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": name},
                    "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}
                })
                .to_string(),
            );
        }
        docs.push(rollout.to_string());
        docs.join("\n---\n")
    }
}

/// Applies one action to the Rollout `web` of `ns`.
pub async fn apply(ns: &TestNamespace, action: &Action) {
    let api = crate::rollouts(ns);
    match action {
        Action::SetImage { version, broken } => {
            crate::set_image(&api, "web", &Scenario::image(*version, *broken)).await
        }
        Action::Promote => crate::promote(&api, "web").await,
        Action::PromoteFull => crate::promote_full(&api, "web").await,
        Action::Abort => crate::abort(&api, "web").await,
        Action::Retry => crate::retry(&api, "web").await,
        Action::Pause => crate::pause(&api, "web").await,
        Action::Resume => crate::resume(&api, "web").await,
        Action::Scale(n) => {
            api.patch(
                "web",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(json!({"spec": {"replicas": n}})),
            )
            .await
            .expect("scale");
        }
    }
}

/// What is compared of one controller's world at a settle point. ReplicaSets and selectors
/// are named by revision, so the two namespaces compare although nothing else names them alike.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Snapshot {
    pub phase: String,
    pub message: String,
    pub step_index: Option<i32>,
    pub abort: bool,
    pub paused: Vec<String>,
    pub conditions: Vec<(String, String, String)>,
    pub counts: (i32, i32, i32, i32),
    /// revision -> (spec replicas, whether it is the stable one, whether it is the current one)
    pub replica_sets: BTreeMap<String, (i32, bool, bool)>,
    /// Service -> revision its selector names
    pub selectors: BTreeMap<String, String>,
}

impl Snapshot {
    pub async fn take(ns: &TestNamespace) -> anyhow::Result<(Snapshot, bool)> {
        let ro: Rollout = crate::rollouts(ns).get("web").await?;
        let rss: Vec<ReplicaSet> = ns
            .api::<ReplicaSet>()
            .list(&ListParams::default())
            .await?
            .items;
        let services: Vec<Service> = ns
            .api::<Service>()
            .list(&ListParams::default())
            .await?
            .items;
        let status = ro.status.clone().unwrap_or_default();
        let observed = status.observed_generation == ro.metadata.generation.map(|g| g.to_string());
        let mut revision_of = BTreeMap::new();
        let mut replica_sets = BTreeMap::new();
        for rs in &rss {
            let meta = &rs.metadata;
            let hash = meta
                .labels
                .as_ref()
                .and_then(|l| l.get("rollouts-pod-template-hash"))
                .cloned()
                .unwrap_or_default();
            let revision = meta
                .annotations
                .as_ref()
                .and_then(|a| a.get("rollout.argoproj.io/revision"))
                .cloned()
                .unwrap_or_default();
            revision_of.insert(hash.clone(), revision.clone());
            let spec = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
            replica_sets.insert(
                revision,
                (
                    spec,
                    status.stable_rs.as_deref() == Some(hash.as_str()),
                    status.current_pod_hash.as_deref() == Some(hash.as_str()),
                ),
            );
        }
        let selectors = services
            .iter()
            .filter_map(|svc| {
                let hash = svc
                    .spec
                    .as_ref()?
                    .selector
                    .as_ref()?
                    .get("rollouts-pod-template-hash")?;
                let revision = revision_of.get(hash).cloned().unwrap_or_else(|| "?".into());
                Some((svc.metadata.name.clone().unwrap_or_default(), revision))
            })
            .collect();
        let mut conditions: Vec<(String, String, String)> = status
            .conditions
            .iter()
            .flatten()
            .map(|c| {
                (
                    c.type_
                        .as_ref()
                        .map(|t| format!("{t:?}"))
                        .unwrap_or_default(),
                    c.status
                        .as_ref()
                        .map(|s| format!("{s:?}"))
                        .unwrap_or_default(),
                    c.reason.clone().unwrap_or_default(),
                )
            })
            .collect();
        conditions.sort();
        let mut paused: Vec<String> = status
            .pause_conditions
            .iter()
            .flatten()
            .map(|p| format!("{:?}", p.reason))
            .collect();
        paused.sort();
        let snapshot = Snapshot {
            phase: status
                .phase
                .as_ref()
                .map(|p| p.to_string())
                .unwrap_or_default(),
            message: status.message.clone().unwrap_or_default(),
            step_index: status.current_step_index,
            abort: status.abort == Some(true),
            paused,
            conditions,
            counts: (
                status.replicas.unwrap_or(0),
                status.updated_replicas.unwrap_or(0),
                status.ready_replicas.unwrap_or(0),
                status.available_replicas.unwrap_or(0),
            ),
            replica_sets,
            selectors,
        };
        Ok((snapshot, observed))
    }
}

/// Waits until the controller of `ns` has observed the Rollout's generation and nothing it
/// shows has changed for `quiet`, and at least `at_least` has passed; gives up after `limit`
/// with the last snapshot.
pub async fn settle(
    ns: &TestNamespace,
    quiet: Duration,
    at_least: Duration,
    limit: Duration,
) -> Snapshot {
    let start = Instant::now();
    let mut last: Option<(Snapshot, Instant)> = None;
    loop {
        if let Ok((snapshot, observed)) = Snapshot::take(ns).await {
            match &last {
                Some((before, since)) if *before == snapshot && observed => {
                    if since.elapsed() >= quiet && start.elapsed() >= at_least {
                        return snapshot;
                    }
                }
                _ => last = Some((snapshot, Instant::now())),
            }
        }
        if start.elapsed() >= limit {
            return last.map(|(s, _)| s).unwrap_or_default();
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The Rollout's events, oldest first, as (type, reason), and how many were recorded in all
/// (a repeat folded into an event counts again).
pub async fn events(ns: &TestNamespace) -> (Vec<(String, String)>, i32) {
    let api: Api<Event> = ns.api();
    let items: Vec<Event> = api
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| {
            e.regarding
                .as_ref()
                .is_some_and(|r| r.kind.as_deref() == Some("Rollout"))
        })
        .collect();
    let recorded = items
        .iter()
        .map(|e| {
            e.series
                .as_ref()
                .map(|s| s.count)
                .or(e.deprecated_count)
                .unwrap_or(1)
                .max(1)
        })
        .sum();
    let mut all: Vec<(i128, (String, String))> = items
        .into_iter()
        .map(|e| {
            let name = e.metadata.name.clone().unwrap_or_default();
            let at = name
                .rsplit_once('.')
                .and_then(|(_, h)| i128::from_str_radix(h, 16).ok())
                .unwrap_or(0);
            (
                at,
                (
                    e.type_.clone().unwrap_or_default(),
                    e.reason.clone().unwrap_or_default(),
                ),
            )
        })
        .collect();
    all.sort_by_key(|(at, _)| *at);
    (all.into_iter().map(|(_, e)| e).collect(), recorded)
}

/// client-go's event recorder, which Argo's controller uses, drops an object's events past a
/// burst of 25 (then lets one through every five minutes); Sluice posts every event. Argo's
/// list then stops short of Sluice's, which goes on the same.
const ARGO_EVENT_BURST: i32 = 25;

/// The key of the differences page's row for events Argo's recorder dropped.
pub const EVENTS_PAST_ARGOS_BURST: &str = "events past Argo's event burst";

/// The events but `ScalingReplicaSet` in order, and how many `ScalingReplicaSet` there are.
/// A scaling is reported by the pass that writes it, and which pass that is depends on when
/// each controller saw the ReplicaSet controller's status: the scalings of two passes may
/// interleave differently with the events of the steps around them. Their number, and the order
/// of everything else, do not depend on timing.
fn order_and_scalings(events: &[(String, String)]) -> (Vec<&(String, String)>, usize) {
    let scaling = |e: &&(String, String)| e.1 == "ScalingReplicaSet";
    (
        events.iter().filter(|e| !scaling(e)).collect(),
        events.iter().filter(scaling).count(),
    )
}

/// The outcome of one scenario.
#[derive(Debug, Default)]
pub struct Outcome {
    pub settle_points: usize,
    /// Settle points (and the event lists) that differ, described.
    pub differences: Vec<String>,
    /// Differences the differences page explains, by the page's key.
    pub documented: Vec<&'static str>,
}

/// Plays `scenario` in `sluice` and `argo` (namespaces each watched by its controller) at the
/// same time and compares them at every settle point.
pub async fn play(scenario: &Scenario, sluice: &TestNamespace, argo: &TestNamespace) -> Outcome {
    // Longer than Sluice's status-write interval (5 s by default), which may hold back a write
    // of counts in the middle of an update.
    let quiet = Duration::from_secs(7);
    let limit = Duration::from_secs(90);
    // A progress deadline ends a wait that looks settled: each side is looked at once both
    // deadlines have surely passed, so that the two are compared on the same side of theirs.
    let at_least = scenario
        .progress_deadline
        .map_or(Duration::ZERO, |(seconds, _)| {
            Duration::from_secs(seconds.unsigned_abs() + 5)
        });
    let manifests = scenario.manifests();
    let (a, b) = tokio::join!(sluice.apply_yaml(&manifests), argo.apply_yaml(&manifests));
    a.expect("applying the scenario for Sluice");
    b.expect("applying the scenario for Argo");
    let mut outcome = Outcome::default();
    let compare = |label: &str, s: Snapshot, a: Snapshot, outcome: &mut Outcome| {
        outcome.settle_points += 1;
        if s != a {
            let mut why = String::new();
            let _ = write!(
                why,
                "seed {}, after {label}:\n  Sluice: {s:?}\n  Argo:   {a:?}",
                scenario.seed
            );
            outcome.differences.push(why);
        }
    };
    let (s, a) = tokio::join!(
        settle(sluice, quiet, at_least, limit),
        settle(argo, quiet, at_least, limit)
    );
    compare("the first deploy", s, a, &mut outcome);
    for action in &scenario.actions {
        tokio::join!(apply(sluice, action), apply(argo, action));
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (s, a) = tokio::join!(
            settle(sluice, quiet, at_least, limit),
            settle(argo, quiet, at_least, limit)
        );
        compare(&format!("{action:?}"), s, a, &mut outcome);
    }
    let ((mut s, _), (a, argo_recorded)) = tokio::join!(events(sluice), events(argo));
    // Sluice's own warning about a spec Argo runs as it is (docs/differences-from-argo.md).
    let warning = ("Warning".to_string(), SPEC_WARNING.to_string());
    if s.contains(&warning) {
        s.retain(|e| *e != warning);
        outcome.documented.push(SPEC_WARNING);
    }
    let (s_order, s_scalings) = order_and_scalings(&s);
    let (a_order, a_scalings) = order_and_scalings(&a);
    let same = s_order == a_order && s_scalings == a_scalings;
    if !same && argo_recorded >= ARGO_EVENT_BURST && s.starts_with(&a) {
        outcome.documented.push(EVENTS_PAST_ARGOS_BURST);
    } else if !same {
        outcome.differences.push(format!(
            "seed {}, events:\n  Sluice: {s:?}\n  Argo:   {a:?}",
            scenario.seed
        ));
    }
    outcome
}
