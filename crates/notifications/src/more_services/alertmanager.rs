//! Alertmanager (`service.alertmanager`: `targets`, `scheme`, `apiPath`, `basicAuth`,
//! `bearerToken`, `timeout`, `insecureSkipVerify`): one alert POSTed as a JSON list to
//! `<scheme>://<target><apiPath>` of every target at once, as the engine sends it. The
//! defaults are the engine's: target `127.0.0.1:9093`, `http`, `/api/v2/alerts`, a timeout of
//! 3 seconds. `basicAuth` wins over `bearerToken`. The recipient is not used.
//!
//! The alert is the template's `alertmanager` part: `labels`, `annotations`, `generatorURL`
//! and `startsAt`, completed when the template is rendered ([`complete`]) as the engine's
//! templater completes it: at least one label, `alertname` the template's name unless the
//! template sets it, a value rendering empty kept as its template text, `generatorURL` the
//! engine's default `{{.app.spec.source.repoURL}}` (which renders `<no value>` for a Rollout)
//! when the template has none, a `git@host:path` URL made `https://host/path`, and `startsAt`
//! the time of rendering. A template with an `alertmanager` part but no labels does not render.
//!
//! Failures: a notification without the part or its labels fails before sending, in the
//! engine's words. A target answering anything but 200 OK, or not at all, failed; as in the
//! engine, the send fails only when every target failed (the others are logged).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};

use super::go_json;
use super::{NotificationService, SendContext, SendError};

const ALERT_NAME: &str = "alertname";

#[derive(Clone, Deserialize)]
pub struct AlertmanagerOptions {
    #[serde(default, deserialize_with = "go_json::de_strings")]
    targets: Vec<String>,
    #[serde(default, deserialize_with = "go_json::de_string")]
    scheme: String,
    #[serde(default, rename = "apiPath", deserialize_with = "go_json::de_string")]
    api_path: String,
    #[serde(default, rename = "basicAuth")]
    basic_auth: Option<BasicAuth>,
    #[serde(
        default,
        rename = "bearerToken",
        deserialize_with = "go_json::de_string"
    )]
    bearer_token: String,
    #[serde(default)]
    timeout: Option<i64>,
    #[serde(default, rename = "insecureSkipVerify")]
    insecure_skip_verify: Option<bool>,
    #[serde(flatten)]
    _transport: go_json::TransportOptions,
}

#[derive(Clone, Deserialize)]
struct BasicAuth {
    #[serde(default, deserialize_with = "go_json::de_string")]
    username: String,
    #[serde(default, deserialize_with = "go_json::de_string")]
    password: String,
}

impl fmt::Debug for AlertmanagerOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Targets are left out too: one may carry credentials (`user:pass@host`).
        f.debug_struct("AlertmanagerOptions")
            .field("targets", &self.targets.len())
            .field("scheme", &self.scheme)
            .field("api_path", &self.api_path)
            .field("basic_auth", &self.basic_auth.is_some())
            .field("bearer_token", &!self.bearer_token.is_empty())
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

pub fn parse(mut settings: Value) -> Result<AlertmanagerOptions, String> {
    go_json::fold(
        &mut settings,
        &[
            "targets",
            "scheme",
            "apiPath",
            "basicAuth",
            "bearerToken",
            "timeout",
            "insecureSkipVerify",
        ],
    );
    go_json::fold(&mut settings, &go_json::TRANSPORT_FIELDS);
    if let Some(auth) = settings.get_mut("basicAuth") {
        go_json::fold(auth, &["username", "password"]);
    }
    let mut opts: AlertmanagerOptions = super::settings(settings)?;
    if opts.targets.is_empty() {
        opts.targets.push("127.0.0.1:9093".into());
    }
    if opts.scheme.is_empty() {
        opts.scheme = "http".into();
    }
    if opts.api_path.is_empty() {
        opts.api_path = "/api/v2/alerts".into();
    }
    if opts.timeout.unwrap_or(0) == 0 {
        opts.timeout = Some(3);
    }
    Ok(opts)
}

