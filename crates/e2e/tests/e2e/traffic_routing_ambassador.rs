//! Ambassador traffic routing on the real control plane, with Argo's Ambassador example
//! (`examples/ambassador`): the `echo-canary` Mapping is created at the first step with a
//! weight, as a copy of the base Mapping pointing at the canary Service, carries each step's
//! weight, is set to 0 once the update completes or is aborted and deleted about 5 seconds
//! later; the base Mapping is never written; and a base Mapping that defines a weight of its
//! own makes the Rollout an InvalidSpec with Argo's message.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::Api;
use kube::api::DynamicObject;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::routing::*;
use sluice_e2e::*;
use sluice_testenv::harness::{TestNamespace, wait_for};
use tokio::task::JoinHandle;

const ROLLOUT: &str = "echo-rollout";
const BASE: &str = "echo";
const CANARY_MAPPING: &str = "echo-canary";

fn mappings(ns: &TestNamespace) -> Api<DynamicObject> {
    router_api(ns, "getambassador.io", "v2", "Mapping", "mappings")
}

/// The example's Services and base Mapping. Its `resolver.yaml` (a KubernetesEndpointResolver,
/// which only Ambassador reads) is left out: no CRD serves that kind here.
async fn apply_services_and_mapping(ns: &TestNamespace, mapping: &str) -> DynamicObject {
    ns.apply_yaml(&corpus_file("examples/ambassador/echo-service.yaml"))
        .await
        .unwrap();
    ns.apply_yaml(mapping).await.unwrap().remove(0)
}

/// The example's Rollout; its steps are setWeight 30, 60 and 100 with timed pauses. The first
/// pause waits for a promotion here and the others are shorter, so that the test can look at
/// the first step and does not wait long for the others.
fn rollout_manifest() -> String {
    corpus_file("examples/ambassador/rollout.yaml")
        .replacen("- pause: {duration: 30s}", "- pause: {}", 1)
        .replace("- pause: {duration: 30s}", "- pause: {duration: 3s}")
        .replace("- pause: {duration: 10}", "- pause: {duration: 3}")
}

/// When an event was seen, and the object's weight then (`None`: deleted).
type Seen = (Instant, Option<i64>);

/// What became of one object, event by event: `Some(weight)` when written, `None` when
/// deleted, each with the time it was seen.
struct History {
    seen: Arc<Mutex<Vec<Seen>>>,
    task: JoinHandle<()>,
}

impl History {
    fn start(api: Api<DynamicObject>, name: &str) -> Self {
        let seen = Arc::new(Mutex::new(Vec::<Seen>::new()));
        let sink = seen.clone();
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let task = tokio::spawn(async move {
            let mut stream = watcher(api, config).default_backoff().boxed();
            while let Some(event) = stream.next().await {
                let value = match event {
                    Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                        Some(json_of(&o).pointer("/spec/weight").and_then(Value::as_i64))
                    }
                    Ok(watcher::Event::Delete(_)) => Some(None),
                    _ => None,
                };
                if let Some(value) = value {
                    let mut seen = sink.lock().expect("history lock");
                    if seen.last().map(|(_, v)| *v) != Some(value) {
                        seen.push((Instant::now(), value));
                    }
                }
            }
        });
        Self { seen, task }
    }

    fn values(&self) -> Vec<Option<i64>> {
        let seen = self.seen.lock().expect("history lock");
        seen.iter().map(|(_, v)| *v).collect()
    }

    /// How long the object stayed at weight 0 before its deletion was seen, the last time.
    fn zero_to_deleted(&self) -> Option<Duration> {
        let seen = self.seen.lock().expect("history lock");
        let n = seen.len();
        match seen.get(n.checked_sub(2)?..)? {
            [(zero_at, Some(0)), (deleted_at, None)] => Some(deleted_at.duration_since(*zero_at)),
            _ => None,
        }
    }
}

