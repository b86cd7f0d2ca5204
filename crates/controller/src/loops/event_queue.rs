//! Events published off the reconcile path: a reconcile hands its events to a queue and goes
//! on, and a few senders publish them, in order for each object.
//!
//! Published inline, each event was a request the reconcile waited for behind the client's
//! rate limiter: an update posts about six, so under a thousand updates at once the workers
//! spent most of their time waiting for events while the ReplicaSet writes that move the
//! updates queued behind them. Events are what Argo's recorder sends asynchronously too. They
//! still share the controller's `--qps` budget (the same client).

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use sluice_engine::EventType;
use tokio::sync::mpsc;
use tracing::debug;

use super::events::EventPublisher;

/// Senders working at once: events of one object always go to the same one, in order.
const SENDERS: usize = 4;
/// Events waiting per sender before a reconcile waits for room (none is dropped).
const BACKLOG: usize = 10_000;

struct Queued {
    regarding: ObjectReference,
    type_: EventType,
    reason: String,
    message: String,
}

/// The queue; [`EventQueue::publisher`] publishes inline where the caller needs the outcome.
pub struct EventQueue {
    publisher: Arc<EventPublisher>,
    senders: Vec<mpsc::Sender<Queued>>,
}

impl EventQueue {
    /// Starts the senders (on the current tokio runtime); they end once the queue is dropped
    /// and what it holds is sent.
    pub fn start(publisher: EventPublisher) -> EventQueue {
        let publisher = Arc::new(publisher);
        let senders = (0..SENDERS)
            .map(|_| {
                let (tx, mut rx) = mpsc::channel::<Queued>(BACKLOG);
                let publisher = publisher.clone();
                tokio::spawn(async move {
                    while let Some(q) = rx.recv().await {
                        let sent = publisher
                            .publish(&q.regarding, q.type_, &q.reason, &q.message)
                            .await;
                        if let Err(e) = sent {
                            debug!(error = %e, reason = q.reason, "could not publish event");
                        }
                    }
                });
                tx
            })
            .collect();
        EventQueue { publisher, senders }
    }

    pub fn publisher(&self) -> &EventPublisher {
        &self.publisher
    }

    /// Queues an event about `regarding`, after every event queued before about the same
    /// object. Waits only when that sender's backlog is full.
    pub async fn publish(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        message: &str,
    ) {
        let mut h = DefaultHasher::new();
        (regarding.uid.as_deref(), regarding.name.as_deref()).hash(&mut h);
        let sender = &self.senders[(h.finish() % self.senders.len() as u64) as usize];
        let queued = Queued {
            regarding: regarding.clone(),
            type_,
            reason: reason.to_owned(),
            message: message.to_owned(),
        };
        if let Err(mpsc::error::TrySendError::Full(queued)) = sender.try_send(queued) {
            // A backlog this deep: wait for room rather than lose an event.
            let _ = sender.send(queued).await;
        }
    }
}
