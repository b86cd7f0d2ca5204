use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::routing::any;
use serde_json::{Value, json};
use sluice_notifications::Config;
use sluice_notifications::services::SlackThreads;

use crate::support::{config, notification, sender, server};

const TEMPLATES: [(&str, &str); 2] = [
    (
        "template.text",
        "message: Rollout {{.rollout.metadata.name}} has been completed.\ngooglechat:\n  threadKey: '{{.rollout.metadata.name}}'\n",
    ),
    (
        "template.cards",
        r#"message: not sent with cards
googlechat:
  cardsV2: |
    - header:
        title: Rollout {{.rollout.metadata.name}}
      sections:
        - widgets:
            - decoratedText:
                topLabel: Strategy
                text: "{{.rollout.strategy}}"
"#,
    ),
];

type Seen = Arc<Mutex<Vec<(Method, Uri, HeaderMap, String)>>>;

/// A Chat webhook recording each request with its query (the thread is in it).
async fn chat_server() -> (String, Seen) {
    async fn record(
        State(seen): State<Seen>,
        method: Method,
        uri: Uri,
        headers: HeaderMap,
        body: Bytes,
    ) -> String {
        let body = String::from_utf8_lossy(&body).into_owned();
        seen.lock().unwrap().push((method, uri, headers, body));
        json!({"name": "spaces/AAA/messages/1", "text": ""}).to_string()
    }
    let seen = Seen::default();
    let app = Router::new().fallback(any(record)).with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), seen)
}

fn rendered(cfg: &Config, template: &str) -> Value {
    let vars = json!({"rollout": {"metadata": {"name": "web"}, "strategy": "Canary"}});
    cfg.templates[template]
        .render(&vars, jiff::Timestamp::UNIX_EPOCH)
        .unwrap()
}

#[tokio::test]
async fn googlechat_posts_text_into_a_thread_and_cards() {
    let (url, seen) = chat_server().await;
    let mut data = vec![(
        "service.googlechat",
        "webhooks:\n  releases: $chat-releases\n".to_owned(),
    )];
    data.extend(TEMPLATES.iter().map(|(k, v)| (*k, v.to_string())));
    let webhook = format!("{url}/v1/spaces/AAA/messages?key=k3y&token=s3cr3t");
    let cfg = config(&data, &[("chat-releases", &webhook)]);
    for template in ["text", "cards"] {
        sender()
            .send(
                &cfg,
                &notification("googlechat", "releases", rendered(&cfg, template)),
                &SlackThreads::new(),
            )
            .await
            .unwrap();
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    let (method, uri, headers, body) = &seen[0];
    assert_eq!(method, Method::POST);
    assert_eq!(uri.path(), "/v1/spaces/AAA/messages");
    let query: Vec<(String, String)> = url::form_urlencoded::parse(uri.query().unwrap().as_bytes())
        .into_owned()
        .collect();
    let pair = |k: &str, v: &str| (k.to_owned(), v.to_owned());
    assert_eq!(
        query,
        vec![
            pair("key", "k3y"),
            pair("token", "s3cr3t"),
            pair("threadKey", "web"),
            pair("messageReplyOption", "REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD"),
        ]
    );
    assert_eq!(headers["content-type"], "application/json");
    let body: Value = serde_json::from_str(body).unwrap();
    assert_eq!(body, json!({"text": "Rollout web has been completed."}));

    let (_, uri, _, body) = &seen[1];
    assert_eq!(uri.query(), Some("key=k3y&token=s3cr3t"), "no thread");
    let body: Value = serde_json::from_str(body).unwrap();
    assert_eq!(body["text"], "");
    assert_eq!(body.get("cards"), None);
    let card = &body["cardsV2"][0];
    assert!(card["cardId"].as_str().is_some_and(|id| id.len() == 36));
    assert_eq!(
        card["card"],
        json!({
            "header": {"title": "Rollout web"},
            "sections": [{"widgets": [{"decoratedText": {"topLabel": "Strategy", "text": "Canary"}}]}]
        })
    );
}

#[tokio::test]
async fn googlechat_reports_googles_error_and_an_unknown_space_without_the_url() {
    let (url, rec) = server().await;
    let cfg = config(
        &[(
            "service.googlechat",
            "webhooks:\n  releases: $chat-releases\n".to_owned(),
        )],
        &[(
            "chat-releases",
            &format!("{url}/v1/spaces/AAA/messages?key=k3y&token=s3cr3t"),
        )],
    );
    let send = |recipient: &'static str| {
        let cfg = cfg.clone();
        async move {
            sender()
                .send(
                    &cfg,
                    &notification("googlechat", recipient, json!({"message": "m"})),
                    &SlackThreads::new(),
                )
                .await
                .unwrap_err()
        }
    };
    *rec.status.lock().unwrap() = Some(StatusCode::BAD_REQUEST);
    *rec.answer.lock().unwrap() = Some(
        json!({"error": {"code": 400, "message": "Invalid JSON payload received.", "status": "INVALID_ARGUMENT"}})
            .to_string(),
    );
    let e = send("releases").await;
    assert_eq!(
        e.message,
        "googlechat 'googlechat': error with message: code=400 status=INVALID_ARGUMENT message=Invalid JSON payload received."
    );
    assert!(!e.permanent);
    *rec.status.lock().unwrap() = Some(StatusCode::NOT_FOUND);
    *rec.answer.lock().unwrap() = Some("<html>Not Found</html>".into());
    let e = send("releases").await;
    assert_eq!(
        e.message,
        "googlechat 'googlechat': cannot send message: unreadable answer (status 404)"
    );
    *rec.status.lock().unwrap() = Some(StatusCode::BAD_GATEWAY);
    *rec.answer.lock().unwrap() = Some("{}".into());
    let e = send("releases").await;
    assert_eq!(
        e.message,
        "googlechat 'googlechat': cannot send message: status 502"
    );
    let e = send("elsewhere").await;
    assert_eq!(
        e.message,
        "googlechat 'googlechat': error creating client to webhook: no Google chat webhook configured for recipient elsewhere"
    );
    assert!(e.permanent);
    assert_eq!(rec.received.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn bad_googlechat_settings_are_a_problem_and_the_other_services_still_send() {
    let (url, rec) = server().await;
    *rec.answer.lock().unwrap() = Some("{}".into());
    let data = BTreeMap::from([
        (
            "service.googlechat.broken".to_owned(),
            "webhooks: $chat-url\n".to_owned(),
        ),
        (
            "service.googlechat.working".to_owned(),
            format!("webhooks:\n  releases: {url}/v1/spaces/B/messages\n"),
        ),
    ]);
    let secret = BTreeMap::from([(
        "chat-url".to_owned(),
        "https://chat.googleapis.com/v1/spaces/A/messages?key=k3y&token=s3cr3t".to_owned(),
    )]);
    let cfg = Config::parse(&data, &secret);
    assert_eq!(cfg.problems.len(), 1, "{:?}", cfg.problems);
    assert_eq!(cfg.problems[0].key, "service.googlechat.broken");
    assert_eq!(
        cfg.problems[0].message,
        "bad googlechat service settings: a field has the wrong type"
    );
    sender()
        .send(
            &cfg,
            &notification("working", "releases", json!({"message": "m"})),
            &SlackThreads::new(),
        )
        .await
        .unwrap();
    assert_eq!(
        rec.received.lock().unwrap()[0].path,
        "/v1/spaces/B/messages"
    );
}