impl Drop for History {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn wait_canary_weight(ns: &TestNamespace, weight: i64) -> Value {
    wait_for(
        &format!("{CANARY_MAPPING} at weight {weight}"),
        TIMEOUT,
        || async {
            let m = json_of(&mappings(ns).get(CANARY_MAPPING).await?);
            let w = m.pointer("/spec/weight").and_then(Value::as_i64);
            anyhow::ensure!(w == Some(weight), "{w:?}");
            Ok(m)
        },
    )
    .await
    .unwrap()
}

async fn wait_canary_deleted(ns: &TestNamespace) {
    wait_for(&format!("{CANARY_MAPPING} deleted"), TIMEOUT, || async {
        let m = mappings(ns).get_opt(CANARY_MAPPING).await?;
        anyhow::ensure!(m.is_none(), "still there");
        Ok(())
    })
    .await
    .unwrap();
}

/// Argo sets the weight to 0, waits 5 s, then deletes the canary Mapping; Sluice deletes it
/// on a reconcile at least 5 s after the weight-0 write. The lower bound leaves 200 ms for the
/// two watch events' delivery, the upper one time for the requeue.
fn assert_deleted_about_5s_after_zero(history: &History) {
    let waited = history
        .zero_to_deleted()
        .expect("the canary Mapping at 0, then deleted");
    assert!(
        waited >= Duration::from_millis(4_800) && waited <= Duration::from_secs(15),
        "deleted {waited:?} after its weight went to 0"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ambassador_canary_mapping_carries_the_step_weights_then_goes_to_zero_and_is_deleted() {
    let (_env, ns, _controller) = setup_routed("ambassador").await;
    let base =
        apply_services_and_mapping(&ns, &corpus_file("examples/ambassador/echo-mapping.yaml"))
            .await;
    let history = History::start(mappings(&ns), CANARY_MAPPING);
    ns.apply_yaml(&rollout_manifest()).await.unwrap();
    let api = rollouts(&ns);
    wait_phase(&api, ROLLOUT, RolloutPhase::Healthy, TIMEOUT).await;
    // Weight 0 with no canary Mapping: nothing is created.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(mappings(&ns).get_opt(CANARY_MAPPING).await.unwrap(), None);

    // setWeight 30: the canary Mapping is the base's copy, pointing at the canary Service.
    set_image(&api, ROLLOUT, "hashicorp/http-echo:0.2.3").await;
    wait_phase(&api, ROLLOUT, RolloutPhase::Paused, TIMEOUT).await;
    let canary = wait_canary_weight(&ns, 30).await;
    assert_eq!(
        canary["spec"],
        json!({
            "resolver": "endpoint",
            "prefix": "/echo",
            "rewrite": "/echo",
            "service": "echo-canary:80",
            "weight": 30
        })
    );
    assert_eq!(canary["metadata"]["ownerReferences"], Value::Null);
    assert_eq!(canary["metadata"]["labels"], Value::Null);

    // 60, then 100, then promotion: 0, and the Mapping deleted about 5 s later.
    promote(&api, ROLLOUT).await;
    wait_for("the update to complete", TIMEOUT, || async {
        let s = api.get(ROLLOUT).await?.status.unwrap_or_default();
        anyhow::ensure!(
            s.phase == Some(RolloutPhase::Healthy) && s.stable_rs == s.current_pod_hash,
            "{:?}",
            s.phase
        );
        Ok(())
    })
    .await
    .unwrap();
    wait_canary_deleted(&ns).await;
    assert_eq!(
        history.values(),
        vec![Some(30), Some(60), Some(100), Some(0), None],
        "canary Mapping weights, then its deletion"
    );
    assert_deleted_about_5s_after_zero(&history);
    let messages: Vec<String> = rollout_events(&ns, ROLLOUT)
        .await
        .into_iter()
        .filter(|(reason, _)| reason == "CanaryMappingWeightUpdate")
        .map(|(_, message)| message)
        .collect();
    for weight in [30, 60, 100, 0] {
        let want = format!("Set canary mapping weight to {weight}");
        assert!(messages.contains(&want), "{want:?} in {messages:?}");
    }

    // An update aborted at 30%: 0 at once, then deleted about 5 s later.
    set_image(&api, ROLLOUT, "hashicorp/http-echo:1.0").await;
    wait_phase(&api, ROLLOUT, RolloutPhase::Paused, TIMEOUT).await;
    wait_canary_weight(&ns, 30).await;
    abort(&api, ROLLOUT).await;
    wait_phase(&api, ROLLOUT, RolloutPhase::Degraded, TIMEOUT).await;
    wait_canary_deleted(&ns).await;
    assert_eq!(
        history.values(),
        vec![
            Some(30),
            Some(60),
            Some(100),
            Some(0),
            None,
            Some(30),
            Some(0),
            None
        ],
        "canary Mapping weights over the update and the aborted one"
    );
    assert_deleted_about_5s_after_zero(&history);

    // The base Mapping was never written.
    let after = mappings(&ns).get(BASE).await.unwrap();
    assert_eq!(
        after.metadata.resource_version, base.metadata.resource_version,
        "the base Mapping is never written"
    );
    assert_eq!(json_of(&after)["spec"], json_of(&base)["spec"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ambassador_base_mapping_with_a_weight_is_an_invalid_spec() {
    let (_env, ns, _controller) = setup_routed("ambassador-invalid").await;
    let example = corpus_file("examples/ambassador/echo-mapping.yaml");
    let weighted = example.replace(
        "  service: echo-stable:80",
        "  service: echo-stable:80\n  weight: 10",
    );
    assert_ne!(weighted, example);
    apply_services_and_mapping(&ns, &weighted).await;
    ns.apply_yaml(&rollout_manifest()).await.unwrap();
    let api = rollouts(&ns);
    let ro = wait_phase(&api, ROLLOUT, RolloutPhase::Degraded, TIMEOUT).await;
    let status = ro.status.unwrap_or_default();
    assert_eq!(
        status.message.as_deref(),
        Some(
            "InvalidSpec: The Rollout \"echo-rollout\" is invalid: spec.weight: Invalid value: \"echo\": Ambassador mapping \"echo\" can not define weight"
        )
    );
    let conditions = status.conditions.unwrap_or_default();
    let invalid = conditions
        .iter()
        .find(|c| c.type_.as_ref().map(|t| t.as_str()) == Some("InvalidSpec"))
        .expect("an InvalidSpec condition");
    assert_eq!(invalid.status.as_ref().map(|s| s.as_str()), Some("True"));
    assert_eq!(invalid.reason.as_deref(), Some("InvalidSpec"));
    // Nothing deployed, no canary Mapping.
    assert!(replicas_by_image(&ns, ROLLOUT).await.is_empty());
    assert_eq!(mappings(&ns).get_opt(CANARY_MAPPING).await.unwrap(), None);

    // The example's Mapping, without the weight, fixes the spec.
    ns.apply_yaml(&example).await.unwrap();
    wait_phase(&api, ROLLOUT, RolloutPhase::Healthy, TIMEOUT).await;
}
