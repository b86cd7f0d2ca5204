//! A standalone Experiment with a duration ends when its duration does, with nothing but the
//! controller's own timed requeue to bring that about: two templates, `duration: 5s`, nobody
//! touching the Experiment once it runs, no analysis measuring beside it. Argo marks it
//! Successful as soon as `availableAt + duration` has passed; so must Sluice, not at its next
//! resync (made long here, so that only the requeue can do it). Then each ReplicaSet is scaled
//! down when the scale-down deadline it was given passes, again on time.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::ReplicaSet;
use kube::Api;
use sluice_api::experiment::{Experiment, ExperimentConditionType};
use sluice_e2e::*;
use sluice_engine::labels::SCALE_DOWN_DEADLINE;
use sluice_testenv::harness::{TestEnv, TestNamespace, wait_for};

const NAME: &str = "ends-on-time";
const DURATION: SignedDuration = SignedDuration::from_secs(5);
const SCALE_DOWN_DELAY: SignedDuration = SignedDuration::from_secs(3);
/// How late after a deadline the controller may act: a requeue lands within a second of it
/// (times are recorded to the second), then a reconcile of a few requests and the poll below.
const BOUND: SignedDuration = SignedDuration::from_secs(3);
/// How often the test looks.
const POLL: Duration = Duration::from_millis(100);

fn manifest() -> String {
    let template = |name: &str, image: &str| {
        format!(
            r#"
  - name: {name}
    replicas: 1
    selector:
      matchLabels: {{app: {NAME}, template: {name}}}
    template:
      metadata:
        labels: {{app: {NAME}, template: {name}}}
      spec:
        containers:
        - name: web
          image: {image}"#
        )
    };
    format!(
        r#"apiVersion: argoproj.io/v1alpha1
kind: Experiment
metadata:
  name: {NAME}
spec:
  duration: {}s
  scaleDownDelaySeconds: {}
  templates:{}{}
"#,
        DURATION.as_secs(),
        SCALE_DOWN_DELAY.as_secs(),
        template("baseline", "nginx:1.0"),
        template("canary", "nginx:2.0"),
    )
}

fn phase(e: &Experiment) -> Option<String> {
    e.status
        .as_ref()
        .and_then(|s| s.phase.as_ref())
        .map(|p| p.to_string())
}

/// Polls the Experiment until `done` holds of it; returns it with the time it was first seen so.
async fn first_seen(
    api: &Api<Experiment>,
    what: &str,
    limit: Duration,
    done: impl Fn(&Experiment) -> bool,
) -> (Experiment, Timestamp) {
    let start = std::time::Instant::now();
    loop {
        let e = api.get(NAME).await.unwrap();
        if done(&e) {
            return (e, Timestamp::now());
        }
        assert!(
            start.elapsed() < limit,
            "not {what} after {limit:?}: {:?}",
            e.status
        );
        tokio::time::sleep(POLL).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn experiment_duration_ends_on_time() {
    let env = TestEnv::with_crds().await.expect("local control plane");
    let ns = TestNamespace::create(&env, "exp-on-time").await.unwrap();
    let mut args = controller_args(ns.name());
    // Far beyond the bounds below: a missed deadline is not rescued by a resync.
    args.rollout_resync = 600;
    let _controller = start_controller_with_args(env.client(), args);
    ns.apply_yaml(&manifest()).await.unwrap();
    let api: Api<Experiment> = ns.api();

    let (running, _) = first_seen(&api, "Running", TIMEOUT, |e| {
        phase(e).as_deref() == Some("Running")
    })
    .await;
    let available_at = running
        .status
        .as_ref()
        .and_then(|s| s.available_at.as_ref())
        .expect("availableAt once both templates run")
        .0;
    let end = available_at + DURATION;

    // Nothing touches the Experiment from here: only a requeue at `end` can end it in time.
    let limit = Duration::try_from(DURATION + BOUND * 2).unwrap();
    let (done, seen) = first_seen(&api, "Successful", limit, |e| {
        phase(e).as_deref() != Some("Running")
    })
    .await;
    assert_eq!(
        phase(&done).as_deref(),
        Some("Successful"),
        "{:?}",
        done.status
    );
    assert!(seen >= end, "Successful at {seen}, before {end}");
    assert!(
        seen <= end + BOUND,
        "Successful only at {seen}, {:?} after availableAt {available_at} + {DURATION:?}",
        seen.duration_since(end)
    );
    // The controller's own record of when: the Progressing condition turned to completed.
    let status = done.status.clone().unwrap_or_default();
    let completed = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == Some(ExperimentConditionType::Progressing))
        .and_then(|c| c.last_transition_time.as_ref())
        .expect("the Progressing condition")
        .0;
    assert!(
        completed >= end && completed <= end + BOUND,
        "completed at {completed}, the duration ended at {end}"
    );
    for ts in status.template_statuses.iter().flatten() {
        assert_eq!(
            ts.status.as_ref().map(|s| s.to_string()).as_deref(),
            Some("Successful"),
            "{ts:?}"
        );
    }

    // Each ReplicaSet is scaled down when its scale-down deadline passes, again by requeue.
    let rss: Api<ReplicaSet> = ns.api();
    for template in ["baseline", "canary"] {
        let name = format!("{NAME}-{template}");
        let deadline = wait_for(
            &format!("{name}'s scale-down deadline"),
            TIMEOUT,
            || async {
                let rs = rss.get(&name).await?;
                let deadline = rs
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(SCALE_DOWN_DEADLINE))
                    .ok_or_else(|| anyhow::anyhow!("no deadline yet"))?;
                Ok(deadline.parse::<Timestamp>()?)
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
        let limit = Duration::try_from(SCALE_DOWN_DELAY + BOUND * 2).unwrap();
        let start = std::time::Instant::now();
        let scaled = loop {
            let rs = rss.get(&name).await.unwrap();
            if rs.spec.as_ref().and_then(|s| s.replicas) == Some(0) {
                break Timestamp::now();
            }
            assert!(start.elapsed() < limit, "{name} still up: {:?}", rs.spec);
            tokio::time::sleep(POLL).await;
        };
        assert!(
            scaled <= deadline + BOUND,
            "{name} scaled down at {scaled}, its deadline was {deadline}"
        );
    }
}