/// Completes the `alertmanager` part `rendered` has from template `name` (whose unrendered
/// tree is `raw`) as the engine's templater does, at `now`; the error is the engine's.
///
/// One difference is deliberate: the engine's templater writes the rendered labels and
/// annotations into the template itself, so every later notification of the template carries
/// the first one's values until the configuration changes. Sluice renders them every time.
pub fn complete(
    name: &str,
    raw: &Value,
    rendered: &mut Value,
    now: jiff::Timestamp,
) -> Result<(), String> {
    let Some(raw_part) = go_json::get(raw, "alertmanager").filter(|p| !p.is_null()) else {
        return Ok(());
    };
    let Some(map) = rendered.as_object_mut() else {
        return Ok(());
    };
    let key = map
        .keys()
        .find(|k| k.eq_ignore_ascii_case("alertmanager"))
        .cloned()
        .unwrap_or_default();
    let part = map.remove(&key).unwrap_or(Value::Null);
    let wrong = |e: String| format!("alertmanager.{e}");

    let raw_url = go_json::string(raw_part, "generatorURL").map_err(wrong)?;
    let url = if raw_url.is_empty() {
        // The engine's default, `{{.app.spec.source.repoURL}}`: a Rollout's templates have no
        // `.app`, and Go renders the missing value as this text.
        "<no value>".to_owned()
    } else {
        go_json::string(&part, "generatorURL").map_err(wrong)?
    };

    let raw_labels = go_json::string_map(raw_part, "labels").map_err(wrong)?;
    if raw_labels.is_empty() {
        return Err("at least one label pair required".into());
    }
    let mut labels = kept(&raw_labels, &part, "labels").map_err(wrong)?;
    labels
        .entry(ALERT_NAME.to_owned())
        .or_insert_with(|| name.to_owned());

    let mut out = serde_json::Map::new();
    out.insert("labels".into(), json!(labels));
    let raw_annotations = go_json::string_map(raw_part, "annotations").map_err(wrong)?;
    if !raw_annotations.is_empty() {
        let annotations = kept(&raw_annotations, &part, "annotations").map_err(wrong)?;
        out.insert("annotations".into(), json!(annotations));
    }
    // An empty URL leaves the one an earlier template of the notification set.
    if !url.is_empty() {
        out.insert("generatorURL".into(), git_url_to_http(&url).into());
    }
    out.insert("startsAt".into(), now.to_string().into());
    map.insert("alertmanager".into(), Value::Object(out));
    Ok(())
}

/// The rendered values of `field`, each that rendered empty kept as its template text (the
/// engine replaces a value only with a non-empty rendering).
fn kept(
    raw: &BTreeMap<String, String>,
    part: &Value,
    field: &str,
) -> Result<BTreeMap<String, String>, String> {
    let rendered = go_json::string_map(part, field)?;
    Ok(raw
        .iter()
        .map(|(k, template)| {
            let value = rendered
                .get(k)
                .filter(|v| !v.is_empty())
                .unwrap_or(template);
            (k.clone(), value.clone())
        })
        .collect())
}

/// `git@host:org/repo` as `https://host/org/repo`; anything else as it is.
fn git_url_to_http(url: &str) -> String {
    match url.strip_prefix("git@") {
        Some(rest) => format!("https://{}", rest.replacen(':', "/", 1)),
        None => url.to_owned(),
    }
}

/// The alert of the rendered templates, as a one-element list.
fn alerts(content: &Value) -> Result<Value, String> {
    let Some(part) = go_json::get(content, "alertmanager").filter(|p| !p.is_null()) else {
        return Err("notification alertmanager no config".into());
    };
    let wrong = |e: String| format!("alertmanager.{e}");
    let labels = go_json::string_map(part, "labels").map_err(wrong)?;
    if labels.is_empty() {
        return Err("alertmanager at least one label pair required".into());
    }
    let annotations = match go_json::get(part, "annotations") {
        None | Some(Value::Null) => Value::Null,
        Some(_) => json!(go_json::string_map(part, "annotations").map_err(wrong)?),
    };
    let mut starts_at = go_json::string(part, "startsAt").map_err(wrong)?;
    if starts_at.is_empty() {
        starts_at = jiff::Timestamp::now().to_string();
    }
    Ok(json!([{
        "labels": labels,
        "annotations": annotations,
        "generatorURL": go_json::string(part, "generatorURL").map_err(wrong)?,
        "startsAt": starts_at,
    }]))
}

