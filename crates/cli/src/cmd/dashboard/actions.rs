//! The write side of the API, at the paths of Argo's dashboard: promote, abort, retry,
//! restart, undo and set image, and Sluice's own pause and resume (Argo's API has no path
//! for them), each done by the CLI command of the same name with the
//! user's own client (so the cluster's RBAC decides), and answered with the Rollout as it
//! is afterwards, as Argo answers.

use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use jiff::Timestamp;
use serde_json::Value;

use super::super::{abort, get_rollout, merge_patch, merge_patch_status, pause as paused, promote};
use super::super::{restart, retry};
use super::super::{rollouts, set_image, undo};
use super::Dashboard;
use super::error::ApiError;
use super::safety::Mode;
use crate::cli::ImageUpdate;
use crate::kube_target::Target;

type Answer = Result<Json<Value>, ApiError>;

impl Dashboard {
    /// The client and namespace of an action on `namespace`, once the mode and scope allow it.
    fn writer(&self, namespace: &str) -> Result<Target, ApiError> {
        if self.mode == Mode::ReadOnly {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "this dashboard is read-only (started with --read-only): no changes are made",
            ));
        }
        self.check_namespace(namespace)?;
        Ok(Target {
            client: self.client.clone(),
            namespace: namespace.to_owned(),
        })
    }
}

/// The Rollout after an action.
async fn rollout_now(target: &Target, name: &str) -> Answer {
    let rollout = get_rollout(&rollouts(target), name).await?;
    serde_json::to_value(rollout)
        .map(Json)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

/// Argo's request body: `{"full": true}` promotes fully. An empty or unreadable body is a
/// plain promotion, as grpc-gateway reads a missing field.
fn full_promotion(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("full")?.as_bool())
        .unwrap_or(false)
}

pub async fn promote(
    State(app): State<Dashboard>,
    Path((namespace, name)): Path<(String, String)>,
    body: Bytes,
) -> Answer {
    let target = app.writer(&namespace)?;
    let promotion = if full_promotion(&body) {
        promote::Promotion::Full
    } else {
        promote::Promotion::Next
    };
    promote::apply(&target, &name, promotion).await?;
    rollout_now(&target, &name).await
}

pub async fn abort(
    State(app): State<Dashboard>,
    Path((namespace, name)): Path<(String, String)>,
) -> Answer {
    let target = app.writer(&namespace)?;
    merge_patch_status(&rollouts(&target), &name, &abort::abort_patch()).await?;
    rollout_now(&target, &name).await
}

pub async fn retry(
    State(app): State<Dashboard>,
    Path((namespace, name)): Path<(String, String)>,
) -> Answer {
    let target = app.writer(&namespace)?;
    merge_patch_status(&rollouts(&target), &name, &retry::retry_patch()).await?;
    rollout_now(&target, &name).await
}

/// `kubectl sluice pause`: the user's own pause (`spec.paused`).
pub async fn pause(
    State(app): State<Dashboard>,
    Path((namespace, name)): Path<(String, String)>,
) -> Answer {
    let target = app.writer(&namespace)?;
    merge_patch(&rollouts(&target), &name, &paused::paused_patch(true)).await?;
    rollout_now(&target, &name).await
}

/// `kubectl sluice resume`: the user's pause lifted.
pub async fn resume(
    State(app): State<Dashboard>,
    Path((namespace, name)): Path<(String, String)>,
) -> Answer {
    let target = app.writer(&namespace)?;
    merge_patch(&rollouts(&target), &name, &paused::paused_patch(false)).await?;
    rollout_now(&target, &name).await
}

pub async fn restart(
    State(app): State<Dashboard>,
    Path((namespace, name)): Path<(String, String)>,
) -> Answer {
    let target = app.writer(&namespace)?;
    let patch = restart::restart_patch(Timestamp::now(), Duration::ZERO)?;
    merge_patch(&rollouts(&target), &name, &patch).await?;
    rollout_now(&target, &name).await
}

pub async fn undo(
    State(app): State<Dashboard>,
    Path((namespace, name, revision)): Path<(String, String, String)>,
) -> Answer {
    undo_to(&app, &namespace, &name, &revision, false).await
}

/// `undo --fast`: the update back skips its steps, pauses and analyses.
pub async fn undo_fast(
    State(app): State<Dashboard>,
    Path((namespace, name, revision)): Path<(String, String, String)>,
) -> Answer {
    undo_to(&app, &namespace, &name, &revision, true).await
}

async fn undo_to(
    app: &Dashboard,
    namespace: &str,
    name: &str,
    revision: &str,
    fast: bool,
) -> Answer {
    let target = app.writer(namespace)?;
    let revision: i64 = revision.parse().map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("revision {revision:?} is not a number"),
        )
    })?;
    undo::apply(&target, name, Some(revision), fast).await?;
    rollout_now(&target, name).await
}

/// `set/{container}/{image}/{tag}`: the image may hold slashes (`registry/team/app`), so
/// everything after the container is taken and the last segment is the tag.
pub async fn set_image(
    State(app): State<Dashboard>,
    Path((namespace, name, container, image_and_tag)): Path<(String, String, String, String)>,
) -> Answer {
    let target = app.writer(&namespace)?;
    let image = image_reference(&image_and_tag).ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("expected set/CONTAINER/IMAGE/TAG, got image and tag {image_and_tag:?}"),
        )
    })?;
    let update = ImageUpdate { container, image };
    set_image::apply(&target, &name, &[update]).await?;
    rollout_now(&target, &name).await
}

/// `IMAGE:TAG` from `IMAGE/TAG` (as Argo joins them); `None` without both parts.
fn image_reference(image_and_tag: &str) -> Option<String> {
    let (image, tag) = image_and_tag.rsplit_once('/')?;
    (!image.is_empty() && !tag.is_empty()).then(|| format!("{image}:{tag}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_and_tag_from_the_path() {
        assert_eq!(image_reference("nginx/1.27").as_deref(), Some("nginx:1.27"));
        assert_eq!(
            image_reference("registry.local:5000/team/app/v2").as_deref(),
            Some("registry.local:5000/team/app:v2")
        );
        assert_eq!(image_reference("nginx"), None);
        assert_eq!(image_reference("nginx/"), None);
        assert_eq!(image_reference("/v1"), None);
    }

    #[test]
    fn full_promotion_from_argos_body() {
        assert!(full_promotion(br#"{"full": true}"#));
        assert!(!full_promotion(br#"{"full": false}"#));
        assert!(!full_promotion(b""));
        assert!(!full_promotion(b"not json"));
    }
}
