//! Web: an HTTP request whose JSON response (or the part `jsonPath` selects) is the result.
//!
//! As in Argo: GET unless `method` says otherwise, a body only with POST/PUT, 10 s timeout by
//! default, a non-2xx status is an Error, and a body that is not JSON is taken as a Successful
//! measurement with the body as value (conditions are not evaluated on it). The value is the
//! selected JSON, e.g. `"It worked!"` with its quotes.

use std::time::Duration;

use jsonpath_rust::JsonPath;
use reqwest::Method;
use sluice_api::analysis::{Metric, WebMetric};
use sluice_api::common::AnalysisPhase;

use super::http::{authenticate, read_body, request_error, with_headers};
use super::{Outcome, ProviderError, Providers};
use crate::expression::json_to_value;

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) async fn measure(
    providers: &Providers,
    metric: &Metric,
    web: &WebMetric,
) -> Result<Outcome, ProviderError> {
    let url = web
        .url
        .as_deref()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| ProviderError::new("web provider has no url"))?;
    let method = method(web.method.as_deref())?;
    let body = web.body.as_deref().filter(|b| !b.is_empty());
    let json_body = web.json_body.as_ref();
    if body.is_some() && json_body.is_some() {
        return Err(ProviderError::new(
            "use either body or jsonBody; both cannot exist for a web metric payload",
        ));
    }
    if (body.is_some() || json_body.is_some()) && method == Method::GET {
        return Err(ProviderError::new(
            "body/jsonBody can only be used with POST or PUT web metric methods",
        ));
    }
    let timeout = match web.timeout_seconds {
        Some(t) if t > 0 => Duration::from_secs(t.unsigned_abs()),
        _ => DEFAULT_TIMEOUT,
    };
    let path = json_path(web.json_path.as_deref());

    let client = providers.http(web.insecure.unwrap_or(false));
    let mut request = with_headers(
        client.request(method, url),
        web.headers.as_deref().unwrap_or_default(),
    )?;
    if let Some(body) = body {
        request = request.body(body.to_owned());
    } else if let Some(json) = json_body {
        // `json` also sets Content-Type: application/json, as Argo does for jsonBody.
        request = request.json(json);
    }
    let request = authenticate(client, request, web.authentication.as_ref(), timeout).await?;
    let response = request
        .timeout(timeout)
        .send()
        .await
        .map_err(|e| request_error(&e, timeout))?;
    let status = response.status();
    if !status.is_success() {
        return Err(ProviderError(format!(
            "received non 2xx response code: {}",
            status.as_u16()
        )));
    }
    let bytes = read_body(response).await?;
    let Ok(document) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        return Ok(Outcome {
            phase: Some(AnalysisPhase::Successful),
            value: Some(text),
            ..Default::default()
        });
    };
    let found = document.query(&path).map_err(|err| {
        ProviderError(format!(
            "invalid jsonPath {:?}: {err}",
            web.json_path.as_deref().unwrap_or("{$}")
        ))
    })?;
    let selected = found.first().ok_or_else(|| {
        ProviderError(format!(
            "could not find jsonPath {:?} in the response",
            web.json_path.as_deref().unwrap_or("{$}")
        ))
    })?;
    let value = serde_json::to_string(selected)
        .map_err(|e| ProviderError(format!("could not encode the selected value: {e}")))?;
    Ok(Outcome::judged(metric, value, &json_to_value(selected)))
}

fn method(method: Option<&str>) -> Result<Method, ProviderError> {
    match method.filter(|m| !m.is_empty()) {
        None => Ok(Method::GET),
        Some(m) => Method::from_bytes(m.to_ascii_uppercase().as_bytes())
            .map_err(|_| ProviderError(format!("invalid web metric method {m:?}"))),
    }
}

