use std::collections::BTreeMap;

use axum::http::StatusCode;
use serde_json::{Value, json};
use sluice_notifications::services::SlackThreads;
use sluice_notifications::{Config, Problem};

use crate::support::{config, notification, sender, server};

const ROUTING_KEY: &str = "R015ZQ8JQ7QX1Y9XGNNQGHOOQ2ZP0ED4";

fn event_content() -> Value {
    json!({
        "message": "Rollout web is aborted.",
        "pagerdutyv2": {
            "summary": "Rollout web is aborted.",
            "severity": "critical",
            "source": "web",
            "component": "canary",
            "group": "",
            "dedupKey": "web-aborted",
            "url": "https://rollouts.example.com/web",
        }
    })
}

#[tokio::test]
async fn pagerdutyv2_triggers_an_event_with_the_recipients_routing_key() {
    let (url, rec) = server().await;
    *rec.status.lock().unwrap() = Some(StatusCode::ACCEPTED);
    *rec.answer.lock().unwrap() = Some(
        json!({"status": "success", "message": "Event processed", "dedup_key": "web-aborted"})
            .to_string(),
    );
    let cfg = config(
        &[(
            "service.pagerdutyv2",
            format!("serviceKeys:\n  my-service: $pagerduty-key-my-service\napiURL: {url}\n"),
        )],
        &[("pagerduty-key-my-service", ROUTING_KEY)],
    );
    sender()
        .send(
            &cfg,
            &notification("pagerdutyv2", "my-service", event_content()),
            &SlackThreads::new(),
        )
        .await
        .unwrap();
    let got = rec.received.lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].method, "POST");
    assert_eq!(got[0].path, "/v2/enqueue");
    assert_eq!(got[0].headers["content-type"], "application/json");
    assert!(
        !got[0].headers.contains_key("authorization"),
        "the key is in the body"
    );
    let body: Value = serde_json::from_str(&got[0].body).unwrap();
    assert_eq!(
        body,
        json!({
            "routing_key": ROUTING_KEY,
            "event_action": "trigger",
            "dedup_key": "web-aborted",
            "client": "ArgoCD",
            "client_url": "https://rollouts.example.com/web",
            "payload": {"summary": "Rollout web is aborted.", "severity": "critical",
                "source": "web", "component": "canary"},
        })
    );
}

#[tokio::test]
async fn pagerdutyv2_reports_its_error_answer_and_a_recipient_without_a_key() {
    let (url, rec) = server().await;
    *rec.status.lock().unwrap() = Some(StatusCode::BAD_REQUEST);
    *rec.answer.lock().unwrap() = Some(
        json!({"status": "invalid event", "message": "Event object is invalid",
            "errors": ["'severity' is invalid (must be one of the following: 'critical', 'warning', 'error' or 'info')"]})
        .to_string(),
    );
    let cfg = config(
        &[(
            "service.pagerdutyv2",
            format!("serviceKeys: {{my-service: {ROUTING_KEY}}}\napiURL: {url}\n"),
        )],
        &[],
    );
    let send = |recipient: &'static str| {
        let cfg: Config = cfg.clone();
        async move {
            sender()
                .send(
                    &cfg,
                    &notification("pagerdutyv2", recipient, event_content()),
                    &SlackThreads::new(),
                )
                .await
        }
    };
    let e = send("my-service").await.unwrap_err();
    assert_eq!(
        e.message,
        "pagerdutyv2 'pagerdutyv2': HTTP response failed with status code 400, status: invalid event, message: Event object is invalid: 'severity' is invalid (must be one of the following: 'critical', 'warning', 'error' or 'info')"
    );
    assert!(!e.permanent);
    assert!(!e.message.contains(ROUTING_KEY));
    assert!(!format!("{cfg:?}").contains(ROUTING_KEY));

    // Any answer but 202 fails, a 200 too.
    *rec.status.lock().unwrap() = Some(StatusCode::OK);
    *rec.answer.lock().unwrap() = Some("{}".into());
    let e = send("my-service").await.unwrap_err();
    assert_eq!(
        e.message,
        "pagerdutyv2 'pagerdutyv2': HTTP response failed with status code 200, status: , message: "
    );

    let e = send("other-service").await.unwrap_err();
    assert_eq!(
        e.message,
        "pagerdutyv2 'pagerdutyv2': no API key configured for recipient other-service"
    );
    assert!(e.permanent);
    assert_eq!(rec.received.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn pagerdutyv2_service_keys_that_are_text_are_a_problem_and_the_rest_still_sends() {
    let (url, rec) = server().await;
    let data: BTreeMap<String, String> = [
        ("service.pagerdutyv2", "serviceKeys: $pd-key\n".to_owned()),
        ("service.webhook.hook", format!("url: {url}/hook\n")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let secret = BTreeMap::from([("pd-key".to_owned(), ROUTING_KEY.to_owned())]);
    let cfg = Config::parse(&data, &secret);
    assert_eq!(
        cfg.problems,
        [Problem {
            key: "service.pagerdutyv2".into(),
            message: "bad pagerdutyv2 service settings: a field has the wrong type".into(),
        }]
    );
    sender()
        .send(
            &cfg,
            &notification("hook", "", json!({"message": "still here"})),
            &SlackThreads::new(),
        )
        .await
        .unwrap();
    assert_eq!(rec.received.lock().unwrap()[0].body, "still here");
}
