//! New Relic (`service.newrelic`: `apiURL`, `apiKey`, `insecureSkipVerify`): a deployment
//! marker POSTed to `<apiURL>/v2/applications/<recipient>/deployments.json` (the recipient is
//! the application id) with the key in `X-Api-Key`, as the engine sends it:
//! `{"deployment": {"revision", "changelog", "description", "user"}}`, from the template's
//! `newrelic` part (`description` defaults to the `message`). `apiURL` defaults to
//! `https://api.newrelic.com`.
//!
//! The engine's defaults read an Argo CD Application: `revision` renders `<no value>` for a
//! Rollout (and is sent so, as the engine sends it), and `changelog` and `user` call
//! `.repo.GetCommitMetadata`, which Argo Rollouts does not provide, so the engine fails to
//! render a template without them. Sluice fails the same way, saying what to set. A missing
//! `apiKey` or `newrelic` part is a permanent failure in the engine's words.
//!
//! Unlike the engine, which ignores the answer's status, an answer outside 2xx is a failure
//! here, so that a wrong key or application id shows in the log and the failure count.

use std::fmt;

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{NotificationService, SendContext, SendError};

const API_URL: &str = "https://api.newrelic.com";
/// What the engine's default `revision` renders for a Rollout.
const NO_VALUE: &str = "<no value>";
/// The engine's default for `changelog` and `user`, which fails for a Rollout.
const COMMIT_METADATA: &str = "call .repo.GetCommitMetadata .app.status.sync.revision";

#[derive(Clone, Deserialize)]
pub struct NewrelicOptions {
    #[serde(default, rename = "apiKey")]
    api_key: String,
    #[serde(default, rename = "apiURL")]
    api_url: String,
    #[serde(default, rename = "insecureSkipVerify")]
    insecure_skip_verify: bool,
}

impl fmt::Debug for NewrelicOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NewrelicOptions")
            .field("api_url", &self.api_url)
            .field("insecure_skip_verify", &self.insecure_skip_verify)
            .finish_non_exhaustive()
    }
}

pub fn parse(settings: Value) -> Result<NewrelicOptions, String> {
    super::settings(settings)
}

/// The marker of the rendered template, or why the engine would not send it.
fn marker(content: &Value) -> Result<Value, String> {
    let Some(part) = content.get("newrelic").filter(|p| !p.is_null()) else {
        return Err("config is missing".into());
    };
    let text = |k: &str| part.get(k).and_then(Value::as_str);
    for field in ["changelog", "user"] {
        // Only an absent field: one present but rendered empty is not the engine's default.
        if text(field).is_none() {
            return Err(format!(
                "template: executing at <{COMMIT_METADATA}>: error calling call: call of nil \
                 (set newrelic.changelog and newrelic.user in the template: the engine's \
                 defaults read an Argo CD Application's commit, which a Rollout has not)"
            ));
        }
    }
    let revision = text("revision").unwrap_or(NO_VALUE);
    let mut deployment = serde_json::Map::new();
    deployment.insert("revision".into(), json!(revision));
    let description = text("description")
        .filter(|d| !d.is_empty())
        .or_else(|| content.get("message").and_then(Value::as_str))
        .unwrap_or_default();
    for (k, v) in [
        ("changelog", text("changelog").unwrap_or_default()),
        ("description", description),
        ("user", text("user").unwrap_or_default()),
    ] {
        if !v.is_empty() {
            deployment.insert(k.into(), json!(v));
        }
    }
    Ok(json!({ "deployment": deployment }))
}

impl NotificationService for NewrelicOptions {
    fn send<'a>(&'a self, ctx: SendContext<'a>) -> BoxFuture<'a, Result<(), SendError>> {
        Box::pin(async move {
            let service = ctx.service;
            let permanent = |m: String| SendError::permanent(format!("newrelic '{service}': {m}"));
            if self.api_key.is_empty() {
                return Err(permanent("apiKey is missing".into()));
            }
            let body = marker(ctx.content).map_err(permanent)?;
            let base = if self.api_url.is_empty() {
                API_URL
            } else {
                self.api_url.trim_end_matches('/')
            };
            let url = format!("{base}/v2/applications/{}/deployments.json", ctx.recipient);
            let response = ctx
                .http
                .client(self.insecure_skip_verify)
                .post(url)
                .header("X-Api-Key", &self.api_key)
                .json(&body)
                .send()
                .await
                .map_err(|e| {
                    SendError::transient(format!(
                        "newrelic '{service}': request failed: {}",
                        super::kind(&e)
                    ))
                })?;
            if let Some((status, answer)) = super::refusal(response).await {
                return Err(SendError::transient(format!(
                    "newrelic '{service}': deployment marker refused with status {status}: {answer}"
                )));
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::marker;
    use serde_json::json;

    #[test]
    fn the_marker_is_the_engines_with_the_message_for_a_description() {
        let full = json!({"message": "Rollout web completed", "newrelic": {
            "revision": "abc", "changelog": "fix", "user": "ci"}});
        assert_eq!(
            marker(&full).unwrap(),
            json!({"deployment": {"revision": "abc", "changelog": "fix",
                                  "description": "Rollout web completed", "user": "ci"}})
        );
        let no_revision =
            json!({"newrelic": {"changelog": "fix", "user": "ci", "description": "d"}});
        assert_eq!(
            marker(&no_revision).unwrap()["deployment"]["revision"],
            "<no value>"
        );
        assert_eq!(
            marker(&json!({"message": "m"})).unwrap_err(),
            "config is missing"
        );
        let e = marker(&json!({"newrelic": {"revision": "abc", "user": "ci"}})).unwrap_err();
        assert!(
            e.contains("call of nil") && e.contains("newrelic.changelog"),
            "{e}"
        );
    }
}
