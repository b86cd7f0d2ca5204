use std::collections::BTreeMap;

use axum::http::StatusCode;
use serde_json::{Value, json};
use sluice_notifications::Config;
use sluice_notifications::services::SlackThreads;

use crate::support::{config, notification, sender, server};

const TOKEN: &str = "NjA3ZTA5YmQtYWJjZC00ZWY5LTg5ZTItZmFrZXRva2Vu";
const ROOM: &str = "Y2lzY29zcGFyazovL3VzL1JPT00vYmJjZWIxYWQtNDNmMS0zYjU4";

#[tokio::test]
async fn webex_posts_markdown_to_a_person_or_a_room_with_the_bots_token() {
    let (url, rec) = server().await;
    *rec.answer.lock().unwrap() = Some(json!({"id": "m1"}).to_string());
    let cfg = config(
        &[
            (
                "service.webex",
                // The engine trims the one trailing slash.
                format!("token: $webex-token\napiURL: {url}/\n"),
            ),
            (
                "template.rollout-completed",
                "message: Rollout **{{.rollout.metadata.name}}** has been completed.\n".to_owned(),
            ),
        ],
        &[("webex-token", TOKEN)],
    );
    let vars = json!({"rollout": {"metadata": {"name": "web"}}});
    let content = cfg.templates["rollout-completed"]
        .render(&vars, jiff::Timestamp::UNIX_EPOCH)
        .unwrap();
    for recipient in ["ops@example.com", ROOM] {
        sender()
            .send(
                &cfg,
                &notification("webex", recipient, content.clone()),
                &SlackThreads::new(),
            )
            .await
            .unwrap();
    }
    let got = rec.received.lock().unwrap().clone();
    assert_eq!(got.len(), 2);
    for r in &got {
        assert_eq!(r.method, "POST");
        assert_eq!(r.path, "/v1/messages");
        assert_eq!(r.headers["authorization"], format!("Bearer {TOKEN}"));
        assert_eq!(r.headers["content-type"], "application/json");
    }
    let body = |i: usize| serde_json::from_str::<Value>(&got[i].body).unwrap();
    assert_eq!(
        body(0),
        json!({"toPersonEmail": "ops@example.com", "markdown": "Rollout **web** has been completed."})
    );
    assert_eq!(
        body(1),
        json!({"roomId": ROOM, "markdown": "Rollout **web** has been completed."})
    );
}

#[tokio::test]
async fn webex_reports_its_answer_and_a_missing_token_without_the_token() {
    let (url, rec) = server().await;
    *rec.status.lock().unwrap() = Some(StatusCode::UNAUTHORIZED);
    let answer = json!({
        "message": "The request requires a valid access token set in the Authorization request header.",
        "trackingId": "ROUTER_1"
    })
    .to_string();
    *rec.answer.lock().unwrap() = Some(answer.clone());
    let cfg = config(
        &[
            ("service.webex", format!("token: {TOKEN}\napiURL: {url}\n")),
            ("service.webex.tokenless", format!("apiURL: {url}\n")),
        ],
        &[],
    );
    let send = |service: &'static str| {
        let cfg = cfg.clone();
        async move {
            sender()
                .send(
                    &cfg,
                    &notification(service, ROOM, json!({"message": "m"})),
                    &SlackThreads::new(),
                )
                .await
                .unwrap_err()
        }
    };
    let e = send("webex").await;
    assert_eq!(
        e.message,
        format!(
            "webex 'webex': request to {url}/v1/messages has failed with error code 401 : {answer}"
        )
    );
    assert!(!e.permanent);
    assert!(!e.message.contains(TOKEN));
    let e = send("tokenless").await;
    assert_eq!(e.message, "webex 'tokenless': no token is configured");
    assert!(e.permanent);
    assert_eq!(rec.received.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn bad_webex_settings_are_a_problem_and_the_other_services_still_send() {
    let (url, rec) = server().await;
    let data = BTreeMap::from([
        (
            "service.webex.broken".to_owned(),
            "token:\n  - $webex-token\n".to_owned(),
        ),
        (
            "service.webex.working".to_owned(),
            format!("token: $webex-token\napiURL: {url}\n"),
        ),
    ]);
    let secret = BTreeMap::from([("webex-token".to_owned(), TOKEN.to_owned())]);
    let cfg = Config::parse(&data, &secret);
    assert_eq!(cfg.problems.len(), 1, "{:?}", cfg.problems);
    assert_eq!(cfg.problems[0].key, "service.webex.broken");
    assert_eq!(
        cfg.problems[0].message,
        "bad webex service settings: a field has the wrong type"
    );
    sender()
        .send(
            &cfg,
            &notification("working", ROOM, json!({"message": "m"})),
            &SlackThreads::new(),
        )
        .await
        .unwrap();
    assert_eq!(rec.received.lock().unwrap().len(), 1);
}
