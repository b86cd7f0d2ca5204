use std::collections::BTreeMap;
use std::sync::Mutex;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, Service};
use serde_json::Value;
use sluice_api::analysis::{AnalysisRun, AnalysisTemplateSpec};
use sluice_engine::observed::TemplateKey;

use super::*;

/// One Rollout held as the API server would: merge patches carrying a stale resourceVersion
/// are refused, and a third party can write it just before the next patch lands.
struct OneRollout {
    rollout: Mutex<Json>,
    /// Writes by somebody else before each of the next patches, as many as given.
    meddle: Mutex<usize>,
    patches: Mutex<usize>,
    leading: bool,
}

impl OneRollout {
    fn new(rollout: Json) -> Self {
        OneRollout {
            rollout: Mutex::new(rollout),
            meddle: Mutex::new(0),
            patches: Mutex::new(0),
            leading: true,
        }
    }

    fn annotation(&self, key: &str) -> Option<String> {
        self.rollout.lock().unwrap()["metadata"]["annotations"][key]
            .as_str()
            .map(str::to_owned)
    }

    fn bump(ro: &mut Json) {
        let rv: u64 = ro["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        ro["metadata"]["resourceVersion"] = json!((rv + 1).to_string());
    }
}

fn merge(into: &mut Json, patch: &Json) {
    match (into, patch) {
        (Json::Object(a), Json::Object(b)) => {
            for (k, v) in b {
                if v.is_null() {
                    a.remove(k);
                } else {
                    merge(a.entry(k.clone()).or_insert(Json::Null), v);
                }
            }
        }
        (slot, v) => *slot = v.clone(),
    }
}

/// What was sent.
#[derive(Default)]
struct Recording(Mutex<Vec<String>>, bool);

impl Deliver for Recording {
    async fn deliver(
        &self,
        _: &str,
        _: &str,
        _: &Config,
        n: &Notification,
        _: &SlackThreads,
    ) -> Result<Sent, SendError> {
        if self.1 {
            return Err(SendError::transient("503"));
        }
        self.0.lock().unwrap().push(n.key.clone());
        Ok(Sent::default())
    }
}

fn unused<T>() -> Result<T, WriteError> {
    Err(WriteError::Api(
        "not used by the notifications driver".into(),
    ))
}

impl ClusterAccess for OneRollout {
    fn may_write(&self) -> Result<(), WriteError> {
        if self.leading {
            Ok(())
        } else {
            Err(WriteError::NotLeader)
        }
    }
    async fn get_rollout(&self, _: &str, _: &str) -> Result<Option<Rollout>, WriteError> {
        Ok(serde_json::from_value(self.rollout.lock().unwrap().clone()).ok())
    }
    async fn patch_rollout(
        &self,
        _: &str,
        _: &str,
        patch: &Value,
    ) -> Result<Option<String>, WriteError> {
        *self.patches.lock().unwrap() += 1;
        let mut ro = self.rollout.lock().unwrap();
        let mut meddle = self.meddle.lock().unwrap();
        if *meddle > 0 {
            *meddle -= 1;
            Self::bump(&mut ro);
        }
        if patch["metadata"]["resourceVersion"] != ro["metadata"]["resourceVersion"] {
            return Err(WriteError::Conflict);
        }
        let mut patch = patch.clone();
        patch["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("resourceVersion");
        merge(&mut ro, &patch);
        Self::bump(&mut ro);
        Ok(ro["metadata"]["resourceVersion"]
            .as_str()
            .map(str::to_owned))
    }
    async fn create_replica_set(&self, _: &str, _: &ReplicaSet) -> Result<(), WriteError> {
        unused()
    }
    async fn patch_replica_set(&self, _: &str, _: &str, _: &Value) -> Result<(), WriteError> {
        unused()
    }
    async fn delete_replica_set(
        &self,
        _: &str,
        _: &str,
        _: Option<&str>,
    ) -> Result<(), WriteError> {
        unused()
    }
    async fn evict_pod(&self, _: &str, _: &str, _: Option<&str>) -> Result<(), WriteError> {
        unused()
    }
    async fn patch_pod(&self, _: &str, _: &str, _: &Value) -> Result<(), WriteError> {
        unused()
    }
    async fn get_service(&self, _: &str, _: &str) -> Result<Option<Service>, WriteError> {
        unused()
    }
    async fn list_services(&self, _: &str) -> Result<Vec<Service>, WriteError> {
        Ok(Vec::new())
    }
    async fn patch_service(&self, _: &str, _: &str, _: &Value) -> Result<(), WriteError> {
        unused()
    }
    async fn list_pods(&self, _: &str, _: &str) -> Result<Vec<Pod>, WriteError> {
        unused()
    }
    async fn patch_rollout_status(
        &self,
        _: &str,
        _: &str,
        _: &Value,
    ) -> Result<Option<String>, WriteError> {
        unused()
    }
    async fn list_analysis_runs(&self, _: &str) -> Result<Vec<AnalysisRun>, WriteError> {
        unused()
    }
    async fn get_analysis_template(
        &self,
        _: &str,
        _: &TemplateKey,
    ) -> Result<Option<AnalysisTemplateSpec>, WriteError> {
        unused()
    }
    async fn create_analysis_run(&self, _: &str, _: &AnalysisRun) -> Result<(), WriteError> {
        unused()
    }
    async fn patch_analysis_run(&self, _: &str, _: &str, _: &Value) -> Result<(), WriteError> {
        unused()
    }
    async fn delete_analysis_run(
        &self,
        _: &str,
        _: &str,
        _: Option<&str>,
    ) -> Result<(), WriteError> {
        unused()
    }
}

fn config() -> Config {
    let mut data = sluice_notifications::catalog::data();
    data.insert(
        "service.webhook.hook".into(),
        "url: http://127.0.0.1:1/hook\n".into(),
    );
    Config::parse(&data, &BTreeMap::new())
}

fn rollout() -> Json {
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {
            "name": "web", "namespace": "team", "resourceVersion": "1",
            "annotations": {
                "rollout.argoproj.io/revision": "2",
                "notifications.argoproj.io/subscribe.on-rollout-step-completed.hook": "ops"
            }
        },
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "image": "app:v2"}]}
            },
            "strategy": {"canary": {"steps": [{"setWeight": 20}, {"pause": {}}]}}
        },
        "status": {"currentStepIndex": 1}
    })
}

