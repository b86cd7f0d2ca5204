use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::routing::any;
use serde_json::{Value, json};
use sluice_notifications::services::SlackThreads;
use sluice_notifications::{Config, Problem};

use crate::support::{Received, config, notification, sender, server};

const TOKEN: &str = "y_NbAkKc66ryYTWUXYEu";

/// A PagerDuty REST API answering every request with `status` and the JSON `answer`, as
/// PagerDuty answers (the support server answers text, which the client refuses to read).
async fn rest_api(status: StatusCode, answer: Value) -> (String, Arc<Mutex<Vec<Received>>>) {
    let received = Arc::new(Mutex::new(Vec::new()));
    let rec = received.clone();
    let app = Router::new().fallback(any(move |uri: Uri, headers: HeaderMap, body: String| {
        let rec = rec.clone();
        let answer = answer.to_string();
        async move {
            rec.lock().unwrap().push(Received {
                method: "POST".into(),
                path: uri.path().to_owned(),
                headers,
                body,
            });
            (status, [(header::CONTENT_TYPE, "application/json")], answer)
        }
    }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), received)
}

#[tokio::test]
async fn pagerduty_creates_an_incident_on_the_recipients_service() {
    let (url, received) = rest_api(
        StatusCode::CREATED,
        json!({"incident": {"id": "PT4KHLK", "incident_number": 1234, "title": "Rollout web"}}),
    )
    .await;
    let cfg = config(
        &[(
            "service.pagerduty",
            format!("token: $pagerdutyToken\nfrom: oncall@example.com\napiURL: {url}\n"),
        )],
        &[("pagerdutyToken", TOKEN)],
    );
    // `priorityID` as the documentation writes it; the engine's field is `priorityId`.
    let content = json!({
        "message": "Rollout web is aborted.",
        "pagerduty": {"title": "Rollout web", "urgency": "high",
            "body": "Rollout web aborted", "priorityID": "PX8QBJP"}
    });
    sender()
        .send(
            &cfg,
            &notification("pagerduty", "PSERVICE", content),
            &SlackThreads::new(),
        )
        .await
        .unwrap();
    let got = received.lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].path, "/incidents");
    assert_eq!(
        got[0].headers["authorization"],
        format!("Token token={TOKEN}")
    );
    assert_eq!(got[0].headers["from"], "oncall@example.com");
    assert_eq!(
        got[0].headers["accept"],
        "application/vnd.pagerduty+json;version=2"
    );
    assert_eq!(got[0].headers["content-type"], "application/json");
    let body: Value = serde_json::from_str(&got[0].body).unwrap();
    assert_eq!(
        body,
        json!({"incident": {
            "type": "incident",
            "title": "Rollout web",
            "service": {"id": "PSERVICE", "type": "service_reference"},
            "priority": {"id": "PX8QBJP", "type": "priority"},
            "urgency": "high",
            "body": {"type": "incident_details\t", "details": "Rollout web aborted"},
        }})
    );
}

#[tokio::test]
async fn pagerduty_reports_its_error_object_and_a_template_without_its_part() {
    let (url, received) = rest_api(
        StatusCode::BAD_REQUEST,
        json!({"error": {"message": "Invalid Input Provided", "code": 2001,
            "errors": ["Service not found."]}}),
    )
    .await;
    let cfg = config(
        &[(
            "service.pagerduty",
            format!("token: {TOKEN}\nfrom: oncall@example.com\napiURL: {url}\n"),
        )],
        &[],
    );
    let send = |content: Value| {
        let cfg: Config = cfg.clone();
        async move {
            sender()
                .send(
                    &cfg,
                    &notification("pagerduty", "PNOPE", content),
                    &SlackThreads::new(),
                )
                .await
        }
    };
    let e = send(json!({"pagerduty": {"title": "t"}}))
        .await
        .unwrap_err();
    assert_eq!(
        e.message,
        "pagerduty 'pagerduty': HTTP response failed with status code 400, message: Invalid Input Provided (code: 2001): Service not found."
    );
    assert!(!e.permanent);
    assert!(!e.message.contains(TOKEN));
    assert!(!format!("{cfg:?}").contains(TOKEN));

    let e = send(json!({"message": "m"})).await.unwrap_err();
    assert_eq!(
        e.message,
        "pagerduty 'pagerduty': no config found for pagerduty"
    );
    assert!(e.permanent);
    assert_eq!(received.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn pagerduty_an_error_answer_that_is_not_json_is_named_as_the_client_names_it() {
    // The support server answers text/plain.
    let (url, rec) = server().await;
    *rec.status.lock().unwrap() = Some(StatusCode::BAD_GATEWAY);
    let cfg = config(
        &[(
            "service.pagerduty",
            format!("token: {TOKEN}\napiURL: {url}/\n"),
        )],
        &[],
    );
    let e = sender()
        .send(
            &cfg,
            &notification(
                "pagerduty",
                "PSERVICE",
                json!({"pagerduty": {"title": "t"}}),
            ),
            &SlackThreads::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        e.message,
        "pagerduty 'pagerduty': HTTP response with status code 502 does not contain Content-Type: application/json"
    );
    assert!(!e.permanent);
    let got = rec.received.lock().unwrap().clone();
    assert_eq!(got[0].path, "/incidents");
    assert_eq!(
        got[0].headers["from"], "",
        "the engine sends From even when empty"
    );
}

#[tokio::test]
async fn pagerduty_a_token_that_is_a_list_is_a_problem_and_the_rest_still_sends() {
    let (url, rec) = server().await;
    let data: BTreeMap<String, String> = [
        (
            "service.pagerduty",
            "token: [$pd-token]\nfrom: a@b.c\n".to_owned(),
        ),
        ("service.webhook.hook", format!("url: {url}/hook\n")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let secret = BTreeMap::from([("pd-token".to_owned(), TOKEN.to_owned())]);
    let cfg = Config::parse(&data, &secret);
    assert_eq!(
        cfg.problems,
        [Problem {
            key: "service.pagerduty".into(),
            message: "bad pagerduty service settings: a field has the wrong type".into(),
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
