//! When a reconcile looks at its object again after a write failed, by how it failed: a
//! stale view shortly, a lost leadership never by itself, anything else after a pause. It sits
//! with the writes so that [`super::WriteError`] can say how it is expected to go on.

use std::time::Duration;

use super::WriteError;

/// How soon an object whose writes met a stale view (409, or an object gone) is looked at again.
pub const STALE_RETRY: Duration = Duration::from_millis(500);
/// How soon an object whose reconcile failed is looked at again.
pub const ERROR_RETRY: Duration = Duration::from_secs(5);

/// When to reconcile an object again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requeue {
    After(Duration),
    /// Only when something changes: a lost leadership leaves the object to the new leader,
    /// and the next acquisition reconciles everything anyway.
    AwaitChange,
}

/// A stale view is observed again shortly; a lost leadership waits for a change; any other
/// failure is retried after [`ERROR_RETRY`].
pub fn requeue_after_error(error: &WriteError) -> Requeue {
    match error {
        WriteError::Conflict | WriteError::NotFound => Requeue::After(STALE_RETRY),
        WriteError::NotLeader => Requeue::AwaitChange,
        WriteError::Api(_) => Requeue::After(ERROR_RETRY),
    }
}

impl From<Requeue> for kube::runtime::controller::Action {
    fn from(requeue: Requeue) -> Self {
        match requeue {
            Requeue::After(after) => Self::requeue(after),
            Requeue::AwaitChange => Self::await_change(),
        }
    }
}
