//! Waiting for the cluster to reach a state, with messages that say what was seen last.

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use anyhow::{anyhow, bail};
use futures::StreamExt;
use kube::Resource;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::time::Instant;

/// Pause between two probes of [`wait_for`].
pub const POLL_INTERVAL: Duration = Duration::from_millis(200);

/// Calls `probe` until it returns `Ok`, at most for `timeout`.
///
/// The probe returns `Err` while the condition does not hold yet, saying what it saw
/// (`anyhow::bail!("readyReplicas={ready}")`); API errors raised with `?` count the same way. On
/// timeout the error names `what` and carries the last of those messages.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<T>>,
{
    let deadline = Instant::now() + timeout;
    let mut last = anyhow!("nothing observed yet");
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(remaining.max(POLL_INTERVAL), probe()).await {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(observed)) => last = observed,
            Err(_) => {}
        }
        if Instant::now() >= deadline {
            bail!("timed out after {timeout:?} waiting for {what}; last observed: {last:#}");
        }
        tokio::time::sleep(POLL_INTERVAL.min(deadline.saturating_duration_since(Instant::now())))
            .await;
    }
}

/// Watches the object `name` until `done` holds for it, at most for `timeout`, and returns it.
/// On timeout the error carries the object's last `status` (or the whole object when it has
/// none).
pub async fn wait_for_object<K>(
    api: &Api<K>,
    name: &str,
    timeout: Duration,
    what: &str,
    done: impl Fn(&K) -> bool,
) -> anyhow::Result<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Serialize + Send + 'static,
{
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut objects = watcher(api.clone(), config)
        .default_backoff()
        .applied_objects()
        .boxed();
    let mut last: Option<K> = None;
    let mut last_error: Option<String> = None;
    let outcome = tokio::time::timeout(timeout, async {
        while let Some(event) = objects.next().await {
            match event {
                Ok(object) if done(&object) => return Some(object),
                Ok(object) => last = Some(object),
                Err(e) => last_error = Some(e.to_string()),
            }
        }
        None
    })
    .await;
    if let Ok(Some(object)) = outcome {
        return Ok(object);
    }
    let seen = match (&last, &last_error) {
        (Some(object), _) => summary(object),
        (None, Some(error)) => format!("watch error: {error}"),
        (None, None) => "the object does not exist".to_string(),
    };
    Err(anyhow!(
        "timed out after {timeout:?} waiting for {what} ({}/{name}); last observed: {seen}",
        api.resource_url()
    ))
}

fn summary<K: Serialize>(object: &K) -> String {
    let value = serde_json::to_value(object).unwrap_or_default();
    let shown = value.get("status").unwrap_or(&value);
    serde_json::to_string(shown).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn wait_for_returns_the_first_success() {
        let mut calls = 0;
        let value = wait_for("three calls", Duration::from_secs(5), || {
            calls += 1;
            let n = calls;
            async move { if n >= 3 { Ok(n) } else { bail!("calls={n}") } }
        })
        .await
        .unwrap();
        assert_eq!(value, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn timeout_names_the_wait_and_the_last_observation() {
        let mut calls = 0;
        let error = wait_for("the impossible", Duration::from_secs(1), || {
            calls += 1;
            let n = calls;
            async move { Err::<(), _>(anyhow!("calls={n}")) }
        })
        .await
        .unwrap_err()
        .to_string();
        assert!(error.contains("waiting for the impossible"), "{error}");
        assert!(
            error.contains(&format!("last observed: calls={calls}")),
            "{error}"
        );
    }
}
