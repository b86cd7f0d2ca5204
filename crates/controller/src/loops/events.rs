//! Publishing Kubernetes events about Rollouts (`events.k8s.io/v1`, which `kubectl describe`
//! and `kubectl get events` show).
//!
//! Repeats of the *same* event (same object, type, reason and message) within a few minutes
//! become one event with a growing series count, as client-go's recorder does for Argo. Events
//! that differ only in their message stay separate: "Rollout step 1/3 completed" and "Rollout
//! step 2/3 completed" are two events. kube's own `Recorder` keys its series on the reason
//! alone, so a later message would be folded into the first one and never shown, which
//! notifications and `kubectl describe` readers depend on.

use std::collections::HashMap;
use std::sync::Mutex;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::Resource;
use kube::api::{Patch, PatchParams, PostParams};
use sluice_engine::EventType;

/// The controller name events are reported by, as Argo reports them.
pub const REPORTING_CONTROLLER: &str = "rollouts-controller";
/// How long a published event may still grow a series.
const SERIES_WINDOW: SignedDuration = SignedDuration::from_mins(6);

/// What makes two events the same event: the object, type, reason and message, kept as a
/// 64-bit digest rather than the strings (ten thousand Rollouts updating publish sixty
/// thousand events within one series window; two different events sharing a digest is a
/// one-in-10^10 chance at that count, and would only fold one into the other's series).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key(u64);

impl Key {
    fn of(uid: &str, type_: &str, reason: &str, message: &str) -> Key {
        use std::hash::{Hash, Hasher};
        let mut h = std::hash::DefaultHasher::new();
        (uid, type_, reason, message).hash(&mut h);
        Key(h.finish())
    }
}

/// What a repeat needs of an event already published: only this is kept, not the event
/// (which the API server returns with managed fields and all), since thousands of Rollouts
/// updating at once publish thousands of events within one series window.
#[derive(Debug, Clone)]
struct Published {
    name: String,
    /// The series count so far (1 for an event not yet repeated).
    count: i32,
    last_seen: Timestamp,
}

/// Published events, and when to next drop those too old to grow a series.
#[derive(Debug, Default)]
struct Recent {
    events: HashMap<Key, Published>,
    next_prune: Option<Timestamp>,
}

/// How often events past their series window are dropped: a sweep per publish would cost
/// time proportional to everything published in the window, for every event.
const PRUNE_EVERY: SignedDuration = SignedDuration::from_secs(30);

/// Publishes events, folding repeats into series.
pub struct EventPublisher {
    client: Client,
    instance: String,
    published: Mutex<Recent>,
}

impl EventPublisher {
    /// `instance` names this replica (the pod name in a cluster).
    pub fn new(client: Client, instance: Option<String>) -> Self {
        Self {
            client,
            instance: instance.unwrap_or_else(|| REPORTING_CONTROLLER.to_owned()),
            published: Mutex::new(Recent::default()),
        }
    }

    /// Publishes one event about `regarding`.
    pub async fn publish(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        message: &str,
    ) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let type_ = match type_ {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        };
        let uid = regarding.uid.as_deref().unwrap_or_default();
        let key = Key::of(uid, type_, reason, message);
        let repeat = {
            let mut recent = self.published.lock().unwrap_or_else(|p| p.into_inner());
            if recent.next_prune.is_none_or(|at| at <= now) {
                recent
                    .events
                    .retain(|_, e| e.last_seen + SERIES_WINDOW > now);
                recent.next_prune = Some(now + PRUNE_EVERY);
            }
            recent
                .events
                .get(&key)
                .filter(|e| e.last_seen + SERIES_WINDOW > now)
                .cloned()
        };
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let url = K8sEvent::url_path(&(), Some(&namespace));
        let published = match repeat {
            Some(earlier) => {
                let count = earlier.count + 1;
                let series = EventSeries {
                    count,
                    last_observed_time: MicroTime(now),
                };
                let patch = serde_json::json!({ "series": series });
                let request = kube::core::Request::new(url.clone())
                    .patch(
                        &earlier.name,
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .map_err(kube::Error::BuildRequest)?;
                self.send(request).await?;
                Published {
                    name: earlier.name,
                    count,
                    last_seen: now,
                }
            }
            None => {
                let event = self.new_event(regarding, type_, reason, message, now);
                let body = serde_json::to_vec(&event).map_err(kube::Error::SerdeError)?;
                let request = kube::core::Request::new(url)
                    .create(&PostParams::default(), body)
                    .map_err(kube::Error::BuildRequest)?;
                self.send(request).await?;
                Published {
                    name: event.metadata.name.unwrap_or_default(),
                    count: 1,
                    last_seen: now,
                }
            }
        };
        self.published
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .events
            .insert(key, published);
        Ok(())
    }

    /// Sends an event write, reading nothing of the response but its status: the event's
    /// name is the one it was created with.
    async fn send(&self, request: http::Request<Vec<u8>>) -> Result<(), kube::Error> {
        self.client
            .request::<serde::de::IgnoredAny>(request)
            .await
            .map(drop)
    }

    fn new_event(
        &self,
        regarding: &ObjectReference,
        type_: &str,
        reason: &str,
        message: &str,
        now: Timestamp,
    ) -> K8sEvent {
        let object = regarding.name.as_deref().unwrap_or(REPORTING_CONTROLLER);
        K8sEvent {
            metadata: ObjectMeta {
                // Unique per event, as client-go names them: object name and a time suffix.
                name: Some(format!("{object}.{:x}", now.as_nanosecond())),
                namespace: regarding.namespace.clone(),
                ..ObjectMeta::default()
            },
            action: Some(reason.to_owned()),
            reason: Some(reason.to_owned()),
            note: Some(message.to_owned()),
            type_: Some(type_.to_owned()),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            reporting_controller: Some(REPORTING_CONTROLLER.to_owned()),
            reporting_instance: Some(self.instance.clone()),
            ..K8sEvent::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Key;

    #[test]
    fn an_event_is_the_same_event_only_with_the_same_object_type_reason_and_message() {
        let base = Key::of(
            "u1",
            "Normal",
            "RolloutStepCompleted",
            "Rollout step 1/3 completed",
        );
        assert_eq!(
            base,
            Key::of(
                "u1",
                "Normal",
                "RolloutStepCompleted",
                "Rollout step 1/3 completed"
            )
        );
        for other in [
            Key::of(
                "u2",
                "Normal",
                "RolloutStepCompleted",
                "Rollout step 1/3 completed",
            ),
            Key::of(
                "u1",
                "Warning",
                "RolloutStepCompleted",
                "Rollout step 1/3 completed",
            ),
            Key::of(
                "u1",
                "Normal",
                "RolloutPaused",
                "Rollout step 1/3 completed",
            ),
            Key::of(
                "u1",
                "Normal",
                "RolloutStepCompleted",
                "Rollout step 2/3 completed",
            ),
        ] {
            assert_ne!(base, other);
        }
    }
}
