//! The write side of the API, at the paths of Argo's dashboard: promote, abort, retry,
//! restart, undo and set image, and Sluice's own pause and resume (Argo's API has no path
//! for them), each done by the CLI command of the same name with the
//! user's own client (so the cluster's RBAC decides), and answered with the Rollout as it
//! is afterwards, as Argo answers.

use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use jiff::Timestamp;
use serde_json::Value;

use super::super::{abort, get_rollout, merge_patch, merge_patch_status, pause as paused, promote};
use super::super::{restart, retry};
use super::super::{rollouts, set_image, undo};
use super::Dashboard;
use super::error::ApiError;
use super::login::{Who, users};
use super::safety::Mode;
use crate::cli::ImageUpdate;
use crate::kube_target::Target;

type Answer = Result<Json<Value>, ApiError>;

impl Dashboard {
    /// The client and namespace of an action on `namespace`, once the mode and scope allow it:
    /// the logged-in user's own, or (without logins) the dashboard's.
    fn writer(&self, who: &Who, namespace: &str) -> Result<Target, ApiError> {
        if self.mode == Mode::ReadOnly {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "this dashboard is read-only (started with --read-only): no changes are made",
            ));
        }
        self.check_namespace(namespace)?;
        let client = match (&self.login, who.identity()) {
            (Some(login), Some(identity)) => login.users.client(identity)?,
            (Some(_), None) => {
                return Err(ApiError::new(StatusCode::UNAUTHORIZED, "log in first"));
            }
            (None, _) => self.client.clone(),
        };
        Ok(Target {
            client,
            namespace: namespace.to_owned(),
        })
    }

    /// The answer to a done action: the Rollout afterwards, and (with logins) an Event on it
    /// naming who did `what`. The Event is posted with the dashboard's own client; failing to
    /// post it does not undo the action, and is logged.
    async fn done(&self, who: &Who, target: &Target, name: &str, what: &str) -> Answer {
        let answer = rollout_now(target, name).await?;
        if let Some(session) = &who.0
            && let Some(event) =
                users::action_event(&session.identity, &session.via, &answer.0, what)
        {
            let events = kube::Api::<k8s_openapi::api::core::v1::Event>::namespaced(
                self.client.clone(),
                &target.namespace,
            );
            if let Err(e) = events
                .create(&kube::api::PostParams::default(), &event)
                .await
            {
                eprintln!(
                    "recording {}'s action on {name}: {e}",
                    session.identity.user
                );
            }
        }
        Ok(answer)
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
    Extension(who): Extension<Who>,
    Path((namespace, name)): Path<(String, String)>,
    body: Bytes,
) -> Answer {
    let target = app.writer(&who, &namespace)?;
    let promotion = if full_promotion(&body) {
        promote::Promotion::Full
    } else {
        promote::Promotion::Next
    };
    promote::apply(&target, &name, promotion).await?;
    app.done(&who, &target, &name, "promoted the Rollout").await
}

pub async fn abort(
    State(app): State<Dashboard>,
    Extension(who): Extension<Who>,
    Path((namespace, name)): Path<(String, String)>,
) -> Answer {
    let target = app.writer(&who, &namespace)?;
    merge_patch_status(&rollouts(&target), &name, &abort::abort_patch()).await?;
    app.done(&who, &target, &name, "aborted the update").await
}

pub async fn retry(
    State(app): State<Dashboard>,
    Extension(who): Extension<Who>,
    Path((namespace, name)): Path<(String, String)>,
) -> Answer {
    let target = app.writer(&who, &namespace)?;
    merge_patch_status(&rollouts(&target), &name, &retry::retry_patch()).await?;
    app.done(&who, &target, &name, "retried the update").await
}

/// `kubectl sluice pause`: the user's own pause (`spec.paused`).
pub async fn pause(
    State(app): State<Dashboard>,
    Extension(who): Extension<Who>,
    Path((namespace, name)): Path<(String, String)>,
) -> Answer {
    let target = app.writer(&who, &namespace)?;
    merge_patch(&rollouts(&target), &name, &paused::paused_patch(true)).await?;
    app.done(&who, &target, &name, "paused the Rollout").await
}

/// `kubectl sluice resume`: the user's pause lifted.
pub async fn resume(
    State(app): State<Dashboard>,
    Extension(who): Extension<Who>,
    Path((namespace, name)): Path<(String, String)>,
) -> Answer {
    let target = app.writer(&who, &namespace)?;
    merge_patch(&rollouts(&target), &name, &paused::paused_patch(false)).await?;
    app.done(&who, &target, &name, "resumed the Rollout").await
}

pub async fn restart(
    State(app): State<Dashboard>,
    Extension(who): Extension<Who>,
    Path((namespace, name)): Path<(String, String)>,
) -> Answer {
    let target = app.writer(&who, &namespace)?;
    let patch = restart::restart_patch(Timestamp::now(), Duration::ZERO)?;
    merge_patch(&rollouts(&target), &name, &patch).await?;
    app.done(&who, &target, &name, "restarted the pods").await
}

pub async fn undo(
    State(app): State<Dashboard>,
    Extension(who): Extension<Who>,
    Path((namespace, name, revision)): Path<(String, String, String)>,
) -> Answer {
    undo_to(&app, &who, &namespace, &name, &revision, false).await
}

/// `undo --fast`: the update back skips its steps, pauses and analyses.
pub async fn undo_fast(
    State(app): State<Dashboard>,
    Extension(who): Extension<Who>,
    Path((namespace, name, revision)): Path<(String, String, String)>,
) -> Answer {
    undo_to(&app, &who, &namespace, &name, &revision, true).await
}

async fn undo_to(
    app: &Dashboard,
    who: &Who,
    namespace: &str,
    name: &str,
    revision: &str,
    fast: bool,
) -> Answer {
    let target = app.writer(who, namespace)?;
    let revision: i64 = revision.parse().map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("revision {revision:?} is not a number"),
        )
    })?;
    undo::apply(&target, name, Some(revision), fast).await?;
    let what = if fast {
        format!("rolled back fast to revision {revision}")
    } else {
        format!("rolled back to revision {revision}")
    };
    app.done(who, &target, name, &what).await
}

/// `set/{container}/{image}/{tag}`: the image may hold slashes (`registry/team/app`), so
/// everything after the container is taken and the last segment is the tag.
pub async fn set_image(
    State(app): State<Dashboard>,
    Extension(who): Extension<Who>,
    Path((namespace, name, container, image_and_tag)): Path<(String, String, String, String)>,
) -> Answer {
    let target = app.writer(&who, &namespace)?;
    let image = image_reference(&image_and_tag).ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("expected set/CONTAINER/IMAGE/TAG, got image and tag {image_and_tag:?}"),
        )
    })?;
    let update = ImageUpdate { container, image };
    set_image::apply(&target, &name, &[update]).await?;
    app.done(&who, &target, &name, "set a new image").await
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
