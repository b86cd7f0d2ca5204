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
use sluice_api::analysis::Metric;
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

/// `authentication.basicAuth` (Argo's master) on a web metric.
#[tokio::test]
async fn basic_auth() {
    let (url, log) = start().await;
    let p = providers(Default::default());
    let m = metric(
        json!({"url": format!("{url}/ok"), "jsonPath": "{$.data.rate}",
               "authentication": {"basicAuth": {"username": "u", "password": "p"}}}),
        Some("result >= 0.95"),
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
        log.lock().unwrap()[0].headers["authorization"],
        "Basic dTpw"
    );
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
            "use either body or jsonBody; both cannot exist for a web metric payload".to_owned(),
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