fn at() -> jiff::Timestamp {
    "2026-11-27T07:30:00Z".parse().unwrap()
}

fn fired(ro: &Json) -> Fired {
    Fired {
        rollout: serde_json::from_value(ro.clone()).unwrap(),
        at: at(),
        type_: "Normal",
        reason: "RolloutStepCompleted".into(),
        message: "Rollout step 1/2 completed (setWeight: 20)".into(),
    }
}

/// The job an event makes due, with its pending entry written.
fn taken(cluster: &OneRollout) -> Job {
    let cfg = config();
    let event = fired(&cluster.rollout.lock().unwrap().clone());
    let taken = futures::executor::block_on(take_event(
        cluster,
        &[&cfg],
        &event,
        &NotifiedState::default(),
        &HashSet::new(),
    ));
    assert_eq!(taken.problems, vec![]);
    assert!(taken.pending_error.is_none());
    assert_eq!(taken.jobs.len(), 1);
    taken.jobs.into_iter().next().unwrap()
}

#[test]
fn a_conflicting_record_is_merged_into_the_fresh_rollout_without_sending_again() {
    let cluster = OneRollout::new(rollout());
    let mut job = taken(&cluster);
    assert!(
        cluster
            .annotation(PENDING)
            .unwrap()
            .contains(&job.notification.key)
    );
    *cluster.meddle.lock().unwrap() = 2;
    let sent = Recording::default();
    let stepped = futures::executor::block_on(step(&cluster, &sent, &config(), &mut job, 7));
    assert!(
        matches!(stepped, Stepped::Recorded { sent_now: true }),
        "{stepped:?}"
    );
    assert_eq!(*sent.0.lock().unwrap(), vec![job.notification.key.clone()]);
    let notified = NotifiedState::parse(cluster.annotation(NOTIFIED).as_deref());
    assert!(notified.contains(&job.notification.key));
    assert_eq!(cluster.annotation(PENDING), None);
    // Once recorded, a second try (another leader's) sends nothing.
    let mut again = job.clone();
    again.sent = None;
    let stepped = futures::executor::block_on(step(&cluster, &sent, &config(), &mut again, 8));
    assert!(matches!(stepped, Stepped::AlreadyRecorded), "{stepped:?}");
    assert_eq!(sent.0.lock().unwrap().len(), 1);
}