/// A Kubernetes-style JSONPath (`{$.data.ok}`, `{.data.ok}`) as an RFC 9535 query (`$.data.ok`).
fn json_path(path: Option<&str>) -> String {
    let path = path
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .unwrap_or("{$}");
    let inner = path
        .strip_prefix('{')
        .and_then(|p| p.strip_suffix('}'))
        .unwrap_or(path)
        .trim();
    if inner.starts_with('$') {
        inner.to_owned()
    } else if inner.starts_with('.') || inner.starts_with('[') {
        format!("${inner}")
    } else {
        format!("$.{inner}")
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use axum::Router;
    use axum::body::Bytes;
    use axum::extract::State;
    use axum::http::{HeaderMap, Method as HttpMethod, StatusCode, Uri};
    use axum::routing::any;
    use serde_json::json;

    use super::super::test_support::{ctx, metric_with, providers, serve};
    use super::*;
    use crate::args::{resolve_args, resolve_metric};
    use crate::redact::Redactor;
    use crate::secrets::MemorySecrets;
    use sluice_api::common::{Argument, SecretKeyRef, ValueFrom};

    #[derive(Clone, Debug)]
    struct Seen {
        method: HttpMethod,
        uri: Uri,
        headers: HeaderMap,
        body: Bytes,
    }

    type Log = Arc<Mutex<Vec<Seen>>>;

    /// Answers by path: `/ok` `{"data":{"ok":true,"rate":0.99}}`, `/message` (the corpus'
    /// `{"message":"It worked!"}`), `/version`, `/text`, `/status/500`, `/slow`, `/echo`.
    fn fake_service(log: Log) -> Router {
        async fn answer(
            State(log): State<Log>,
            method: HttpMethod,
            uri: Uri,
            headers: HeaderMap,
            body: Bytes,
        ) -> (StatusCode, String) {
            log.lock().unwrap().push(Seen {
                method: method.clone(),
                uri: uri.clone(),
                headers: headers.clone(),
                body: body.clone(),
            });
            let json = |v: serde_json::Value| (StatusCode::OK, v.to_string());
            match uri.path() {
                "/ok" => json(json!({"data": {"ok": true, "rate": 0.99}})),
                "/bad" => json(json!({"data": {"ok": false, "rate": 0.2}})),
                "/middle" => json(json!({"data": {"ok": false, "rate": 0.8}})),
                "/message" => json(json!({"message": "It worked!"})),
                "/version" => json(json!({"major": "1", "minor": "30", "gitVersion": "v1.30.0"})),
                "/text" => (StatusCode::OK, "all good".to_owned()),
                "/status/500" => (StatusCode::INTERNAL_SERVER_ERROR, "down".to_owned()),
                "/slow" => {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    json(json!({}))
                }
                "/echo" if method == HttpMethod::POST => {
                    (StatusCode::OK, String::from_utf8_lossy(&body).into_owned())
                }
                _ => (StatusCode::NOT_FOUND, "no such path".to_owned()),
            }
        }
        Router::new().fallback(any(answer)).with_state(log)
    }

    async fn start() -> (String, Log) {
        let log: Log = Default::default();
        (serve(fake_service(log.clone())).await, log)
    }

    fn metric(web: serde_json::Value, success: Option<&str>, failure: Option<&str>) -> Metric {
        metric_with("web", json!({"web": web}), success, failure)
    }

    #[tokio::test]
    async fn healthy_bad_inconclusive() {
        let (url, log) = start().await;
        let p = providers(Default::default());
        let cases = [
            ("/ok", AnalysisPhase::Successful, "0.99"),
            ("/bad", AnalysisPhase::Failed, "0.2"),
            ("/middle", AnalysisPhase::Inconclusive, "0.8"),
        ];
        for (path, phase, value) in cases {
            let m = metric(
                json!({"url": format!("{url}{path}"), "jsonPath": "{$.data.rate}",
                       "headers": [{"key": "Authorization", "value": "Bearer t"}]}),
                Some("result >= 0.95"),
                Some("result < 0.5"),
            );
            let measurement = p.measure(&ctx(), &m).await;
            assert_eq!(measurement.phase, Some(phase), "{:?}", measurement.message);
            assert_eq!(measurement.value.as_deref(), Some(value));
            assert!(measurement.started_at.is_some() && measurement.finished_at.is_some());
        }
        let seen = log.lock().unwrap();
        assert_eq!(seen[0].method, HttpMethod::GET);
        assert_eq!(seen[0].uri.path(), "/ok");
        assert_eq!(seen[0].headers["authorization"], "Bearer t");
        assert!(seen[0].body.is_empty());
    }

    #[tokio::test]
    async fn corpus_templates() {
        let (url, _) = start().await;
        let p = providers(Default::default());
        // analysistemplate-web-background: the whole document, `result.major == '1'`.
        let m = metric(
            json!({"url": format!("{url}/version"), "insecure": true}),
            Some("result.major == '1'"),
            None,
        );
        let measurement = p.measure(&ctx(), &m).await;
        assert_eq!(
            measurement.phase,
            Some(AnalysisPhase::Successful),
            "{:?}",
            measurement.message
        );
        assert_eq!(
            measurement.value.as_deref(),
            Some(r#"{"major":"1","minor":"30","gitVersion":"v1.30.0"}"#)
        );
        // rollout-secret: `{$.message}` and `result == 'It worked!'`.
        let m = metric(
            json!({"url": format!("{url}/message"), "jsonPath": "{$.message}"}),
            Some("result == 'It worked!'"),
            None,
        );
        let measurement = p.measure(&ctx(), &m).await;
        assert_eq!(measurement.phase, Some(AnalysisPhase::Successful));
        assert_eq!(measurement.value.as_deref(), Some("\"It worked!\""));
        // The Kubernetes form without `$`.
        let m = metric(
            json!({"url": format!("{url}/ok"), "jsonPath": "{.data.ok}"}),
            Some("result"),
            None,
        );
        assert_eq!(
            p.measure(&ctx(), &m).await.phase,
            Some(AnalysisPhase::Successful)
        );
    }

    #[tokio::test]
    async fn post_bodies() {
        let (url, log) = start().await;
        let p = providers(Default::default());
        let m = metric(
            json!({"url": format!("{url}/echo"), "method": "POST", "jsonBody": {"ok": true, "n": [1, 2]},
                   "jsonPath": "{$.n[1]}"}),
            Some("result == 2"),
            None,
        );
        let measurement = p.measure(&ctx(), &m).await;
        assert_eq!(
            measurement.phase,
            Some(AnalysisPhase::Successful),
            "{:?}",
            measurement.message
        );
        let m = metric(
            json!({"url": format!("{url}/echo"), "method": "post", "body": "{\"ok\": false}"}),
            Some("result.ok"),
            None,
        );
        assert_eq!(
            p.measure(&ctx(), &m).await.phase,
            Some(AnalysisPhase::Failed)
        );
        let seen = log.lock().unwrap();
        assert_eq!(seen[0].method, HttpMethod::POST);
        assert_eq!(seen[0].headers["content-type"], "application/json");
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&seen[0].body).unwrap(),
            json!({"ok": true, "n": [1, 2]})
        );
        assert_eq!(seen[1].body, "{\"ok\": false}");
    }

    #[tokio::test]
    async fn text_body_is_successful() {
        let (url, _) = start().await;
        let p = providers(Default::default());
        let m = metric(
            json!({"url": format!("{url}/text")}),
            Some("result == 'no'"),
            None,
        );
        let measurement = p.measure(&ctx(), &m).await;
        assert_eq!(measurement.phase, Some(AnalysisPhase::Successful));
        assert_eq!(measurement.value.as_deref(), Some("all good"));
    }

    #[tokio::test]
    async fn errors() {
        let (url, _) = start().await;
        let p = providers(Default::default());
        let cases = [
            (
                json!({"url": format!("{url}/status/500")}),
                "received non 2xx response code: 500".to_owned(),
            ),
            (
                json!({"url": format!("{url}/nowhere")}),
                "received non 2xx response code: 404".to_owned(),
            ),
            (
                json!({"url": format!("{url}/slow"), "timeoutSeconds": 1}),
                format!("request to {url}/slow timed out after 1s"),
            ),
            (
                json!({"url": format!("{url}/ok"), "jsonPath": "{$.missing}"}),
                "could not find jsonPath \"{$.missing}\" in the response".to_owned(),
            ),
            (
                json!({"url": format!("{url}/ok"), "jsonPath": "{$[}"}),
                "invalid jsonPath \"{$[}\"".to_owned(),
            ),
            (
                json!({"url": format!("{url}/ok"), "body": "x"}),
                "body/jsonBody can only be used with POST or PUT web metric methods".to_owned(),
            ),
            (
                json!({"url": format!("{url}/ok"), "method": "POST", "body": "x", "jsonBody": {}}),
                "use either body or jsonBody; both cannot exist for a web metric payload"
                    .to_owned(),
            ),
            (json!({"url": ""}), "web provider has no url".to_owned()),
            (
                json!({"url": "http://x", "method": "GE T"}),
                "invalid web metric method \"GE T\"".to_owned(),
            ),
        ];
        for (web, message) in cases {
            let measurement = p.measure(&ctx(), &metric(web, Some("true"), None)).await;
            assert_eq!(measurement.phase, Some(AnalysisPhase::Error));
            let got = measurement.message.unwrap();
            assert!(
                got.starts_with(&message),
                "{got:?} should start with {message:?}"
            );
            assert!(measurement.finished_at.is_some());
        }
    }

    #[test]
    fn kubernetes_json_paths() {
        assert_eq!(json_path(None), "$");
        assert_eq!(json_path(Some("{$}")), "$");
        assert_eq!(json_path(Some("{$.message}")), "$.message");
        assert_eq!(json_path(Some(" {.data.ok} ")), "$.data.ok");
        assert_eq!(json_path(Some("{.items[0].n}")), "$.items[0].n");
        assert_eq!(json_path(Some("$.a")), "$.a");
        assert_eq!(json_path(Some("{a.b}")), "$.a.b");
    }

    /// The rollout-secret template: the URL comes from a Secret; when the request fails, the
    /// error echoes the URL, and the measurement must not.
    #[tokio::test]
    async fn secret_values_never_reach_the_measurement() {
        let (url, _) = start().await;
        let token = "tok-3f9a1c";
        let secrets = MemorySecrets::new();
        let args = [Argument {
            name: Some("secret-url".into()),
            value: None,
            value_from: Some(ValueFrom {
                secret_key_ref: Some(SecretKeyRef {
                    name: Some("example-secret".into()),
                    key: Some("secretUrl".into()),
                }),
                field_ref: None,
            }),
        }];
        let template = metric(
            json!({"url": "{{args.secret-url}}", "jsonPath": "{$.message}", "timeoutSeconds": 1}),
            Some("result == 'It worked!'"),
            None,
        );
        let p = providers(Default::default());
        // (URL, whether the error text quotes it)
        let urls = [
            (format!("http://127.0.0.1:1/{token}"), true),
            (format!("{url}/slow?token={token}"), true),
            (format!("{url}/status/500?token={token}"), false),
            (format!("http://[::1/{token}"), false),
        ];
        for (secret_url, quoted) in urls {
            secrets.insert("ns", "example-secret", [("secretUrl", secret_url.as_str())]);
            let resolved = resolve_args(&args, "ns", &secrets).await.unwrap();
            let metric = resolve_metric(&template, &resolved).unwrap();
            let ctx = ctx().with_redactor(resolved.redactor().clone());
            let measurement = p.measure(&ctx, &metric).await;
            assert_eq!(
                measurement.phase,
                Some(AnalysisPhase::Error),
                "{secret_url}"
            );
            let text = serde_json::to_string(&measurement).unwrap();
            assert!(!text.contains(token), "{text}");
            assert_eq!(text.contains("*****"), quoted, "{text}");
        }
        // A response echoing the secret is redacted in the value too.
        let m = metric(
            json!({"url": format!("{url}/echo"), "method": "POST", "jsonBody": {"t": token}}),
            None,
            None,
        );
        let plain = p.measure(&ctx(), &m).await;
        assert_eq!(plain.value, Some(format!("{{\"t\":\"{token}\"}}")));
        let redacting = ctx().with_redactor(Redactor::new([token]));
        let measurement = p.measure(&redacting, &m).await;
        assert_eq!(measurement.value.as_deref(), Some("{\"t\":\"*****\"}"));
    }
}
