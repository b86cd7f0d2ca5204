//! GitHub (`service.github`: `appID`, `installationID`, `privateKey`, `enterpriseBaseURL`,
//! `insecureSkipVerify`), as a GitHub App: a JWT signed with the App's key (RS256) is exchanged
//! for an installation token (kept until a minute before it expires), with which the template's
//! `github` part acts on the repository of `repoURLPath` at the commit of `revisionPath`, in
//! the engine's order:
//! - `status` (`state`, `label`, `targetURL`): a commit status, described by the `message`
//!   (140 characters at most). GitHub's 422 (a commit takes at most 1,000 statuses of one
//!   context) is logged and the notification counted as sent, as the engine does, so that it is
//!   not retried.
//! - `deployment` (`state`, `environment`, `environmentURL`, `logURL`, `requiredContexts`,
//!   `autoMerge` (true when absent), `transientEnvironment`, `reference` (the revision when
//!   empty)): the first deployment of the revision and environment, created when there is
//!   none, gets a deployment status.
//! - `pullRequestComment` (`content`, 65,536 characters at most; `commentTag`): a comment on
//!   each pull request with the commit; with a tag, a comment carrying
//!   `<!-- argocd-notifications <tag> -->` is edited instead of adding one.
//! - `checkRun` (`name`, `details_url`, `status`, `conclusion`, `started_at`, `completed_at`
//!   (RFC 3339), `output`: `title`, `summary`, `text`): a check run on the revision.
//! - `repositoryDispatch` (`event_type`, `client_payload`, JSON): a repository dispatch event.
//!
//! For a Rollout, set `repoURLPath` and `revisionPath`: the engine's defaults read an Argo CD
//! Application (`{{.app.spec.source.repoURL}}`,
//! `{{.app.status.operationState.syncResult.revision}}`), which render `<no value>` for a
//! Rollout, so the engine fails with ``GitHub.repoURL (<no value>) does not have a `/` ``; so
//! does Sluice, saying what to set.
//!
//! `enterpriseBaseURL` is the engine's own option for GitHub Enterprise (and any server
//! speaking GitHub's API): as in the engine, it should end in `/api/v3`.
//! A template without a `github` part, a repository URL without an owner, a check run that is
//! completed without a conclusion, a bad time or a payload that is not JSON are permanent
//! failures; a failed request or an error answer is a failure with go-github's words.

mod api;
mod auth;

use std::fmt;

use futures::future::BoxFuture;
use reqwest::Method;
use ring::signature::RsaKeyPair;
use serde::Deserialize;
use serde_json::{Value, json};

use self::auth::Token;
use super::{NotificationService, SendContext, SendError};

/// What the engine's default `repoURLPath` and `revisionPath` render for a Rollout.
const NO_VALUE: &str = "<no value>";
const V3: &str = "application/vnd.github.v3+json";
const DEPLOYMENTS: &str =
    "application/vnd.github.ant-man-preview+json, application/vnd.github.flash-preview+json";
const PULLS_OF_COMMIT: &str = "application/vnd.github.groot-preview+json";
const REACTIONS: &str = "application/vnd.github.squirrel-girl-preview";
const CHECK_RUNS: &str = "application/vnd.github.antiope-preview+json";
const API_VERSION: &str = "2022-11-28";
const GO_RFC3339: &str = "2006-01-02T15:04:05Z07:00";

#[derive(Deserialize)]
struct GitHubOptions {
    #[serde(default, rename = "appID")]
    app_id: Value,
    #[serde(default, rename = "installationID")]
    installation_id: Value,
    #[serde(default, rename = "privateKey")]
    private_key: String,
    #[serde(default, rename = "enterpriseBaseURL")]
    enterprise_base_url: String,
    #[serde(default, rename = "insecureSkipVerify")]
    insecure_skip_verify: bool,
}

/// A GitHub service: its App, its key and the installation token it holds.
pub struct GitHubService {
    app_id: i64,
    installation_id: i64,
    key: RsaKeyPair,
    api_base: String,
    token_base: String,
    insecure_skip_verify: bool,
    token: tokio::sync::Mutex<Option<Token>>,
}

impl fmt::Debug for GitHubService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GitHubService")
            .field("app_id", &self.app_id)
            .field("installation_id", &self.installation_id)
            .field("api_base", &self.api_base)
            .field("insecure_skip_verify", &self.insecure_skip_verify)
            .finish_non_exhaustive()
    }
}