#[test]
fn a_record_that_keeps_failing_is_retried_without_a_second_send() {
    let cluster = OneRollout::new(rollout());
    let mut job = taken(&cluster);
    *cluster.meddle.lock().unwrap() = CONFLICT_RETRIES;
    let sent = Recording::default();
    let stepped = futures::executor::block_on(step(&cluster, &sent, &config(), &mut job, 7));
    assert!(
        matches!(
            stepped,
            Stepped::RecordFailed {
                sent_now: true,
                error: WriteError::Conflict
            }
        ),
        "{stepped:?}"
    );
    assert!(!stepped.done());
    let stepped = futures::executor::block_on(step(&cluster, &sent, &config(), &mut job, 8));
    assert!(
        matches!(stepped, Stepped::Recorded { sent_now: false }),
        "{stepped:?}"
    );
    assert_eq!(sent.0.lock().unwrap().len(), 1);
}

#[test]
fn a_follower_sends_nothing_and_a_failed_send_is_retried_then_given_up() {
    let mut cluster = OneRollout::new(rollout());
    let mut job = taken(&cluster);
    cluster.leading = false;
    let sent = Recording::default();
    let stepped = futures::executor::block_on(step(&cluster, &sent, &config(), &mut job, 7));
    assert!(matches!(stepped, Stepped::NotLeading), "{stepped:?}");
    assert!(sent.0.lock().unwrap().is_empty());
    cluster.leading = true;
    let failing = Recording(Mutex::default(), true);
    for attempt in 1..=MAX_ATTEMPTS {
        let stepped = futures::executor::block_on(step(&cluster, &failing, &config(), &mut job, 7));
        let Stepped::SendFailed { given_up, .. } = stepped else {
            panic!("{stepped:?}");
        };
        assert_eq!(given_up, attempt == MAX_ATTEMPTS);
    }
    // Given up: no longer pending, so no leader takes it over.
    assert_eq!(cluster.annotation(PENDING), None);
    assert_eq!(retry_delay(1), Duration::from_secs(1));
    assert_eq!(retry_delay(4), Duration::from_secs(8));
    assert_eq!(retry_delay(12), Duration::from_secs(300));
}

#[test]
fn a_pending_notification_is_taken_over_as_it_was_at_its_event() {
    let cluster = OneRollout::new(rollout());
    let job = taken(&cluster);
    // The Rollout moved on since the event; the notification renders as at the event.
    cluster.rollout.lock().unwrap()["status"]["currentStepIndex"] = json!(2);
    let cached: Rollout = serde_json::from_value(cluster.rollout.lock().unwrap().clone()).unwrap();
    let cfg = config();
    let jobs =
        futures::executor::block_on(take_over(&cluster, &[&cfg], &cached, &HashSet::new(), at()));
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].notification, job.notification);
    // Queued here already: nothing to take over.
    let queued: HashSet<String> = [job.notification.key.clone()].into();
    let jobs = futures::executor::block_on(take_over(&cluster, &[&cfg], &cached, &queued, at()));
    assert!(jobs.is_empty());
}

#[test]
fn a_lane_goes_in_order_and_other_lanes_go_past_a_waiting_one() {
    let cluster = OneRollout::new(rollout());
    let job = taken(&cluster);
    let mut other = job.clone();
    other.notification.trigger = "on-rollout-paused".into();
    let queue = vec![(job.clone(), false), (job.clone(), true), (other, true)];
    assert_eq!(next_job(&queue, &HashSet::new(), |ready| *ready), Some(2));
    let blocked: HashSet<_> = [(
        "team".to_owned(),
        "web".to_owned(),
        "on-rollout-paused".to_owned(),
    )]
    .into();
    assert_eq!(next_job(&queue, &blocked, |ready| *ready), None);
    assert_eq!(next_job(&queue, &HashSet::new(), |_| true), Some(0));
}

#[test]
fn a_pending_entry_renders_with_the_status_of_its_event() {
    let now = json!({"metadata": {"name": "web"}, "status": {"currentStepIndex": 2}});
    let entry = json!({"reason": "RolloutStepCompleted", "status": {"currentStepIndex": 1}});
    assert_eq!(
        as_at_event(&now, &entry),
        json!({"metadata": {"name": "web"}, "status": {"currentStepIndex": 1}})
    );
    let older = json!({"reason": "RolloutStepCompleted", "occurrence": "r2.s1.x"});
    assert_eq!(as_at_event(&now, &older), now);
}