impl AlertmanagerOptions {
    /// Posts `body` to the target; why it failed, without its URL.
    async fn post(&self, http: &super::Http, target: &str, body: &str) -> Result<(), String> {
        let timeout = Duration::from_secs(self.timeout.unwrap_or(3).max(0).unsigned_abs());
        let mut request = http
            .client(self.insecure_skip_verify.unwrap_or(false))
            .post(format!("{}://{target}{}", self.scheme, self.api_path))
            .timeout(timeout)
            .header("Content-Type", "application/json")
            .body(body.to_owned());
        if let Some(auth) = &self.basic_auth {
            request = request.basic_auth(&auth.username, Some(&auth.password));
        } else if !self.bearer_token.is_empty() {
            request = request.bearer_auth(&self.bearer_token);
        }
        let response = request
            .send()
            .await
            .map_err(|e| format!("request failed: {}", super::kind(&e)))?;
        let status = response.status().as_u16();
        if status != 200 {
            let text = response.text().await.unwrap_or_default();
            let text: String = text.chars().take(200).collect();
            return Err(format!("failed with error code {status} : {text}"));
        }
        Ok(())
    }
}

impl NotificationService for AlertmanagerOptions {
    fn send<'a>(&'a self, ctx: SendContext<'a>) -> BoxFuture<'a, Result<(), SendError>> {
        Box::pin(async move {
            let service = ctx.service;
            let body = alerts(ctx.content)
                .map_err(|e| SendError::permanent(format!("alertmanager '{service}': {e}")))?
                .to_string();
            let results = futures::future::join_all(
                self.targets
                    .iter()
                    .map(|target| self.post(ctx.http, target, &body)),
            )
            .await;
            let failures: Vec<String> = results
                .into_iter()
                .enumerate()
                .filter_map(|(i, r)| r.err().map(|e| format!("target {}: {e}", i + 1)))
                .collect();
            for failure in &failures {
                tracing::warn!(service, "alertmanager {failure}");
            }
            if failures.len() == self.targets.len() {
                return Err(SendError::transient(format!(
                    "alertmanager '{service}': no events were successfully received by alertmanager ({})",
                    failures.join("; ")
                )));
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn now() -> jiff::Timestamp {
        "2026-01-02T03:04:05.5Z".parse().unwrap()
    }

    #[test]
    fn the_templater_completes_the_part() {
        let raw = json!({"message": "m", "alertmanager": {
            "labels": {"severity": 5, "rollout": "{{.rollout.metadata.name}}",
                "missing": "{{.nothing}}"},
            "annotations": {"a": "{{.x}}"},
            "generatorURL": "{{.url}}"}});
        let mut rendered = json!({"message": "m", "alertmanager": {
            "labels": {"severity": 5, "rollout": "web", "missing": ""},
            "annotations": {"a": "text"},
            "generatorURL": "git@github.com:org/repo.git"}});
        complete("on-deployed", &raw, &mut rendered, now()).unwrap();
        assert_eq!(
            rendered["alertmanager"],
            json!({"labels": {"severity": "5", "rollout": "web", "missing": "{{.nothing}}",
                    "alertname": "on-deployed"},
                "annotations": {"a": "text"},
                "generatorURL": "https://github.com/org/repo.git",
                "startsAt": "2026-01-02T03:04:05.5Z"})
        );
    }

    #[test]
    fn the_engines_defaults_and_refusal() {
        let raw = json!({"alertmanager": {"labels": {"alertname": "mine"}}});
        let mut rendered = raw.clone();
        complete("t", &raw, &mut rendered, now()).unwrap();
        assert_eq!(rendered["alertmanager"]["labels"]["alertname"], "mine");
        assert_eq!(rendered["alertmanager"]["generatorURL"], "<no value>");
        assert!(rendered["alertmanager"].get("annotations").is_none());

        let raw = json!({"alertmanager": {"annotations": {"a": "b"}}});
        let mut rendered = raw.clone();
        assert_eq!(
            complete("t", &raw, &mut rendered, now()).unwrap_err(),
            "at least one label pair required"
        );
        let mut untouched = json!({"message": "m"});
        complete("t", &json!({"message": "m"}), &mut untouched, now()).unwrap();
        assert_eq!(untouched, json!({"message": "m"}));
    }

    #[test]
    fn the_settings_get_the_engines_defaults() {
        let opts = parse(json!({"BasicAuth": {"Username": "u", "password": "p"}})).unwrap();
        assert_eq!(opts.targets, ["127.0.0.1:9093"]);
        assert_eq!(opts.scheme, "http");
        assert_eq!(opts.api_path, "/api/v2/alerts");
        assert_eq!(opts.timeout, Some(3));
        assert_eq!(opts.basic_auth.map(|a| a.username).as_deref(), Some("u"));
        assert!(parse(json!({"targets": "a:1"})).is_err());
        assert!(parse(json!({"timeout": "3"})).is_err());
    }
}