/// The settings, refused as the engine refuses them when it builds the service: ids that are
/// not integers, a key that is not an RSA key in PEM, an enterprise URL that is not a URL.
pub fn parse(settings: Value) -> Result<GitHubService, String> {
    let opts: GitHubOptions = super::settings(settings)?;
    let app_id = auth::to_int64("appID", &opts.app_id)?;
    let installation_id = auth::to_int64("installationID", &opts.installation_id)?;
    let (api_base, token_base) = api::bases(&opts.enterprise_base_url)?;
    let key = auth::parse_key(&opts.private_key)?;
    Ok(GitHubService {
        app_id,
        installation_id,
        key,
        api_base,
        token_base,
        insecure_skip_verify: opts.insecure_skip_verify,
        token: tokio::sync::Mutex::new(None),
    })
}

/// The template's `github` part, rendered.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Fields {
    #[serde(rename = "repoURLPath")]
    repo_url: Option<String>,
    #[serde(rename = "revisionPath")]
    revision: Option<String>,
    status: Option<Status>,
    deployment: Option<Deployment>,
    #[serde(rename = "pullRequestComment")]
    pull_request_comment: Option<Comment>,
    #[serde(rename = "checkRun")]
    check_run: Option<CheckRun>,
    #[serde(rename = "repositoryDispatch")]
    repository_dispatch: Option<Dispatch>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Status {
    state: String,
    label: String,
    #[serde(rename = "targetURL")]
    target_url: String,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Deployment {
    state: String,
    environment: String,
    #[serde(rename = "environmentURL")]
    environment_url: String,
    #[serde(rename = "logURL")]
    log_url: String,
    required_contexts: Option<Vec<String>>,
    auto_merge: Option<bool>,
    transient_environment: Option<bool>,
    reference: String,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Comment {
    content: String,
    comment_tag: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct CheckRun {
    name: String,
    details_url: String,
    status: String,
    conclusion: String,
    started_at: String,
    completed_at: String,
    output: Option<CheckRunOutput>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct CheckRunOutput {
    title: String,
    summary: String,
    text: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Dispatch {
    event_type: String,
    client_payload: String,
}

/// Why a call failed: the answer's status, when there was one.
struct Failed {
    status: Option<u16>,
    error: SendError,
}

impl From<SendError> for Failed {
    fn from(error: SendError) -> Self {
        Failed {
            status: None,
            error,
        }
    }
}

/// One send: the service, the client and the repository acted on.
struct Call<'a> {
    svc: &'a GitHubService,
    name: &'a str,
    client: &'a reqwest::Client,
    repo: String,
}

impl Call<'_> {
    fn permanent(&self, message: impl fmt::Display) -> SendError {
        SendError::permanent(format!("github '{}': {message}", self.name))
    }

    fn transient(&self, message: impl fmt::Display) -> SendError {
        SendError::transient(format!("github '{}': {message}", self.name))
    }

    /// The installation token, fetched when there is none or it is about to expire.
    async fn token(&self, method: &Method, path: &str) -> Result<String, SendError> {
        let mut held = self.svc.token.lock().await;
        let now = jiff::Timestamp::now();
        if let Some(t) = held.as_ref().filter(|t| t.fresh(now)) {
            return Ok(t.value.clone());
        }
        let id = self.svc.installation_id;
        let refused = |why: String| {
            self.transient(format!(
                "{method} {path}: could not refresh installation id {id}'s token: {why}"
            ))
        };
        let jwt = auth::jwt(&self.svc.key, self.svc.app_id, now.as_second())
            .map_err(|e| self.permanent(e))?;
        let url = format!(
            "{}/app/installations/{id}/access_tokens",
            self.svc.token_base
        );
        let response = self
            .client
            .post(&url)
            .bearer_auth(jwt)
            .header("Accept", V3)
            .send()
            .await
            .map_err(|e| {
                refused(format!(
                    "could not get access_tokens from GitHub API for installation ID {id}: {}",
                    super::kind(&e)
                ))
            })?;
        let status = response.status();
        if !status.is_success() {
            let path = response.url().path().to_owned();
            return Err(refused(format!(
                "received non 2xx response status \"{} {}\" when fetching {path}",
                status.as_u16(),
                status.canonical_reason().unwrap_or_default()
            )));
        }
        let answer: Value = response
            .json()
            .await
            .map_err(|_| refused("unreadable access_tokens answer".into()))?;
        let token = Token::from_answer(&answer)
            .ok_or_else(|| refused("the access_tokens answer has no token".into()))?;
        let value = token.value.clone();
        *held = Some(token);
        Ok(value)
    }

    /// A request to `repos/<owner>/<repo>/<rest>`: the JSON answer (null when empty).
    async fn call(
        &self,
        method: Method,
        rest: &str,
        query: &[(&str, &str)],
        accept: &str,
        body: Option<&Value>,
    ) -> Result<Value, Failed> {
        let mut url =
            reqwest::Url::parse(&format!("{}repos/{}/{rest}", self.svc.api_base, self.repo))
                .map_err(|_| {
                    self.permanent(format!("{method} repos/{}/{rest}: not a URL", self.repo))
                })?;
        let shown = url.path().to_owned();
        let query: Vec<_> = query.iter().filter(|(_, v)| !v.is_empty()).collect();
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        let token = self.token(&method, &shown).await?;
        let mut request = self
            .client
            .request(method.clone(), url)
            .header("Authorization", format!("token {token}"))
            .header("Accept", accept)
            .header("X-GitHub-Api-Version", API_VERSION);
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request
            .send()
            .await
            .map_err(|e| self.transient(format!("{method} {shown}: {}", super::kind(&e))))?;
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        if status == 202 {
            return Err(Failed {
                status: Some(status),
                error: self.transient("job scheduled on GitHub side; try again later"),
            });
        }
        if !(200..300).contains(&status) {
            return Err(Failed {
                status: Some(status),
                error: self.transient(api::error_text(method.as_str(), &shown, status, &text)),
            });
        }
        if text.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&text).map_err(|_| {
            self.transient(format!("{method} {shown}: unreadable answer"))
                .into()
        })
    }

    async fn status(&self, s: &Status, revision: &str, message: &str) -> Result<bool, SendError> {
        let body = json!({
            "state": s.state,
            "target_url": s.target_url,
            "description": api::trunc(message, 140),
            "context": s.label,
        });
        let rest = format!("statuses/{}", api::escape_ref(revision));
        match self.call(Method::POST, &rest, &[], V3, Some(&body)).await {
            Ok(_) => Ok(true),
            Err(Failed {
                status: Some(422), ..
            }) => {
                tracing::warn!(
                    service = self.name,
                    "github: too many commit statuses for sha {revision} and context {}; not retried",
                    s.label
                );
                Ok(false)
            }
            Err(f) => Err(f.error),
        }
    }

    async fn deployment(
        &self,
        d: &Deployment,
        revision: &str,
        message: &str,
    ) -> Result<(), SendError> {
        let query = [("environment", d.environment.as_str()), ("ref", revision)];
        let found = self
            .call(Method::GET, "deployments", &query, V3, None)
            .await
            .map_err(|f| f.error)?;
        let existing = found
            .as_array()
            .and_then(|list| list.first())
            .and_then(|d| d.get("id"))
            .and_then(Value::as_i64);
        let id = match existing {
            Some(id) => id,
            None => {
                let reference = if d.reference.is_empty() {
                    revision
                } else {
                    &d.reference
                };
                let body = json!({
                    "ref": reference,
                    "auto_merge": d.auto_merge.unwrap_or(true),
                    "required_contexts": d.required_contexts,
                    "environment": d.environment,
                    "transient_environment": d.transient_environment.unwrap_or(false),
                });
                let created = self
                    .call(Method::POST, "deployments", &[], DEPLOYMENTS, Some(&body))
                    .await
                    .map_err(|f| f.error)?;
                created
                    .get("id")
                    .and_then(Value::as_i64)
                    .ok_or_else(|| self.transient("the created deployment has no id"))?
            }
        };
        let body = json!({
            "state": d.state,
            "log_url": d.log_url,
            "description": api::trunc(message, 140),
            "environment": d.environment,
            "environment_url": d.environment_url,
        });
        let rest = format!("deployments/{id}/statuses");
        self.call(Method::POST, &rest, &[], DEPLOYMENTS, Some(&body))
            .await
            .map_err(|f| f.error)?;
        Ok(())
    }

    async fn comments(&self, c: &Comment, revision: &str) -> Result<(), SendError> {
        // The templater has already put the tag after the content once; the engine adds it
        // again when it posts, so a tagged comment ends with the tag twice, as in Argo.
        let content = if c.comment_tag.is_empty() {
            c.content.clone()
        } else {
            format!("{}\n{}", c.content, tag(&c.comment_tag))
        };
        let mut body = api::trunc(&content, 65536);
        let rest = format!("commits/{}/pulls", api::escape_ref(revision));
        let pulls = self
            .call(Method::GET, &rest, &[], PULLS_OF_COMMIT, None)
            .await
            .map_err(|f| f.error)?;
        for pull in pulls.as_array().into_iter().flatten() {
            let number = pull.get("number").and_then(Value::as_i64).unwrap_or(0);
            let comments_of = if number == 0 {
                "issues/comments".to_owned()
            } else {
                format!("issues/{number}/comments")
            };
            if !c.comment_tag.is_empty() {
                let pattern = tag(&c.comment_tag);
                let comments = self
                    .call(Method::GET, &comments_of, &[], REACTIONS, None)
                    .await
                    .map_err(|f| f.error)?;
                let existing = comments.as_array().into_iter().flatten().find(|comment| {
                    comment
                        .get("body")
                        .and_then(Value::as_str)
                        .is_some_and(|b| b.contains(&pattern))
                });
                if let Some(existing) = existing {
                    let id = existing.get("id").and_then(Value::as_i64).unwrap_or(0);
                    let mut edited = existing.clone();
                    edited["body"] = Value::String(format!("{body}\n{pattern}"));
                    let rest = format!("issues/comments/{id}");
                    self.call(Method::PATCH, &rest, &[], V3, Some(&edited))
                        .await
                        .map_err(|f| f.error)?;
                    continue;
                }
                // As in the engine, the tag is added to the body kept for the next pull
                // request too.
                body = format!("{body}\n{pattern}");
            }
            let rest = format!("issues/{number}/comments");
            self.call(Method::POST, &rest, &[], V3, Some(&json!({ "body": body })))
                .await
                .map_err(|f| f.error)?;
        }
        Ok(())
    }

    async fn check_run(&self, r: &CheckRun, revision: &str) -> Result<(), SendError> {
        let mut status = r.status.as_str();
        if !r.conclusion.is_empty() && status.is_empty() {
            status = "completed";
        }
        if (status == "completed" || !r.completed_at.is_empty()) && r.conclusion.is_empty() {
            return Err(self.permanent(
                "github checkrun: conclusion is required when status is completed or completed_at is set",
            ));
        }
        let mut body = json!({
            "name": r.name,
            "head_sha": revision,
            "details_url": r.details_url,
            "external_id": "argocd-notifications",
        });
        let mut set = |k: &str, v: &str| {
            if !v.is_empty() {
                body[k] = Value::String(v.to_owned());
            }
        };
        set("status", status);
        set("conclusion", &r.conclusion);
        for (field, value) in [
            ("started_at", &r.started_at),
            ("completed_at", &r.completed_at),
        ] {
            if !value.is_empty() && value.parse::<jiff::Timestamp>().is_err() {
                return Err(self.permanent(format!(
                    "parsing time \"{value}\" as \"{GO_RFC3339}\": not an RFC 3339 time"
                )));
            }
            set(field, value);
        }
        if let Some(o) = &r.output {
            body["output"] = json!({"title": o.title, "summary": o.summary, "text": o.text});
        }
        self.call(Method::POST, "check-runs", &[], CHECK_RUNS, Some(&body))
            .await
            .map_err(|f| f.error)?;
        Ok(())
    }

    async fn dispatch(&self, d: &Dispatch) -> Result<(), SendError> {
        let payload: Value = serde_json::from_str(&d.client_payload).map_err(|e| {
            self.permanent(format!(
                "json: error calling MarshalJSON for type *json.RawMessage: {e}"
            ))
        })?;
        let body = json!({"event_type": d.event_type, "client_payload": payload});
        self.call(Method::POST, "dispatches", &[], V3, Some(&body))
            .await
            .map_err(|f| f.error)?;
        Ok(())
    }
}

fn tag(comment_tag: &str) -> String {
    format!("<!-- argocd-notifications {comment_tag} -->")
}

impl NotificationService for GitHubService {
    fn send<'a>(&'a self, ctx: SendContext<'a>) -> BoxFuture<'a, Result<(), SendError>> {
        Box::pin(async move {
            let name = ctx.service;
            let fail = |m: String| SendError::permanent(format!("github '{name}': {m}"));
            let github = match ctx.content.get("github") {
                Some(g) if !g.is_null() => g.clone(),
                _ => return Err(fail("config is empty".into())),
            };
            let fields: Fields = serde_json::from_value(github)
                .map_err(|e| fail(format!("the template's github part: {}", super::redact(&e))))?;
            let message = ctx
                .content
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let repo_url = fields.repo_url.as_deref().unwrap_or(NO_VALUE);
            let revision = fields.revision.as_deref().unwrap_or(NO_VALUE);
            let full_name = api::full_name(repo_url);
            let parts: Vec<&str> = full_name.split('/').collect();
            if parts.len() < 2 {
                let hint = if fields.repo_url.is_none() {
                    " (set github.repoURLPath and github.revisionPath in the template: the \
                     engine's defaults read an Argo CD Application, which a Rollout is not)"
                } else {
                    ""
                };
                return Err(fail(format!(
                    "GitHub.repoURL ({repo_url}) does not have a `/`{hint}"
                )));
            }
            let call = Call {
                svc: self,
                name,
                client: ctx.http.client(self.insecure_skip_verify),
                repo: format!("{}/{}", parts[0], parts[1]),
            };
            if let Some(s) = &fields.status
                && !call.status(s, revision, message).await?
            {
                return Ok(());
            }
            if let Some(d) = &fields.deployment {
                call.deployment(d, revision, message).await?;
            }
            if let Some(c) = &fields.pull_request_comment {
                call.comments(c, revision).await?;
            }
            if let Some(r) = &fields.check_run {
                call.check_run(r, revision).await?;
            }
            if let Some(d) = &fields.repository_dispatch {
                call.dispatch(d).await?;
            }
            Ok(())
        })
    }
}
